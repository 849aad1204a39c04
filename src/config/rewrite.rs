//! The text of a `rewrite` line as the configuration holds it (`[routing] rewrite`, a
//! `[[site]]`'s `rewrite`): nginx's `rewrite REGEX REPLACEMENT [FLAG]` in one string, checked
//! here (the regex compiles, every `$n` names a group it has, every variable is known, the
//! flag is one of nginx's); `rules::rewrite` runs it.
//!
//! Words are separated by blanks; a word may be quoted with `"` or `'` (a regex holding a
//! blank must be); a trailing `;` and a leading `rewrite` are accepted, so nginx's line
//! `rewrite "^/external/([0-9]+)/?" /external.php?vid=$1 last;` can be pasted as it is.

/// What a rewrite does after it matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// No flag: the next rewrite sees the new URI.
    Continue,
    /// `last`: the whole list again with the new URI.
    Last,
    /// `break`: no further rewrite.
    Break,
    /// `redirect`: 302 to the result.
    Redirect,
    /// `permanent`: 301 to the result.
    Permanent,
}

impl Flag {
    /// Reads nginx's flag word (`None` for an unknown word).
    pub fn parse(word: &str) -> Option<Flag> {
        Some(match word {
            "" => Flag::Continue,
            "last" => Flag::Last,
            "break" => Flag::Break,
            "redirect" => Flag::Redirect,
            "permanent" => Flag::Permanent,
            _ => return None,
        })
    }
}

/// Why a rewrite line is refused (`shellac check` names file:line:key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    #[error(
        "expected `REGEX REPLACEMENT [last|break|redirect|permanent]` (nginx's rewrite), got {0} word(s)"
    )]
    Words(usize),
    #[error("unknown flag `{0}` (nginx's flags: last, break, redirect, permanent)")]
    Flag(String),
    #[error("an unclosed quote")]
    Quote,
    #[error("the regular expression does not compile: {0}")]
    Regex(String),
    #[error("${0} names a capture group the regular expression does not have (it has {1})")]
    Capture(usize, usize),
    #[error(
        "unknown variable ${0} (known: $1-$9, $scheme, $host, $args, $query_string, $uri, $request_uri)"
    )]
    Variable(String),
}

/// The variables a replacement may name.
pub const VARIABLES: [&str; 6] = [
    "scheme",
    "host",
    "args",
    "query_string",
    "uri",
    "request_uri",
];

/// One checked rewrite line.
#[derive(Debug, Clone)]
pub struct Line {
    pub regex: regex::Regex,
    pub replacement: String,
    pub flag: Flag,
}

impl Line {
    /// Reads and checks one line.
    pub fn parse(text: &str) -> Result<Line, RewriteError> {
        let mut words = words(text)?;
        if words.first().is_some_and(|w| w == "rewrite") {
            words.remove(0);
        }
        let (regex, replacement, flag) = match words.as_slice() {
            [r, p] => (r, p, Flag::Continue),
            [r, p, f] => (
                r,
                p,
                Flag::parse(f).ok_or_else(|| RewriteError::Flag(f.clone()))?,
            ),
            other => return Err(RewriteError::Words(other.len())),
        };
        Line::new(regex, replacement, flag)
    }

    /// A line from its parts, checked.
    pub fn new(regex: &str, replacement: &str, flag: Flag) -> Result<Line, RewriteError> {
        let regex = regex::Regex::new(regex).map_err(|e| {
            let text = e.to_string();
            let last = text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
            RewriteError::Regex(last.trim().to_owned())
        })?;
        let groups = regex.captures_len() - 1;
        for piece in pieces(replacement) {
            match piece {
                Piece::Group(n) if n > groups => return Err(RewriteError::Capture(n, groups)),
                Piece::Var(v) if !VARIABLES.contains(&v) => {
                    return Err(RewriteError::Variable(v.to_owned()));
                }
                _ => {}
            }
        }
        Ok(Line {
            regex,
            replacement: replacement.to_owned(),
            flag,
        })
    }
}

/// The line cut into words (quotes removed, a trailing `;` dropped).
fn words(text: &str) -> Result<Vec<String>, RewriteError> {
    let text = text.trim();
    let text = text.strip_suffix(';').unwrap_or(text);
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        if c == '"' || c == '\'' {
            chars.next();
            let mut closed = false;
            for d in chars.by_ref() {
                if d == c {
                    closed = true;
                    break;
                }
                word.push(d);
            }
            if !closed {
                return Err(RewriteError::Quote);
            }
        } else {
            while let Some(&d) = chars.peek() {
                if d.is_whitespace() {
                    break;
                }
                word.push(d);
                chars.next();
            }
        }
        out.push(word);
    }
    Ok(out)
}

/// A piece of a replacement.
pub enum Piece<'a> {
    Text(&'a str),
    Group(usize),
    Var(&'a str),
}

/// A replacement cut into text, `$n` / `${n}` and `$name` / `${name}`.
pub fn pieces(s: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        if at > 0 {
            out.push(Piece::Text(&rest[..at]));
        }
        let after = &rest[at + 1..];
        let (name, used) = if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => (&inner[..end], end + 2),
                None => ("", 0),
            }
        } else if after.as_bytes().first().is_some_and(u8::is_ascii_digit) {
            (&after[..1], 1)
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        if name.is_empty() {
            out.push(Piece::Text("$"));
            rest = after;
            continue;
        }
        match name.parse::<usize>() {
            Ok(n) => out.push(Piece::Group(n)),
            Err(_) => out.push(Piece::Var(name)),
        }
        rest = &after[used..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_2009_line_pastes_as_written() {
        let l =
            Line::parse(r#"rewrite "^/external/([0-9]+)/?" /external.php?vid=$1 last;"#).unwrap();
        assert_eq!(l.regex.as_str(), "^/external/([0-9]+)/?");
        assert_eq!(l.replacement, "/external.php?vid=$1");
        assert_eq!(l.flag, Flag::Last);
        let l = Line::parse("^/a /b").unwrap();
        assert_eq!(l.flag, Flag::Continue);
        let l = Line::parse("'^/a b$' /c permanent").unwrap();
        assert_eq!(l.regex.as_str(), "^/a b$");
    }

    #[test]
    fn bad_lines_are_refused() {
        assert_eq!(Line::parse("^/a").unwrap_err(), RewriteError::Words(1));
        assert_eq!(
            Line::parse("^/a /b lst").unwrap_err(),
            RewriteError::Flag("lst".into())
        );
        assert_eq!(Line::parse("\"^/a /b").unwrap_err(), RewriteError::Quote);
        assert!(matches!(
            Line::parse("( /x last"),
            Err(RewriteError::Regex(_))
        ));
        assert_eq!(
            Line::parse("^/(a)$ /$2 last").unwrap_err(),
            RewriteError::Capture(2, 1)
        );
        assert_eq!(
            Line::parse("^/a$ /$nope last").unwrap_err(),
            RewriteError::Variable("nope".into())
        );
    }
}
