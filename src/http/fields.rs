//! Reading fields cheaply: whether a field is present, and the value of one that may appear
//! only once. A request usually has a handful of fields, and the hit path asks several times,
//! mostly for fields that are absent: comparing names beats hashing them.

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// Whether `headers` has field `name`. A request usually has a handful of fields: comparing
/// their names one by one is cheaper than hashing `name` for a lookup (~90 instructions, and
/// the hit path asks several times, mostly for fields that are absent).
pub fn has_field(headers: &HeaderMap, name: &HeaderName) -> bool {
    // A hashed lookup is ~85 instructions; comparing a dozen names is less (standard names
    // compare as one-byte tags).
    if headers.keys_len() <= 12 {
        headers.keys().any(|k| k == name)
    } else {
        headers.contains_key(name)
    }
}

/// A field that may appear once appeared more than once.
#[derive(Debug, PartialEq, Eq)]
pub struct Repeated;

/// The value of a field that may appear at most once: `Ok(None)` when absent, `Err(Repeated)`
/// when present more than once. Like [`has_field`], a pass over the names for small maps.
pub fn single_field<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> Result<Option<&'a HeaderValue>, Repeated> {
    let mut found = None;
    if headers.keys_len() <= 12 {
        // `iter` yields every value, a repeated field's extra values included.
        for (k, v) in headers.iter() {
            if k == name {
                if found.is_some() {
                    return Err(Repeated);
                }
                found = Some(v);
            }
        }
        return Ok(found);
    }
    let mut values = headers.get_all(name).iter();
    found = values.next();
    match values.next() {
        Some(_) => Err(Repeated),
        None => Ok(found),
    }
}

#[cfg(test)]
mod tests {
    use http::header;

    use super::*;

    #[test]
    fn single_field_absent_once_and_repeated_in_small_and_large_maps() {
        for fillers in [0, 20] {
            let mut h = HeaderMap::new();
            for i in 0..fillers {
                h.insert(
                    HeaderName::from_bytes(format!("x-f{i}").as_bytes()).unwrap(),
                    HeaderValue::from_static("v"),
                );
            }
            assert_eq!(single_field(&h, &header::HOST), Ok(None));
            h.insert(header::HOST, HeaderValue::from_static("a.test"));
            assert_eq!(
                single_field(&h, &header::HOST),
                Ok(Some(&HeaderValue::from_static("a.test")))
            );
            h.append(header::HOST, HeaderValue::from_static("b.test"));
            assert_eq!(
                single_field(&h, &header::HOST),
                Err(Repeated),
                "{fillers} fillers"
            );
        }
    }

    #[test]
    fn has_field_small_and_large_maps() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("a"));
        h.insert("x-custom", HeaderValue::from_static("1"));
        assert!(has_field(&h, &header::HOST));
        assert!(has_field(&h, &HeaderName::from_static("x-custom")));
        assert!(!has_field(&h, &header::CACHE_CONTROL));
        for i in 0..20 {
            h.insert(
                HeaderName::try_from(format!("x-f{i}")).unwrap(),
                HeaderValue::from_static("v"),
            );
        }
        assert!(has_field(&h, &HeaderName::from_static("x-f19")));
        assert!(!has_field(&h, &header::CACHE_CONTROL));
    }
}
