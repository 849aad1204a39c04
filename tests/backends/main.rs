//! Backends that fail: probes, directors, retries, restarts, max_connections, serving stale.
//! The origins and helpers are here; the tests in `health`, `routing` and `limits` (test names
//! `MODULE::NAME`).

#[path = "../common/mod.rs"]
mod common;
mod health;
mod limits;
mod routing;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use shellac::config::units::Dur;
use shellac::config::{Config, DirectorConfig, DirectorKind, ProbeConfig, ProbeRef};

/// An origin that answers with its own name (uncacheable) and a health endpoint that can be
/// switched to 500.
async fn named(name: &'static str, failing: Arc<AtomicBool>) -> Origin {
    Origin::start(move |s| {
        if s.path == "/health" {
            return if failing.load(Ordering::SeqCst) {
                Reply::ok("down").status(500)
            } else {
                Reply::ok("up")
            };
        }
        Reply::ok(name).cc("no-store")
    })
    .await
}

fn backends(c: &mut Config, origins: &[&Origin]) {
    c.backends.clear();
    for (i, o) in origins.iter().enumerate() {
        let mut b = shellac::config::BackendConfig::new(
            &format!("o{i}"),
            &o.addr.ip().to_string(),
            o.addr.port(),
        );
        b.connect_timeout = Dur(Duration::from_millis(500));
        c.backends.push(b);
    }
}

fn director(c: &mut Config, kind: DirectorKind, members: &[&str]) -> usize {
    c.directors.push(DirectorConfig {
        name: "d".into(),
        kind,
        backends: members.iter().map(|m| m.to_string()).collect(),
        hash_on: None,
        restart_on: vec![],
        restart_unless: vec![],
        max_restarts: 4,
        member_weights: Vec::new(),
    });
    c.directors.len() - 1
}

fn fast_probe() -> ProbeConfig {
    ProbeConfig {
        name: String::new(),
        url: Some("/health".into()),
        request: None,
        expected_status: 200,
        interval: Dur(Duration::from_millis(50)),
        timeout: Dur(Duration::from_millis(500)),
        window: 3,
        threshold: 2,
        initial: Some(3),
    }
}

async fn backend_json(shellac: &Shellac) -> serde_json::Value {
    serde_json::from_slice(&get(shellac.admin, "/backends").await.body).unwrap()
}

async fn healthy(shellac: &Shellac, name: &str) -> bool {
    let v = backend_json(shellac).await;
    v["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap()["healthy"]
        .as_bool()
        .unwrap()
}

/// Polls until backend `name` has health `want` (bounded: 5 s).
async fn wait_health(shellac: &Shellac, name: &str, want: bool) {
    for _ in 0..100 {
        if healthy(shellac, name).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{name} never became {}",
        if want { "healthy" } else { "sick" }
    );
}

async fn futures_names(shellac: &Shellac, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(get(shellac.addr, "/page").await.text());
    }
    out
}
