//! Clients: a response as one saw it ([`Resp`]), a keep-alive connection ([`Conn`]), one-shot
//! requests, raw bytes written and read ([`raw`], [`exchange`]), a slow reader.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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

/// Whether `cache_status` says a hit whose `ttl=` is `full` seconds less at most `slack`: a
/// loaded CI machine may take a few seconds between the store and the hit, so a test that
/// wants "the TTL came from this field" must not ask for the exact second.
pub fn hit_ttl_near(cache_status: &str, full: i64, slack: i64) -> bool {
    let ttl = cache_status
        .split("hit; ttl=")
        .nth(1)
        .and_then(|t| t.split(';').next())
        .and_then(|t| t.trim().parse::<i64>().ok());
    matches!(ttl, Some(t) if t <= full && t >= full - slack)
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
