//! The scripted origin: what it saw of each request ([`Seen`]), how it answers ([`Reply`],
//! [`ReplyBody`]: whole, generated, gated, stalled), and the server itself ([`Origin`]).

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
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};

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
