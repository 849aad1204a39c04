//! A request path read as a file name under the document root, safe by construction: the
//! percent-escapes decoded once, and refused rather than interpreted when they could reach
//! outside the root or mean something else to the file system — `..` segments (written or
//! escaped, `%2e%2e`), escaped slashes (`%2f`), backslashes, NUL and control bytes, bytes
//! that are not UTF-8 (overlong forms such as `%c0%ae` are not UTF-8), and names starting
//! with `.` unless the operator serves them (`.well-known` always is). What comes out is a
//! list of plain names; joining them under the root cannot climb out of it (symbolic links
//! are the opener's question, `open.rs`).

use super::refusal::Refusal;

/// A request path as names under the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FilePath {
    /// The names, in order (no empty, `.` or `..` ones).
    pub names: Vec<String>,
    /// The path ended with `/` (a directory was asked for).
    pub trailing_slash: bool,
}

impl FilePath {
    /// The names joined with `/`, relative (empty for the root itself).
    pub fn relative(&self) -> String {
        self.names.join("/")
    }
}

/// Reads `path` (the request target's path, still percent-encoded, starting with `/`).
/// Refused: `Traversal`, `Encoding` (a malformed escape, not UTF-8, not starting with `/`),
/// `Control` (400); `EscapedSlash`, `Dotfile` (404, as if the name were not there).
pub(crate) fn parse(path: &str, dotfiles: bool) -> Result<FilePath, Refusal> {
    if !path.starts_with('/') {
        return Err(Refusal::Encoding);
    }
    let trailing_slash = path.ends_with('/');
    let mut names = Vec::new();
    // Split before decoding: an escaped slash stays inside its segment and is refused there.
    for raw in path.split('/') {
        let name = decode(raw)?;
        match name.as_str() {
            "" | "." => continue,
            ".." => return Err(Refusal::Traversal),
            _ => {}
        }
        if name.contains('/') {
            return Err(Refusal::EscapedSlash);
        }
        if name.starts_with('.') && !dotfiles && name != ".well-known" {
            return Err(Refusal::Dotfile);
        }
        names.push(name);
    }
    Ok(FilePath {
        names,
        trailing_slash,
    })
}

/// One segment with its escapes decoded; refused when an escape is malformed, when the
/// result is not UTF-8, or holds a control byte, NUL or a backslash.
fn decode(raw: &str) -> Result<String, Refusal> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(Refusal::Encoding)?;
            let digit = |c: u8| (c as char).to_digit(16);
            let (Some(h), Some(l)) = (digit(hex[0]), digit(hex[1])) else {
                return Err(Refusal::Encoding);
            };
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    if out.iter().any(|&c| c < 0x20 || c == 0x7f || c == b'\\') {
        return Err(Refusal::Control);
    }
    String::from_utf8(out).map_err(|_| Refusal::Encoding)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &str) -> Result<Vec<String>, Refusal> {
        parse(p, false).map(|f| f.names)
    }

    #[test]
    fn plain_paths_become_names() {
        assert_eq!(names("/").unwrap(), Vec::<String>::new());
        assert_eq!(names("/a/b.css").unwrap(), ["a", "b.css"]);
        assert_eq!(names("//a/./b/").unwrap(), ["a", "b"]);
        assert_eq!(names("/caf%C3%A9%20x.txt").unwrap(), ["café x.txt"]);
        assert!(parse("/dir/", false).unwrap().trailing_slash);
        assert_eq!(names("/.well-known/acme").unwrap(), [".well-known", "acme"]);
    }

    #[test]
    fn traversal_in_every_spelling_is_refused() {
        for p in [
            "/../etc/passwd",
            "/a/../../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/%2E%2E/etc/passwd",
            "/.%2e/etc/passwd",
            "/a/%2e%2e%2f%2e%2e%2fetc/passwd",
            "/%c0%ae%c0%ae/etc/passwd",
            "/%e0%80%ae%e0%80%ae/x",
            "/..%5c..%5cetc/passwd",
            "/a\\..\\b",
            "/a%00.txt",
            "/a%0a",
            "/a%7f",
            "/a%zz",
            "/a%2",
            "relative",
        ] {
            assert!(parse(p, true).is_err(), "{p}");
        }
        assert_eq!(
            names("/a%2fb"),
            Err(Refusal::EscapedSlash),
            "an escaped slash"
        );
        assert_eq!(names("/a/%2e%2e"), Err(Refusal::Traversal));
        assert_eq!(names("/.%2e/x"), Err(Refusal::Traversal));
        assert_eq!(names("/%c0%ae%c0%ae/x"), Err(Refusal::Encoding), "overlong");
        assert_eq!(names("/a%zz"), Err(Refusal::Encoding));
        assert_eq!(names("/a%00.txt"), Err(Refusal::Control));
        assert_eq!(names("/a\\..\\b"), Err(Refusal::Control));
        assert_eq!(names("/..%5c..%5cx"), Err(Refusal::Control));
    }

    #[test]
    fn dotfiles_only_when_served() {
        assert_eq!(names("/.env"), Err(Refusal::Dotfile));
        assert_eq!(names("/.git/config"), Err(Refusal::Dotfile));
        assert_eq!(names("/a/%2ehtpasswd"), Err(Refusal::Dotfile));
        assert_eq!(parse("/.env", true).unwrap().names, [".env"]);
    }
}
