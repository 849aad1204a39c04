//! nginx's `rewrite regex replacement [flag]` (issue 31), run before the cache key is made:
//! the regex is matched against the path (never the query), `$1`–`$9` / `${1}` and `$scheme`,
//! `$host`, `$args`, `$uri`, `$request_uri` are substituted, and the flags mean what they
//! mean in nginx — none: go on with the next rewrite; `last`: start the list again with the
//! new URI (at most [`MAX_CYCLES`] times, then a 500 as nginx's "rewrite or internal
//! redirection cycle"); `break`: stop here; `redirect` / `permanent`: a 302 / 301 to the
//! result, also taken when the result starts with `http://`, `https://` or `$scheme`.
//! The query: kept as it was unless the replacement has a `?`; then the replacement's query
//! comes first and the old one is appended (Apache's `[QSA]`), or dropped when the
//! replacement ends with `?`.

use regex::Regex;

/// How many times `last` may restart the list for one request (nginx: 10).
pub const MAX_CYCLES: usize = 10;

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

/// One `rewrite` line.
#[derive(Debug, Clone)]
pub struct Rewrite {
    regex: Regex,
    replacement: String,
    flag: Flag,
}

/// Why a rewrite line is refused (`shellac check` names file:line:key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    #[error("the regular expression does not compile: {0}")]
    Regex(String),
    #[error("${0} names a capture group the regular expression does not have (it has {1})")]
    Capture(usize, usize),
    #[error(
        "unknown variable ${0} (known: $1-$9, $scheme, $host, $args, $query_string, $uri, $request_uri)"
    )]
    Variable(String),
}

const VARIABLES: [&str; 6] = [
    "scheme",
    "host",
    "args",
    "query_string",
    "uri",
    "request_uri",
];

impl Rewrite {
    /// A rewrite line, checked: the regex compiles, every `$n` names a group it has, every
    /// variable is known.
    pub fn new(regex: &str, replacement: &str, flag: Flag) -> Result<Rewrite, RewriteError> {
        let regex = Regex::new(regex).map_err(|e| RewriteError::Regex(e.to_string()))?;
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
        Ok(Rewrite {
            regex,
            replacement: replacement.to_owned(),
            flag,
        })
    }
}

/// The request facts variables read.
#[derive(Debug, Clone, Copy)]
pub struct Vars<'a> {
    /// "http" or "https".
    pub scheme: &'a str,
    /// The Host's name.
    pub host: &'a str,
    /// The target as the client sent it.
    pub request_uri: &'a str,
}

/// What the rewrites made of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// No rewrite matched.
    Unchanged,
    /// The new target (path and query), used for the cache key and the backend.
    Rewritten(String),
    /// Answer with a redirect.
    Redirect { status: u16, location: String },
    /// `last` restarted the list more than [`MAX_CYCLES`] times: answer 500.
    Cycle,
}

/// Runs `rewrites` over a request's path and query.
pub fn apply(rewrites: &[Rewrite], path: &str, query: Option<&str>, vars: Vars<'_>) -> Outcome {
    let mut path = path.to_owned();
    let mut query = query.map(str::to_owned);
    let mut changed = false;
    let mut cycles = 0;
    'restart: loop {
        for rw in rewrites {
            let Some(caps) = rw.regex.captures(&path) else {
                continue;
            };
            let mut out = String::with_capacity(rw.replacement.len() + path.len());
            for piece in pieces(&rw.replacement) {
                match piece {
                    Piece::Text(t) => out.push_str(t),
                    Piece::Group(n) => out.push_str(caps.get(n).map_or("", |m| m.as_str())),
                    Piece::Var("scheme") => out.push_str(vars.scheme),
                    Piece::Var("host") => out.push_str(vars.host),
                    Piece::Var("args" | "query_string") => {
                        out.push_str(query.as_deref().unwrap_or(""))
                    }
                    Piece::Var("uri") => out.push_str(&path),
                    Piece::Var("request_uri") => out.push_str(vars.request_uri),
                    Piece::Var(_) => {}
                }
            }
            drop(caps);
            // The query: the replacement's, then the old one unless it ends with '?'.
            let (new_path, new_query) = match out.split_once('?') {
                None => (out, query.clone()),
                Some((p, "")) => (p.to_owned(), None),
                Some((p, q)) => {
                    let q = match &query {
                        Some(old) if !old.is_empty() => format!("{q}&{old}"),
                        _ => q.to_owned(),
                    };
                    (p.to_owned(), Some(q))
                }
            };
            let external = new_path.starts_with("http://") || new_path.starts_with("https://");
            if external || matches!(rw.flag, Flag::Redirect | Flag::Permanent) {
                let status = if rw.flag == Flag::Permanent { 301 } else { 302 };
                return Outcome::Redirect {
                    status,
                    location: join(&new_path, new_query.as_deref()),
                };
            }
            path = new_path;
            query = new_query;
            changed = true;
            match rw.flag {
                Flag::Continue | Flag::Redirect | Flag::Permanent => {}
                Flag::Break => break 'restart,
                Flag::Last => {
                    cycles += 1;
                    if cycles > MAX_CYCLES {
                        return Outcome::Cycle;
                    }
                    continue 'restart;
                }
            }
        }
        break;
    }
    if changed {
        Outcome::Rewritten(join(&path, query.as_deref()))
    } else {
        Outcome::Unchanged
    }
}

fn join(path: &str, query: Option<&str>) -> String {
    match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    }
}

enum Piece<'a> {
    Text(&'a str),
    Group(usize),
    Var(&'a str),
}

/// A replacement cut into text, `$n` / `${n}` and `$name` / `${name}`.
fn pieces(s: &str) -> Vec<Piece<'_>> {
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

    const VARS: Vars<'static> = Vars {
        scheme: "https",
        host: "www.domain.com",
        request_uri: "/orig?x=1",
    };

    fn rw(re: &str, rep: &str, flag: &str) -> Rewrite {
        Rewrite::new(re, rep, Flag::parse(flag).unwrap()).unwrap()
    }

    #[test]
    fn the_2009_operators_rule() {
        let rules = [rw("^/external/([0-9]+)/?", "/external.php?vid=$1", "last")];
        assert_eq!(
            apply(&rules, "/external/42/", None, VARS),
            Outcome::Rewritten("/external.php?vid=42".into())
        );
        assert_eq!(
            apply(&rules, "/external/42", Some("ref=home"), VARS),
            Outcome::Rewritten("/external.php?vid=42&ref=home".into()),
            "the old query is appended (Apache's [QSA])"
        );
        assert_eq!(apply(&rules, "/other", None, VARS), Outcome::Unchanged);
    }

    #[test]
    fn query_rules() {
        let keep = [rw("^/a$", "/b", "break")];
        assert_eq!(
            apply(&keep, "/a", Some("q=1"), VARS),
            Outcome::Rewritten("/b?q=1".into())
        );
        let drop_q = [rw("^/a$", "/b?", "break")];
        assert_eq!(
            apply(&drop_q, "/a", Some("q=1"), VARS),
            Outcome::Rewritten("/b".into())
        );
    }

    #[test]
    fn flags() {
        // No flag: the next line sees the result; break stops; last restarts.
        let rules = [
            rw("^/one$", "/two", ""),
            rw("^/two$", "/three", "break"),
            rw("^/three$", "/four", ""),
        ];
        assert_eq!(
            apply(&rules, "/one", None, VARS),
            Outcome::Rewritten("/three".into())
        );
        let rules = [rw("^/b$", "/c", ""), rw("^/a$", "/b", "last")];
        assert_eq!(
            apply(&rules, "/a", None, VARS),
            Outcome::Rewritten("/c".into())
        );
        let loop_rules = [rw("^/(.*)$", "/$1", "last")];
        assert_eq!(apply(&loop_rules, "/x", None, VARS), Outcome::Cycle);
        let perm = [rw("^/old/(.*)$", "/new/$1", "permanent")];
        assert_eq!(
            apply(&perm, "/old/p", Some("a=b"), VARS),
            Outcome::Redirect {
                status: 301,
                location: "/new/p?a=b".into()
            }
        );
        let ext = [rw("^/(.*)$", "$scheme://example.org/${1}x", "")];
        assert_eq!(
            apply(&ext, "/p", None, VARS),
            Outcome::Redirect {
                status: 302,
                location: "https://example.org/px".into()
            }
        );
    }

    #[test]
    fn bad_lines_are_refused() {
        assert!(matches!(
            Rewrite::new("(", "/x", Flag::Last),
            Err(RewriteError::Regex(_))
        ));
        assert_eq!(
            Rewrite::new("^/(a)$", "/$2", Flag::Last).unwrap_err(),
            RewriteError::Capture(2, 1)
        );
        assert_eq!(
            Rewrite::new("^/a$", "/$nope", Flag::Last).unwrap_err(),
            RewriteError::Variable("nope".into())
        );
        assert_eq!(Flag::parse("lst"), None);
    }
}
