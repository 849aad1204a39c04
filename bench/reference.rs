//! The reference server for benchmarks: a minimal hyper HTTP/1.1 server that answers every
//! request with the same body from memory (`/small100`: 100 bytes; anything else: the given
//! size). No proxy can do less work per hit, so it stands for the limit of this machine
//! (issue 8). Run: `cargo run --release --example reference -- 127.0.0.1:18000 6451`.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Response, header};
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 18000)));
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(6451);
    let body = Bytes::from(vec![b'x'; size]);
    let small = Bytes::from(vec![b'x'; 100]);
    // One worker per CPU the process may run on (taskset pins it like the proxies).
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(addr).await?;
        eprintln!("reference server on {addr}, {size}-byte body, {threads} thread(s)");
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let (body, small) = (body.clone(), small.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let body = if req.uri().path() == "/small100" {
                        small.clone()
                    } else {
                        body.clone()
                    };
                    async move {
                        let mut resp = Response::new(Full::new(body));
                        resp.headers_mut().insert(
                            header::CACHE_CONTROL,
                            header::HeaderValue::from_static("public, max-age=3600"),
                        );
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}
