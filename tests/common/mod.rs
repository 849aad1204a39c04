//! Test harness in the spirit of varnishtest: a scripted origin, the real proxy and clients,
//! all on ephemeral loopback ports, speaking HTTP over sockets.
#![allow(dead_code)]

pub mod binary;
pub mod compile;
pub mod h2;
pub mod log_stream;
pub mod pages;
pub mod pebble;
pub mod raw_origin;
pub mod redis_cluster;
pub mod tls;
pub mod tools;
pub mod vcl;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};

use shellac::config::Config;
use shellac::server::{self, Running};

/// What the origin saw of one request.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body_len: u64,
}

/// How the origin's body is produced.
pub enum ReplyBody {
    Bytes(Vec<u8>),
    /// `len` bytes generated in `chunk`-sized pieces, never held whole.
    Generated {
        len: u64,
        chunk: usize,
    },
    /// First chunk, then wait for the gate, then the rest.
    Gated {
        first: Vec<u8>,
        gate: Arc<Notify>,
        rest: Vec<u8>,
    },
    /// First chunk, then stall for `pause`, then the rest.
    Stall {
        first: Vec<u8>,
        pause: Duration,
        rest: Vec<u8>,
    },
}

/// The origin's answer to one request.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: ReplyBody,
    /// Wait this long before sending the head.
    pub delay: Duration,
    /// Omit Content-Length (chunked encoding).
    pub chunked: bool,
}

impl Reply {
    pub fn ok(body: &str) -> Reply {
        Reply {
            status: 200,
            headers: vec![],
            body: ReplyBody::Bytes(body.as_bytes().to_vec()),
            delay: Duration::ZERO,
            chunked: false,
        }
    }
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
    pub fn cc(self, value: &str) -> Reply {
        self.header("cache-control", value)
    }
    pub fn status(mut self, status: u16) -> Reply {
        self.status = status;
        self
    }
    pub fn delay(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }
    pub fn chunked(mut self) -> Reply {
        self.chunked = true;
        self
    }
    pub fn body(mut self, body: ReplyBody) -> Reply {
        self.body = body;
        self
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A scripted origin server.
pub struct Origin {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    in_flight: Arc<AtomicUsize>,
    pub peak: Arc<AtomicUsize>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Origin {
    pub async fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let listener = Arc::new(listener);
        Origin::serve_on(addr, Arc::new(handler), move || {
            let listener = listener.clone();
            async move {
                let (stream, _) = listener.accept().await.ok()?;
                // A streamed body comes from a task, so hyper writes the head and the body
                // apart: without TCP_NODELAY the body waits for the proxy's delayed ACK of
                // the head (~40 ms per response on a reused connection), as no real origin
                // does.
                let _ = stream.set_nodelay(true);
                Some(stream)
            }
        })
    }

    /// The same scripted origin on a Unix socket at `path` (a backend's
    /// `address = "unix:PATH"`); its `addr` is unspecified (`0.0.0.0:0`).
    pub async fn start_unix(
        path: &std::path::Path,
        handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
    ) -> Origin {
        let listener = Arc::new(tokio::net::UnixListener::bind(path).unwrap());
        let addr = SocketAddr::from(([0, 0, 0, 0], 0));
        Origin::serve_on(addr, Arc::new(handler), move || {
            let listener = listener.clone();
            async move { listener.accept().await.ok().map(|(stream, _)| stream) }
        })
    }

    /// Serves `handler` on each connection `accept` gives (`None`: the listener failed)
    /// until [`Origin::stop`].
    fn serve_on<S, A, F>(addr: SocketAddr, handler: Handler, mut accept: A) -> Origin
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
        A: FnMut() -> F + Send + 'static,
        F: std::future::Future<Output = Option<S>> + Send,
    {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (s, f, p) = (seen.clone(), in_flight.clone(), peak.clone());
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut stop_accept = stopped.clone();
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    r = accept() => match r {
                        Some(stream) => stream,
                        None => return,
                    },
                    _ = stop_accept.changed() => return,
                };
                let (handler, seen, in_flight, peak) =
                    (handler.clone(), s.clone(), f.clone(), p.clone());
                let mut stop_conn = stopped.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let (handler, seen, in_flight, peak) = (
                            handler.clone(),
                            seen.clone(),
                            in_flight.clone(),
                            peak.clone(),
                        );
                        async move {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            let resp = serve(req, &handler, &seen).await;
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    let conn =
                        http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                    tokio::select! {
                        _ = conn => {}
                        _ = stop_conn.changed() => {}
                    }
                });
            }
        });
        Origin {
            addr,
            seen,
            in_flight,
            peak,
            stop,
        }
    }

    /// Stops listening and drops every open connection (the origin "dies").
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Requests seen so far.
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    pub fn count_path(&self, path: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.path == path)
            .count()
    }

    pub fn last(&self) -> Seen {
        self.seen
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("origin saw a request")
    }
}

async fn serve(
    req: Request<Incoming>,
    handler: &Handler,
    seen: &Arc<Mutex<Vec<Seen>>>,
) -> Response<ChannelBody> {
    let (parts, mut body) = req.into_parts();
    let mut body_len = 0u64;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(d) = frame.data_ref() {
            body_len += d.len() as u64;
        }
    }
    let s = Seen {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        headers: parts.headers,
        body_len,
    };
    let reply = handler(&s);
    seen.lock().unwrap().push(s);
    tokio::time::sleep(reply.delay).await;
    let (tx, rx) = mpsc::channel::<Bytes>(2);
    let total: u64 = match &reply.body {
        ReplyBody::Bytes(b) => b.len() as u64,
        ReplyBody::Generated { len, .. } => *len,
        ReplyBody::Gated { first, rest, .. } | ReplyBody::Stall { first, rest, .. } => {
            (first.len() + rest.len()) as u64
        }
    };
    // A whole body is ready with the head, so hyper writes both at once as a real origin
    // does for a small page: an origin that dies (`Origin::stop`) ends between responses,
    // never between a head and its body. Streamed kinds below come from a task.
    let (first, rest) = match reply.body {
        ReplyBody::Bytes(b) => ((!b.is_empty()).then(|| Bytes::from(b)), None),
        other => (None, Some(other)),
    };
    let mut resp = Response::new(ChannelBody {
        first,
        rx,
        exact: (!reply.chunked).then_some(total),
    });
    *resp.status_mut() = StatusCode::from_u16(reply.status).unwrap();
    for (k, v) in &reply.headers {
        resp.headers_mut().append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    if !reply.chunked {
        resp.headers_mut().insert("content-length", total.into());
    }
    let Some(rest) = rest else {
        return resp;
    };
    tokio::spawn(async move {
        match rest {
            ReplyBody::Bytes(_) => {}
            ReplyBody::Generated { len, chunk } => {
                let piece = Bytes::from(vec![b'x'; chunk]);
                let mut left = len;
                while left > 0 {
                    let n = left.min(chunk as u64) as usize;
                    if tx.send(piece.slice(..n)).await.is_err() {
                        return;
                    }
                    left -= n as u64;
                }
            }
            ReplyBody::Gated { first, gate, rest } => {
                let _ = tx.send(Bytes::from(first)).await;
                gate.notified().await;
                let _ = tx.send(Bytes::from(rest)).await;
            }
            ReplyBody::Stall { first, pause, rest } => {
                let _ = tx.send(Bytes::from(first)).await;
                tokio::time::sleep(pause).await;
                let _ = tx.send(Bytes::from(rest)).await;
            }
        }
    });
    resp
}

/// A body fed from a channel (back-pressured: the producer waits for the consumer).
pub struct ChannelBody {
    first: Option<Bytes>,
    rx: mpsc::Receiver<Bytes>,
    exact: Option<u64>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(b) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        self.rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
    fn size_hint(&self) -> http_body::SizeHint {
        match self.exact {
            Some(n) => http_body::SizeHint::with_exact(n),
            None => http_body::SizeHint::default(),
        }
    }
}

/// The real proxy, in-process, on ephemeral loopback ports.
pub struct Shellac {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    running: Option<Running>,
}

impl Shellac {
    /// A Shellac started by the test itself (`server::start` with a config of its own).
    #[allow(dead_code)]
    pub fn from_running(running: Running) -> Shellac {
        Shellac {
            addr: running.listen[0],
            admin: running.admin.expect("an admin listener"),
            running: Some(running),
        }
    }

    /// Starts Shellac in front of `origin`; `tweak` adjusts the config first.
    pub async fn start(origin: SocketAddr, tweak: impl FnOnce(&mut Config)) -> Shellac {
        let mut config = Config::embedded_default();
        config.server.listen = vec!["127.0.0.1:0".parse().unwrap()];
        config.server.admin = Some("127.0.0.1:0".parse().unwrap());
        config.backends[0].host = origin.ip().to_string();
        config.backends[0].port = origin.port();
        tweak(&mut config);
        assert!(
            config.validate().is_empty(),
            "test config invalid: {:?}",
            config.validate()
        );
        let running = server::start(Arc::new(config))
            .await
            .expect("shellac starts");
        Shellac {
            addr: running.listen[0],
            admin: running.admin.unwrap(),
            running: Some(running),
        }
    }

    /// Starts Shellac with a first backend that has no host and port (a document root, a
    /// Unix socket): `tweak` gives it its kind or address and adjusts the rest of the config.
    pub async fn start_hostless(tweak: impl FnOnce(&mut Config)) -> Shellac {
        Shellac::start("127.0.0.1:9".parse().unwrap(), |c| {
            c.backends[0].host = String::new();
            tweak(c);
        })
        .await
    }

    /// Starts Shellac with a first backend that serves the files under `root`
    /// (`protocol = "files"`); `tweak` adjusts the config after that.
    pub async fn start_files(root: &std::path::Path, tweak: impl FnOnce(&mut Config)) -> Shellac {
        Shellac::start_hostless(|c| {
            let b = &mut c.backends[0];
            b.protocol = shellac::config::BackendProtocol::Files;
            b.root = Some(root.to_path_buf());
            tweak(c);
        })
        .await
    }

    /// Starts Shellac from a config file (so `POST /reload` re-reads it). The file should
    /// listen on `127.0.0.1:0` and put the admin listener on `127.0.0.1:0`.
    pub async fn start_reloadable(path: &std::path::Path) -> Shellac {
        Shellac::try_start_reloadable(path)
            .await
            .expect("shellac starts")
    }

    /// Like [`Shellac::start_reloadable`], with the start-up error instead of a panic (a
    /// fixed port a previous test's Shellac has not released yet).
    pub async fn try_start_reloadable(path: &std::path::Path) -> anyhow::Result<Shellac> {
        let mut config =
            Config::load(path).unwrap_or_else(|e| panic!("test config invalid: {e:?}"));
        let program = shellac::vcl::attach::attach(&mut config, None)
            .unwrap_or_else(|e| panic!("test VCL invalid: {e:?}"));
        let running = server::start_with(
            Arc::new(config),
            program,
            shellac::reload::ConfigSource::File(path.to_path_buf()),
            shellac::config::CliOverrides::default(),
        )
        .await?;
        Ok(Shellac {
            addr: running.listen[0],
            admin: running.admin.unwrap(),
            running: Some(running),
        })
    }

    /// Starts Shellac on an example config file, pointed at `origin` (first backend) and at
    /// ephemeral ports; `tweak` adjusts it further.
    pub async fn start_file(
        path: &str,
        origin: SocketAddr,
        tweak: impl FnOnce(&mut Config),
    ) -> Shellac {
        let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
        let mut config =
            Config::load(std::path::Path::new(&full)).unwrap_or_else(|e| panic!("{path}: {e:?}"));
        config.server.listen = vec!["127.0.0.1:0".parse().unwrap()];
        config.server.admin = Some("127.0.0.1:0".parse().unwrap());
        config.backends[0].host = origin.ip().to_string();
        config.backends[0].port = origin.port();
        tweak(&mut config);
        let running = server::start(Arc::new(config))
            .await
            .expect("shellac starts");
        Shellac {
            addr: running.listen[0],
            admin: running.admin.unwrap(),
            running: Some(running),
        }
    }

    /// `POST /reload`: (status, JSON body).
    pub async fn reload(&self) -> (u16, serde_json::Value) {
        let resp = request(self.admin, "POST", "/reload", &[], b"").await;
        let v = serde_json::from_slice(&resp.body).unwrap_or(serde_json::Value::Null);
        (resp.status, v)
    }

    /// TLS addresses accepting client connections now, in `[[tls]]` order.
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.running
            .as_ref()
            .map(|r| r.live.listening_tls().into_iter().map(|(_, a)| a).collect())
            .unwrap_or_default()
    }

    /// Addresses accepting client connections now.
    pub fn listening(&self) -> Vec<SocketAddr> {
        self.running
            .as_ref()
            .map(|r| r.live.listening())
            .unwrap_or_default()
    }

    /// All counters and gauges from `GET /stats` on the admin listener (the integer values;
    /// ratios are read with [`Shellac::ratio`]).
    pub async fn stats(&self) -> HashMap<String, u64> {
        self.stats_json()
            .await
            .into_iter()
            .filter_map(|(k, v)| v.as_u64().map(|v| (k, v)))
            .collect()
    }

    /// `GET /stats` as parsed JSON values.
    pub async fn stats_json(&self) -> HashMap<String, serde_json::Value> {
        let resp = get(self.admin, "/stats").await;
        assert_eq!(resp.status, 200);
        serde_json::from_slice(&resp.body).expect("stats JSON")
    }

    /// A fractional value of `/stats`, e.g. `hit_ratio_10s`.
    pub async fn ratio(&self, name: &str) -> f64 {
        self.stats_json()
            .await
            .get(name)
            .and_then(|v| v.as_f64())
            .unwrap_or_else(|| panic!("no number {name}"))
    }

    pub async fn stat(&self, name: &str) -> u64 {
        *self
            .stats()
            .await
            .get(name)
            .unwrap_or_else(|| panic!("no counter {name}"))
    }

    /// Reopens the access log, as SIGUSR1 does.
    pub fn reopen_logs(&self) {
        if let Some(r) = &self.running {
            r.reopen_logs();
        }
    }

    /// Graceful shutdown with `grace` for requests in flight.
    pub async fn stop_with(mut self, grace: Duration) {
        if let Some(r) = self.running.take() {
            r.shutdown(grace).await;
        }
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown(Duration::from_secs(1)).await;
        }
    }
}

/// A response as a client saw it.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    pub fn cache_status(&self) -> &str {
        self.header("cache-status").unwrap_or("")
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A keep-alive client connection.
pub struct Conn {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).await.unwrap();
        Conn::over(stream).await
    }

    /// A connection over any stream (a TLS client connection).
    pub async fn over(
        stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    ) -> Conn {
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        Conn { sender }
    }

    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Resp {
        let resp = self.send_head(method, path, headers, body).await;
        let (parts, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: the body ended early: {e:?}"))
            .to_bytes();
        Resp {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        }
    }

    pub async fn send_head(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response<Incoming> {
        let mut req = Request::builder().method(method).uri(path);
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req = req.header("host", "test.example");
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(Bytes::copy_from_slice(body))).unwrap();
        self.sender
            .ready()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: the connection closed before: {e:?}"));
        // What went wrong, when a response does not come, is what the next CI failure needs.
        self.sender
            .send_request(req)
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: no response: {e:?}"))
    }
}

/// A client socket with a 4 KiB receive buffer: a reader that does not read backs the
/// server's writes up after a few KiB (slow readers, blocked writes).
pub async fn connect_small_window(addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(addr).await.unwrap()
}

/// A trickle reader: 4 KiB every 50 ms (never stalled long enough for a `send_timeout`) until
/// `gave_up` says the server ended the response; then what the kernel still holds of it (the
/// server's send buffer, hundreds of KiB that would take seconds to trickle) is read at full
/// speed until the connection ends. Bounded: at most 600 trickled reads and `limit` bytes in
/// all, none waited for more than 5 s. Whether the connection was closed within `limit` bytes.
pub async fn trickle_until_closed<F, Fut>(s: &mut TcpStream, limit: usize, gave_up: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut buf = [0u8; 4096];
    let (mut read, mut trickled, mut given_up) = (0, 0, false);
    while read <= limit {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(n)) => read += n,
            Err(_) => return false,
        }
        given_up = given_up || gave_up().await;
        if !given_up {
            if trickled == 600 {
                return false;
            }
            trickled += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    false
}

pub async fn get(addr: SocketAddr, path: &str) -> Resp {
    Conn::open(addr).await.send("GET", path, &[], b"").await
}

pub async fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Resp {
    Conn::open(addr).await.send("GET", path, headers, b"").await
}

pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    Conn::open(addr)
        .await
        .send(method, path, headers, body)
        .await
}

/// Waits (bounded: 10 s) until `path` holds at least `n` lines; returns them.
pub async fn wait_lines(path: &std::path::Path, n: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for _ in 0..200 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        lines = text.lines().map(str::to_string).collect();
        if lines.len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    lines
}

/// Waits (bounded: 10 s) until `cond` holds for `sh`'s stats; panics naming `what` if not.
pub async fn until_stats(sh: &Shellac, what: &str, cond: impl Fn(&HashMap<String, u64>) -> bool) {
    for _ in 0..200 {
        if cond(&sh.stats().await) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}: {:?}", sh.stats().await);
}

/// Polls `f` every 50 ms until it is true or `limit` has passed; whether it became true.
pub async fn eventually<F, Fut>(limit: Duration, f: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A loopback port free now (bound and released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("shellac-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes raw bytes and reads until the server closes (or 5 s pass).
pub async fn raw(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// What a raw client saw: everything the server sent, and whether it closed the connection.
pub struct Exchange {
    pub text: String,
    pub closed: bool,
}

impl Exchange {
    /// Status codes of the responses, in order.
    pub fn statuses(&self) -> Vec<u16> {
        self.text
            .match_indices("HTTP/1.")
            .filter_map(|(i, _)| self.text.get(i + 9..i + 12)?.parse().ok())
            .collect()
    }
}

/// Writes raw bytes, then reads until the server closes or `wait` passes without a byte.
pub async fn exchange(addr: SocketAddr, bytes: &[u8], wait: Duration) -> Exchange {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let _ = stream.write_all(bytes).await;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let closed = loop {
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    Exchange {
        text: String::from_utf8_lossy(&out).into_owned(),
        closed,
    }
}

/// A directory under the system temp dir, removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "shellac-test-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self, file: &str) -> std::path::PathBuf {
        self.0.join(file)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
