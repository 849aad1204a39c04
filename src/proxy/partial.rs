//! Conditional requests (RFC 9110 §13) and Range requests (RFC 9110 §14) answered from a stored
//! response: which answer a request gets, before any body is produced. The rules are
//! `http/conditional.rs`'s (the static-files origin applies them to files); this reads the
//! stored validators.

use http::Method;
use http::header::{self, HeaderMap};

use crate::cache::StoredFields;
pub use crate::http::conditional::{Answer, MAX_RANGES, RangeSpec, not_modified, parse_range};

/// Evaluates preconditions in RFC 9110 §13.2.2 order, then Range and If-Range.
/// `stored` are the stored response's headers, `len` its body length.
pub fn evaluate(method: &Method, request: &HeaderMap, stored: &StoredFields, len: u64) -> Answer {
    // Most hits carry none of these fields: one pass over the request's (few) field names
    // instead of the stored validators' date parsing.
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
    let etag = stored.get_str(&header::ETAG);
    let last_modified = stored
        .get_str(&header::LAST_MODIFIED)
        .and_then(|v| httpdate::parse_http_date(v.trim()).ok());
    crate::http::conditional::evaluate(method, request, etag, last_modified, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
            .collect()
    }

    const LM: &str = "Sat, 21 Nov 2026 10:00:00 GMT";

    fn stored() -> HeaderMap {
        headers(&[("etag", "\"v1\""), ("last-modified", LM)])
    }

    fn answer(req: &[(&str, &str)]) -> Answer {
        evaluate(
            &Method::GET,
            &headers(req),
            &StoredFields::from_map(&stored()),
            1000,
        )
    }

    #[test]
    fn overlapping_ranges_beyond_the_body_are_ignored() {
        assert_eq!(parse_range("bytes=0-,0-", 100), RangeSpec::Ignore);
        assert_eq!(parse_range("bytes=0-60,40-99", 100), RangeSpec::Ignore);
        assert_eq!(
            parse_range("bytes=0-10,5-15", 100),
            RangeSpec::Ranges(vec![(0, 10), (5, 15)])
        );
        assert_eq!(
            parse_range(&format!("bytes={}", vec!["0-1"; 17].join(",")), 100),
            RangeSpec::Ignore
        );
    }

    #[test]
    fn if_none_match_is_weak() {
        assert_eq!(answer(&[("if-none-match", "\"v1\"")]), Answer::NotModified);
        assert_eq!(
            answer(&[("if-none-match", "W/\"v1\"")]),
            Answer::NotModified
        );
        assert_eq!(
            answer(&[("if-none-match", "\"v0\", \"v1\"")]),
            Answer::NotModified
        );
        assert_eq!(answer(&[("if-none-match", "*")]), Answer::NotModified);
        assert_eq!(answer(&[("if-none-match", "\"v2\"")]), Answer::Full);
        // INM takes precedence over IMS.
        assert_eq!(
            answer(&[("if-none-match", "\"v2\""), ("if-modified-since", LM)]),
            Answer::Full
        );
    }

    #[test]
    fn if_modified_since() {
        assert_eq!(answer(&[("if-modified-since", LM)]), Answer::NotModified);
        assert_eq!(
            answer(&[("if-modified-since", "Sat, 21 Nov 2026 09:00:00 GMT")]),
            Answer::Full
        );
        assert_eq!(answer(&[("if-modified-since", "garbage")]), Answer::Full);
    }

    #[test]
    fn if_match_and_unmodified_since() {
        assert_eq!(
            answer(&[("if-match", "\"v2\"")]),
            Answer::PreconditionFailed
        );
        assert_eq!(
            answer(&[("if-match", "W/\"v1\"")]),
            Answer::PreconditionFailed,
            "strong comparison"
        );
        assert_eq!(answer(&[("if-match", "\"v1\"")]), Answer::Full);
        assert_eq!(
            answer(&[("if-unmodified-since", "Sat, 21 Nov 2026 09:00:00 GMT")]),
            Answer::PreconditionFailed
        );
        assert_eq!(answer(&[("if-unmodified-since", LM)]), Answer::Full);
    }

    #[test]
    fn ranges() {
        assert_eq!(
            parse_range("bytes=0-", 100),
            RangeSpec::Ranges(vec![(0, 99)])
        );
        assert_eq!(
            parse_range("bytes=0-9, 20-29", 100),
            RangeSpec::Ranges(vec![(0, 9), (20, 29)])
        );
        assert_eq!(
            parse_range("bytes=-10", 100),
            RangeSpec::Ranges(vec![(90, 99)])
        );
        assert_eq!(
            parse_range("bytes=-200", 100),
            RangeSpec::Ranges(vec![(0, 99)])
        );
        assert_eq!(
            parse_range("bytes=90-200", 100),
            RangeSpec::Ranges(vec![(90, 99)])
        );
        assert_eq!(parse_range("bytes=100-", 100), RangeSpec::Unsatisfiable);
        assert_eq!(parse_range("bytes=5-1", 100), RangeSpec::Ignore);
        assert_eq!(parse_range("items=0-1", 100), RangeSpec::Ignore);
        assert_eq!(parse_range("bytes=0x1-2", 100), RangeSpec::Ignore);
        let many = format!(
            "bytes={}",
            (0..20)
                .map(|i| format!("{i}-{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert_eq!(
            parse_range(&many, 100),
            RangeSpec::Ignore,
            "too many ranges"
        );
        assert_eq!(
            parse_range("bytes=99999999999999999999-", 100),
            RangeSpec::Ignore
        );
    }

    #[test]
    fn if_range() {
        assert_eq!(
            answer(&[("range", "bytes=0-9"), ("if-range", "\"v1\"")]),
            Answer::Partial(vec![(0, 9)])
        );
        assert_eq!(
            answer(&[("range", "bytes=0-9"), ("if-range", "\"v0\"")]),
            Answer::Full
        );
        assert_eq!(
            answer(&[("range", "bytes=0-9"), ("if-range", LM)]),
            Answer::Partial(vec![(0, 9)])
        );
        assert_eq!(
            answer(&[
                ("range", "bytes=0-9"),
                ("if-range", "Sat, 21 Nov 2026 11:00:00 GMT")
            ]),
            Answer::Full
        );
        assert_eq!(answer(&[("range", "bytes=5000-")]), Answer::Unsatisfiable);
    }
}
