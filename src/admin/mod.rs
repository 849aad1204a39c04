//! The admin listener: counters (`/stats`, `/stats/live`, `/metrics`), live tools, cache
//! inspection and invalidation, reload, the dashboard, and a small index (`/help`).

mod acme;
mod dashboard;
pub mod fleet;
mod health;
mod inspect;
mod invalidate;
mod live;
mod metrics;
mod reply;
mod stats;

use std::convert::Infallible;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::proxy::Proxy;
use crate::reload::Live;
pub use reply::AdminBody;
use reply::{JSON, TEXT, json, reply};

pub(crate) async fn serve(
    listener: TcpListener,
    live: Arc<Live>,
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
        let live = live.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let live = live.clone();
                async move { Ok::<_, Infallible>(handle(&live, req).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(live: &Arc<Live>, req: Request<Incoming>) -> Response<AdminBody> {
    let proxy = live.load();
    // The dashboard's page and script hold no data: they load without a token and the page
    // asks for one when the API answers 401.
    let asset = req.method() == Method::GET && matches!(req.uri().path(), "/" | "/dashboard.js");
    if let Some(token) = &proxy.config.server.admin_token
        && !asset
        && !authorized(&req, token)
    {
        let mut resp = reply(
            StatusCode::UNAUTHORIZED,
            TEXT,
            b"admin token required: Authorization: Bearer TOKEN\n".to_vec(),
        );
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"shellac\""),
        );
        return resp;
    }
    if invalidate::handles(&req) {
        return invalidate::route(&proxy, req).await;
    }
    if health::handles(&req) {
        return health::route(&proxy, req).await;
    }
    if acme::handles(&req) {
        return acme::route(&proxy, req);
    }
    match (req.method(), req.uri().path()) {
        (&Method::POST, "/reload") => reload(live).await,
        (&Method::POST, "/upgrade") => upgrade(live).await,
        (&Method::GET, "/log/stream") => live::log_stream(&proxy, req.uri()),
        (&Method::GET, "/top") => live::top(&proxy, req.uri()),
        (&Method::GET, "/cache") => inspect::route(&proxy, req.uri()).await,
        (&Method::GET, "/fleet") => match fleet::describe(&proxy).await {
            Some(v) => reply(StatusCode::OK, JSON, json(v)),
            None => reply(
                StatusCode::NOT_FOUND,
                TEXT,
                b"no fleet: [storage.shared] is not configured\n".to_vec(),
            ),
        },
        (&Method::GET, "/tls") => reply(
            StatusCode::OK,
            JSON,
            json(live.tls().describe(&live.listening_tls())),
        ),
        (&Method::GET, "/metrics") => reply(
            StatusCode::OK,
            metrics::CONTENT_TYPE,
            metrics::encode(&proxy, &live.tls().certificates()).into_bytes(),
        ),
        (&Method::GET, "/api/dashboard") => {
            let site = live::query(req.uri())
                .remove("site")
                .filter(|s| !s.is_empty());
            let mut data = dashboard::data(&proxy, site.as_deref());
            data["tls"] = dashboard::tls(&proxy, &live.tls().certificates());
            reply(StatusCode::OK, JSON, json(data))
        }
        _ => route(&proxy, req),
    }
}

/// Constant-time comparison of the bearer token, so timing does not reveal a prefix.
fn authorized(req: &Request<Incoming>, token: &str) -> bool {
    let Some(given) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    let (a, b) = (given.trim().as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `POST /upgrade`: starts the binary at this process's path and hands it the listening
/// sockets and the disk tier (`crate::upgrade`); 200 once it serves (this process then
/// drains and exits), 500 with the reason when it could not (this process serves on).
async fn upgrade(live: &Arc<Live>) -> Response<AdminBody> {
    match crate::upgrade::perform(live.clone()).await {
        Ok(u) => reply(
            StatusCode::OK,
            JSON,
            json(serde_json::json!({
                "ok": true,
                "old_pid": u.old_pid,
                "new_pid": u.new_pid,
                "binary": u.binary.display().to_string(),
            })),
        ),
        Err(e) => {
            tracing::error!("upgrade failed, this process serves on: {e}");
            reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                JSON,
                json(serde_json::json!({ "ok": false, "error": e })),
            )
        }
    }
}

/// `POST /reload`: 200 with what changed, or 400 with every error (the old config runs on).
async fn reload(live: &Arc<Live>) -> Response<AdminBody> {
    match live.reload().await {
        Ok(r) => reply(
            StatusCode::OK,
            JSON,
            json(serde_json::json!({
                "ok": true,
                "generation": r.generation,
                "changes": r.changes,
            })),
        ),
        Err(errors) => {
            tracing::warn!("reload rejected, the running configuration is unchanged:");
            for e in &errors {
                tracing::warn!("  {e}");
            }
            reply(
                StatusCode::BAD_REQUEST,
                JSON,
                json(serde_json::json!({
                    "ok": false,
                    "generation": live.generation(),
                    "errors": errors,
                })),
            )
        }
    }
}

fn route(proxy: &Proxy, req: Request<Incoming>) -> Response<AdminBody> {
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
        (&Method::GET, "/vsl") => vsl(proxy, req.uri()),
        (&Method::GET, "/stats/live") => reply(StatusCode::OK, JSON, json(stats::live(proxy))),
        (&Method::GET, "/sites") => reply(StatusCode::OK, JSON, json(stats::sites(proxy))),
        (&Method::GET, "/storages") => reply(StatusCode::OK, JSON, json(stats::storages(proxy))),
        (&Method::GET, "/") => reply(
            StatusCode::OK,
            "text/html; charset=utf-8",
            dashboard::INDEX_HTML.as_bytes().to_vec(),
        ),
        (&Method::GET, "/dashboard.js") => reply(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            dashboard::SCRIPT_JS.as_bytes().to_vec(),
        ),
        (&Method::GET, "/help") => reply(StatusCode::OK, TEXT, INDEX.as_bytes().to_vec()),
        (_, "/reload") => reply(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            b"use POST /reload\n".to_vec(),
        ),
        _ => reply(StatusCode::NOT_FOUND, TEXT, b"not found\n".to_vec()),
    }
}

/// `GET /vsl?after=N`: the Varnish-style records kept (`log.vsl_records`) after sequence
/// number N, one a line; the field `Vsl-Last` is the last one's number (N when none is newer),
/// for the next call's `after`.
fn vsl(proxy: &Proxy, uri: &http::Uri) -> Response<AdminBody> {
    let after = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|kv| kv.strip_prefix("after="))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let (text, last) = proxy.shared.vsl.since(after);
    let mut r = reply(StatusCode::OK, TEXT, text.into_bytes());
    if let Ok(v) = http::HeaderValue::from_str(&last.to_string()) {
        r.headers_mut().insert("vsl-last", v);
    }
    r
}

const INDEX: &str = "Shellac admin

GET /                    web dashboard (live charts; assets built into the binary)
GET /api/dashboard       the JSON it polls every second
GET /stats               counters, gauges and hit ratios (flat JSON)
GET /stats/descriptions  what each one means
GET /stats/live          values, rates, averages, hit ratios, TTFB percentiles
GET /metrics             Prometheus / OpenMetrics text format
GET /backends            health, probes, connections and counters per backend (JSON)
POST /backends/NAME/health  body: sick, healthy or auto (NAME may hold *): the operator's word
GET /tls                 TLS listeners and each certificate's names, key and expiry (JSON)
GET /sites               every [[site]]'s requests, hits, misses, passes, rewrites, hit ratio, cache bytes and share (JSON)
GET /storages            the memory tier's storages (s0, Transient, [[storage.named]]): bytes, size, free, objects, stored, evicted (JSON)
GET /vsl?after=N         Varnish-style records kept by log.vsl_records, after number N
GET /log/stream          live transactions, JSON lines (?url=REGEX&status=5xx&miss=1&backend=NAME&site=NAME)
GET /top                 rankings (?by=url|host|backend|ua|site&sort=requests|misses|bytes&window=60&n=20&site=NAME)
POST /ban                body: a ban expression, e.g. req.url ~ ^/news/
GET /bans                active bans
POST /purge[?soft=1]     body: the URL to purge (every variant)
POST /purge/tags         body: surrogate keys (space-separated)
GET /cache?url=URL       what is cached for a URL: variants, tiers, TTL left, size, tags
                         (URL = http://HOST/path, or /path with &host=HOST; percent-encoded)
GET /fleet               the shared tier ([storage.shared]) and every node's invalidation lag
POST /reload             re-read the configuration file and swap it in (JSON result)
GET /acme                ACME certificates: names, state, expiry, next renewal, last error
POST /acme/renew[?name=N] renew ACME certificates now (all, or the one covering N)
";
