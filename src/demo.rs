//! `shellac demo`: a small built-in origin plus the proxy in front of it, so a newcomer sees a
//! miss and then a hit within a minute.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long the demo origin takes per response, so hits are visibly faster.
pub const ORIGIN_DELAY: Duration = Duration::from_millis(200);

/// Starts the demo origin on `addr` (port 0 for any) and returns its address.
pub async fn start_origin(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let hits = Arc::new(AtomicU64::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let hits = hits.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let n = hits.fetch_add(1, Ordering::Relaxed) + 1;
                    async move { Ok::<_, Infallible>(origin_response(req, n).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

async fn origin_response(req: Request<Incoming>, n: u64) -> Response<Full<Bytes>> {
    tokio::time::sleep(ORIGIN_DELAY).await;
    let (cache_control, text) = match req.uri().path() {
        "/private" => (
            "private",
            "This page is private: Shellac passes it through and never stores it.\n",
        ),
        "/no-store" => ("no-store", "This page says no-store: never cached.\n"),
        _ => (
            "public, max-age=60",
            "Hello from the demo origin. This page may be cached for 60 seconds.\n",
        ),
    };
    let body = format!("{text}origin response #{n} for {}\n", req.uri().path());
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static(cache_control),
    );
    h.insert(
        header::DATE,
        header::HeaderValue::from_str(&httpdate::fmt_http_date(std::time::SystemTime::now()))
            .expect("date"),
    );
    resp
}

/// Sends one GET and returns (status line, Cache-Status, Age, elapsed).
pub async fn probe(
    addr: SocketAddr,
    path: &str,
) -> std::io::Result<(String, String, String, Duration)> {
    let started = std::time::Instant::now();
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: demo.local\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf);
    let mut lines = text.lines();
    let status = lines.next().unwrap_or("").to_string();
    let field = |name: &str| {
        text.lines()
            .take_while(|l| !l.is_empty())
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "-".into())
    };
    Ok((
        status,
        field("cache-status"),
        field("age"),
        started.elapsed(),
    ))
}
