//! `POST /backends/NAME/health` (body `sick`, `healthy` or `auto`): the operator's word on a
//! backend's health, as Varnish's `backend.set_health` — maintenance without editing the
//! configuration. `NAME` may hold `*` (any run of characters) to set several at once.

use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use super::reply::{JSON, json, reply};
use crate::backend::health::Forced;
use crate::proxy::Proxy;

/// Whether this module answers `req`.
pub(super) fn handles(req: &Request<Incoming>) -> bool {
    target(req.uri().path()).is_some() && req.method() == Method::POST
}

/// The backend name (or pattern) in `/backends/NAME/health`.
fn target(path: &str) -> Option<&str> {
    path.strip_prefix("/backends/")?
        .strip_suffix("/health")
        .filter(|n| !n.is_empty() && !n.contains('/'))
}

pub(super) async fn route(
    proxy: &Proxy,
    req: Request<Incoming>,
) -> Response<super::reply::AdminBody> {
    let pattern = target(req.uri().path()).unwrap_or_default().to_string();
    let body = match Limited::new(req.into_body(), 1024).collect().await {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).to_string(),
        Err(_) => String::new(),
    };
    let Some(forced) = Forced::parse(&body) else {
        return reply(
            StatusCode::BAD_REQUEST,
            JSON,
            json(serde_json::json!({
                "error": format!("the body must be sick, healthy or auto, not {:?}", body.trim())
            })),
        );
    };
    let mut set = Vec::new();
    for b in &proxy.backends.backends {
        if matches(&pattern, b.name()) {
            b.health.set_forced(forced);
            tracing::warn!(
                backend = b.name(),
                "health set to {} by the admin listener",
                forced.as_str()
            );
            set.push(serde_json::json!({
                "name": b.name(),
                "admin_health": forced.as_str(),
                "healthy": b.health.is_healthy(),
            }));
        }
    }
    if set.is_empty() {
        return reply(
            StatusCode::NOT_FOUND,
            JSON,
            json(serde_json::json!({
                "error": format!("no backend named {pattern:?} (GET /backends lists them)")
            })),
        );
    }
    reply(
        StatusCode::OK,
        JSON,
        json(serde_json::json!({ "backends": set })),
    )
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
fn matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    if !name.ends_with(last) {
        return false;
    }
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_patterns() {
        assert_eq!(target("/backends/web1/health"), Some("web1"));
        assert_eq!(target("/backends//health"), None);
        assert_eq!(target("/backends/a/b/health"), None);
        assert!(matches("web1", "web1") && !matches("web1", "web10"));
        assert!(matches("web*", "web10") && matches("*", "x") && matches("a*c*e", "abcde"));
        assert!(!matches("a*c", "ab") && !matches("*x", "y"));
    }
}
