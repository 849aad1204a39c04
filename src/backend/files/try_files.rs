//! nginx's `try_files` for the files origin: each path of the list (`$uri` replaced by the
//! request's path, still percent-encoded, then read by `path.rs` like any request path, so an
//! entry can never reach outside the root) is looked up in turn through the open-file cache;
//! the first regular file — or, for an entry ending in `/`, directory — found is served as if
//! it had been asked for (`$uri/` for a path without its `/`: a 301 to it, as nginx). When
//! none is there the fallback decides: a status, a file from the root, or the request handed
//! on unchanged to another backend (`TryNext`, which the fetch step reads:
//! `proxy/fetch/send.rs`). With that last form a path naming a PHP script (a
//! segment with an extension of `fastcgi/php.rs`'s family: `.php`, `.phtml`, ...) goes to
//! that backend without a look at the disk, as nginx's `location ~ \.php$` takes it before
//! the `location /` holding `try_files`: the files origin never sends a script's source
//! (nor a directory's index that is a script: the request goes to that backend as it came,
//! which runs the index).

use super::lookup::{Files, Found};
use super::path::{self, FilePath};
use super::scripts::{is_script, names_a_script};
use crate::config::try_files::{Fallback, TryFiles, URI};
use crate::http::accept_encoding::Accepts;
use http::StatusCode;

/// Marks a files origin's answer as "none of the files exists: send this request to the
/// backend or director named" (`try_files = [..., "@NAME"]`). The answer itself is dropped.
#[derive(Clone, Debug)]
pub(crate) struct TryNext(pub String);

impl Files {
    /// The first entry of `t` that exists, served; else the fallback (blocking: runs on the
    /// blocking pool). `raw` is the request's path as sent.
    pub(super) fn try_files(&self, t: &TryFiles, raw: &str, accepts: &Accepts) -> Found {
        if let Fallback::Backend(name) = &t.fallback
            && names_a_script(raw)
        {
            return Found::Next(name.clone());
        }
        for entry in &t.paths {
            let Some(names) = self.existing(entry, raw) else {
                continue;
            };
            // A directory entry naming another path than the request's: a 301 to it (the
            // query kept), before the index is looked at (a script index is run at `/dir/`).
            // nginx drops the entry's `/` and serves what is left as the request's path, so
            // `$uri/` for `/docs` is a 301 to `/docs/` (as this backend answers a directory
            // without `try_files`; the index's relative links resolve inside it), `$uri/`
            // for `/docs/` is its index, and a fixed `/directory/` is a 301 to `/directory/`
            // (http_try_files.t "dir-dir") — except for `/directory/` itself, which nginx
            // would send round a redirect loop: its index is served.
            if names.trailing_slash
                && let Some(moved) = moved(entry, raw)
            {
                return Found::Moved(moved);
            }
            let found = self.find(&names, accepts);
            // A directory whose index is a script (`index = ["index.php", ...]`): the
            // fallback runs it, as nginx's index module hands `/blog/index.php` to the PHP
            // location.
            if let (Fallback::Backend(next), Found::File { name, .. }) = (&t.fallback, &found)
                && is_script(name)
            {
                return Found::Next(next.clone());
            }
            return found;
        }
        match &t.fallback {
            Fallback::Status(code) => Found::Status(
                StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            ),
            Fallback::Backend(name) => Found::Next(name.clone()),
            Fallback::Path(p) => match path::parse(&p.replace(URI, raw), self.dotfiles) {
                Ok(names) => self.find(&names, accepts),
                Err(_) => Found::Status(StatusCode::NOT_FOUND),
            },
        }
    }

    /// `entry` with `$uri` replaced, when it names something there: a regular file, or a
    /// directory if it ends in `/`.
    fn existing(&self, entry: &str, raw: &str) -> Option<FilePath> {
        let names = path::parse(&entry.replace(URI, raw), self.dotfiles).ok()?;
        let opened = self.cache.open(&names.relative()).ok()?;
        (opened.dir == names.trailing_slash).then_some(names)
    }
}

/// Where a directory entry found on disk sends the request: `None` to serve its index in
/// place, else the path (with its `/`) a `301` goes to.
fn moved(entry: &str, raw: &str) -> Option<String> {
    let expanded = entry.replace(URI, raw);
    let inner = expanded.strip_suffix('/')?;
    (!inner.ends_with('/') && expanded != raw).then_some(expanded)
}

#[cfg(test)]
mod tests {
    use super::moved;

    /// nginx's reading of an entry ending in `/`: its `/` dropped, what is left the path.
    #[test]
    fn directory_entries_redirect_as_nginx() {
        assert_eq!(moved("$uri/", "/docs").as_deref(), Some("/docs/"));
        assert_eq!(moved("$uri/", "/docs/"), None);
        assert_eq!(moved("$uri/", "/"), None);
        assert_eq!(
            moved("/directory/", "/dir-dir/").as_deref(),
            Some("/directory/")
        );
        assert_eq!(moved("/directory/", "/x").as_deref(), Some("/directory/"));
        assert_eq!(moved("/directory/", "/directory/"), None, "no loop");
        assert_eq!(moved("/static$uri/", "/a/").as_deref(), None);
        assert_eq!(moved("/static$uri/", "/a").as_deref(), Some("/static/a/"));
    }
}
