//! The benchmark origin: one small hyper HTTP/1.1 server that every proxy in `bench/run.sh`
//! fetches from, so all of them see byte-identical responses (issue 8).
//! Run: `cargo run --release --example origin -- 127.0.0.1:18080`.
//!
//! Routes (bodies are built once at start-up and served from memory):
//! - `/hit6k`, `/small100`, `/big21m`: 6451 B, 100 B, 22020096 B, `public, max-age=3600`;
//! - `/pass50k`: 51200 B, `no-store, private`;
//! - `/slow/pass50k`: the same after a 2 ms delay (an application server's think time);
//! - `/obj/...`: any path, 100 B, `public, max-age=3600` (miss storm, object count);
//! - `/obj6k/...`: any path, 6451 B, `public, max-age=3600` (RSS against the cache size);
//! - `/cold/...`: 6451 B, `public, max-age=3600`, after a 200 ms delay (coalescing);
//! - `/__count/cold/...`: how many requests `/cold/...` has received, as a decimal number.
//!
//! Every response carries `ETag` and `Last-Modified` like a static-file server would, so the
//! stored header block is a realistic size.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

const CACHEABLE: &str = "public, max-age=3600";
const UNCACHEABLE: &str = "no-store, private";

struct Bodies {
    b6k: Bytes,
    b100: Bytes,
    b50k: Bytes,
    b21m: Bytes,
}

fn body(len: usize) -> Bytes {
    // Not all one byte, so nothing along the way can shortcut it.
    Bytes::from((0..len).map(|i| b'a' + (i % 26) as u8).collect::<Vec<u8>>())
}

fn main() -> std::io::Result<()> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 18080)));
    let bodies = Arc::new(Bodies {
        b6k: body(6451),
        b100: body(100),
        b50k: body(51200),
        b21m: body(22_020_096),
    });
    // Requests per `/cold/...` path: the coalescing workload checks that exactly one arrived.
    let counts: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(addr).await?;
        eprintln!("bench origin on {addr}");
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(conn) => conn,
                // EMFILE and friends: back off instead of spinning; the run goes on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let (bodies, counts) = (bodies.clone(), counts.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let (bodies, counts) = (bodies.clone(), counts.clone());
                    async move {
                        Ok::<_, Infallible>(answer(req.uri().path(), &bodies, &counts).await)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

async fn answer(
    path: &str,
    bodies: &Bodies,
    counts: &Mutex<HashMap<String, u64>>,
) -> Response<Full<Bytes>> {
    let (body, cache_control) = match path {
        "/hit6k" => (bodies.b6k.clone(), CACHEABLE),
        "/small100" => (bodies.b100.clone(), CACHEABLE),
        "/big21m" => (bodies.b21m.clone(), CACHEABLE),
        "/pass50k" => (bodies.b50k.clone(), UNCACHEABLE),
        "/slow/pass50k" => {
            tokio::time::sleep(Duration::from_millis(2)).await;
            (bodies.b50k.clone(), UNCACHEABLE)
        }
        p if p.starts_with("/obj/") => (bodies.b100.clone(), CACHEABLE),
        p if p.starts_with("/obj6k/") => (bodies.b6k.clone(), CACHEABLE),
        // /sized/N/...: an N-byte body (at most the 21 MB body's length).
        p if p.starts_with("/sized/") => {
            let n = p["/sized/".len()..]
                .split('/')
                .next()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0)
                .min(bodies.b21m.len());
            (bodies.b21m.slice(..n), CACHEABLE)
        }
        p if p.starts_with("/cold/") => {
            if let Ok(mut counts) = counts.lock() {
                *counts.entry(p.to_owned()).or_default() += 1;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            (bodies.b6k.clone(), CACHEABLE)
        }
        p if p.starts_with("/__count/") => {
            let n = counts
                .lock()
                .ok()
                .and_then(|c| c.get(&p["/__count".len()..]).copied())
                .unwrap_or(0);
            let mut resp = Response::new(Full::new(Bytes::from(n.to_string())));
            resp.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static(UNCACHEABLE));
            return resp;
        }
        _ => {
            let mut resp = Response::new(Full::new(Bytes::from_static(b"not found\n")));
            *resp.status_mut() = StatusCode::NOT_FOUND;
            return resp;
        }
    };
    let mut resp = Response::new(Full::new(body));
    let h = resp.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(
        header::LAST_MODIFIED,
        HeaderValue::from_static("Sun, 22 Nov 2026 00:00:00 GMT"),
    );
    h.insert(header::ETAG, HeaderValue::from_static("\"6a1f-5c2e\""));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    resp
}
