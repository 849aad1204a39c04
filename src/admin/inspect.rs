//! `GET /cache?url=URL[&host=HOST]`: what the cache holds for one URL — every variant, the
//! tiers holding it, status, size, age, TTL / grace / keep / stale-if-error left, tags,
//! validators. An inspection is not a hit: nothing is promoted, marked or counted.

use std::time::Instant;

use http::{Response, StatusCode, Uri};
use serde_json::{Value, json};

use super::reply::{AdminBody, JSON, reply};
use crate::cache::inspect::Inspection;
use crate::cache::{CacheKey, Object};
use crate::proxy::Proxy;

pub(super) async fn route(proxy: &Proxy, uri: &Uri) -> Response<AdminBody> {
    let q = super::live::query(uri);
    let key = match key_of(
        q.get("url").map(String::as_str),
        q.get("host").map(String::as_str),
    ) {
        Ok(key) => key,
        Err(problem) => {
            return reply(
                StatusCode::BAD_REQUEST,
                JSON,
                super::reply::json(json!({ "error": problem })),
            );
        }
    };
    let seen = proxy.cache.inspect(&key).await;
    let now = Instant::now();
    let mut body = describe(proxy, &seen, now);
    let status = if seen.is_empty() {
        body["error"] = json!("not cached");
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    reply(status, JSON, super::reply::json(body))
}

/// The cache key for `url` (absolute `http://host/path`, or a path with `host`), with the
/// target normalised the way requests are (`http::target`), so what is asked for is what a
/// request would look up.
fn key_of(url: Option<&str>, host: Option<&str>) -> Result<CacheKey, String> {
    let url = url.ok_or("give url=/path&host=HOST or url=http://HOST/path")?;
    let (authority, path) = if url.starts_with('/') {
        let host = host.ok_or("a path needs host=HOST (the Host header requests carry)")?;
        (host.to_string(), url.to_string())
    } else {
        let uri: Uri = url
            .parse()
            .map_err(|e| format!("url {url:?} is not a URL: {e}"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(format!("url {url:?} must be http(s)://HOST/path or /path"));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| format!("url {url:?} has no host"))?;
        let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        (host.unwrap_or(authority.as_str()).to_string(), path.into())
    };
    if authority.is_empty() || authority.bytes().any(|b| b <= b' ' || b == b'/') {
        return Err(format!("host {authority:?} is not a host"));
    }
    let path = crate::http::target::normalise(&path).unwrap_or(path);
    Ok(CacheKey::new(&authority, &path))
}

fn describe(proxy: &Proxy, seen: &Inspection, now: Instant) -> Value {
    let variants: Vec<Value> = seen
        .variants
        .iter()
        .map(|v| {
            let copies: Vec<Value> = v
                .copies
                .iter()
                .map(|(tier, o)| {
                    let mut c = copy(o, now);
                    c["tier"] = json!(tier);
                    if *tier == "shared" {
                        // Its metadata only: chunks are not read for a look.
                        c["body_in"] = json!("shared");
                        c["hit_in_memory"] = Value::Null;
                    }
                    c["banned"] = json!(proxy.cache.bans.is_banned(&v.key, o));
                    c
                })
                .collect();
            let selection = v
                .copies
                .first()
                .map(|(_, o)| o.vary_selection())
                .unwrap_or_default();
            json!({
                "variant": format!("{:016x}", v.key.variant),
                "selection": selection
                    .into_iter()
                    .map(|(n, v)| (n, v.map(Value::from).unwrap_or(Value::Null)))
                    .collect::<serde_json::Map<_, _>>(),
                "tiers": v.tiers(),
                "copies": copies,
            })
        })
        .collect();
    json!({
        "key": {
            "host": seen.key.host(),
            "path_and_query": seen.key.path_and_query(),
            "url": seen.key.to_string(),
        },
        "vary": seen.vary.iter().map(|n| n.as_str()).collect::<Vec<_>>(),
        "hit_for_miss": seen.hit_for_miss,
        "shared": match seen.shared {
            None => Value::Null,
            Some(true) => json!("reachable"),
            Some(false) => json!("unreachable"),
        },
        "variants": variants,
    })
}

/// One tier's copy of a variant. Durations in whole seconds (rounded down), like `Age`.
fn copy(o: &Object, now: Instant) -> Value {
    let text = |v: Option<&str>| v.map(Value::from).unwrap_or(Value::Null);
    json!({
        "status": o.status_code(),
        "state": o.phase(now).as_str(),
        "header_bytes": o.header_bytes(),
        "body_bytes": o.body_bytes(),
        "size_bytes": o.header_bytes() + o.body_bytes(),
        "body_in": o.body_location(),
        "age_seconds": o.age(now).as_secs(),
        "ttl_seconds": o.ttl().as_secs(),
        "ttl_left_seconds": o.remaining_ttl(now).as_secs(),
        "grace_left_seconds": o.grace_left(now).as_secs(),
        "keep_left_seconds": o.keep_left(now).as_secs(),
        "stale_if_error_left_seconds": o.stale_if_error_left(now).map(|d| d.as_secs()),
        "tags": o.tags(),
        "etag": text(o.etag()),
        "last_modified": text(o.last_modified()),
        "hit_in_memory": o.was_hit(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_from_absolute_urls_and_paths() {
        let k = key_of(Some("http://Example.com:80/a%7eb?x=1"), None).unwrap();
        assert_eq!((k.host(), k.path_and_query()), ("example.com", "/a~b?x=1"));
        let k = key_of(Some("/p"), Some("www.example.com")).unwrap();
        assert_eq!((k.host(), k.path_and_query()), ("www.example.com", "/p"));
        assert!(key_of(Some("/p"), None).is_err());
        assert!(key_of(None, Some("h")).is_err());
        assert!(key_of(Some("ftp://h/p"), None).is_err());
        assert!(key_of(Some("/p"), Some("a b")).is_err());
    }
}
