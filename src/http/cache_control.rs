//! `Cache-Control` (RFC 9111 §5.2) parsed into the directives a shared cache acts on.

use std::time::Duration;

use http::HeaderMap;
use http::header::CACHE_CONTROL;

use super::structured::{self, Bare, Member};

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
    /// The directives came from a targeted field (RFC 9213): `Cache-Control` and `Expires`
    /// are ignored for the response.
    pub targeted: bool,
}

impl CacheControl {
    /// Parses every `Cache-Control` field line of `headers`.
    pub fn from_headers(headers: &HeaderMap) -> CacheControl {
        // Most requests carry no Cache-Control: a pass over their few names, no hashing.
        if !crate::http::fields::has_field(headers, &CACHE_CONTROL) {
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

    /// The first targeted field in `targets` with a valid, non-empty value (RFC 9213 §2.2),
    /// else `Cache-Control`. Targeted fields are Structured Field Dictionaries (RFC 9213 §2.1):
    /// one that does not parse as one is ignored whole, and a directive whose value has the
    /// wrong type (`max-age="3600"`, `max-age=3600.0`, `no-store=1`) is ignored rather than
    /// coerced. `Surrogate-Control`, older than RFC 9213 and not a structured field, is read
    /// like `Cache-Control`.
    pub fn targeted(headers: &HeaderMap, targets: &[String]) -> CacheControl {
        targets
            .iter()
            .find_map(|t| {
                let mut cc = if t.eq_ignore_ascii_case("surrogate-control") {
                    Self::from_field(headers, t.as_str())?
                } else {
                    Self::from_structured(headers, t.as_str())?
                };
                cc.targeted = true;
                Some(cc)
            })
            .unwrap_or_else(|| Self::from_headers(headers))
    }

    /// A targeted field parsed as a Dictionary; `None` when absent, empty or invalid.
    fn from_structured(headers: &HeaderMap, name: &str) -> Option<CacheControl> {
        let mut lines = headers.get_all(name).iter().peekable();
        lines.peek()?;
        let members = structured::parse_dictionary(lines.map(|v| v.as_bytes()))?;
        if members.is_empty() {
            return None;
        }
        let mut cc = CacheControl::default();
        for (key, member) in members {
            let Member::Item(value) = member else {
                continue;
            };
            let seconds = || match value {
                Bare::Integer(n) if n >= 0 => {
                    Some(Duration::from_secs((n as u64).min(u32::MAX as u64)))
                }
                _ => None,
            };
            let flag = || match value {
                Bare::Boolean(b) => Some(b),
                _ => None,
            };
            let fields = || match &value {
                Bare::String(s) => Some(field_list(s).collect::<Vec<_>>()),
                _ => None,
            };
            match key.as_str() {
                "max-age" => cc.max_age = seconds().or(cc.max_age),
                "s-maxage" => cc.s_maxage = seconds().or(cc.s_maxage),
                "stale-while-revalidate" => {
                    cc.stale_while_revalidate = seconds().or(cc.stale_while_revalidate)
                }
                "stale-if-error" => cc.stale_if_error = seconds().or(cc.stale_if_error),
                "no-store" => cc.no_store = flag().unwrap_or(false),
                "public" => cc.public = flag().unwrap_or(false),
                "must-revalidate" => cc.must_revalidate = flag().unwrap_or(false),
                "proxy-revalidate" => cc.proxy_revalidate = flag().unwrap_or(false),
                "no-cache" => match (flag(), fields()) {
                    (Some(b), _) => cc.no_cache = b,
                    (None, Some(f)) => cc.no_cache_fields = f,
                    _ => {}
                },
                "private" => match (flag(), fields()) {
                    (Some(b), _) => cc.private = b,
                    (None, Some(f)) => cc.private_fields = f,
                    _ => {}
                },
                _ => {}
            }
        }
        Some(cc)
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

/// Whether `Cache-Control` field lines hold `no-transform` (RFC 9110 §7.7: an intermediary
/// must not change the content), read without building the whole directive set.
pub fn no_transform<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> bool {
    lines.into_iter().any(|line| {
        line.split(|b| *b == b',').any(|d| {
            d.split(|b| *b == b'=')
                .next()
                .unwrap_or_default()
                .trim_ascii()
                .eq_ignore_ascii_case(b"no-transform")
        })
    })
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

    /// Issue 23: CDN-Cache-Control is an RFC 9213 Structured Field Dictionary. A member of the
    /// wrong type is ignored (not coerced, not "0"); a field that does not parse is ignored
    /// whole and the next one (or Cache-Control) counts.
    #[test]
    fn cdn_cache_control_is_a_structured_dictionary() {
        let targets = vec![
            "CDN-Cache-Control".to_string(),
            "Surrogate-Control".to_string(),
        ];
        let with = |cdn: &[&str]| {
            let mut h = HeaderMap::new();
            h.insert("cache-control", "max-age=5".parse().unwrap());
            for line in cdn {
                h.append("cdn-cache-control", line.parse().unwrap());
            }
            CacheControl::targeted(&h, &targets)
        };
        let secs = |n| Some(Duration::from_secs(n));
        assert_eq!(with(&["max-age=3600"]).max_age, secs(3600));
        assert!(with(&["max-age=3600"]).targeted);
        for wrong in [
            "max-age=\"3600\"",
            "max-age=3600.0",
            "max-age=-1",
            "max-age=?1",
            "max-age=(1)",
            "max-age",
        ] {
            let cc = with(&[wrong]);
            assert!(cc.targeted, "{wrong}: the field is valid");
            assert_eq!(cc.max_age, None, "{wrong}: the member is ignored");
        }
        assert_eq!(
            with(&["max-age=60;foo=bar"]).max_age,
            secs(60),
            "parameters"
        );
        assert_eq!(
            with(&["max-age=60, max-age=10"]).max_age,
            secs(10),
            "last wins"
        );
        assert_eq!(with(&["max-age=60", "no-store"]).max_age, secs(60));
        assert!(with(&["max-age=60", "no-store"]).no_store);
        assert!(!with(&["no-store=?0, max-age=1"]).no_store);
        assert!(!with(&["no-store=1, max-age=1"]).no_store, "not a Boolean");
        let c = with(&["no-cache=\"Set-Cookie\", private"]);
        assert_eq!(c.no_cache_fields, vec!["set-cookie"]);
        assert!(c.private && !c.no_cache);
        assert!(
            !with(&["private=x-user, max-age=1"]).private,
            "a Token: ignored"
        );
        // Not a Dictionary, or empty: ignored whole, Cache-Control applies.
        for invalid in [
            "Max-Age=3600",
            "max-age=3600,",
            "max-age=1 2",
            "max-age=60, ",
        ] {
            let cc = with(&[invalid]);
            assert!(!cc.targeted, "{invalid}");
            assert_eq!(cc.max_age, secs(5), "{invalid}");
        }
        // Surrogate-Control keeps the Cache-Control syntax.
        let mut h = HeaderMap::new();
        h.insert("surrogate-control", "max-age=\"30\"".parse().unwrap());
        assert_eq!(CacheControl::targeted(&h, &targets).max_age, secs(30));
        // An invalid CDN-Cache-Control falls through to the next targeted field.
        h.insert("cdn-cache-control", "MAX-AGE=1".parse().unwrap());
        assert_eq!(CacheControl::targeted(&h, &targets).max_age, secs(30));
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
