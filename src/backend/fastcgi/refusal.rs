//! Why a FastCGI origin refused a request before the application saw it — a path that could
//! climb out of the root or mean something else to the file system (read as the files origin
//! reads it, `files/path.rs`), a script that is not there, or the `cgi.fix_pathinfo` attempt
//! (`/uploads/evil.jpg/x.php`: a `.php` path under a regular file, which PHP with
//! `cgi.fix_pathinfo = 1` would run as `evil.jpg`) — each with its status and its counter
//! (`fastcgi_refused_*`: `stats.rs`). The answer carries its [`ScriptRefusal`]; the fetch
//! step counts it (`proxy/fetch/send.rs`), once per answer from the origin, as it counts the
//! files origin's.

use http::{Response, StatusCode};

use crate::backend::files::Refusal;
use crate::backend::source::{Source, plain_response};
use crate::stats::{Counter, Counters};

/// Why a FastCGI origin refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScriptRefusal {
    /// The path, read as the files origin reads it: a `..` segment, a malformed escape, a
    /// control byte or backslash (400), an escaped slash or a dotfile (404).
    Path(Refusal),
    /// A `.php` path whose script is not a regular file inside the root (missing, a
    /// directory, a link out, unreadable): 404.
    Missing,
    /// A `.php` path with a regular file on its way (`/uploads/evil.jpg/x.php`, the
    /// `cgi.fix_pathinfo` hole): 404, never run.
    PathInfo,
}

impl ScriptRefusal {
    /// The status the client gets.
    pub(crate) fn status(self) -> StatusCode {
        match self {
            ScriptRefusal::Path(r) => r.status(),
            ScriptRefusal::Missing | ScriptRefusal::PathInfo => StatusCode::NOT_FOUND,
        }
    }

    /// The counter of this reason (a path refusal `path::parse` cannot give counts nowhere).
    pub(crate) fn counter(self, c: &Counters) -> Option<&Counter> {
        Some(match self {
            ScriptRefusal::Path(Refusal::Traversal) => &c.fastcgi_refused_traversal,
            ScriptRefusal::Path(Refusal::Encoding) => &c.fastcgi_refused_encoding,
            ScriptRefusal::Path(Refusal::Control) => &c.fastcgi_refused_control,
            ScriptRefusal::Path(Refusal::EscapedSlash) => &c.fastcgi_refused_escaped_slash,
            ScriptRefusal::Path(Refusal::Dotfile) => &c.fastcgi_refused_dotfile,
            ScriptRefusal::Path(_) => return None,
            ScriptRefusal::Missing => &c.fastcgi_refused_missing,
            ScriptRefusal::PathInfo => &c.fastcgi_refused_pathinfo,
        })
    }

    /// The answer: a plain page with the status, marked with the reason.
    pub(crate) fn response(self) -> Response<Source> {
        let mut resp = plain_response(self.status());
        resp.extensions_mut().insert(self);
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::{Refusal, ScriptRefusal};
    use crate::stats::Counters;

    /// Each reason the FastCGI origin can give has a counter of its own, named for it.
    #[test]
    fn every_reason_counts_in_a_counter_of_its_own() {
        for r in [
            ScriptRefusal::Path(Refusal::Traversal),
            ScriptRefusal::Path(Refusal::Encoding),
            ScriptRefusal::Path(Refusal::Control),
            ScriptRefusal::Path(Refusal::EscapedSlash),
            ScriptRefusal::Path(Refusal::Dotfile),
            ScriptRefusal::Missing,
            ScriptRefusal::PathInfo,
        ] {
            let counters = Counters::default();
            r.counter(&counters).expect("a counter").inc();
            let moved: Vec<&str> = counters
                .snapshot()
                .into_iter()
                .filter(|(_, v)| *v > 0)
                .map(|(name, _)| name)
                .collect();
            assert_eq!(moved.len(), 1, "{r:?}: {moved:?}");
            assert!(moved[0].starts_with("fastcgi_refused_"), "{r:?}: {moved:?}");
            let resp = r.response();
            assert_eq!(resp.status(), r.status());
            assert_eq!(resp.extensions().get::<ScriptRefusal>(), Some(&r));
        }
        assert!(
            ScriptRefusal::Path(Refusal::Method)
                .counter(&Counters::default())
                .is_none()
        );
    }
}
