//! nginx's `rewrite regex replacement [flag]` (issue 31), run before the cache key is made:
//! the regex is matched against nginx's `$uri` (the path decoded, `rewrite_uri.rs`; never the
//! query), the captures put back escaped, `$1`–`$9` / `${1}` and `$scheme`,
//! `$host`, `$args`, `$uri`, `$request_uri` are substituted, and the flags mean what they
//! mean in nginx — none: go on with the next rewrite; `last`: start the list again with the
//! new URI (at most [`MAX_CYCLES`] times, then a 500 as nginx's "rewrite or internal
//! redirection cycle"); `break`: stop here; `redirect` / `permanent`: a 302 / 301 to the
//! result, also taken when the result starts with `http://`, `https://` or `$scheme`.
//! The query: kept as it was unless the replacement has a `?`; then the replacement's query
//! comes first and the old one is appended (Apache's `[QSA]`), or dropped when the
//! replacement ends with `?` (`/b?` has no query, `/b?x=1?` only its own).

use super::rewrite_uri::Subject;
pub use crate::config::rewrite::{Flag, RewriteError};
use crate::config::rewrite::{Line, Piece, pieces};

/// How many times `last` may restart the list for one request (nginx: 10).
pub const MAX_CYCLES: usize = 10;

/// One `rewrite` line, checked (`config::rewrite`).
#[derive(Debug, Clone)]
pub struct Rewrite {
    line: Line,
}

impl Rewrite {
    /// A rewrite line, checked: the regex compiles, every `$n` names a group it has, every
    /// variable is known.
    pub fn new(regex: &str, replacement: &str, flag: Flag) -> Result<Rewrite, RewriteError> {
        Line::new(regex, replacement, flag).map(|line| Rewrite { line })
    }

    /// A rewrite line as the configuration writes it (`REGEX REPLACEMENT [FLAG]`).
    pub fn parse(text: &str) -> Result<Rewrite, RewriteError> {
        Line::parse(text).map(|line| Rewrite { line })
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
    let mut subject = Subject::of(&path);
    let mut query = query.map(str::to_owned);
    let mut changed = false;
    let mut cycles = 0;
    'restart: loop {
        for rw in rewrites {
            let Some(caps) = rw.line.regex.captures(&subject.text) else {
                continue;
            };
            let mut out = String::with_capacity(rw.line.replacement.len() + path.len());
            for piece in pieces(&rw.line.replacement) {
                match piece {
                    Piece::Text(t) => out.push_str(t),
                    Piece::Group(n) => {
                        subject.put(&mut out, caps.get(n).map_or("", |m| m.as_str()))
                    }
                    Piece::Var("scheme") => out.push_str(vars.scheme),
                    Piece::Var("host") => out.push_str(vars.host),
                    Piece::Var("args" | "query_string") => {
                        out.push_str(query.as_deref().unwrap_or(""))
                    }
                    Piece::Var("uri") => subject.put(&mut out, &subject.text),
                    Piece::Var("request_uri") => out.push_str(vars.request_uri),
                    Piece::Var(_) => {}
                }
            }
            drop(caps);
            // The query: the replacement's, then the old one unless it ends with '?'.
            let (out, keep_old) = match out.strip_suffix('?') {
                Some(cut) => (cut.to_owned(), false),
                None => (out, true),
            };
            let (new_path, new_query) = match out.split_once('?') {
                None if keep_old => (out, query.clone()),
                None => (out, None),
                Some((p, q)) => {
                    let q = match &query {
                        Some(old) if keep_old && !old.is_empty() => format!("{q}&{old}"),
                        _ => q.to_owned(),
                    };
                    (p.to_owned(), Some(q))
                }
            };
            let external = new_path.starts_with("http://") || new_path.starts_with("https://");
            if external || matches!(rw.line.flag, Flag::Redirect | Flag::Permanent) {
                let status = if rw.line.flag == Flag::Permanent {
                    301
                } else {
                    302
                };
                return Outcome::Redirect {
                    status,
                    location: join(&new_path, new_query.as_deref()),
                };
            }
            subject = Subject::of(&new_path);
            path = new_path;
            query = new_query;
            changed = true;
            match rw.line.flag {
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
        // nginx: a replacement with its own query and a final '?' drops the old one.
        let own_only = [rw("^/a$", "/b?x=1?", "break")];
        assert_eq!(
            apply(&own_only, "/a", Some("q=1"), VARS),
            Outcome::Rewritten("/b?x=1".into())
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
    fn matched_on_the_decoded_uri_and_put_back_escaped() {
        let cafe = [rw("^/café/(.*)$", "/coffee/$1", "break")];
        assert_eq!(
            apply(&cafe, "/caf%C3%A9/a%20b", None, VARS),
            Outcome::Rewritten("/coffee/a%20b".into())
        );
        let old = [rw("^/old/(.*)$", "/new/$1", "permanent")];
        assert_eq!(
            apply(&old, "//old//blah%20%3Fblah", Some("x=1"), VARS),
            Outcome::Redirect {
                status: 301,
                location: "/new/blah%20%3Fblah?x=1".into()
            }
        );
        let wiki = [rw("^/wiki/(.*)$", "/index.php?title=$1", "last")];
        assert_eq!(
            apply(&wiki, "/wiki/A+B%26C", None, VARS),
            Outcome::Rewritten("/index.php?title=A%2BB%26C".into())
        );
        // nginx's rewrite_unescape.t: `$uri` escaped again, `$request_uri` as sent.
        let uri = [rw("^", "http://example.com$uri", "")];
        assert_eq!(
            apply(&uri, "/t3/blah%20%3Fblah", None, VARS),
            Outcome::Redirect {
                status: 302,
                location: "http://example.com/t3/blah%20%3Fblah".into()
            }
        );
        let raw = [rw("^", "http://example.com$request_uri?", "")];
        let vars = Vars {
            request_uri: "/t2/blah%20%3Fblah",
            ..VARS
        };
        assert_eq!(
            apply(&raw, "/t2/blah%20%3Fblah", None, vars),
            Outcome::Redirect {
                status: 302,
                location: "http://example.com/t2/blah%20%3Fblah".into()
            }
        );
        // The next line meets the result decoded.
        let chain = [rw("^/x/(.*)$", "/y/$1", ""), rw("^/y/a b$", "/z", "")];
        assert_eq!(
            apply(&chain, "/x/a%20b", None, VARS),
            Outcome::Rewritten("/z".into())
        );
        // No capture ever holds a `..`: a root's parent is out of reach.
        let jail = [rw("^/(.*)$", "/pub/$1", "break")];
        for path in ["/%2E%2E/s", "/a%2F..%2F..%2Fs", "/a/%2e%2e/%2E%2E/s"] {
            assert_eq!(
                apply(&jail, path, None, VARS),
                Outcome::Rewritten("/pub/s".into()),
                "{path}"
            );
        }
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
