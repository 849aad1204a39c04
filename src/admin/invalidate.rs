//! Invalidation on the admin listener: `POST /ban` (body: expression), `GET /bans`,
//! `POST /purge` (body: a URL; `?soft=1` marks stale), `POST /purge/tags` (body: tags).

use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use super::reply::reply;
use crate::cache::CacheKey;
use crate::cache::ban::BanError;
use crate::cache::shared::feed::{self, Invalidation};
use crate::proxy::Proxy;

/// Largest request body the admin endpoints read.
const MAX_BODY: usize = 64 * 1024;

const JSON: &str = "application/json";

/// Whether this module answers `req`.
pub(super) fn handles(req: &Request<Incoming>) -> bool {
    matches!(
        (req.method(), req.uri().path()),
        (&Method::POST, "/ban")
            | (&Method::GET, "/bans")
            | (&Method::POST, "/purge")
            | (&Method::POST, "/purge/tags")
    )
}

pub(super) async fn route(
    proxy: &Proxy,
    req: Request<Incoming>,
) -> Response<super::reply::AdminBody> {
    let json = |status: StatusCode, v: serde_json::Value| {
        reply(
            status,
            JSON,
            serde_json::to_vec_pretty(&v).unwrap_or_default(),
        )
    };
    if req.method() == Method::GET {
        let bans: Vec<serde_json::Value> = proxy
            .cache
            .bans
            .list()
            .into_iter()
            .map(|(id, age, expr)| serde_json::json!({"id": id, "age_seconds": age, "expr": expr}))
            .collect();
        return json(StatusCode::OK, serde_json::json!({ "bans": bans }));
    }
    let path = req.uri().path().to_string();
    let soft = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "soft=1"));
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).trim().to_string(),
        Err(_) => {
            return json(
                StatusCode::PAYLOAD_TOO_LARGE,
                serde_json::json!({"error": "body over 64 KiB"}),
            );
        }
    };
    let counters = &proxy.counters;
    match path.as_str() {
        // 200 only once the ban is durable (with a disk tier: the synced ban list holds it).
        "/ban" => match proxy.cache.ban(&body).await {
            Ok(ban) => {
                counters.ban_added.inc();
                let mut out = serde_json::json!({"id": ban.id, "expr": ban.expr});
                if let Some(fleet) = fleet(proxy, Invalidation::Ban(ban.expr.clone())).await {
                    out["fleet"] = fleet;
                }
                json(StatusCode::OK, out)
            }
            Err(e @ BanError::Invalid(_)) => json(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": e.to_string()}),
            ),
            Err(e @ BanError::NotDurable(_)) => {
                counters.ban_added.inc();
                let mut out = serde_json::json!({"error": e.to_string(), "applied": true});
                // Applied here: the fleet gets it too.
                if let Some(fleet) = fleet(proxy, Invalidation::Ban(body.trim().to_string())).await
                {
                    out["fleet"] = fleet;
                }
                json(StatusCode::SERVICE_UNAVAILABLE, out)
            }
            Err(e @ (BanError::Full(_) | BanError::PersistFull(_))) => json(
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"error": e.to_string(), "applied": false}),
            ),
        },
        "/purge" => {
            let Some(key) = url_key(&body) else {
                return json(
                    StatusCode::BAD_REQUEST,
                    serde_json::json!({"error": "body must be an absolute http(s) URL"}),
                );
            };
            let (n, inv) = if soft {
                (
                    proxy.cache.soft_purge(&key),
                    Invalidation::Soft(key.clone()),
                )
            } else {
                (proxy.cache.purge(&key), Invalidation::Purge(key.clone()))
            };
            counters.purge_req.inc();
            counters.purge_objects.add(n as u64);
            let mut out = serde_json::json!({"purged": n, "url": key.to_string(), "soft": soft});
            if let Some(fleet) = fleet(proxy, inv).await {
                out["fleet"] = fleet;
            }
            json(StatusCode::OK, out)
        }
        _ => {
            let tags: Vec<String> = body.split_ascii_whitespace().map(str::to_string).collect();
            if tags.is_empty() {
                return json(
                    StatusCode::BAD_REQUEST,
                    serde_json::json!({"error": "body must list tags"}),
                );
            }
            let n = proxy.cache.purge_tags(&tags);
            counters.purge_req.inc();
            counters.purge_objects.add(n as u64);
            let mut out = serde_json::json!({"purged": n, "tags": tags});
            if let Some(fleet) = fleet(proxy, Invalidation::Tags(tags.clone())).await {
                out["fleet"] = fleet;
            }
            json(StatusCode::OK, out)
        }
    }
}

/// With a fleet (`[storage.shared]`): sends an invalidation applied here to every node and
/// says what became of it (`fleet` in the answer).
async fn fleet(proxy: &Proxy, inv: Invalidation) -> Option<serde_json::Value> {
    let shared = proxy.cache.shared.as_ref()?;
    Some(feed::broadcast(shared, inv).await.json())
}

/// `http://host[:port]/path?query` → the cache key it is stored under.
fn url_key(url: &str) -> Option<CacheKey> {
    let uri: http::Uri = url.parse().ok()?;
    let authority = uri.authority()?;
    Some(CacheKey::new(
        authority.as_str(),
        uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"),
    ))
}
