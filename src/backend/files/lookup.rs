//! A document root and what a request's path finds under it: the file (an index file for a
//! directory, a precompressed sibling the client accepts), a redirect to the trailing slash,
//! a listing (`autoindex`), or a status.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::StatusCode;

use super::listing;
use super::mime;
use super::open::{self, Missing, OpenCache, Opened, Stat};
use super::path;
use super::refusal::Refusal;
use super::scripts::{self, Named};
use crate::config::BackendConfig;
use crate::config::try_files::TryFiles;
use crate::http::accept_encoding::{Accepts, Coding};

/// Precompressed siblings: the coding and the suffix of its file.
const SIBLINGS: [(Coding, &str); 3] = [
    (Coding::Br, "br"),
    (Coding::Zstd, "zst"),
    (Coding::Gzip, "gz"),
];

/// A document root served as an origin.
pub(crate) struct Files {
    pub(super) cache: OpenCache,
    pub(super) types: mime::Types,
    pub(super) index: Vec<String>,
    pub(super) dotfiles: bool,
    /// Send scripts' sources (`send_scripts`); else a path naming one is 404.
    pub(super) send_scripts: bool,
    pub(super) follow_symlinks: bool,
    pub(super) precompressed: bool,
    pub(super) autoindex: bool,
    /// `try_files`, read (checked with the configuration).
    pub(super) try_files: Option<TryFiles>,
}

/// What a request found on disk.
pub(super) enum Found {
    /// The file to send (and its name, for the type), with its coding and whether
    /// precompressed siblings exist (`Vary`).
    File {
        file: Arc<Opened>,
        stat: Stat,
        name: String,
        coding: Coding,
        vary: bool,
    },
    /// A directory asked for without its trailing slash.
    Redirect,
    /// A `try_files` directory entry naming another path than the request's: a `301` to
    /// this path (with its `/`).
    Moved(String),
    /// The listing of a directory without an index file (`autoindex`).
    Listing(String),
    /// None of `try_files` exists: the request goes to this backend or director.
    Next(String),
    /// Refused, and why (counted).
    Refused(Refusal),
    /// Not found, failed, or a `try_files` `=CODE`.
    Status(StatusCode),
}

impl Files {
    pub(crate) fn new(config: &BackendConfig) -> Files {
        let configured = config
            .root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/nonexistent"));
        // The containment check compares real paths: the root's own, links resolved. A root
        // missing at start (`shellac check` refuses it) is used as written.
        let root = std::fs::canonicalize(&configured).unwrap_or(configured);
        Files {
            cache: OpenCache::new(
                root,
                config.follow_symlinks,
                !config.send_scripts && config.sniff_scripts,
                config.open_file_cache,
                config.open_file_cache_valid.0,
            ),
            types: mime::Types::new(&config.mime_types, &config.default_type),
            index: config
                .index
                .clone()
                .unwrap_or_else(|| vec!["index.html".to_string()]),
            dotfiles: config.dotfiles,
            send_scripts: config.send_scripts,
            follow_symlinks: config.follow_symlinks,
            precompressed: config.precompressed,
            autoindex: config.autoindex,
            try_files: TryFiles::parse(&config.try_files).ok().flatten(),
        }
    }

    /// The open-file cache's counters and size, for `/backends`.
    pub(super) fn describe(&self, v: &mut serde_json::Value) {
        let s = &self.cache.stats;
        v["files_cache_hit"] = s.hit.load(Ordering::Relaxed).into();
        v["files_cache_miss"] = s.miss.load(Ordering::Relaxed).into();
        v["files_cache_expired"] = s.expired.load(Ordering::Relaxed).into();
        v["files_cache_evicted"] = s.evicted.load(Ordering::Relaxed).into();
        v["files_cache_entries"] = self.cache.len().into();
        v["files_listing_omitted"] = s.listing_omitted.load(Ordering::Relaxed).into();
        v["files_listing_unlisted"] = s.listing_unlisted.load(Ordering::Relaxed).into();
        v["root"] = self.cache.root().display().to_string().into();
    }

    /// Looks the request up on disk (blocking: runs on the blocking pool).
    pub(super) fn find(&self, names: &path::FilePath, accepts: &Accepts) -> Found {
        let relative = names.relative();
        let opened = match self.cache.open(&relative) {
            Ok(o) => o,
            Err(m) => return found_of(m),
        };
        let asked = names
            .names
            .iter()
            .map(|n| scripts::named(n))
            .max()
            .unwrap_or(Named::Plain);
        if let Some(refused) = self.hidden(&opened, asked) {
            return Found::Refused(refused);
        }
        let (file, relative, name) = if opened.dir {
            if !names.trailing_slash && !names.names.is_empty() {
                return Found::Redirect;
            }
            let mut chosen = None;
            for index in &self.index {
                let candidate = if relative.is_empty() {
                    index.clone()
                } else {
                    format!("{relative}/{index}")
                };
                match self.cache.open(&candidate) {
                    Ok(f) if !f.dir => {
                        chosen = Some((f, candidate, index.clone()));
                        break;
                    }
                    // Not there, or not one the root would serve: the next one.
                    Ok(_) | Err(Missing::NotFound | Missing::Outside | Missing::Special) => {
                        continue;
                    }
                    Err(m) => return found_of(m),
                }
            }
            match chosen {
                // An index that is really a script (`index.html -> index.php`).
                Some((f, _, index))
                    if let Some(refused) = self.hidden(&f, scripts::named(&index)) =>
                {
                    return Found::Refused(refused);
                }
                Some(c) => c,
                None if self.autoindex => return self.listing(names),
                None => return Found::Refused(Refusal::NoIndex),
            }
        } else {
            if names.trailing_slash {
                return Found::Status(StatusCode::NOT_FOUND);
            }
            let name = names.names.last().cloned().unwrap_or_default();
            (opened, relative, name)
        };
        let mut chosen = (file, Coding::Identity);
        let mut vary = false;
        if self.precompressed {
            let mut available = vec![(Coding::Identity, chosen.0.clone())];
            for (coding, suffix) in SIBLINGS {
                // A sibling that is really something else (a link to a script) is none.
                if let Ok(f) = self.cache.open(&format!("{relative}.{suffix}"))
                    && !f.dir
                    && self.hidden(&f, Named::Plain).is_none()
                {
                    available.push((coding, f));
                }
            }
            vary = available.len() > 1;
            let codings: Vec<Coding> = available.iter().map(|(c, _)| *c).collect();
            if let Some(best) = accepts.choose(&codings)
                && let Some((c, f)) = available.into_iter().find(|(c, _)| *c == best)
            {
                chosen = (f, c);
            }
        }
        match Stat::of(&chosen.0.file) {
            Ok(stat) => Found::File {
                file: chosen.0,
                stat,
                name,
                coding: chosen.1,
                vary,
            },
            Err(_) => Found::Status(StatusCode::INTERNAL_SERVER_ERROR),
        }
    }

    /// Why `opened`, asked for by a name that is `asked`, may not be sent: it is really more
    /// of a script than its name says — a link with another name to a script or a script's
    /// copy, or a file whose first bytes are PHP source (`scripts.rs`) — and the backend does
    /// not send scripts. What the name itself
    /// says is judged by name (`mod.rs`, `try_files.rs`: an index `index.php` is handed to
    /// a `try_files` `@NAME`).
    fn hidden(&self, opened: &Opened, asked: Named) -> Option<Refusal> {
        if self.send_scripts || opened.named <= asked {
            return None;
        }
        opened.named.refusal()
    }

    /// The listing of the directory `names` (found, without an index).
    fn listing(&self, names: &path::FilePath) -> Found {
        let dir = self.cache.root().join(names.relative());
        let shown_as = if names.names.is_empty() {
            "/".to_string()
        } else {
            format!("/{}/", names.relative())
        };
        let shown = listing::Shown {
            root: self.cache.root(),
            dotfiles: self.dotfiles,
            follow_symlinks: self.follow_symlinks,
            send_scripts: self.send_scripts,
            sniff: self.cache.sniffs(),
        };
        match listing::render(&dir, &shown_as, &shown) {
            Ok(listing) => {
                let s = &self.cache.stats;
                s.listing_omitted
                    .fetch_add(listing.omitted, Ordering::Relaxed);
                s.listing_unlisted
                    .fetch_add(listing.unlisted, Ordering::Relaxed);
                Found::Listing(listing.page)
            }
            Err(e) => found_of(open::missing(&e)),
        }
    }
}

/// What a path that gives no file answers: a refusal (counted) or a plain status.
fn found_of(m: Missing) -> Found {
    match m {
        Missing::NotFound => Found::Status(StatusCode::NOT_FOUND),
        Missing::Outside => Found::Refused(Refusal::Symlink),
        Missing::Special => Found::Refused(Refusal::Special),
        Missing::Forbidden => Found::Refused(Refusal::Unreadable),
        Missing::Failed => Found::Status(StatusCode::INTERNAL_SERVER_ERROR),
    }
}
