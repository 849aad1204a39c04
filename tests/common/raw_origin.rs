//! A recording backend that speaks HTTP/1.1 by hand: it keeps the exact bytes of every request
//! it receives (to assert what reached the origin, byte for byte) and answers with whatever raw
//! bytes the test scripts, malformed ones included.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type Script = Arc<dyn Fn(&[u8]) -> Vec<u8> + Send + Sync>;

pub struct RawOrigin {
    pub addr: SocketAddr,
    /// Every request received, head and body, exactly as sent.
    pub requests: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Every byte received, per connection, in order.
    pub streams: Arc<Mutex<Vec<Vec<u8>>>>,
    pub connections: Arc<AtomicUsize>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl RawOrigin {
    /// `reply` gets each request's bytes and returns the raw response to write.
    pub async fn start(reply: impl Fn(&[u8]) -> Vec<u8> + Send + Sync + 'static) -> RawOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reply: Script = Arc::new(reply);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let (r, s, c) = (requests.clone(), streams.clone(), connections.clone());
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    a = listener.accept() => match a { Ok((s, _)) => s, Err(_) => return },
                    _ = stopped.changed() => return,
                };
                let index = {
                    let mut streams = s.lock().unwrap();
                    streams.push(Vec::new());
                    streams.len() - 1
                };
                c.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, reply.clone(), r.clone(), s.clone(), index));
            }
        });
        RawOrigin {
            addr,
            requests,
            streams,
            connections,
            stop,
        }
    }

    /// An origin that answers every request with `200` and a cacheable `ok`.
    pub async fn ok() -> RawOrigin {
        RawOrigin::start(|_| {
            b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ncontent-length: 2\r\n\r\nok".to_vec()
        })
        .await
    }

    /// An origin that answers every request with `200` and a body of `len` bytes `b` (the
    /// response built once and leaked, so each answer is one copy).
    pub async fn sized(len: usize) -> RawOrigin {
        let body: &'static [u8] = Box::leak(
            [
                format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n").into_bytes(),
                vec![b'b'; len],
            ]
            .concat()
            .into_boxed_slice(),
        );
        RawOrigin::start(move |_| body.to_vec()).await
    }

    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    pub fn request(&self, i: usize) -> String {
        String::from_utf8_lossy(&self.requests.lock().unwrap()[i]).into_owned()
    }

    /// All bytes received on all connections.
    pub fn received(&self) -> String {
        let streams = self.streams.lock().unwrap();
        streams
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect::<Vec<_>>()
            .join("")
    }

    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

async fn serve(
    mut stream: TcpStream,
    reply: Script,
    requests: Arc<Mutex<Vec<Vec<u8>>>>,
    streams: Arc<Mutex<Vec<Vec<u8>>>>,
    index: usize,
) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        // Parse as many complete requests as the buffer holds.
        while let Some(len) = request_len(&buf) {
            let req: Vec<u8> = buf.drain(..len).collect();
            requests.lock().unwrap().push(req.clone());
            let resp = reply(&req);
            if stream.write_all(&resp).await.is_err() {
                return;
            }
        }
        let n = match tokio::time::timeout(Duration::from_secs(30), stream.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => return,
        };
        streams.lock().unwrap()[index].extend_from_slice(&chunk[..n]);
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Length of the first complete request in `buf` (head + Content-Length or chunked body).
fn request_len(buf: &[u8]) -> Option<usize> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let field = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    if field("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
        let mut pos = head_end;
        loop {
            let line_end = buf[pos..].windows(2).position(|w| w == b"\r\n")? + pos;
            let size_text = String::from_utf8_lossy(&buf[pos..line_end]);
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            pos = line_end + 2;
            if size == 0 {
                // Trailers until the blank line.
                loop {
                    let end = buf[pos..].windows(2).position(|w| w == b"\r\n")? + pos;
                    let blank = end == pos;
                    pos = end + 2;
                    if blank {
                        return Some(pos);
                    }
                }
            }
            if buf.len() < pos + size + 2 {
                return None;
            }
            pos += size + 2;
        }
    }
    let len: usize = field("content-length:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (buf.len() >= head_end + len).then_some(head_end + len)
}

/// Reads from `stream` until `text` holds `needle` (bounded: 5 s).
pub async fn read_until(stream: &mut TcpStream, text: &mut String, needle: &str) {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !text.contains(needle) {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .expect("in time")
            .expect("read");
        assert!(n > 0, "closed before {needle:?}: {text:?}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// A backend for one request on one connection that answers in two steps: `first` (an
/// interim response) as soon as the request head is in, `last` only once the test calls
/// `go.notify_one()` — so a test can see what reached the client while the backend is still
/// working. It then keeps the connection (up to 5 s) until the proxy is done with it. A
/// second fetch would never be answered.
pub struct GatedOrigin {
    pub addr: SocketAddr,
    pub go: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl GatedOrigin {
    pub async fn start(first: &'static [u8], last: &'static [u8]) -> GatedOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let go = Arc::new(tokio::sync::Notify::new());
        let origin_go = go.clone();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut text = String::new();
            read_until(&mut s, &mut text, "\r\n\r\n").await;
            s.write_all(first).await.unwrap();
            origin_go.notified().await;
            s.write_all(last).await.unwrap();
            // Keep the connection until the proxy is done with it.
            let mut rest = [0u8; 1024];
            let _ = tokio::time::timeout(Duration::from_secs(5), s.read(&mut rest)).await;
        });
        GatedOrigin { addr, go, task }
    }

    /// Stops the backend's task.
    pub fn abort(&self) {
        self.task.abort();
    }
}
