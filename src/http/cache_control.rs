//! `Cache-Control` (RFC 9111 §5.2) parsed into the directives a shared cache acts on.

use std::time::Duration;

use http::HeaderMap;
use http::header::CACHE_CONTROL;

/// Directives relevant to a shared cache. Unknown directives are ignored (RFC 9111 §5.2.3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheControl {
    pub no_store: bool,
    /// `no-cache` without field names.
    pub no_cache: bool,
    /// `no-cache="a, b"`: the response may be stored without these fields.
    pub no_cache_fields: Vec<String>,
    /// `private` without field names.
    pub private: bool,
    /// `private="a, b"`: a shared cache may store the response without these fields.
    pub private_fields: Vec<String>,
    pub public: bool,
    pub must_revalidate: bool,
    pub proxy_revalidate: bool,
    pub max_age: Option<Duration>,
    pub s_maxage: Option<Duration>,
    /// RFC 5861: serve stale this long while revalidating in the background.
    pub stale_while_revalidate: Option<Duration>,
    /// RFC 5861: serve stale this long when the origin errors.
    pub stale_if_error: Option<Duration>,
    /// Request: accept a stale response (`None` inside = any staleness).
    pub max_stale: Option<Option<Duration>>,
    /// Request: want at least this much freshness left.
    pub min_fresh: Option<Duration>,
    /// Request: answer from cache or 504.
    pub only_if_cached: bool,
}

impl CacheControl {
    /// Parses every `Cache-Control` field line of `headers`.
    pub fn from_headers(headers: &HeaderMap) -> CacheControl {
        // Most requests carry no Cache-Control: a pass over their few names, no hashing.
        if !crate::http::headers::has_field(headers, &CACHE_CONTROL) {
            return CacheControl::default();
        }
        // A HeaderName constant, not a &str: a &str name is parsed again on every lookup.
        Self::from_field(headers, &CACHE_CONTROL).unwrap_or_default()
    }

    /// Parses every line of field `name`; `None` when the field is absent.
    pub fn from_field<K: http::header::AsHeaderName>(
        headers: &HeaderMap,
        name: K,
    ) -> Option<CacheControl> {
        let mut values = headers.get_all(name).iter().peekable();
        values.peek()?;
        Some(Self::from_lines(values.map(|v| v.as_bytes())))
    }

    /// Parses field lines given as bytes; a line that is not visible ASCII is skipped (as
    /// `HeaderValue::to_str` refuses it).
    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> CacheControl {
        let mut cc = CacheControl::default();
        for line in lines {
            if line
                .iter()
                .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
                && let Ok(text) = std::str::from_utf8(line)
            {
                cc.parse_into(text);
            }
        }
        cc
    }

    /// The first targeted field (RFC 9213) present in `targets`, else `Cache-Control`.
    pub fn targeted(headers: &HeaderMap, targets: &[String]) -> CacheControl {
        targets
            .iter()
            .find_map(|t| Self::from_field(headers, t.as_str()))
            .unwrap_or_else(|| Self::from_headers(headers))
    }

    fn parse_into(&mut self, text: &str) {
        for (name, arg) in directives(text) {
            match name.to_ascii_lowercase().as_str() {
                "no-store" => self.no_store = true,
                "no-cache" => match arg {
                    Some(fields) if !fields.is_empty() => {
                        self.no_cache_fields.extend(field_list(&fields))
                    }
                    _ => self.no_cache = true,
                },
                "private" => match arg {
                    Some(fields) if !fields.is_empty() => {
                        self.private_fields.extend(field_list(&fields))
                    }
                    _ => self.private = true,
                },
                "public" => self.public = true,
                "must-revalidate" => self.must_revalidate = true,
                "proxy-revalidate" => self.proxy_revalidate = true,
                // A duplicated or invalid max-age makes the response stale (RFC 9111 §4.2.1):
                // we keep the smallest valid value and treat garbage as 0.
                "max-age" => self.max_age = min_opt(self.max_age, delta_seconds(arg.as_deref())),
                "s-maxage" => self.s_maxage = min_opt(self.s_maxage, delta_seconds(arg.as_deref())),
                "stale-while-revalidate" => {
                    self.stale_while_revalidate = Some(delta_seconds(arg.as_deref()))
                }
                "stale-if-error" => self.stale_if_error = Some(delta_seconds(arg.as_deref())),
                "max-stale" => {
                    self.max_stale = Some(arg.as_deref().map(|a| delta_seconds(Some(a))))
                }
                "min-fresh" => self.min_fresh = Some(delta_seconds(arg.as_deref())),
                "only-if-cached" => self.only_if_cached = true,
                _ => {}
            }
        }
    }
}

fn min_opt(old: Option<Duration>, new: Duration) -> Option<Duration> {
    Some(old.map_or(new, |o| o.min(new)))
}

/// delta-seconds (RFC 9111 §1.2.2); invalid values count as 0, overflow saturates.
fn delta_seconds(arg: Option<&str>) -> Duration {
    match arg {
        Some(a) if !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()) => Duration::from_secs(
            a.parse::<u64>()
                .unwrap_or(u32::MAX as u64)
                .min(u32::MAX as u64),
        ),
        _ => Duration::ZERO,
    }
}

fn field_list(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(',')
        .map(|f| f.trim().to_ascii_lowercase())
        .filter(|f| !f.is_empty())
}

/// Splits a directive list, honouring quoted-string arguments that contain commas.
fn directives(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && (bytes[i] == b',' || bytes[i] == b' ' || bytes[i] == b'\t') {
            i += 1;
        }
        let start = i;
        while i < bytes.len() && bytes[i] != b'=' && bytes[i] != b',' {
            i += 1;
        }
        let name = text[start..i].trim().to_string();
        let mut arg = None;
        if i < bytes.len() && bytes[i] == b'=' {
            i += 1;
            if i < bytes.len() && bytes[i] == b'"' {
                i += 1;
                let mut value = String::new();
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' && i + 1 < bytes.len() {
                        i += 1;
                    }
                    value.push(bytes[i] as char);
                    i += 1;
                }
                i += 1;
                arg = Some(value);
                while i < bytes.len() && bytes[i] != b',' {
                    i += 1;
                }
            } else {
                let s = i;
                while i < bytes.len() && bytes[i] != b',' {
                    i += 1;
                }
                arg = Some(text[s..i].trim().to_string());
            }
        }
        if !name.is_empty() {
            out.push((name, arg));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(text: &str) -> CacheControl {
        let mut c = CacheControl::default();
        c.parse_into(text);
        c
    }

    #[test]
    fn parses_common_directives() {
        let c = cc("public, max-age=60, s-maxage=120");
        assert!(c.public);
        assert_eq!(c.max_age, Some(Duration::from_secs(60)));
        assert_eq!(c.s_maxage, Some(Duration::from_secs(120)));
        let c = cc("no-store,private");
        assert!(c.no_store && c.private);
        let c = cc("MAX-AGE=\"30\", Must-Revalidate");
        assert_eq!(c.max_age, Some(Duration::from_secs(30)));
        assert!(c.must_revalidate);
    }

    #[test]
    fn rfc5861_and_request_directives() {
        let c = cc("max-age=60, stale-while-revalidate=30, stale-if-error=600");
        assert_eq!(c.stale_while_revalidate, Some(Duration::from_secs(30)));
        assert_eq!(c.stale_if_error, Some(Duration::from_secs(600)));
        let c = cc("max-stale, min-fresh=5, only-if-cached");
        assert_eq!(c.max_stale, Some(None));
        assert_eq!(c.min_fresh, Some(Duration::from_secs(5)));
        assert!(c.only_if_cached);
        assert_eq!(
            cc("max-stale=10").max_stale,
            Some(Some(Duration::from_secs(10)))
        );
    }

    #[test]
    fn targeted_field_wins() {
        let mut h = HeaderMap::new();
        h.insert("cache-control", "no-store".parse().unwrap());
        h.insert("cdn-cache-control", "max-age=600".parse().unwrap());
        let targets = vec![
            "CDN-Cache-Control".to_string(),
            "Surrogate-Control".to_string(),
        ];
        let c = CacheControl::targeted(&h, &targets);
        assert!(!c.no_store);
        assert_eq!(c.max_age, Some(Duration::from_secs(600)));
        h.remove("cdn-cache-control");
        assert!(CacheControl::targeted(&h, &targets).no_store);
    }

    #[test]
    fn qualified_forms_and_garbage() {
        let c = cc("no-cache=\"Set-Cookie, X-Foo\", private=\"x-user\"");
        assert!(!c.no_cache && !c.private);
        assert_eq!(c.no_cache_fields, vec!["set-cookie", "x-foo"]);
        assert_eq!(c.private_fields, vec!["x-user"]);
        assert_eq!(cc("max-age=abc").max_age, Some(Duration::ZERO));
        assert_eq!(
            cc("max-age=10, max-age=5").max_age,
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            cc("max-age=99999999999999999999").max_age,
            Some(Duration::from_secs(u32::MAX as u64))
        );
    }
}
