//! The backend side of a request: build the backend request, send it, decide storage, and fill
//! the busy object (the second state machine: head → stream → store | trim | fail).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, StatusCode, Version};
use http_body_util::BodyExt;

use super::Proxy;
use super::body::ResponseBody;
use super::deliver;
use super::fsm::{FetchMode, Step, Txn};
use crate::backend::{BackendBody, RequestBody};
use crate::cache::busy::{BusyHead, BusyObject, LeaderGuard};
use crate::cache::policy::{self, NoCacheReason, StorePlan};
use crate::cache::{Body, CacheKey, Object, VarySelection};
use crate::http::headers;

/// Request fields that would make the backend answer something other than the full object.
const CONDITIONAL: [HeaderName; 6] = [
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_MATCH,
    header::IF_UNMODIFIED_SINCE,
    header::IF_RANGE,
    header::RANGE,
];

/// Bodies up to this size are stored as one contiguous chunk; larger ones in pieces this big.
const STORE_CHUNK: usize = 64 * 1024;

/// Sends the backend request for `mode` and turns the answer into the next step.
pub(super) async fn fetch(txn: &mut Txn<'_>, mode: FetchMode) -> Step {
    let for_cache = !matches!(mode, FetchMode::Pass(_));
    let bereq = build_request(txn, for_cache);
    let request_time = SystemTime::now();
    let resp = match txn.backend.send(bereq).await {
        Ok(resp) => resp,
        Err(e) => {
            tracing::warn!(backend = txn.backend.name(), error = %e, "backend fetch failed");
            if let FetchMode::Miss(guard) = &mode {
                guard.object().fail_with(e.status(), e.as_str());
            }
            return Step::Synth(e.status(), e.as_str());
        }
    };
    let response_time = SystemTime::now();
    let stored_at = Instant::now();
    let (mut parts, body) = resp.into_parts();
    headers::strip_hop_by_hop(&mut parts.headers);

    let (guard, detail) = match mode {
        FetchMode::Pass(reason) => {
            let fwd = if reason == NoCacheReason::Method {
                "method"
            } else {
                "request"
            };
            let status = format!("shellac; fwd={fwd}; detail={}", reason.as_str());
            let body = if txn.head_only {
                ResponseBody::empty()
            } else {
                ResponseBody::backend(body)
            };
            return Step::Deliver(deliver::respond(parts.status, parts.headers, body, &status));
        }
        FetchMode::Miss(guard) => (Some(guard), String::new()),
        FetchMode::Alone(why) => (None, format!("; detail={why}")),
    };
    let Some(key) = txn.key.clone() else {
        return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
    };
    let proxy = txn.proxy;
    let content_length = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let plan = policy::evaluate(
        parts.status,
        &parts.headers,
        request_time,
        response_time,
        &proxy.config.cache,
    )
    .and_then(|plan| match content_length {
        Some(len) if len > proxy.max_object_size => Err(NoCacheReason::TooLarge),
        _ => Ok(plan),
    });
    let plan = match plan {
        Ok(plan) => plan,
        Err(reason) => {
            proxy.counters.cache_uncacheable.inc();
            proxy
                .cache
                .mark_hit_for_miss(key, proxy.config.cache.hit_for_miss_ttl.0);
            if let Some(guard) = guard {
                guard.object().abandon();
            }
            let status = format!("shellac; fwd=miss; detail={}", reason.as_str());
            let body = if txn.head_only {
                ResponseBody::empty()
            } else {
                ResponseBody::backend(body)
            };
            return Step::Deliver(deliver::respond(parts.status, parts.headers, body, &status));
        }
    };

    for name in &plan.strip {
        parts.headers.remove(name);
    }
    parts.headers.remove(header::AGE);
    let vary: VarySelection = plan
        .vary
        .iter()
        .map(|name| (name.clone(), txn.req.headers.get(name).cloned()))
        .collect();
    let mut head_headers = parts.headers.clone();
    if plan.initial_age.as_secs() > 0 {
        head_headers.insert(header::AGE, HeaderValue::from(plan.initial_age.as_secs()));
    }
    let busy = guard
        .as_ref()
        .map(|g| g.object().clone())
        .unwrap_or_else(BusyObject::new);
    busy.set_head(BusyHead {
        status: parts.status,
        headers: head_headers.clone(),
        content_length,
        vary: vary.clone(),
    });
    // Register our reader before the fill starts so no chunk can be trimmed before we read it.
    let reader = (!txn.head_only).then(|| busy.reader());
    if guard.is_none() {
        proxy.cache.clear_hit_for_miss(&key);
    }
    let fill = Fill {
        status: parts.status,
        headers: parts.headers,
        vary,
        plan,
        stored_at,
    };
    tokio::spawn(fill.run(proxy.clone(), key, busy, guard, body));
    let body = match reader {
        Some(r) => ResponseBody::busy(r, content_length),
        None => ResponseBody::empty(),
    };
    Step::Deliver(deliver::respond(
        parts.status,
        head_headers,
        body,
        &format!("shellac; fwd=miss; stored{detail}"),
    ))
}

/// The backend request: hop-by-hop removed, `X-Forwarded-For` and `Via` added; for cache
/// fills a plain GET without conditionals or ranges, so the whole object comes back.
fn build_request(txn: &mut Txn<'_>, for_cache: bool) -> Request<RequestBody> {
    let mut headers: HeaderMap = txn.req.headers.clone();
    headers::strip_hop_by_hop(&mut headers);
    headers.remove(header::EXPECT);
    headers::append_forwarded_for(&mut headers, txn.client.ip());
    headers::append_via(&mut headers);
    if let Some(authority) = txn.req.uri.authority() {
        if let Ok(v) = HeaderValue::from_str(authority.as_str()) {
            headers.insert(header::HOST, v);
        }
    } else if !headers.contains_key(header::HOST)
        && let Ok(v) = HeaderValue::from_str(&txn.backend.address())
    {
        headers.insert(header::HOST, v);
    }
    let method = if for_cache {
        for name in CONDITIONAL {
            headers.remove(name);
        }
        http::Method::GET
    } else {
        txn.req.method.clone()
    };
    let body = match (for_cache, txn.body.take()) {
        (false, Some(b)) => RequestBody::stream(b, txn.proxy.counters.clone()),
        _ => RequestBody::empty(),
    };
    let path = txn
        .req
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let mut req = Request::new(body);
    *req.method_mut() = method;
    *req.uri_mut() = path.parse().unwrap_or_else(|_| http::Uri::from_static("/"));
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;
    req
}

/// What the fill needs to build the cached object once the body is complete.
struct Fill {
    status: StatusCode,
    headers: HeaderMap,
    vary: VarySelection,
    plan: StorePlan,
    stored_at: Instant,
}

impl Fill {
    /// Streams the backend body into the busy object, then stores it. Runs as its own task so
    /// the cache fill completes even if the client that started it goes away.
    async fn run(
        self,
        proxy: Arc<Proxy>,
        key: CacheKey,
        busy: Arc<BusyObject>,
        mut guard: Option<LeaderGuard>,
        mut body: BackendBody,
    ) {
        let mut total: u64 = 0;
        let mut storing = true;
        loop {
            if !busy.writable().await {
                tracing::debug!(%key, "every reader left an unstorable response; stopping fetch");
                busy.fail();
                return;
            }
            match body.frame().await {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    total += data.len() as u64;
                    if storing && total > proxy.max_object_size {
                        storing = false;
                        busy.start_trimming();
                        if let Some(g) = guard.as_mut() {
                            g.release();
                        }
                        proxy.counters.cache_uncacheable.inc();
                        proxy
                            .cache
                            .mark_hit_for_miss(key.clone(), proxy.config.cache.hit_for_miss_ttl.0);
                    }
                    busy.push(data);
                }
                Some(Err(e)) => {
                    tracing::warn!(%key, error = %e, "backend body failed; object not stored");
                    busy.fail();
                    return;
                }
                None => break,
            }
        }
        if storing {
            let body = rechunk(busy.chunks(), total);
            let object = Object {
                status: self.status,
                headers: self.headers,
                body: Body::Memory(body),
                body_len: total,
                vary: self.vary,
                initial_age: self.plan.initial_age,
                ttl: self.plan.ttl,
                stored_at: self.stored_at,
                state: Default::default(),
            };
            proxy.cache.storage.insert(key, Arc::new(object));
            proxy.counters.cache_insert.inc();
        }
        busy.finish();
        drop(guard);
    }
}

/// Regroups body chunks into pieces of [`STORE_CHUNK`] bytes (one piece for small bodies), so a
/// hit sends few, large frames whatever framing the backend used.
fn rechunk(chunks: Vec<Bytes>, total: u64) -> Vec<Bytes> {
    if chunks.len() <= 1 || chunks.iter().all(|c| c.len() >= STORE_CHUNK) {
        return chunks;
    }
    let mut out = Vec::with_capacity((total as usize / STORE_CHUNK) + 1);
    let mut piece = BytesMut::with_capacity(STORE_CHUNK.min(total as usize));
    for chunk in chunks {
        let mut rest = &chunk[..];
        while !rest.is_empty() {
            let take = (STORE_CHUNK - piece.len()).min(rest.len());
            piece.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if piece.len() == STORE_CHUNK {
                out.push(piece.split().freeze());
            }
        }
    }
    if !piece.is_empty() {
        out.push(piece.freeze());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rechunk_merges_small_pieces() {
        let chunks: Vec<Bytes> = (0..100).map(|_| Bytes::from(vec![1u8; 1000])).collect();
        let out = rechunk(chunks, 100_000);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].len(), STORE_CHUNK);
        assert_eq!(out.iter().map(|c| c.len()).sum::<usize>(), 100_000);
    }
}
