//! HTTP/2 clients for the tests: hyper's (h2c with prior knowledge), and a raw-frame client
//! that writes exactly the frames a test asks for (attacks, conformance) and reads frames back.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Resp;

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// An HTTP/2 connection through hyper's client (h2c, prior knowledge).
pub struct H2Conn {
    sender: hyper::client::conn::http2::SendRequest<Full<Bytes>>,
}

impl H2Conn {
    pub async fn open(addr: SocketAddr) -> H2Conn {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .expect("HTTP/2 handshake");
        tokio::spawn(conn);
        H2Conn { sender }
    }

    /// Sends a request (`:authority` test.example unless `authority` names one) and reads the
    /// whole response.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Resp {
        self.try_send(method, path, headers, body)
            .await
            .expect("HTTP/2 response")
    }

    pub async fn try_send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Resp, String> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("http://test.example{path}"))
            .version(http::Version::HTTP_2);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|e| e.to_string())?;
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok(Resp {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }

    pub fn sender(&self) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
        self.sender.clone()
    }
}

/// One GET over a new HTTP/2 connection.
pub async fn h2_get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Resp {
    H2Conn::open(addr)
        .await
        .send("GET", path, headers, b"")
        .await
}

pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const PRIORITY: u8 = 2;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PUSH_PROMISE: u8 = 5;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const WINDOW_UPDATE: u8 = 8;
pub const CONTINUATION: u8 = 9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
/// HEADERS carries priority fields (RFC 9113 §6.2, deprecated but still parsed).
pub const PRIORITY_FLAG: u8 = 0x20;

/// What a raw connection read next.
#[derive(Debug)]
pub enum Event {
    Frame(RawFrame),
    Closed,
    Timeout,
}

/// A frame as read back.
#[derive(Clone, Debug)]
pub struct RawFrame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl RawFrame {
    /// The error code of a RST_STREAM or GOAWAY.
    pub fn code(&self) -> Option<u32> {
        let at = match self.kind {
            RST_STREAM => 0,
            GOAWAY => 4,
            _ => return None,
        };
        let b = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Encodes a frame.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&len.to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK: one field as a literal without indexing, new name, no Huffman (RFC 7541 §6.2.2).
pub fn literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    int7(out, name.len());
    out.extend_from_slice(name);
    int7(out, value.len());
    out.extend_from_slice(value);
}

/// An HPACK string length (7-bit prefix integer, Huffman bit off).
fn int7(out: &mut Vec<u8>, mut n: usize) {
    if n < 127 {
        out.push(n as u8);
        return;
    }
    out.push(127);
    n -= 127;
    while n >= 128 {
        out.push((n % 128 + 128) as u8);
        n /= 128;
    }
    out.push(n as u8);
}

/// A header block for a request: the four pseudo-header fields, then `fields`.
pub fn request_block(method: &str, path: &str, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    literal(&mut b, b":method", method.as_bytes());
    literal(&mut b, b":scheme", b"http");
    literal(&mut b, b":authority", b"test.example");
    literal(&mut b, b":path", path.as_bytes());
    for (n, v) in fields {
        literal(&mut b, n.as_bytes(), v.as_bytes());
    }
    b
}

/// What a raw connection runs over: a TCP socket, or a TLS stream over one.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A raw HTTP/2 client connection.
pub struct Raw {
    stream: Box<dyn Io>,
    buf: Vec<u8>,
}

impl Raw {
    /// Connects, sends the preface and an empty SETTINGS frame.
    pub async fn open(addr: SocketAddr) -> Raw {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        // Tests write frames piece by piece: without this, Nagle holds each small write until
        // the previous one is acknowledged (a delayed ACK, 40 ms, per connection).
        stream.set_nodelay(true).unwrap();
        let mut hello = PREFACE.to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &[]));
        stream.write_all(&hello).await.unwrap();
        Raw::from_stream(stream)
    }

    /// A connection the test opened (and greeted, or not) itself: a socket or a TLS stream.
    pub fn from_stream(stream: impl Io + 'static) -> Raw {
        Raw {
            stream: Box::new(stream),
            buf: Vec::new(),
        }
    }

    /// Writes bytes; false when the connection is gone.
    pub async fn send(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).await.is_ok()
    }

    /// A GET on `stream` with END_STREAM.
    pub async fn get(&mut self, stream: u32, path: &str) -> bool {
        let block = request_block("GET", path, &[]);
        self.send(&frame(HEADERS, END_HEADERS | END_STREAM, stream, &block))
            .await
    }

    /// The next frame, or None when the connection closed or nothing came within `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<RawFrame> {
        match self.event(wait).await {
            Event::Frame(f) => Some(f),
            Event::Closed | Event::Timeout => None,
        }
    }

    /// The next frame, or whether the connection closed (an error or reset counts: h2spec's
    /// "connection closed") or nothing came within `wait`.
    pub async fn event(&mut self, wait: Duration) -> Event {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let f = RawFrame {
                        kind: self.buf[3],
                        flags: self.buf[4],
                        stream: u32::from_be_bytes([
                            self.buf[5],
                            self.buf[6],
                            self.buf[7],
                            self.buf[8],
                        ]) & 0x7fff_ffff,
                        payload: self.buf[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    return Event::Frame(f);
                }
            }
            let mut chunk = [0u8; 16384];
            match tokio::time::timeout_at(deadline, self.stream.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => self.buf.extend_from_slice(&chunk[..n]),
                Ok(_) => return Event::Closed,
                Err(_) => return Event::Timeout,
            }
        }
    }

    /// Reads frames until one matches `want` (returned), the connection closes or `wait`
    /// passes (None). SETTINGS are acknowledged on the way.
    pub async fn until(
        &mut self,
        wait: Duration,
        mut want: impl FnMut(&RawFrame) -> bool,
    ) -> Option<RawFrame> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let f = self.next(left).await?;
            if f.kind == SETTINGS && f.flags & ACK == 0 {
                self.send(&frame(SETTINGS, ACK, 0, &[])).await;
            }
            if want(&f) {
                return Some(f);
            }
        }
    }

    /// Reads until a GOAWAY (its error code) or the end of the connection (None).
    pub async fn goaway(&mut self, wait: Duration) -> Option<u32> {
        self.until(wait, |f| f.kind == GOAWAY)
            .await
            .and_then(|f| f.code())
    }

    /// Reads until the connection is closed (true) or `wait` passes (false).
    pub async fn closed(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        let mut chunk = [0u8; 16384];
        loop {
            match tokio::time::timeout_at(deadline, self.stream.read(&mut chunk)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => {}
                Err(_) => return false,
            }
        }
    }
}

/// Opens a connection, sends the preface, an empty SETTINGS and `flood` while reading
/// everything the server sends (without acknowledging anything) until it closes the
/// connection or `wait` passes; returns what was read.
pub async fn flood_and_read(addr: SocketAddr, flood: Vec<u8>, wait: Duration) -> Vec<u8> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move {
        let mut hello = PREFACE.to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &[]));
        let _ = wr.write_all(&hello).await;
        let _ = wr.write_all(&flood).await;
        wr
    });
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 65536];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, rd.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    writer.abort();
    seen
}

/// The frames in `bytes` (a whole stream read from the server), in order.
pub fn frames_of(mut bytes: &[u8]) -> Vec<RawFrame> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        if bytes.len() < 9 + len {
            break;
        }
        out.push(RawFrame {
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff,
            payload: bytes[9..9 + len].to_vec(),
        });
        bytes = &bytes[9 + len..];
    }
    out
}
