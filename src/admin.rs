//! The admin listener: `GET /stats` (flat JSON of counters and gauges) and a small index.

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
use crate::stats::{Counters, GAUGES};

pub(crate) async fn serve(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(_) => continue,
            },
            _ = shutdown.changed() => return,
        };
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let proxy = proxy.clone();
                async move { Ok::<_, Infallible>(route(&proxy, req)) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn route(proxy: &Proxy, req: Request<Incoming>) -> Response<Full<Bytes>> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/stats") => {
            let map: serde_json::Map<String, serde_json::Value> = proxy
                .stats()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.into()))
                .collect();
            let body = serde_json::to_vec_pretty(&map).unwrap_or_default();
            reply(StatusCode::OK, "application/json", body)
        }
        (&Method::GET, "/stats/descriptions") => {
            let map: serde_json::Map<String, serde_json::Value> = Counters::DESCRIPTIONS
                .iter()
                .chain(GAUGES)
                .map(|(k, d)| (k.to_string(), (*d).into()))
                .collect();
            reply(StatusCode::OK, "application/json", serde_json::to_vec_pretty(&map).unwrap_or_default())
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
            reply(StatusCode::OK, "application/json", serde_json::to_vec_pretty(&body).unwrap_or_default())
        }
        (&Method::GET, "/") => reply(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            b"Shellac admin\n\nGET /stats               counters and gauges (JSON)\nGET /stats/descriptions  what each one means\nGET /backends            health, probes, connections and counters per backend (JSON)\n".to_vec(),
        ),
        _ => reply(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", b"not found\n".to_vec()),
    }
}

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
