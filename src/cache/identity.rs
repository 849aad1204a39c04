//! What a stored object knows about its identity representation when it is stored encoded
//! (docs/compression.md): the decoded length, and the identity's strong `ETag` when Shellac
//! made the encoding itself (the origin named the identity bytes). One stored field,
//! [`FIELD`], never sent to a client or taken from a backend; it is written once the body is
//! complete (`proxy/fill.rs`), so it travels with the object through every tier.
//!
//! With it a client that gets the body decoded is sent `Content-Length`, a `Range` is
//! answered over the decoded bytes, and the identity keeps its strong `ETag`.

use http::HeaderValue;

/// The stored field: `<decoded length>` or `<decoded length> <strong ETag>`.
pub const FIELD: &str = "shellac-identity";

/// The identity representation of an object stored encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// Its length in bytes.
    pub length: u64,
    /// Its strong `ETag` (`"v1"`), when known.
    pub etag: Option<HeaderValue>,
}

impl Identity {
    /// Reads the field's value; `None` when it is not one Shellac wrote.
    pub fn parse(value: &[u8]) -> Option<Identity> {
        let value = std::str::from_utf8(value).ok()?.trim();
        let (length, etag) = match value.split_once(' ') {
            Some((length, etag)) => (length, Some(etag.trim())),
            None => (value, None),
        };
        if length.is_empty() || !length.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let length = length.parse().ok()?;
        let etag = match etag {
            Some(e) if strong(e.as_bytes()) => Some(HeaderValue::from_str(e).ok()?),
            Some(_) => return None,
            None => None,
        };
        Some(Identity { length, etag })
    }

    /// The field's value.
    pub fn to_value(&self) -> Option<HeaderValue> {
        let mut v = self.length.to_string();
        if let Some(etag) = &self.etag {
            v.push(' ');
            v.push_str(etag.to_str().ok()?);
        }
        HeaderValue::from_str(&v).ok()
    }

    /// The identity of a response with these fields, from [`FIELD`].
    pub fn of(fields: &http::HeaderMap) -> Option<Identity> {
        Identity::parse(fields.get(FIELD)?.as_bytes())
    }
}

/// A strong entity tag: `"..."` (no `W/`), as RFC 9110 §8.8.3 spells it.
pub fn strong(etag: &[u8]) -> bool {
    etag.len() >= 2
        && etag[0] == b'"'
        && etag[etag.len() - 1] == b'"'
        && !etag[1..etag.len() - 1].contains(&b'"')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_field_round_trips() {
        let id = Identity {
            length: 72_000,
            etag: Some(HeaderValue::from_static("\"v1\"")),
        };
        let v = id.to_value().unwrap();
        assert_eq!(v, "72000 \"v1\"");
        assert_eq!(Identity::parse(v.as_bytes()), Some(id));
        assert_eq!(
            Identity::parse(b"5"),
            Some(Identity {
                length: 5,
                etag: None
            })
        );
        for bad in [
            &b""[..],
            b"x",
            b"-1",
            b"5 W/\"v1\"",
            b"5 v1",
            b"99999999999999999999999",
        ] {
            assert_eq!(Identity::parse(bad), None, "{bad:?}");
        }
    }
}
