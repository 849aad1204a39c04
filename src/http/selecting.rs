//! How the value of a request field named in `Vary` is compared (RFC 9111 §4.1): exactly, but
//! for the transformations the field's own grammar says change nothing.
//!
//! RFC 9111 §4.1 lets two selecting values match when one becomes the other by "adding or
//! removing whitespace, where allowed in the header field's syntax", combining field lines, or
//! a normalisation "known to have identical semantics, according to the header field's
//! specification (… case-normalization, where values are defined to be case-insensitive)".
//! Shellac used to lower-case every member of every field, which is right for a few fields and
//! a leak for most: with `Vary: Cookie` a client sending `sid=victimsecretabc` got the page
//! stored for `sid=VictimSecretAbc`, and the same with `Vary: Authorization` and bearer tokens
//! (issue 32). Now:
//! - every value is compared byte for byte after its outer whitespace (the field's OWS);
//! - a field whose grammar is a list (RFC 9110 §5.6.1: `Accept`, `Accept-Language`, …) also
//!   has the whitespace around its commas and its empty members removed (commas inside a
//!   quoted string are not separators);
//! - only the fields whose values are case-insensitive by their specification, and that a
//!   cache normalises on purpose, are lower-cased: `Accept-Encoding` (content-codings and the
//!   `q` weight, RFC 9110 §12.5.3; the compression negotiation rewrites it anyway),
//!   `Accept-Charset` (charset names, §12.5.2) and `Accept-Language` (language ranges, RFC 4647
//!   §2).
//!
//! Anything else — `Cookie`, `Authorization`, `Origin`, `User-Agent`, an application's own
//! `X-` field — must match exactly: a difference Shellac cannot prove meaningless is a miss,
//! never another client's response.

use http::{HeaderName, HeaderValue};

/// Request fields defined as comma-separated lists (RFC 9110 §5.6.1, and the de-facto lists
/// proxies forward): whitespace around the commas and empty members carry no meaning.
const LISTS: [&str; 14] = [
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "cache-control",
    "forwarded",
    "if-match",
    "if-none-match",
    "pragma",
    "prefer",
    "te",
    "via",
    "x-forwarded-for",
    "sec-ch-ua",
];

/// Request fields whose values are case-insensitive by their specification and that Shellac
/// compares lower-cased on purpose.
const CASE_INSENSITIVE: [&str; 3] = ["accept-encoding", "accept-charset", "accept-language"];

/// The bytes `value` of field `name` is compared (and hashed) by, for `Vary`.
pub fn selecting_value(name: &HeaderName, value: &HeaderValue) -> Vec<u8> {
    let bytes = value.as_bytes().trim_ascii();
    let name = name.as_str();
    let mut out = if LISTS.contains(&name) {
        list_normalised(bytes)
    } else {
        bytes.to_vec()
    };
    if CASE_INSENSITIVE.contains(&name) {
        out.make_ascii_lowercase();
    }
    out
}

/// A list's members (split at commas outside quoted strings), each without its surrounding
/// whitespace, empty ones dropped, joined by `", "`.
fn list_normalised(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    let push = |member: &[u8], out: &mut Vec<u8>| {
        let member = member.trim_ascii();
        if !member.is_empty() {
            if !out.is_empty() {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(member);
        }
    };
    for (i, &b) in bytes.iter().enumerate() {
        if escaped {
            escaped = false;
        } else if quoted && b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            quoted = !quoted;
        } else if b == b',' && !quoted {
            push(&bytes[start..i], &mut out);
            start = i + 1;
        }
    }
    push(&bytes[start..], &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(name: &str, a: &str, b: &str) -> bool {
        let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
        selecting_value(&name, &HeaderValue::from_str(a).unwrap())
            == selecting_value(&name, &HeaderValue::from_str(b).unwrap())
    }

    /// Issue 32: values of fields that are not case-insensitive lists are compared exactly.
    #[test]
    fn vary_values_compared_exactly_cookie() {
        assert!(same("cookie", "sid=VictimSecretAbc", "sid=VictimSecretAbc"));
        assert!(!same(
            "cookie",
            "sid=VictimSecretAbc",
            "sid=victimsecretabc"
        ));
        assert!(!same("cookie", "a=1; b=2", "a=1;b=2"), "not a comma list");
        assert!(!same("cookie", "a=1, b=2", "a=1,b=2"), "not a comma list");
        assert!(same("cookie", " a=1 ", "a=1"), "the field's own OWS");
    }

    #[test]
    fn vary_values_compared_exactly_authorization_bearer() {
        assert!(!same("authorization", "Bearer AbC.dEf", "Bearer abc.def"));
        assert!(!same("authorization", "Bearer a,b", "Bearer a, b"));
        assert!(same("authorization", "Bearer AbC.dEf", "Bearer AbC.dEf"));
    }

    #[test]
    fn vary_values_compared_exactly_other_fields() {
        for name in ["origin", "user-agent", "x-api-key", "x-device"] {
            assert!(!same(name, "Mobile", "mobile"), "{name}");
            assert!(!same(name, "a, b", "a,b"), "{name}: its syntax is unknown");
        }
        // A list whose members are case-sensitive: whitespace only.
        assert!(same(
            "accept",
            "text/html,application/json",
            "text/html , application/json"
        ));
        assert!(!same("accept", "text/html;v=\"A\"", "text/html;v=\"a\""));
        assert!(same("if-none-match", "\"A\",\"B\"", "\"A\", \"B\""));
        assert!(!same("if-none-match", "\"A\"", "\"a\""));
    }

    #[test]
    fn vary_values_compared_exactly_accept_language() {
        assert!(same("accept-language", "en-US,fr;q=0.5", "en-us, fr;q=0.5"));
        assert!(
            same("accept-language", "en-US, fr", "en-US,,fr"),
            "empty member"
        );
        assert!(!same("accept-language", "en", "fr"));
        assert!(
            !same("accept-language", "en, fr", "fr, en"),
            "order is preference"
        );
    }

    #[test]
    fn vary_values_compared_exactly_accept_encoding() {
        assert!(same("accept-encoding", "GZIP, br", "gzip,br"));
        assert!(same("accept-encoding", "gzip;Q=0.5", "gzip;q=0.5"));
        assert!(!same("accept-encoding", "gzip", "br"));
    }

    #[test]
    fn commas_in_quoted_strings_are_not_separators() {
        assert!(!same("accept", "a;p=\"x,y\"", "a;p=\"x, y\""));
        assert!(same("accept", "a;p=\"x,y\" ,b", "a;p=\"x,y\", b"));
        assert!(!same("accept", "a;p=\"x\\\",y\"", "a;p=\"x\\\", y\""));
    }
}
