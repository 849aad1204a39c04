//! Request-target normalisation (RFC 3986 §6.2.2): the one form of the path and query that the
//! cache key, the rules and the backend all see, so that the cache can never store a response
//! under a key that the origin would route differently.
//!
//! Normalised: percent-escapes to upper-case hex (`%2f` → `%2F`); escapes of unreserved
//! characters decoded (`%41` → `A`, `%7E` → `~`), except `.` (`%2E` stays encoded, so decoding
//! can never create a `..` segment the client did not send). Not normalised (the origin sees
//! exactly what the client sent): dot segments, `//`, reserved characters (`%2F` stays `%2F`),
//! `+` vs `%20`, query parameter order, case of the path.

/// The normalised form of `path_and_query`, or None when it is already normal (the common
/// case: no allocation).
///
/// A target with a malformed escape (`%` not followed by two hex digits) is left alone: the
/// strict parser refuses those, and decoding next to one could create a new escape
/// (`%7%41` → `%7A`), i.e. decode twice.
pub fn normalise(path_and_query: &str) -> Option<String> {
    let bytes = path_and_query.as_bytes();
    let mut needs = false;
    // The escapes found by memchr: most targets have none, and a byte-by-byte walk cost
    // ~120 instructions per fast hit on an 11-byte target (callgrind, bench/RESULTS.md
    // "fourteenth stop: user").
    for i in memchr::memchr_iter(b'%', bytes) {
        match escape_at(bytes, i) {
            Some(v) => {
                needs |= decodes(v) || bytes[i + 1..i + 3].iter().any(u8::is_ascii_lowercase);
            }
            None => return None,
        }
    }
    if !needs {
        return None;
    }
    let mut out = String::with_capacity(path_and_query.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(v) = escape_at(bytes, i)
        {
            if decodes(v) {
                out.push(v as char);
            } else {
                out.push('%');
                out.push(hex_upper(v >> 4));
                out.push(hex_upper(v & 0xf));
            }
            i += 3;
            continue;
        }
        // Only ASCII reaches here (the strict parser refuses anything else in a target); a
        // multi-byte character is copied whole all the same.
        let ch_len = path_and_query[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&path_and_query[i..i + ch_len]);
        i += ch_len;
    }
    Some(out)
}

fn escape_at(b: &[u8], i: usize) -> Option<u8> {
    let hi = (*b.get(i + 1)? as char).to_digit(16)?;
    let lo = (*b.get(i + 2)? as char).to_digit(16)?;
    Some((hi * 16 + lo) as u8)
}

/// Unreserved characters (RFC 3986 §2.3) other than `.`.
fn decodes(v: u8) -> bool {
    v.is_ascii_alphanumeric() || matches!(v, b'-' | b'_' | b'~')
}

fn hex_upper(n: u8) -> char {
    char::from_digit(u32::from(n), 16)
        .unwrap_or('0')
        .to_ascii_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_escapes_only() {
        assert_eq!(normalise("/a/b?c=d"), None);
        assert_eq!(normalise("/a%2Fb"), None);
        assert_eq!(normalise("/a%2fb").as_deref(), Some("/a%2Fb"));
        assert_eq!(normalise("/%41%7e%2d?q=%5f").as_deref(), Some("/A~-?q=_"));
        assert_eq!(normalise("/a/%2e%2e/b").as_deref(), Some("/a/%2E%2E/b"));
        assert_eq!(normalise("/a/%2E%2E/b"), None);
        assert_eq!(normalise("/%zz"), None);
        assert_eq!(normalise("/x%2"), None);
        // Found by fuzzing: decoding next to a broken escape would create a new one.
        assert_eq!(normalise("/%7%41"), None);
        assert_eq!(normalise("/%2%46"), None);
        assert_eq!(normalise("/%c3%a9").as_deref(), Some("/%C3%A9"));
    }
}
