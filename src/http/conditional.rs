//! Conditional requests (RFC 9110 §13) and Range requests (RFC 9110 §14): which answer a
//! request gets from a representation's validators and length, before any body is produced.
//! The proxy applies it to stored responses (`proxy/partial.rs`), the static-files origin
//! to files (`backend/files/`).

use std::time::SystemTime;

use http::Method;
use http::header::{self, HeaderMap, HeaderValue};

/// Ranges per request at most; a request with more gets the whole representation (RFC 9110
/// §14.2 lets a server ignore Range; this bounds the work a request can cause).
pub const MAX_RANGES: usize = 16;

/// How to answer a GET/HEAD from a stored response.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// 200 with the whole body.
    Full,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    PreconditionFailed,
    /// 206 with these inclusive byte ranges (one range: a plain body; several: multipart).
    Partial(Vec<(u64, u64)>),
    /// 416 Range Not Satisfiable.
    Unsatisfiable,
}

/// Evaluates preconditions in RFC 9110 §13.2.2 order, then Range and If-Range, against a
/// representation with `etag` (the field's value, quotes included), `last_modified` and
/// `len` bytes.
pub fn evaluate(
    method: &Method,
    request: &HeaderMap,
    etag: Option<&str>,
    last_modified: Option<SystemTime>,
    len: u64,
) -> Answer {
    // Most hits carry none of these fields: one pass over the request's (few) field names
    // instead of five hash lookups and the stored validators' date parsing.
    let relevant = request.keys().any(|k| {
        k == header::IF_MATCH
            || k == header::IF_NONE_MATCH
            || k == header::IF_MODIFIED_SINCE
            || k == header::IF_UNMODIFIED_SINCE
            || k == header::RANGE
    });
    if !relevant {
        return Answer::Full;
    }

    // 1. If-Match (strong comparison)
    if let Some(im) = list(request, header::IF_MATCH) {
        if !im
            .iter()
            .any(|t| t == "*" && etag.is_some() || etag.is_some_and(|e| strong_eq(t, e)))
        {
            return Answer::PreconditionFailed;
        }
    } else if let (Some(ius), Some(lm)) = (
        date(request.get(header::IF_UNMODIFIED_SINCE)),
        last_modified,
    ) {
        // 2. If-Unmodified-Since
        if lm > ius {
            return Answer::PreconditionFailed;
        }
    }
    let safe = method == Method::GET || method == Method::HEAD;
    // 3. If-None-Match (weak comparison)
    if let Some(inm) = list(request, header::IF_NONE_MATCH) {
        if inm
            .iter()
            .any(|t| t == "*" || etag.is_some_and(|e| weak_eq(t, e)))
        {
            return if safe {
                Answer::NotModified
            } else {
                Answer::PreconditionFailed
            };
        }
    } else if safe
        && let (Some(ims), Some(lm)) = (date(request.get(header::IF_MODIFIED_SINCE)), last_modified)
        && lm <= ims
    {
        // 4. If-Modified-Since
        return Answer::NotModified;
    }
    // 5. Range, for GET only
    if method != Method::GET {
        return Answer::Full;
    }
    let Some(range) = request.get(header::RANGE).and_then(|v| v.to_str().ok()) else {
        return Answer::Full;
    };
    if !if_range_holds(request, etag, last_modified) {
        return Answer::Full;
    }
    match parse_range(range, len) {
        RangeSpec::Ignore => Answer::Full,
        RangeSpec::Unsatisfiable => Answer::Unsatisfiable,
        RangeSpec::Ranges(r) => Answer::Partial(r),
    }
}

/// Whether the request's `If-Range` (RFC 9110 §13.1.5) names the representation with `etag`
/// and `last_modified`, so that its `Range` is answered: true without `If-Range`; an entity
/// tag compared strongly (a weak one never matches), a date equal to `Last-Modified`.
pub fn if_range_holds(
    request: &HeaderMap,
    etag: Option<&str>,
    last_modified: Option<SystemTime>,
) -> bool {
    let Some(if_range) = request.get(header::IF_RANGE) else {
        return true;
    };
    let Ok(if_range) = if_range.to_str() else {
        return false;
    };
    if if_range.starts_with('"') || if_range.starts_with("W/") {
        etag.is_some_and(|e| strong_eq(if_range.trim(), e))
    } else {
        // A date validator must equal Last-Modified exactly (RFC 9110 §13.1.5).
        httpdate::parse_http_date(if_range.trim())
            .ok()
            .is_some_and(|d| Some(d) == last_modified)
    }
}

/// Steps 3 and 4 of RFC 9110 §13.2.2 for a GET or HEAD — `If-None-Match`, else
/// `If-Modified-Since` — against the validators of the response as it is delivered
/// (`delivered`), as Varnish evaluates them after vcl_deliver, which may change them (VCL
/// only; without VCL [`evaluate`] answers). As Varnish's `RFC2616_Do_Cond` does,
/// `If-None-Match` uses the weak comparison, but the strong one on a request with `Range`:
/// a weak validator does not stand for the bytes of a range (RFC 9110 §13.1.5, §14.4), so
/// that request gets its 206 rather than a 304. True: the answer is 304.
pub fn not_modified(request: &HeaderMap, delivered: &HeaderMap) -> bool {
    let etag = delivered.get(header::ETAG).and_then(|v| v.to_str().ok());
    if let Some(inm) = list(request, header::IF_NONE_MATCH) {
        let compare = if request.contains_key(header::RANGE) {
            strong_eq
        } else {
            weak_eq
        };
        return inm
            .iter()
            .any(|t| t == "*" || etag.is_some_and(|e| compare(t, e)));
    }
    let last_modified = date(delivered.get(header::LAST_MODIFIED));
    matches!(
        (date(request.get(header::IF_MODIFIED_SINCE)), last_modified),
        (Some(ims), Some(lm)) if lm <= ims
    )
}

/// Fields of a 200 that the 304 (Not Modified) standing for it leaves out (RFC 9110 §15.4.5):
/// the representation metadata that describes a body the 304 does not have, and that body's
/// framing. `Content-Digest` and `Content-MD5` are digests of that body.
const NOT_IN_A_304: [header::HeaderName; 9] = [
    header::CONTENT_LENGTH,
    header::CONTENT_RANGE,
    header::CONTENT_TYPE,
    header::CONTENT_ENCODING,
    header::CONTENT_LANGUAGE,
    header::TRANSFER_ENCODING,
    header::ACCEPT_RANGES,
    header::HeaderName::from_static("content-digest"),
    header::HeaderName::from_static("content-md5"),
];

/// `headers`, the fields of the 200 a 304 (Not Modified) stands for, made the 304's — the one
/// definition every 304 Shellac makes uses (a stored object's, a fetched response's, one made
/// after vcl_deliver, a sliced object's). RFC 9110 §15.4.5: the 304 sends each of
/// Cache-Control, Content-Location, Date, ETag, Expires and Vary the 200 would have sent (they
/// stay); it MAY send the 200's other fields (they stay too, as Varnish and nginx send them,
/// so a cache freshening its copy with the 304, RFC 9111 §4.3.4, sees what the 200 says); it
/// SHOULD NOT send representation metadata beyond what guides cache updates — so
/// `Last-Modified` stays, and the body's type, coding, language, length and framing go
/// ([`NOT_IN_A_304`]).
pub fn not_modified_fields(headers: &mut HeaderMap) {
    for name in NOT_IN_A_304 {
        headers.remove(name);
    }
}

/// A parsed `Range` header against a body of known length.
#[derive(Debug, PartialEq, Eq)]
pub enum RangeSpec {
    /// Not a byte range we serve (other unit, syntax error, too many ranges): send it all.
    Ignore,
    Unsatisfiable,
    Ranges(Vec<(u64, u64)>),
}

/// Parses `bytes=a-b, c-, -n` (RFC 9110 §14.1.2) into inclusive ranges within `len`.
pub fn parse_range(text: &str, len: u64) -> RangeSpec {
    let Some(spec) = text.trim().strip_prefix("bytes=") else {
        return RangeSpec::Ignore;
    };
    // An empty representation is sent whole (a 200 of no bytes), as Varnish does (trunk
    // c00135): no range of it is satisfiable, and RFC 9110 §14.2 lets a server ignore Range.
    if len == 0 {
        return RangeSpec::Ignore;
    }
    let parts: Vec<&str> = spec
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() || parts.len() > MAX_RANGES {
        return RangeSpec::Ignore;
    }
    let mut out = Vec::new();
    for part in parts {
        let Some((first, last)) = part.split_once('-') else {
            return RangeSpec::Ignore;
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let range = match (first.trim(), last.trim()) {
            ("", n) if digits(n) => {
                let Ok(n) = n.parse::<u64>() else {
                    return RangeSpec::Ignore;
                };
                (n > 0 && len > 0).then(|| (len.saturating_sub(n), len - 1))
            }
            (a, "") if digits(a) => {
                let Ok(a) = a.parse::<u64>() else {
                    return RangeSpec::Ignore;
                };
                (a < len).then(|| (a, len - 1))
            }
            (a, b) if digits(a) && digits(b) => {
                let (Ok(a), Ok(b)) = (a.parse::<u64>(), b.parse::<u64>()) else {
                    return RangeSpec::Ignore;
                };
                if b < a {
                    return RangeSpec::Ignore;
                }
                (a < len).then(|| (a, b.min(len - 1)))
            }
            _ => return RangeSpec::Ignore,
        };
        if let Some(r) = range {
            out.push(r);
        }
    }
    // Overlapping ranges that add up to more than the body would make one request cost
    // more than the object: send it whole instead (RFC 9110 §14.2 allows ignoring Range).
    let total = out
        .iter()
        .fold(0u64, |sum, (a, b)| sum.saturating_add(b - a + 1));
    if out.is_empty() {
        RangeSpec::Unsatisfiable
    } else if out.len() > 1 && total > len {
        RangeSpec::Ignore
    } else {
        RangeSpec::Ranges(out)
    }
}

fn list(request: &HeaderMap, name: header::HeaderName) -> Option<Vec<String>> {
    let mut values = request.get_all(name).iter().peekable();
    values.peek()?;
    Some(
        values
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect(),
    )
}

fn date(v: Option<&HeaderValue>) -> Option<SystemTime> {
    httpdate::parse_http_date(v?.to_str().ok()?.trim()).ok()
}

fn opaque(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag)
}

/// Strong comparison: both strong and identical.
fn strong_eq(a: &str, b: &str) -> bool {
    !a.starts_with("W/") && !b.starts_with("W/") && a == b
}

/// Weak comparison: opaque tags identical, weakness ignored.
fn weak_eq(a: &str, b: &str) -> bool {
    opaque(a) == opaque(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After vcl_deliver (Varnish's `RFC2616_Do_Cond`, trunk c00025): `If-None-Match` compares
    /// weakly, strongly when the request has a `Range` — so a weak match of a range request
    /// is not a 304.
    #[test]
    fn if_none_match_compares_strongly_with_a_range() {
        let fields = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (n, v) in pairs {
                h.insert(*n, HeaderValue::from_static(v));
            }
            h
        };
        let strong = fields(&[("etag", "\"1\"")]);
        let weak = fields(&[("etag", "W/\"1\"")]);
        // (If-None-Match, with a Range, the delivered ETag, 304)
        let cases = [
            ("\"1\"", false, &strong, true),
            ("W/\"1\"", false, &strong, true),
            ("\"1\"", false, &weak, true),
            ("\"2\"", false, &strong, false),
            ("\"1\"", true, &strong, true),
            ("W/\"1\"", true, &strong, false),
            ("\"1\"", true, &weak, false),
            ("W/\"1\"", true, &weak, false),
            ("*", true, &weak, true),
        ];
        for (inm, range, delivered, want) in cases {
            let mut request = fields(&[("if-none-match", inm)]);
            if range {
                request.insert(header::RANGE, HeaderValue::from_static("bytes=1-2"));
            }
            let etag = delivered.get(header::ETAG);
            assert_eq!(
                not_modified(&request, delivered),
                want,
                "{inm} {range} {etag:?}"
            );
        }
    }

    /// A Range on an empty representation is ignored (the whole, empty, body: 200), as
    /// Varnish answers it (trunk c00135); on a body past its end it is unsatisfiable (416).
    #[test]
    fn if_range_names_a_response_by_strong_etag_or_exact_date() {
        let lm = httpdate::parse_http_date("Sat, 01 Jan 2022 00:00:00 GMT").ok();
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::IF_RANGE, HeaderValue::from_str(v).unwrap());
            h
        };
        assert!(if_range_holds(&HeaderMap::new(), None, None));
        assert!(if_range_holds(&with("\"v1\""), Some("\"v1\""), None));
        assert!(!if_range_holds(&with("\"v1\""), Some("W/\"v1\""), None));
        assert!(!if_range_holds(&with("W/\"v1\""), Some("W/\"v1\""), None));
        assert!(!if_range_holds(&with("\"v0\""), Some("\"v1\""), lm));
        assert!(if_range_holds(
            &with("Sat, 01 Jan 2022 00:00:00 GMT"),
            None,
            lm
        ));
        assert!(!if_range_holds(
            &with("Sat, 01 Jan 2022 00:00:01 GMT"),
            None,
            lm
        ));
        assert!(!if_range_holds(&with("bad"), Some("\"v1\""), lm));
    }

    #[test]
    fn a_range_of_an_empty_body_is_ignored() {
        for range in ["bytes=0-0", "bytes=0-", "bytes=-1", "bytes=5-9"] {
            assert!(
                matches!(parse_range(range, 0), RangeSpec::Ignore),
                "{range}"
            );
        }
        assert!(matches!(
            parse_range("bytes=5-9", 3),
            RangeSpec::Unsatisfiable
        ));
        assert!(matches!(parse_range("bytes=0-0", 3), RangeSpec::Ranges(_)));
    }

    #[test]
    fn a_304_keeps_the_200s_fields_but_the_bodys() {
        let mut h = HeaderMap::new();
        for (name, value) in [
            ("cache-control", "max-age=60"),
            ("content-location", "/a.en"),
            ("date", "Sun, 29 Nov 2026 10:00:00 GMT"),
            ("etag", "\"v1\""),
            ("expires", "Thu, 18 Aug 2050 02:01:18 GMT"),
            ("vary", "Accept-Encoding"),
            ("last-modified", "Sat, 21 Nov 2026 10:00:00 GMT"),
            ("link", "</s.css>; rel=preload"),
            ("content-type", "text/html"),
            ("content-encoding", "gzip"),
            ("content-language", "en"),
            ("content-length", "1234"),
            ("content-range", "bytes 0-9/1234"),
            ("content-digest", "sha-256=:x:"),
            ("content-md5", "x"),
            ("transfer-encoding", "chunked"),
            ("accept-ranges", "bytes"),
        ] {
            h.insert(
                header::HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        not_modified_fields(&mut h);
        let mut kept: Vec<&str> = h.keys().map(|n| n.as_str()).collect();
        kept.sort_unstable();
        assert_eq!(
            kept,
            [
                "cache-control",
                "content-location",
                "date",
                "etag",
                "expires",
                "last-modified",
                "link",
                "vary"
            ]
        );
    }
}
