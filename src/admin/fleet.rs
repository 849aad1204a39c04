//! The fleet on the admin listener: `GET /fleet` (this node's shared tier and every node's
//! position in the invalidation log, with its lag), and the summary that `/stats/live`
//! (`shellac stat`) and `/api/dashboard` carry.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::cache::shared::feed;
use crate::proxy::Proxy;

/// This node's shared tier in one object (null without `[storage.shared]`): no I/O.
pub fn summary(proxy: &Proxy) -> Value {
    let Some(tier) = proxy.cache.shared.as_deref() else {
        return Value::Null;
    };
    let c = &proxy.counters;
    let sync_age = tier.feed.sync_age_ms();
    json!({
        "node": tier.node,
        "breaker": tier.breaker.state(),
        "hits": c.shared_hit.get(),
        "misses": c.shared_miss.get(),
        "writes": c.shared_write.get(),
        "write_skips": c.shared_write_skip.get(),
        "errors": c.shared_error.get(),
        "connect_errors": c.shared_connect_error.get(),
        "timeouts": c.shared_timeout.get(),
        "skipped": c.shared_skipped.get(),
        "leases": c.shared_lease.get(),
        "lease_waits": c.shared_lease_wait.get(),
        "position": tier.feed.position().to_string(),
        "lag_ms": tier.feed.lag_ms.load(Ordering::Relaxed),
        "sync_age_ms": (sync_age != u64::MAX).then_some(sync_age),
        "outbox": tier.feed.queued(),
        "auth_errors": c.shared_auth_error.get(),
        // A configuration error (auth.rs): shown in red by `shellac stat` and the dashboard.
        "auth_error": tier.refusals.current(crate::clock::now_ms()),
    })
}

/// `GET /fleet`: the summary, and each node the log knows (position, heartbeat age, lag);
/// 404 without a fleet.
pub async fn describe(proxy: &Proxy) -> Option<Value> {
    let tier = proxy.cache.shared.as_ref()?;
    let mut out = summary(proxy);
    out["nodes"] = match feed::nodes(tier).await {
        Some(nodes) => Value::Array(
            nodes
                .into_iter()
                .map(|(name, position, beat_ms, lag_ms)| {
                    json!({
                        "name": name,
                        "position": position.to_string(),
                        "heartbeat_age_ms": beat_ms,
                        "lag_ms": lag_ms,
                        "live": beat_ms < 5_000,
                    })
                })
                .collect(),
        ),
        None => Value::Null,
    };
    Some(out)
}

/// `shellac stat`'s fleet lines, from `GET /fleet`; `color`: a refusal of the credentials
/// in red (a terminal).
pub fn render(v: &Value, color: bool) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    if let Some(refusal) = v["auth_error"].as_object() {
        let (red, plain) = if color {
            ("\x1b[1;31m", "\x1b[0m")
        } else {
            ("", "")
        };
        let _ = writeln!(
            out,
            "{red}CONFIGURATION ERROR: the Redis cluster refuses the shared tier ({} times since {} s ago): {}{plain}\n{red}  Redis said: {}{plain}",
            refusal.get("count").and_then(Value::as_u64).unwrap_or(0),
            refusal.get("since_ms").and_then(Value::as_u64).unwrap_or(0) / 1000,
            refusal.get("fix").and_then(Value::as_str).unwrap_or("?"),
            refusal.get("error").and_then(Value::as_str).unwrap_or("?"),
        );
    }
    let _ = writeln!(
        out,
        "Shared tier (node {}): breaker {}  hits {}  misses {}  writes {}  errors {}  timeouts {}  invalidation lag {} ms{}",
        v["node"].as_str().unwrap_or("?"),
        v["breaker"].as_str().unwrap_or("?"),
        n("hits"),
        n("misses"),
        n("writes"),
        n("errors"),
        n("timeouts"),
        n("lag_ms"),
        match n("outbox") {
            0 => String::new(),
            q => format!("  ({q} invalidations queued)"),
        }
    );
    for node in v["nodes"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "  node {:<20} lag {:>6} ms  heartbeat {:>6} ms ago{}",
            node["name"].as_str().unwrap_or("?"),
            node["lag_ms"].as_u64().unwrap_or(0),
            node["heartbeat_age_ms"].as_u64().unwrap_or(0),
            if node["live"].as_bool() == Some(true) {
                ""
            } else {
                "  (not live)"
            }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_nodes_and_queue() {
        let v = json!({
            "node": "a", "breaker": "closed", "hits": 3, "misses": 1, "writes": 1,
            "errors": 0, "timeouts": 0, "lag_ms": 0, "outbox": 2,
            "nodes": [{"name": "b", "lag_ms": 12, "heartbeat_age_ms": 300, "live": true},
                      {"name": "c", "lag_ms": 9000, "heartbeat_age_ms": 9000, "live": false}],
        });
        let text = render(&v, false);
        assert!(text.contains("breaker closed  hits 3"), "{text}");
        assert!(text.contains("(2 invalidations queued)"), "{text}");
        assert!(
            text.contains("node b") && text.contains("lag     12 ms"),
            "{text}"
        );
        assert!(text.contains("(not live)"), "{text}");
    }
}
