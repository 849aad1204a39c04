//! The FastCGI origin kind (`[[backend]] protocol = "fastcgi"`): a responder such as PHP-FPM
//! at `host:port` or on a Unix socket (`address`), the records and parameters of
//! `crate::fastcgi`. Connections are kept (FCGI_KEEP_CONN) in a LIFO pool of at most
//! `max_idle`, closed once unused for `idle_timeout` (a task closes them even when no request
//! comes); with one request per connection and
//! `max_connections` (required: the application's number of workers) bounding requests in
//! flight, connections open plus kept never exceed it — a kept connection holds a PHP-FPM
//! child, so more would starve new requests.
//!
//! Before a request reaches the application its script is found under `root` (the site's,
//! `[[site]] root`, when the request carries one: sites share the pool): the path is
//! read as `backend/files/path.rs` reads it (no `..`, no escaped slash, no dotfile), split at
//! the first `.php` segment (SCRIPT_NAME, PATH_INFO), and the script must be a regular file
//! inside the root — `/uploads/evil.jpg/x.php` is 404, never `evil.jpg` run as PHP (the
//! `cgi.fix_pathinfo` hole). A directory gets its `index` script (a trailing-slash redirect
//! first); any other path goes to the front controller (the first `index` at the root) if
//! there is one, else 404. A path refused before the application sees it carries its reason
//! (`refusal.rs`), counted in `fastcgi_refused_*`.

mod exchange;
mod pool;
mod refusal;
mod scripts;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http::header;
use http::{Request, Response, StatusCode};
use http_body::Body as _;
use http_body_util::BodyExt;

use self::exchange::{ExchangeError, ReadState, StdoutBody};
use self::pool::Pool;
pub(crate) use self::refusal::ScriptRefusal;
use self::scripts::{Is, Scripts};
use super::connector::Transport;
use super::endpoint::Endpoint;
use super::error::FetchError;
use super::extensions::{ClientInfo, DocRoot};
use super::files::path;
use super::origin::Origin;
use super::request_body::RequestBody;
use super::source::{BoxStream, Source, plain_response, slash_redirect};
use crate::config::BackendConfig;
use crate::fastcgi::params::{self, ScriptPath};

/// A FastCGI application behind a backend.
pub(crate) struct FastCgi {
    pool: Arc<Pool>,
    /// What paths under a root name, kept (`open_file_cache`, `open_file_cache_valid`).
    scripts: Arc<Scripts>,
    root: Arc<Path>,
    /// The root as the application sees it (DOCUMENT_ROOT): as configured, no trailing `/`.
    document_root: String,
    index: Vec<String>,
    extra: Vec<(String, String)>,
    max_head: usize,
    max_fields: usize,
}

/// The script a request runs, or what it gets instead.
enum Resolved {
    Script {
        script: String,
        path_info: String,
    },
    Redirect,
    Status(StatusCode),
    /// Refused before the application sees it, and why (counted).
    Refused(ScriptRefusal),
}

impl FastCgi {
    pub(super) fn new(config: &BackendConfig, max_head: usize, max_fields: usize) -> FastCgi {
        let configured = config
            .root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/nonexistent"));
        let document_root = configured
            .to_string_lossy()
            .trim_end_matches('/')
            .to_string();
        FastCgi {
            pool: Arc::new(Pool::new(config.max_idle, config.idle_timeout.0)),
            scripts: Arc::new(Scripts::new(
                config.open_file_cache,
                config.open_file_cache_valid.0,
            )),
            root: std::fs::canonicalize(&configured)
                .unwrap_or(configured)
                .into(),
            document_root,
            index: config
                .index
                .clone()
                .unwrap_or_else(|| vec!["index.php".to_string()]),
            extra: config
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            max_head,
            max_fields,
        }
    }

    /// The script lookups' counters and kept answers, for `/backends` (the names of a files
    /// backend's open-file cache: the same settings bound both).
    pub(super) fn describe(&self, v: &mut serde_json::Value) {
        let s = &self.scripts.stats;
        v["files_cache_hit"] = s.hit.load(Ordering::Relaxed).into();
        v["files_cache_miss"] = s.miss.load(Ordering::Relaxed).into();
        v["files_cache_expired"] = s.expired.load(Ordering::Relaxed).into();
        v["files_cache_evicted"] = s.evicted.load(Ordering::Relaxed).into();
        v["files_cache_entries"] = self.scripts.len().into();
    }

    /// Finds the script for `raw` (the request path, still escaped), asking `is` what each
    /// path under the root names; `None` as soon as `is` cannot say without the disk.
    fn resolve(
        index: &[String],
        raw: &str,
        is: &mut dyn FnMut(&str) -> Option<Is>,
    ) -> Option<Resolved> {
        let names = match path::parse(raw, false) {
            Ok(n) => n,
            Err(refused) => return Some(Resolved::Refused(ScriptRefusal::Path(refused))),
        };
        let relative = names.relative();
        let clean = format!("/{relative}");
        // Split at `.php` alone, not the whole family the files origin refuses
        // (`fastcgi/php.rs` says why): `/a.phtml` goes to the front controller.
        if let Some(ScriptPath { script, path_info }) = params::split_script(&clean, ".php") {
            let script = script.trim_start_matches('/');
            if is(script)? == Is::File {
                return Some(Resolved::Script {
                    script: format!("/{script}"),
                    path_info: path_info.to_string(),
                });
            }
            // Not there: is a regular file on its way (`uploads/evil.jpg` of
            // `/uploads/evil.jpg/x.php`, what `cgi.fix_pathinfo` would run)?
            let mut way = script.match_indices('/').map(|(i, _)| &script[..i]);
            let under_file = loop {
                match way.next() {
                    Some(prefix) if is(prefix)? == Is::File => break true,
                    Some(_) => {}
                    None => break false,
                }
            };
            return Some(Resolved::Refused(if under_file {
                ScriptRefusal::PathInfo
            } else {
                ScriptRefusal::Missing
            }));
        }
        if is(&relative)? == Is::Dir {
            if !names.trailing_slash && !names.names.is_empty() {
                return Some(Resolved::Redirect);
            }
            for i in index {
                let rel = if relative.is_empty() {
                    i.clone()
                } else {
                    format!("{relative}/{i}")
                };
                if is(&rel)? == Is::File {
                    return Some(Resolved::Script {
                        script: format!("/{rel}"),
                        path_info: String::new(),
                    });
                }
            }
        }
        // The front controller (WordPress, Laravel, Symfony route every path through it).
        Some(match index.first() {
            Some(front) if is(front)? == Is::File => Resolved::Script {
                script: format!("/{front}"),
                path_info: String::new(),
            },
            _ => Resolved::Status(StatusCode::NOT_FOUND),
        })
    }

    /// The script for `raw` under `root`: on this thread when every answer it needs is kept
    /// ([`Scripts`]), else on the blocking pool (which keeps what it looked up).
    async fn find(&self, root: Arc<Path>, raw: &str) -> Resolved {
        let mut hits = 0;
        let kept = FastCgi::resolve(&self.index, raw, &mut |rel| {
            let is = self.scripts.cached(&root, rel);
            hits += u64::from(is.is_some());
            is
        });
        if let Some(resolved) = kept {
            self.scripts.hits(hits);
            return resolved;
        }
        let (scripts, index, raw) = (self.scripts.clone(), self.index.clone(), raw.to_string());
        tokio::task::spawn_blocking(move || {
            let mut hits = 0;
            let resolved = FastCgi::resolve(&index, &raw, &mut |rel| {
                Some(match scripts.cached(&root, rel) {
                    Some(is) => {
                        hits += 1;
                        is
                    }
                    None => scripts.look(&root, rel),
                })
            });
            scripts.hits(hits);
            resolved
        })
        .await
        .ok()
        .flatten()
        .unwrap_or(Resolved::Status(StatusCode::INTERNAL_SERVER_ERROR))
    }

    async fn exchange(
        &self,
        endpoint: &Arc<Endpoint>,
        mut conn: Transport,
        req: Request<RequestBody>,
    ) -> Result<Response<Source>, FetchError> {
        let name = &endpoint.config.name;
        let failed = |e: ExchangeError| FetchError::Failed(name.clone(), Box::new(e));
        let (parts, mut body) = req.into_parts();
        // A site's own root (`[[site]] root`) instead of the backend's.
        let site_root = parts.extensions.get::<DocRoot>();
        let root = site_root.map_or_else(|| self.root.clone(), |r| r.real.clone());
        let document_root = site_root.map_or(self.document_root.as_str(), |r| &r.written);
        let (script, path_info) = match self.find(root, parts.uri.path()).await {
            Resolved::Script { script, path_info } => (script, path_info),
            Resolved::Redirect => return Ok(slash_redirect(&parts.uri)),
            Resolved::Status(s) => return Ok(plain_response(s)),
            Resolved::Refused(r) => return Ok(r.response()),
        };
        // CONTENT_LENGTH must be known: a body without a length is read first (it is bounded
        // by server.max_body_size already).
        let content_length = if body.is_end_stream() {
            None
        } else if let Some(n) = body.size_hint().exact() {
            Some(n)
        } else {
            let bytes = (&mut body)
                .collect()
                .await
                .map_err(|e| FetchError::Failed(name.clone(), e))?
                .to_bytes();
            let n = bytes.len() as u64;
            body = RequestBody::bytes(bytes, endpoint.counters.clone());
            Some(n)
        };
        let client = parts.extensions.get::<ClientInfo>().copied();
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let (server_name, host_port) = split_host(host);
        let https = client.is_some_and(|c| c.https);
        let default_port = if https { 443 } else { 80 };
        // A Unix socket listener has no address (0.0.0.0:0): the Host's port stands in.
        let server_addr = client
            .and_then(|c| c.local)
            .filter(|l| l.port() != 0)
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], host_port.unwrap_or(default_port))));
        let remote_addr = client.map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.addr);
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let request = params::Request {
            method: parts.method.as_str(),
            target,
            query: parts.uri.query().unwrap_or(""),
            script: ScriptPath {
                script: &script,
                path_info: &path_info,
            },
            document_root,
            server_name,
            server_addr,
            remote_addr,
            https,
            protocol: client.map_or("HTTP/1.1", |c| c.protocol),
            fields: &parts.headers,
            content_length,
            extra: &self.extra,
        };
        let encoded = params::encode(&request);
        let keep = self.pool.keeps();
        exchange::send(&mut conn, &encoded, body, keep)
            .await
            .map_err(failed)?;
        let mut state = ReadState::new(name);
        let (head, first) =
            exchange::read_head(&mut conn, &mut state, self.max_head, self.max_fields)
                .await
                .map_err(failed)?;
        let pool = keep.then(|| self.pool.clone());
        let stdout: BoxStream = Box::pin(StdoutBody::new(conn, state, first, pool));
        let mut resp = Response::new(Source::Stream(stdout));
        *resp.status_mut() = head.status;
        let mut fields = head.fields;
        // Framing is Shellac's: the application's word on it is not passed on.
        for hop in [
            header::TRANSFER_ENCODING,
            header::CONNECTION,
            header::CONTENT_LENGTH,
        ] {
            fields.remove(hop);
        }
        *resp.headers_mut() = fields;
        Ok(resp)
    }
}

/// `example.org:8080` → (`example.org`, Some(8080)); IPv6 literals keep their brackets off.
fn split_host(host: &str) -> (&str, Option<u16>) {
    if let Some(rest) = host.strip_prefix('[') {
        if let Some((ip, after)) = rest.split_once(']') {
            return (ip, after.strip_prefix(':').and_then(|p| p.parse().ok()));
        }
        return (host, None);
    }
    match host.rsplit_once(':') {
        Some((name, port)) => match port.parse() {
            Ok(p) => (name, Some(p)),
            Err(_) => (host, None),
        },
        None => (host, None),
    }
}

impl Origin for FastCgi {
    type Conn = Transport;

    fn alpn(&self) -> &'static [u8] {
        b"http/1.1"
    }

    async fn connection(
        &self,
        endpoint: &Arc<Endpoint>,
        connect: Duration,
        fresh: bool,
    ) -> Result<(Transport, bool), FetchError> {
        if !fresh && let Some(conn) = self.pool.checkout() {
            return Ok((conn, true));
        }
        let conn = endpoint.open_transport(connect).await?;
        endpoint.counters.backend_conn.inc();
        endpoint.stats.conn.inc();
        Ok((conn, false))
    }

    async fn request(
        &self,
        endpoint: &Arc<Endpoint>,
        conn: Transport,
        req: Request<RequestBody>,
    ) -> Result<Response<Source>, FetchError> {
        self.exchange(endpoint, conn, req).await
    }

    /// A kept connection the application closed (PHP-FPM's `pm.max_requests`, its
    /// `request_terminate_timeout`) fails before any answer: tried again on a new one.
    fn retries_stale(&self) -> bool {
        true
    }

    /// The application accepts a connection (the probe's request text is HTTP's: FastCGI has
    /// no status line to read; a `[[probe]]` path would run a script on every probe).
    async fn probe(&self, endpoint: &Endpoint, _request: &[u8]) -> Result<u16, String> {
        endpoint.probe_transport().await.map(|_| 200)
    }

    fn idle(&self) -> usize {
        self.pool.kept()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_split_into_name_and_port() {
        assert_eq!(split_host("example.org"), ("example.org", None));
        assert_eq!(split_host("example.org:8080"), ("example.org", Some(8080)));
        assert_eq!(split_host("[::1]:81"), ("::1", Some(81)));
        assert_eq!(split_host("[::1]"), ("::1", None));
    }

    /// Never hand the application a script that does not exist: the classic
    /// `cgi.fix_pathinfo` hole (`/uploads/evil.jpg/x.php` running `evil.jpg`).
    #[test]
    fn scripts_must_exist_under_the_root() {
        let dir = std::env::temp_dir().join(format!("shellac-fcgi-resolve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("uploads")).unwrap();
        std::fs::create_dir_all(dir.join("blog")).unwrap();
        std::fs::write(dir.join("uploads/evil.jpg"), "<?php system('id');").unwrap();
        std::fs::write(dir.join("index.php"), "").unwrap();
        std::fs::write(dir.join("blog/index.php"), "").unwrap();
        let root = std::fs::canonicalize(&dir).unwrap();
        let index = vec!["index.php".to_string()];
        let disk = Scripts::new(0, Duration::ZERO);
        let script =
            |raw: &str| match FastCgi::resolve(&index, raw, &mut |rel| Some(disk.look(&root, rel)))
            {
                Some(Resolved::Script { script, path_info }) => format!("{script} {path_info}"),
                Some(Resolved::Redirect) => "redirect".into(),
                Some(Resolved::Status(s)) => s.as_u16().to_string(),
                Some(Resolved::Refused(r)) => format!("{} {r:?}", r.status().as_u16()),
                None => unreachable!("the disk always answers"),
            };
        assert_eq!(script("/uploads/evil.jpg/x.php"), "404 PathInfo");
        assert_eq!(script("/uploads/evil.jpg/.php"), "404 Path(Dotfile)");
        assert_eq!(
            script("/uploads/evil.jpg"),
            "/index.php ",
            "front controller"
        );
        assert_eq!(script("/index.php/a/b"), "/index.php /a/b");
        assert_eq!(script("/blog"), "redirect");
        assert_eq!(script("/blog/"), "/blog/index.php ");
        assert_eq!(script("/nope.php"), "404 Missing");
        assert_eq!(script("/uploads/nope.php/x"), "404 Missing");
        assert_eq!(script("/blog.php"), "404 Missing");
        assert_eq!(script("/%2e%2e/etc/passwd.php"), "400 Path(Traversal)");
        assert_eq!(script("/.git/x.php"), "404 Path(Dotfile)");
        assert_eq!(script("/a%2fb.php"), "404 Path(EscapedSlash)");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Regression (bench/ab2009.sh phpinfo): every request's script was looked up on the
    /// blocking pool (two thread wake-ups and four system calls a page). Once a path's
    /// answers are kept, its script is found without the disk — the same one — and a path
    /// with an answer missing still goes to the disk.
    #[test]
    fn kept_answers_find_the_script_without_the_disk() {
        let dir = std::env::temp_dir().join(format!("shellac-fcgi-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("blog")).unwrap();
        std::fs::write(dir.join("index.php"), "").unwrap();
        std::fs::write(dir.join("info.php"), "").unwrap();
        std::fs::write(dir.join("blog/index.php"), "").unwrap();
        let root = std::fs::canonicalize(&dir).unwrap();
        let index = vec!["index.php".to_string()];
        let scripts = Scripts::new(100, Duration::from_secs(3600));
        let kept = |raw: &str| {
            FastCgi::resolve(&index, raw, &mut |rel| scripts.cached(&root, rel)).map(|r| match r {
                Resolved::Script { script, path_info } => format!("{script} {path_info}"),
                Resolved::Redirect => "redirect".into(),
                Resolved::Status(s) => s.as_u16().to_string(),
                Resolved::Refused(r) => format!("{} {r:?}", r.status().as_u16()),
            })
        };
        let look = |raw: &str| {
            FastCgi::resolve(&index, raw, &mut |rel| Some(scripts.look(&root, rel)));
        };
        for raw in [
            "/info.php/x",
            "/blog",
            "/blog/",
            "/a/pretty/url",
            "/nope.php",
        ] {
            assert_eq!(kept(raw), None, "{raw} before it was looked up");
            look(raw);
        }
        assert_eq!(kept("/info.php/x").as_deref(), Some("/info.php /x"));
        assert_eq!(kept("/info.php").as_deref(), Some("/info.php "));
        assert_eq!(kept("/blog/").as_deref(), Some("/blog/index.php "));
        assert_eq!(kept("/blog").as_deref(), Some("redirect"));
        assert_eq!(kept("/a/pretty/url").as_deref(), Some("/index.php "));
        assert_eq!(kept("/nope.php").as_deref(), Some("404 Missing"));
        assert_eq!(
            kept("/%2e%2e/x.php").as_deref(),
            Some("400 Path(Traversal)")
        );
        assert_eq!(kept("/other.php"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
