//! Why a files origin refused a request — a method it does not answer, a path that could
//! climb out of the root or mean something else to the file system, a name it does not
//! serve, a file it may not send — each with its status and its counter
//! (`files_refused_*`, `files_script_refused`: `stats.rs`) and its word (`as_str`). The answer carries its
//! [`Refusal`]; the fetch step counts it (`proxy/fetch/send.rs`), once per answer from the
//! origin (a stored copy of a refusal served again is not counted again).

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};

use crate::backend::source::{Source, plain_response};
use crate::stats::{Counter, Counters};

/// Why a files origin refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A method other than GET or HEAD: 405 with `Allow`.
    Method,
    /// A `..` segment, written or escaped (`%2e%2e`): 400.
    Traversal,
    /// A malformed `%` escape, or bytes that are not UTF-8 (overlong `%c0%ae`): 400.
    Encoding,
    /// NUL, another control byte or a backslash: 400.
    Control,
    /// An escaped slash (`%2f`) inside a segment: 404.
    EscapedSlash,
    /// A name starting with `.` (not `.well-known`) while `dotfiles = false`: 404.
    Dotfile,
    /// A symbolic link leading out of the root while `follow_symlinks = false`: 404.
    Symlink,
    /// A FIFO, a device or a socket: 404.
    Special,
    /// A file or directory this process may not read (`EACCES`): 403.
    Unreadable,
    /// A directory without an index file while `autoindex = false`: 403.
    NoIndex,
    /// A PHP script while `send_scripts = false` (`scripts.rs`): 404.
    Script,
    /// A copy of a PHP script (`x.php~`, `x.php.bak`, `x.php.gz`) while `send_scripts =
    /// false` (`scripts.rs`): 404.
    ScriptCopy,
    /// A file named like an ordinary one whose first bytes are PHP source (`<?php`, `<?=`:
    /// `scripts.rs`), a script's copy under an invented name, while `send_scripts = false`
    /// and `sniff_scripts`: 404.
    ScriptSource,
}

impl Refusal {
    /// Every reason, in the order [`Refused`] keeps them.
    pub(crate) const ALL: [Refusal; 13] = [
        Refusal::Method,
        Refusal::Traversal,
        Refusal::Encoding,
        Refusal::Control,
        Refusal::EscapedSlash,
        Refusal::Dotfile,
        Refusal::Symlink,
        Refusal::Special,
        Refusal::Unreadable,
        Refusal::NoIndex,
        Refusal::Script,
        Refusal::ScriptCopy,
        Refusal::ScriptSource,
    ];

    /// The status the client gets.
    pub(crate) fn status(self) -> StatusCode {
        match self {
            Refusal::Method => StatusCode::METHOD_NOT_ALLOWED,
            Refusal::Traversal | Refusal::Encoding | Refusal::Control => StatusCode::BAD_REQUEST,
            Refusal::Unreadable | Refusal::NoIndex => StatusCode::FORBIDDEN,
            Refusal::EscapedSlash
            | Refusal::Dotfile
            | Refusal::Symlink
            | Refusal::Special
            | Refusal::Script
            | Refusal::ScriptCopy
            | Refusal::ScriptSource => StatusCode::NOT_FOUND,
        }
    }

    /// The counter of this reason.
    pub(crate) fn counter(self, c: &Counters) -> &Counter {
        match self {
            Refusal::Method => &c.files_refused_method,
            Refusal::Traversal => &c.files_refused_traversal,
            Refusal::Encoding => &c.files_refused_encoding,
            Refusal::Control => &c.files_refused_control,
            Refusal::EscapedSlash => &c.files_refused_escaped_slash,
            Refusal::Dotfile => &c.files_refused_dotfile,
            Refusal::Symlink => &c.files_refused_symlink,
            Refusal::Special => &c.files_refused_special,
            Refusal::Unreadable => &c.files_refused_unreadable,
            Refusal::NoIndex => &c.files_refused_no_index,
            Refusal::Script => &c.files_script_refused,
            Refusal::ScriptCopy => &c.files_refused_script_copy,
            Refusal::ScriptSource => &c.files_refused_script_source,
        }
    }

    /// The name of its process-wide counter (`stats.rs`), which `/backends` and `/sites`
    /// use for the backend's and the site's own.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Refusal::Method => "files_refused_method",
            Refusal::Traversal => "files_refused_traversal",
            Refusal::Encoding => "files_refused_encoding",
            Refusal::Control => "files_refused_control",
            Refusal::EscapedSlash => "files_refused_escaped_slash",
            Refusal::Dotfile => "files_refused_dotfile",
            Refusal::Symlink => "files_refused_symlink",
            Refusal::Special => "files_refused_special",
            Refusal::Unreadable => "files_refused_unreadable",
            Refusal::NoIndex => "files_refused_no_index",
            Refusal::Script => "files_script_refused",
            Refusal::ScriptCopy => "files_refused_script_copy",
            Refusal::ScriptSource => "files_refused_script_source",
        }
    }

    /// The word for logs and for the `reason` label of `/metrics`
    /// (`shellac_backend_files_refused_total`, `shellac_site_files_refused_total`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Refusal::Method => "method",
            Refusal::Traversal => "traversal",
            Refusal::Encoding => "encoding",
            Refusal::Control => "control",
            Refusal::EscapedSlash => "escaped_slash",
            Refusal::Dotfile => "dotfile",
            Refusal::Symlink => "symlink",
            Refusal::Special => "special",
            Refusal::Unreadable => "unreadable",
            Refusal::NoIndex => "no_index",
            Refusal::Script => "script",
            Refusal::ScriptCopy => "script_copy",
            Refusal::ScriptSource => "script_source",
        }
    }

    /// The answer: a plain page with the status (`Allow` on a 405), marked with the reason.
    pub(crate) fn response(self) -> Response<Source> {
        let mut resp = plain_response(self.status());
        if self == Refusal::Method {
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        }
        resp.extensions_mut().insert(self);
        resp
    }
}

/// Refusals by reason of one backend or one site (the process-wide totals are `Counters`'):
/// what tells an operator with many sites which one is probed.
#[derive(Debug, Default)]
pub struct Refused([Counter; Refusal::ALL.len()]);

impl Refused {
    pub(crate) fn count(&self, r: Refusal) {
        if let Some(i) = Refusal::ALL.iter().position(|a| *a == r) {
            self.0[i].inc();
        }
    }

    /// (reason, count) for every reason, in [`Refusal::ALL`]'s order.
    pub(crate) fn snapshot(&self) -> Vec<(Refusal, u64)> {
        Refusal::ALL
            .iter()
            .zip(&self.0)
            .map(|(r, c)| (*r, c.get()))
            .collect()
    }

    /// Whether any request was refused.
    pub(crate) fn any(&self) -> bool {
        self.0.iter().any(|c| c.get() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::{Refusal, Refused};
    use crate::stats::Counters;

    /// Each reason has a counter of its own, named for the files origin, and its answer is
    /// marked with it.
    #[test]
    fn every_reason_counts_in_a_counter_of_its_own() {
        for r in Refusal::ALL {
            let counters = Counters::default();
            r.counter(&counters).inc();
            let moved: Vec<&str> = counters
                .snapshot()
                .into_iter()
                .filter(|(_, v)| *v > 0)
                .map(|(name, _)| name)
                .collect();
            assert_eq!(moved, [r.name()], "{r:?}");
            assert!(moved[0].starts_with("files_"), "{r:?}: {moved:?}");
            let own = Refused::default();
            own.count(r);
            let counted: Vec<Refusal> = own
                .snapshot()
                .into_iter()
                .filter(|(_, n)| *n == 1)
                .map(|(r, _)| r)
                .collect();
            assert_eq!(counted, [r]);
            let resp = r.response();
            assert_eq!(resp.status(), r.status());
            assert_eq!(resp.extensions().get::<Refusal>(), Some(&r));
        }
    }
}
