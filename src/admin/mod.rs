//! The admin listener: counters (`/stats`, `/stats/live`, `/metrics`) and a small index.

mod invalidate;
mod stats;

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::proxy::Proxy;

pub(crate) async fn serve(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "admin accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let proxy = proxy.clone();
                async move {
                    if invalidate::handles(&req) {
                        return Ok::<_, Infallible>(invalidate::route(&proxy, req).await);
                    }
                    Ok::<_, Infallible>(route(&proxy, req))
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn route(proxy: &Proxy, req: Request<Incoming>) -> Response<Full<Bytes>> {
    const JSON: &str = "application/json";
    let json = |v: serde_json::Value| serde_json::to_vec_pretty(&v).unwrap_or_default();
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/stats") => reply(StatusCode::OK, JSON, json(stats::flat(proxy))),
        (&Method::GET, "/stats/descriptions") => {
            reply(StatusCode::OK, JSON, json(stats::descriptions()))
        }
        (&Method::GET, "/backends") => {
            let b = &proxy.backends;
            let body = serde_json::json!({
                "default": b.default.name(),
                "backends": b.backends.iter().map(|b| b.describe()).collect::<Vec<_>>(),
                "directors": b.directors.iter().map(|d| serde_json::json!({
                    "name": d.config.name,
                    "type": d.config.kind.as_str(),
                    "healthy": crate::backend::director::Member::Director(d.clone()).healthy(),
                    "members": d.members.iter().map(|m| m.name().to_string()).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            });
            reply(StatusCode::OK, JSON, json(body))
        }
        (&Method::GET, "/stats/live") => reply(StatusCode::OK, JSON, json(stats::live(proxy))),
        (&Method::GET, "/metrics") => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            stats::prometheus(proxy).into_bytes(),
        ),
        (&Method::GET, "/") => reply(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            INDEX.as_bytes().to_vec(),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            b"not found\n".to_vec(),
        ),
    }
}

const INDEX: &str = "Shellac admin

GET /stats               counters, gauges and hit ratios (flat JSON)
GET /stats/descriptions  what each one means
GET /stats/live          values, rates, averages, hit ratios, TTFB percentiles
GET /metrics             Prometheus text format
GET /backends            health, probes, connections and counters per backend (JSON)
POST /ban                body: a ban expression, e.g. req.url ~ ^/news/
GET /bans                active bans
POST /purge[?soft=1]     body: the URL to purge (every variant)
POST /purge/tags         body: surrogate keys (space-separated)
";

fn reply(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    resp
}
