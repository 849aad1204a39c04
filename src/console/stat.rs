//! `shellac stat`: the counters of `/stats/live` (or one `[[site]]`'s), with the fleet above
//! them when there is one.

use std::fmt::Write as _;
use std::io;

use serde_json::Value;

use crate::client::AdminClient;

use super::text::{duration_us, ratio, show, uptime};
use crate::config::units::size_text;

/// `shellac stat` screen from `/stats/live`: uptime, hit ratios, TTFB percentiles, then every
/// counter (only non-zero ones unless `all`) with value, current rate and average rate.
pub fn render_stat(live: &Value, all: bool) -> String {
    let mut out = String::new();
    let hr = &live["hit_ratio"];
    let _ = writeln!(
        out,
        "Uptime {}   Hit ratio: 10s {}  100s {}  1000s {}  (all {})",
        uptime(live["uptime_seconds"].as_u64().unwrap_or(0)),
        ratio(&hr["hit_ratio_10s"]),
        ratio(&hr["hit_ratio_100s"]),
        ratio(&hr["hit_ratio_1000s"]),
        ratio(&hr["hit_ratio"]),
    );
    let t = &live["ttfb_us_10s"];
    let _ = writeln!(
        out,
        "TTFB (10s): p50 {}  p90 {}  p99 {}",
        duration_us(&t["p50"]),
        duration_us(&t["p90"]),
        duration_us(&t["p99"])
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<28} {:>14} {:>12} {:>12}  DESCRIPTION",
        "NAME", "CURRENT", "CHANGE/s", "AVG/s"
    );
    for c in live["counters"].as_array().into_iter().flatten() {
        let value = c["value"].as_u64().unwrap_or(0);
        if value == 0 && !all {
            continue;
        }
        let gauge = c["gauge"].as_bool().unwrap_or(false);
        let (rate, avg) = if gauge {
            (".".to_string(), ".".to_string())
        } else {
            (
                format!("{:.2}", c["rate"].as_f64().unwrap_or(0.0)),
                format!("{:.2}", c["avg"].as_f64().unwrap_or(0.0)),
            )
        };
        let _ = writeln!(
            out,
            "{:<28} {:>14} {:>12} {:>12}  {}",
            c["name"].as_str().unwrap_or("?"),
            value,
            rate,
            avg,
            c["description"].as_str().unwrap_or("")
        );
    }
    render_sites(&live["sites"], None, &mut out);
    out
}

/// The `[[site]]` table of `GET /sites` (`shellac stats`), as `shellac stat` shows it below
/// its counters: nothing without sites.
pub fn render_sites_table(sites: &Value) -> String {
    let mut out = String::new();
    render_sites(sites, None, &mut out);
    out
}

/// The `[[site]]` table (issue 31: `shellac stat` labelled by site): one row per site, or
/// only `only`'s. Nothing without sites.
fn render_sites(sites: &Value, only: Option<&str>, out: &mut String) {
    let rows: Vec<&Value> = sites
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| only.is_none_or(|name| s["name"].as_str() == Some(name)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<28} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  HIT RATIO",
        "SITE", "REQUESTS", "HITS", "MISSES", "PASSES", "REWRITES", "CACHED", "SHARE"
    );
    for s in rows {
        let n = |k: &str| s[k].as_u64().unwrap_or(0);
        let _ = writeln!(
            out,
            "{:<28} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  {}",
            s["name"].as_str().unwrap_or("?"),
            n("req"),
            n("hit"),
            n("miss"),
            n("pass"),
            n("rewrite"),
            size_text(n("cache_bytes")),
            s["cache_share"].as_u64().map_or("-".into(), size_text),
            ratio(&s["hit_ratio"]).trim()
        );
    }
}

/// `shellac stat --site NAME`: uptime, the site's hit ratio since start and its counters, with
/// the change per second since `previous` (`/stats/live` answers, seconds apart) when there
/// is one. Err: no such site (naming the ones there are).
pub fn render_site_stat(
    live: &Value,
    name: &str,
    previous: Option<(&Value, f64)>,
) -> Result<String, String> {
    let find = |live: &Value| -> Option<Value> {
        live["sites"]
            .as_array()?
            .iter()
            .find(|s| s["name"].as_str() == Some(name))
            .cloned()
    };
    let Some(site) = find(live) else {
        let names: Vec<&str> = live["sites"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["name"].as_str())
            .collect();
        return Err(if names.is_empty() {
            format!("--site {name}: this Shellac has no [[site]]")
        } else {
            format!(
                "--site {name}: no [[site]] of that name; there are: {}",
                names.join(", ")
            )
        });
    };
    let before = previous.and_then(|(v, secs)| Some((find(v)?, secs)));
    let uptime_secs = live["uptime_seconds"].as_u64().unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Uptime {}   Site {name}: hit ratio {} since start",
        uptime(uptime_secs),
        ratio(&site["hit_ratio"]).trim()
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<28} {:>14} {:>12} {:>12}  DESCRIPTION",
        "NAME", "CURRENT", "CHANGE/s", "AVG/s"
    );
    // Then the site's requests a files backend refused, by the process-wide counter's name
    // (those that moved: `/sites` has every reason).
    let refused: Vec<(&str, &str)> = site
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| k.starts_with("files_") && v.as_u64().is_some_and(|n| n > 0))
        .map(|(k, _)| (k.as_str(), crate::stats::description(k)))
        .collect();
    let fixed = [
        ("req", "Requests answered for the site"),
        ("hit", "Of those, hits"),
        ("miss", "Of those, misses"),
        ("pass", "Of those, neither hit nor miss"),
        ("rewrite", "Requests whose target a rewrite changed"),
        ("cache_bytes", "Bytes its objects take in the memory tier"),
        (
            "cache_share",
            "Its cache_share of the memory tier, in bytes",
        ),
        (
            "cache_share_evictions",
            "Objects evicted to hold it to its cache_share",
        ),
    ];
    for (key, description) in fixed.into_iter().chain(refused) {
        if site[key].is_null() {
            continue;
        }
        let value = site[key].as_u64().unwrap_or(0);
        let rate = match &before {
            Some((b, secs)) if *secs > 0.0 => format!(
                "{:.2}",
                value.saturating_sub(b[key].as_u64().unwrap_or(0)) as f64 / secs
            ),
            _ => ".".to_string(),
        };
        let avg = if uptime_secs > 0 {
            format!("{:.2}", value as f64 / uptime_secs as f64)
        } else {
            ".".to_string()
        };
        let _ = writeln!(
            out,
            "{:<28} {:>14} {:>12} {:>12}  {description}",
            format!("site_{key}"),
            value,
            rate,
            avg
        );
    }
    Ok(out)
}

/// `shellac stat`: once (`once`) or refreshed every second until interrupted; `site`: only
/// that `[[site]]`'s counters.
pub fn stat(client: &AdminClient, once: bool, all: bool, site: Option<&str>) -> io::Result<()> {
    let mut previous: Option<(std::time::Instant, Value)> = None;
    loop {
        let live = client.get_json("/stats/live")?;
        let now = std::time::Instant::now();
        if let Some(name) = site {
            let before = previous
                .as_ref()
                .map(|(at, v)| (v, now.duration_since(*at).as_secs_f64()));
            let screen = render_site_stat(&live, name, before)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            previous = Some((now, live));
            if show(&screen, once)? {
                return Ok(());
            }
            continue;
        }
        let mut screen = render_stat(&live, all);
        if live["fleet"].is_object() {
            // The shared tier and every node's lag (one more request: it asks Redis).
            if let Ok(fleet) = client.get_json("/fleet") {
                let color = io::IsTerminal::is_terminal(&io::stdout())
                    && std::env::var_os("NO_COLOR").is_none();
                screen = format!("{}\n{screen}", crate::admin::fleet::render(&fleet, color));
            }
        }
        if show(&screen, once)? {
            return Ok(());
        }
    }
}
