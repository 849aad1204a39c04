//! The path a `rewrite` regex meets, and how what it captured goes back into a target: nginx
//! matches its `$uri` — the path with every escape decoded, `//` merged and dot segments
//! removed — so `^/café/(.*)$` or `"^/a b$"` match what a client sends as `/caf%C3%A9/...`
//! or `/a%20b`. A capture is decoded text: put back into the path it is escaped for a path
//! (`%`, `?`, `#`, a space, a non-ASCII byte ... as `%XX`), after the replacement's `?` for a
//! query (also `&` and `+`), so `/wiki/A%3FB` rewritten to `/w/$1` is `/w/A%3FB`, never the
//! query `?B` (what nginx's rewrite_unescape.t lists as expected and nginx does not yet do).
//!
//! Traversal: dot segments are removed *after* decoding (RFC 3986 §5.2.4, a `..` never
//! climbing above `/`), so neither `..` nor `%2E%2E` nor `%2F..%2F` is ever in the text a
//! regex captures: a rewrite into a files root cannot be led out of it by its captures.
//! A path whose escapes do not decode to UTF-8 is matched as it came (normalised, escapes
//! kept) and its captures are put back as they are.

/// The text a rewrite's regex is matched against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Subject {
    /// nginx's `$uri`, or the path as it came (`decoded == false`).
    pub text: String,
    /// Whether `text` is decoded: its captures then need escaping when put back.
    pub decoded: bool,
}

impl Subject {
    /// The subject of a request's (normalised) path.
    pub fn of(path: &str) -> Subject {
        match decode(path) {
            Some(text) => Subject {
                text: remove_dot_segments(&merge_slashes(&text)),
                decoded: true,
            },
            None => Subject {
                text: path.to_owned(),
                decoded: false,
            },
        }
    }

    /// Appends `piece` (a capture or `$uri`) to `out`, the replacement built so far: escaped
    /// for a query once `out` has a `?`, for a path before it, as it is when not decoded.
    pub fn put(&self, out: &mut String, piece: &str) {
        if !self.decoded {
            out.push_str(piece);
        } else if out.contains('?') {
            escape(out, piece, keep_in_query);
        } else {
            escape(out, piece, keep_in_path);
        }
    }
}

/// Every `%XX` decoded; `None` when the bytes are not UTF-8. A `%` not followed by two hex
/// digits is kept as it is (the strict parser refuses those before a rewrite sees them).
fn decode(path: &str) -> Option<String> {
    if !path.contains('%') {
        return Some(path.to_owned());
    }
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |j: usize| b.get(j).and_then(|c| (*c as char).to_digit(16));
        if b[i] == b'%'
            && let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2))
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Runs of `/` as one (nginx's `merge_slashes on`, its default).
fn merge_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c == '/' && out.ends_with('/') {
            continue;
        }
        out.push(c);
    }
    out
}

/// RFC 3986 §5.2.4 on a path of `/`-separated segments: `.` goes, `..` takes the segment
/// before it with it (nothing above `/`); a final `.` or `..` leaves a trailing `/`.
fn remove_dot_segments(path: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len() - 1;
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." | ".." => {
                if *seg == ".." && kept.len() > 1 {
                    kept.pop();
                }
                if i == last {
                    kept.push("");
                }
            }
            s => kept.push(s),
        }
    }
    kept.join("/")
}

/// pchar (RFC 3986 §3.3) and `/`: unreserved, sub-delims, `:`, `@`.
fn keep_in_path(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&c)
}

/// A query's characters (RFC 3986 §3.4) but `&` and `+`, which a form would read as a new
/// parameter and a space.
fn keep_in_query(c: u8) -> bool {
    c != b'&' && c != b'+' && (keep_in_path(c) || c == b'?')
}

fn escape(out: &mut String, text: &str, keep: fn(u8) -> bool) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &c in text.as_bytes() {
        if keep(c) {
            out.push(c as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(c >> 4)] as char);
            out.push(HEX[usize::from(c & 0xf)] as char);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(path: &str) -> String {
        Subject::of(path).text
    }

    #[test]
    fn the_subject_is_nginx_uri() {
        assert_eq!(uri("/caf%C3%A9/a%20b"), "/café/a b");
        assert_eq!(uri("//old///p"), "/old/p");
        assert_eq!(uri("/a%2Fb"), "/a/b");
        assert_eq!(uri("/a/./b/../c"), "/a/c");
        assert_eq!(uri("/a/b/.."), "/a/");
        assert_eq!(uri("/a/."), "/a/");
        assert_eq!(uri("/"), "/");
        assert_eq!(uri("/%2E%2E/%2e%2E/etc/passwd"), "/etc/passwd");
        assert_eq!(uri("/pub%2F..%2F..%2Fsecret"), "/secret");
        assert_eq!(uri("/..a/b..c/"), "/..a/b..c/");
        assert_eq!(uri("/a%25b"), "/a%b");
        // Not UTF-8 once decoded: matched as it came.
        let s = Subject::of("/x%FF%2F");
        assert_eq!((s.text.as_str(), s.decoded), ("/x%FF%2F", false));
    }

    #[test]
    fn captures_go_back_escaped_for_where_they_land() {
        let s = Subject::of("/");
        let mut out = String::from("/w/");
        s.put(&mut out, "A?B #c%d é/e+f&g");
        assert_eq!(out, "/w/A%3FB%20%23c%25d%20%C3%A9/e+f&g");
        out.push_str("?t=");
        s.put(&mut out, "A?B #c%d é/e+f&g=h");
        assert_eq!(
            out,
            "/w/A%3FB%20%23c%25d%20%C3%A9/e+f&g?t=A?B%20%23c%25d%20%C3%A9/e%2Bf%26g=h"
        );
        // Not decoded: as it is.
        let raw = Subject::of("/x%FF");
        let mut out = String::from("/y");
        raw.put(&mut out, "%FF");
        assert_eq!(out, "/y%FF");
    }
}
