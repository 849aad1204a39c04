//! The static-files origin kind (`[[backend]] protocol = "files"`): a request's path names a
//! file under the document root `root` (or its site's, `site_root.rs`), answered as an HTTP
//! origin would answer it — GET and HEAD (else 405 with `Allow`), index files for directories
//! (a directory without one is 403, or its listing with `autoindex`: `listing.rs`), nginx's
//! `try_files` (`try_files.rs`), `Content-Type` by extension (`mime.rs`), `ETag` /
//! `Last-Modified`, 304 / 412 and single or multipart 206 / 416 with `If-Range`
//! (`http/conditional.rs`, the rules the proxy applies to stored objects), precompressed
//! `.br` / `.zst` / `.gz` siblings by `Accept-Encoding` with `Vary`. Its answer goes through the same cache policy, rules, logs
//! and counters as any backend's: a cache fill asks for the whole file without conditionals
//! (the proxy answers 304 / 206 from the stored copy), a pass request gets them answered here.
//!
//! Safe by construction: the path is read by `path.rs` (nothing that could climb out of the
//! root or mean something else to the file system gets through), a PHP script's source is
//! never sent unless `send_scripts` (`scripts.rs`: nor a copy of it, `x.php.bak`, nor a link
//! with another name to either, nor a file whose first bytes are PHP source unless
//! `sniff_scripts = false`), opened by `open.rs` (the file
//! actually opened is checked to be under the root unless `follow_symlinks`) through a bounded
//! open-file cache, and read by `body.rs` (a file that shrinks or changes while it is sent
//! ends the body with an error); every refusal carries its reason, which the fetch step
//! counts (`refusal.rs`: `files_refused_*`, `files_script_refused`). All file-system calls run on tokio's blocking pool, but for
//! the sendfile(2) of large parts on cleartext HTTP/1.1 (`zero_copy.rs`).

mod body;
mod listing;
mod lookup;
mod mime;
pub(super) mod open;
pub(super) mod path;
mod refusal;
mod scripts;
mod site_root;
#[cfg(test)]
mod tests;
mod try_files;
pub(crate) mod zero_copy;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;

use self::body::{FileBody, Part};
use self::lookup::{Files, Found};
use self::open::{Opened, Stat};
use self::scripts::Named;
use self::site_root::SiteRoots;
use self::zero_copy::ZeroCopy;
use super::endpoint::Endpoint;
use super::error::FetchError;
use super::extensions::{Autoindex, DocRoot};
use super::origin::Origin;
use super::request_body::RequestBody;
use super::source::{BoxStream, Source, moved_to, plain_response, slash_redirect};
use crate::config::BackendConfig;
use crate::config::try_files::Fallback;
use crate::http::accept_encoding::{Accepts, Coding};
use crate::http::conditional::{self, Answer};

pub(crate) use self::refusal::{Refusal, Refused};
pub(crate) use self::try_files::TryNext;

impl Files {
    async fn answer(self: &Arc<Self>, req: Request<RequestBody>) -> Response<Source> {
        let (parts, _) = req.into_parts();
        if parts.method != Method::GET && parts.method != Method::HEAD {
            return Refusal::Method.response();
        }
        let names = match path::parse(parts.uri.path(), self.dotfiles) {
            Ok(n) => n,
            Err(refused) => return refused.response(),
        };
        // A script's source is never sent by default; `try_files` ending in `@NAME` hands
        // the path to NAME instead (`try_files.rs`).
        let hands_on = self
            .try_files
            .as_ref()
            .is_some_and(|t| matches!(t.fallback, Fallback::Backend(_)));
        // A script's copy (`x.php.bak`, `x.php~`) is refused even then: PHP would not run it.
        match scripts::path_named(parts.uri.path()) {
            _ if self.send_scripts => {}
            Named::Script if !hands_on => return Refusal::Script.response(),
            Named::Copy => return Refusal::ScriptCopy.response(),
            _ => {}
        }
        let accepts = Accepts::parse(
            parts
                .headers
                .get_all(header::ACCEPT_ENCODING)
                .iter()
                .map(HeaderValue::as_bytes),
        );
        let this = self.clone();
        let lookup = {
            let names = names.clone();
            let raw = parts.uri.path().to_string();
            tokio::task::spawn_blocking(move || match &this.try_files {
                Some(t) => this.try_files(t, &raw, &accepts),
                None => this.find(&names, &accepts),
            })
        };
        let found = lookup
            .await
            .unwrap_or(Found::Status(StatusCode::INTERNAL_SERVER_ERROR));
        match found {
            Found::Refused(refused) => {
                // Named like a plain file, PHP source inside: the operator should know.
                if refused == Refusal::ScriptSource {
                    tracing::warn!(
                        path = parts.uri.path(),
                        reason = refused.as_str(),
                        "files backend refused a file whose first bytes are PHP source"
                    );
                }
                refused.response()
            }
            Found::Status(s) => plain_response(s),
            Found::Next(name) => {
                let mut resp = plain_response(StatusCode::NOT_FOUND);
                resp.extensions_mut().insert(TryNext(name));
                resp
            }
            Found::Listing(page) => {
                let len = page.len();
                let body = if parts.method == Method::HEAD {
                    empty()
                } else {
                    Box::pin(
                        http_body_util::Full::new(Bytes::from(page))
                            .map_err(|never| match never {}),
                    )
                };
                let mut resp = Response::new(Source::Stream(body));
                let h = resp.headers_mut();
                h.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                );
                h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
                resp
            }
            Found::Redirect => slash_redirect(&parts.uri),
            Found::Moved(path) => moved_to(&path, parts.uri.query()),
            // A script or a copy found as a directory's index or through a `try_files` entry.
            Found::File { ref name, .. }
                if let Some(refused) = scripts::named(name).refusal()
                    && !self.send_scripts =>
            {
                refused.response()
            }
            Found::File {
                file,
                stat,
                name,
                coding,
                vary,
            } => self.file_response(
                &parts.method,
                &parts.headers,
                file,
                stat,
                &name,
                coding,
                vary,
            ),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn file_response(
        &self,
        method: &Method,
        request: &HeaderMap,
        file: Arc<Opened>,
        stat: Stat,
        name: &str,
        coding: Coding,
        vary: bool,
    ) -> Response<Source> {
        let len = stat.len;
        let (etag, modified) = validators(&stat, coding);
        let content_type = self.types.of(name);
        let mut headers = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(&etag) {
            headers.insert(header::ETAG, v);
        }
        if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(modified)) {
            headers.insert(header::LAST_MODIFIED, v);
        }
        if vary {
            headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
        }
        let answer = conditional::evaluate(method, request, Some(&etag), Some(modified), len);
        let (status, parts) = match answer {
            Answer::NotModified => (StatusCode::NOT_MODIFIED, Vec::new()),
            Answer::PreconditionFailed => {
                return plain_response(StatusCode::PRECONDITION_FAILED);
            }
            Answer::Unsatisfiable => {
                let mut resp = plain_response(StatusCode::RANGE_NOT_SATISFIABLE);
                if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                    resp.headers_mut().insert(header::CONTENT_RANGE, v);
                }
                return resp;
            }
            Answer::Full => {
                headers.insert(header::CONTENT_TYPE, content_type);
                headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
                (StatusCode::OK, vec![Part::File { start: 0, end: len }])
            }
            Answer::Partial(ranges) if ranges.len() == 1 => {
                let (start, end) = ranges[0];
                headers.insert(header::CONTENT_TYPE, content_type);
                headers.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start + 1));
                if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/{len}")) {
                    headers.insert(header::CONTENT_RANGE, v);
                }
                (
                    StatusCode::PARTIAL_CONTENT,
                    vec![Part::File {
                        start,
                        end: end + 1,
                    }],
                )
            }
            Answer::Partial(ranges) => {
                let parts = byteranges(&stat, &ranges, &content_type, &mut headers);
                (StatusCode::PARTIAL_CONTENT, parts)
            }
        };
        headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        if coding != Coding::Identity {
            headers.insert(
                header::CONTENT_ENCODING,
                HeaderValue::from_static(coding.as_str()),
            );
        }
        let zero_copy = Arc::new(ZeroCopy::default());
        let body: BoxStream = if *method == Method::HEAD || parts.is_empty() {
            empty()
        } else {
            Box::pin(FileBody::new(file, stat, parts, zero_copy.clone()))
        };
        let mut resp = Response::new(Source::Stream(body));
        resp.extensions_mut().insert(zero_copy);
        *resp.status_mut() = status;
        *resp.headers_mut() = headers;
        resp
    }
}

/// The file's validators: its ETag (inode, modification time, length, and the coding of a
/// precompressed sibling) and its modification time in whole seconds (compared as HTTP dates
/// are written).
fn validators(stat: &Stat, coding: Coding) -> (String, std::time::SystemTime) {
    let etag = match coding {
        Coding::Identity => format!("\"{:x}-{:x}-{:x}\"", stat.ino, stat.mtime_ns, stat.len),
        c => format!(
            "\"{:x}-{:x}-{:x}-{}\"",
            stat.ino,
            stat.mtime_ns,
            stat.len,
            c.as_str()
        ),
    };
    let modified = stat
        .modified
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| std::time::UNIX_EPOCH + Duration::from_secs(d.as_secs()))
        .unwrap_or(std::time::UNIX_EPOCH);
    (etag, modified)
}

/// A `multipart/byteranges` answer of several `ranges` (inclusive ends): its parts (each
/// range's part head, then the file's bytes; the closing boundary last), with its
/// `Content-Type` and `Content-Length` put in `headers`.
fn byteranges(
    stat: &Stat,
    ranges: &[(u64, u64)],
    content_type: &HeaderValue,
    headers: &mut HeaderMap,
) -> Vec<Part> {
    let len = stat.len;
    let boundary = format!("shellac-{:016x}", stat.mtime_ns as u64 ^ stat.ino ^ len);
    let ct = content_type.to_str().unwrap_or("application/octet-stream");
    let mut parts = Vec::with_capacity(ranges.len() * 2 + 1);
    let mut total = 0u64;
    for &(start, end) in ranges {
        let head = format!(
            "\r\n--{boundary}\r\nContent-Type: {ct}\r\nContent-Range: bytes {start}-{end}/{len}\r\n\r\n"
        );
        total += head.len() as u64 + (end - start + 1);
        parts.push(Part::Literal(Bytes::from(head)));
        parts.push(Part::File {
            start,
            end: end + 1,
        });
    }
    let tail = format!("\r\n--{boundary}--\r\n");
    total += tail.len() as u64;
    parts.push(Part::Literal(Bytes::from(tail)));
    if let Ok(v) = HeaderValue::from_str(&format!("multipart/byteranges; boundary={boundary}")) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(total));
    parts
}

fn empty() -> BoxStream {
    Box::pin(http_body_util::Empty::<Bytes>::new().map_err(|never| match never {}))
}

/// The kind's handle: the state behind an `Arc`, shared with the blocking lookups; the
/// files of the site roots and listings requests carry (`site_root.rs`); its own root as a
/// site carries one (for a site with listings of its own and no root of its own); the
/// backend's refusals by reason, whatever root answered (`/backends`, `/metrics`).
pub(crate) struct FilesKind(Arc<Files>, SiteRoots<Files>, DocRoot, Box<Refused>);

impl FilesKind {
    pub(super) fn new(config: &BackendConfig) -> FilesKind {
        let own = DocRoot::new(
            config
                .root
                .as_deref()
                .unwrap_or(std::path::Path::new("/nonexistent")),
        );
        FilesKind(
            Arc::new(Files::new(config)),
            SiteRoots::new(config),
            own,
            // Boxed: its counters take a cache line each.
            Box::default(),
        )
    }

    /// The backend's refusals by reason.
    pub(super) fn refused(&self) -> &Refused {
        &self.3
    }

    pub(super) fn describe(&self, v: &mut serde_json::Value) {
        self.0.describe(v);
        // The backend's own refusals, under the names of the process-wide counters.
        for (r, n) in self.3.snapshot() {
            v[r.name()] = n.into();
        }
        // The open-file caches of site roots count with the backend's own.
        for files in self.1.all() {
            let s = &files.cache.stats;
            for (key, n) in [
                ("files_cache_hit", s.hit.load(Ordering::Relaxed)),
                ("files_cache_miss", s.miss.load(Ordering::Relaxed)),
                ("files_cache_expired", s.expired.load(Ordering::Relaxed)),
                ("files_cache_evicted", s.evicted.load(Ordering::Relaxed)),
                ("files_cache_entries", files.cache.len() as u64),
                (
                    "files_listing_omitted",
                    s.listing_omitted.load(Ordering::Relaxed),
                ),
                (
                    "files_listing_unlisted",
                    s.listing_unlisted.load(Ordering::Relaxed),
                ),
            ] {
                v[key] = (v[key].as_u64().unwrap_or(0) + n).into();
            }
        }
    }
}

impl Origin for FilesKind {
    type Conn = ();

    fn alpn(&self) -> &'static [u8] {
        b"http/1.1"
    }

    async fn connection(
        &self,
        _endpoint: &Arc<Endpoint>,
        _connect: Duration,
        _fresh: bool,
    ) -> Result<((), bool), FetchError> {
        Ok(((), false))
    }

    async fn request(
        &self,
        _endpoint: &Arc<Endpoint>,
        _conn: (),
        req: Request<RequestBody>,
    ) -> Result<Response<Source>, FetchError> {
        // A site with a root of its own (`[[site]] root`) is served from it, a site with
        // listings of its own (`[[site]] autoindex`) with them.
        let root = req
            .extensions()
            .get::<DocRoot>()
            .filter(|root| *root.real != *self.0.cache.root());
        let autoindex = req
            .extensions()
            .get::<Autoindex>()
            .copied()
            .unwrap_or(Autoindex(self.0.autoindex));
        let resp = if root.is_none() && autoindex.0 == self.0.autoindex {
            self.0.answer(req).await
        } else {
            let root = root.unwrap_or(&self.2);
            let files = self.1.files(root, autoindex, Files::new);
            files.answer(req).await
        };
        if let Some(refused) = resp.extensions().get::<Refusal>() {
            self.3.count(*refused);
        }
        Ok(resp)
    }

    fn retries_stale(&self) -> bool {
        false
    }

    /// Healthy while the root is a directory this process can open.
    async fn probe(&self, _endpoint: &Endpoint, _request: &[u8]) -> Result<u16, String> {
        let root = self.0.cache.root().to_path_buf();
        let looked = tokio::task::spawn_blocking(move || std::fs::read_dir(&root).map(|_| ()))
            .await
            .map_err(|e| e.to_string())?;
        looked
            .map(|()| 200)
            .map_err(|e| format!("document root: {e}"))
    }

    fn idle(&self) -> usize {
        0
    }
}
