//! A request path read as a file name under the document root, safe by construction: the
//! percent-escapes decoded once, and refused rather than interpreted when they could reach
//! outside the root or mean something else to the file system — `..` segments (written or
//! escaped, `%2e%2e`), escaped slashes (`%2f`), backslashes, NUL and control bytes, bytes
//! that are not UTF-8 (overlong forms such as `%c0%ae` are not UTF-8), and names starting
//! with `.` unless the operator serves them (`.well-known` always is). What comes out is a
//! list of plain names; joining them under the root cannot climb out of it (symbolic links
//! are the opener's question, `open.rs`).

/// Why a path is refused, and the status it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Malformed or hostile (`..`, a bad escape, a control byte, a backslash): 400.
    BadRequest,
    /// A name the files origin does not serve (a dotfile, an escaped slash): 404, as if it
    /// were not there.
    NotFound,
}

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
pub(crate) fn parse(path: &str, dotfiles: bool) -> Result<FilePath, Refused> {
    if !path.starts_with('/') {
        return Err(Refused::BadRequest);
    }
    let trailing_slash = path.ends_with('/');
    let mut names = Vec::new();
    // Split before decoding: an escaped slash stays inside its segment and is refused there.
    for raw in path.split('/') {
        let name = decode(raw)?;
        match name.as_str() {
            "" | "." => continue,
            ".." => return Err(Refused::BadRequest),
            _ => {}
        }
        if name.contains('/') {
            return Err(Refused::NotFound);
        }
        if name.starts_with('.') && !dotfiles && name != ".well-known" {
            return Err(Refused::NotFound);
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
fn decode(raw: &str) -> Result<String, Refused> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(Refused::BadRequest)?;
            let digit = |c: u8| (c as char).to_digit(16);
            let (Some(h), Some(l)) = (digit(hex[0]), digit(hex[1])) else {
                return Err(Refused::BadRequest);
            };
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    if out.iter().any(|&c| c < 0x20 || c == 0x7f || c == b'\\') {
        return Err(Refused::BadRequest);
    }
    String::from_utf8(out).map_err(|_| Refused::BadRequest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &str) -> Result<Vec<String>, Refused> {
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
        assert_eq!(names("/a%2fb"), Err(Refused::NotFound), "an escaped slash");
        assert_eq!(names("/a/%2e%2e"), Err(Refused::BadRequest));
    }

    #[test]
    fn dotfiles_only_when_served() {
        assert_eq!(names("/.env"), Err(Refused::NotFound));
        assert_eq!(names("/.git/config"), Err(Refused::NotFound));
        assert_eq!(names("/a/%2ehtpasswd"), Err(Refused::NotFound));
        assert_eq!(parse("/.env", true).unwrap().names, [".env"]);
    }
}
