//! `shellac top`: the rankings of `/top` (by URL, host, backend, user agent or site).

use std::fmt::Write as _;
use std::io;
use std::time::Duration;

use serde_json::Value;

use crate::client::AdminClient;

use super::text::{human_bytes, show};

/// `shellac top` screen from `/top`.
pub fn render_top(top: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Top {} by {}{} over the last {} s{}",
        top["by"].as_str().unwrap_or("?"),
        top["sort"].as_str().unwrap_or("?"),
        top["site"]
            .as_str()
            .map_or(String::new(), |s| format!(" of site {s}")),
        top["window"],
        if top["collecting"].as_bool() == Some(false) {
            "  (collecting started now: nobody was watching)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "{:>10} {:>10} {:>10}  KEY",
        "REQUESTS", "MISSES", "BYTES"
    );
    for r in top["rows"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "{:>10} {:>10} {:>10}  {}",
            r["requests"].as_u64().unwrap_or(0),
            r["misses"].as_u64().unwrap_or(0),
            human_bytes(r["bytes"].as_u64().unwrap_or(0)),
            r["key"].as_str().unwrap_or("?")
        );
    }
    // Every request of the window, from the counters (which run whether anybody watches).
    let t = &top["totals"];
    if t.is_object() {
        let _ = writeln!(
            out,
            "{:>10} {:>10} {:>10}  (all requests, last {} s)",
            t["requests"].as_u64().unwrap_or(0),
            t["misses"].as_u64().unwrap_or(0),
            human_bytes(t["bytes"].as_u64().unwrap_or(0)),
            t["seconds"].as_u64().unwrap_or(0)
        );
    }
    out
}

/// `shellac top`: once, or refreshed every second until interrupted. When nothing was being
/// collected, `once` waits `settle` and asks again so the ranking has something in it; the
/// last line counts every request of the window (from the counters) either way.
pub fn top(client: &AdminClient, query: &str, once: bool, settle: Duration) -> io::Result<()> {
    let path = format!("/top?{query}");
    loop {
        let mut top = client.get_json(&path)?;
        let started_now = once && top["collecting"].as_bool() == Some(false);
        if started_now {
            std::thread::sleep(settle);
            top = client.get_json(&path)?;
        }
        let mut screen = render_top(&top);
        if once && started_now {
            // Issue 32: the first call printed a bare header; the ranking covers only the
            // seconds since it started collecting, the totals line the whole window.
            let totals = &top["totals"];
            let _ = writeln!(
                screen,
                "(rankings are collected only while `shellac top` or the dashboard watches: this call started them {} s ago{} — run `shellac top` to watch them fill)",
                settle.as_secs().max(1),
                match totals["requests"].as_u64() {
                    None => String::new(),
                    Some(0) => format!(
                        "; no requests at all in the last {} s",
                        totals["seconds"].as_u64().unwrap_or(0)
                    ),
                    Some(_) => "; the last line counts every request of the window".to_string(),
                }
            );
        } else if once && top["rows"].as_array().is_none_or(|r| r.is_empty()) {
            let _ = writeln!(
                screen,
                "(no requests in the last {} s)",
                top["window"].as_u64().unwrap_or(60)
            );
        }
        if show(&screen, once)? {
            return Ok(());
        }
    }
}
