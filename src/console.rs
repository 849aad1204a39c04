//! The terminal tools, `shellac stat`, `shellac top` and `shellac log`: they read the admin
//! listener (`/stats/live`, `/top`, `/log/stream`) and render plain text. Rendering is separate
//! from I/O so it can be tested.

use std::fmt::Write as _;
use std::io::{self, BufRead, Write};
use std::time::Duration;

use serde_json::Value;

use crate::client::AdminClient;

/// Clears the terminal and homes the cursor (plain ANSI).
const CLEAR: &str = "\x1b[H\x1b[2J";

fn ratio(v: &Value) -> String {
    v.as_f64()
        .map_or("  -   ".into(), |r| format!("{:5.1}%", r * 100.0))
}

fn duration_us(v: &Value) -> String {
    match v.as_u64() {
        None => "-".into(),
        Some(us) if us < 1000 => format!("{us}µs"),
        Some(us) if us < 1_000_000 => format!("{:.1}ms", us as f64 / 1000.0),
        Some(us) => format!("{:.2}s", us as f64 / 1e6),
    }
}

fn uptime(secs: u64) -> String {
    format!(
        "{}d+{:02}:{:02}:{:02}",
        secs / 86_400,
        secs % 86_400 / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

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
        "{:<28} {:>10} {:>10} {:>10} {:>10} {:>10}  HIT RATIO",
        "SITE", "REQUESTS", "HITS", "MISSES", "PASSES", "REWRITES"
    );
    for s in rows {
        let n = |k: &str| s[k].as_u64().unwrap_or(0);
        let _ = writeln!(
            out,
            "{:<28} {:>10} {:>10} {:>10} {:>10} {:>10}  {}",
            s["name"].as_str().unwrap_or("?"),
            n("req"),
            n("hit"),
            n("miss"),
            n("pass"),
            n("rewrite"),
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
    for (key, description) in [
        ("req", "Requests answered for the site"),
        ("hit", "Of those, hits"),
        ("miss", "Of those, misses"),
        ("pass", "Of those, neither hit nor miss"),
        ("rewrite", "Requests whose target a rewrite changed"),
    ] {
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

/// Prints `screen` once (returns true: done) or redraws it and waits a second before the next
/// refresh (false).
fn show(screen: &str, once: bool) -> io::Result<bool> {
    let mut stdout = io::stdout().lock();
    if once {
        stdout.write_all(screen.as_bytes())?;
        return Ok(true);
    }
    write!(stdout, "{CLEAR}{screen}")?;
    stdout.flush()?;
    drop(stdout);
    std::thread::sleep(Duration::from_secs(1));
    Ok(false)
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

fn human_bytes(n: u64) -> String {
    match n {
        n if n < 10 * 1024 => format!("{n}B"),
        n if n < 10 * 1024 * 1024 => format!("{}KiB", n / 1024),
        n if n < 10 * 1024 * 1024 * 1024 => format!("{}MiB", n >> 20),
        n => format!("{}GiB", n >> 30),
    }
}

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

/// Percent-encodes a query value (everything but unreserved characters).
pub fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
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

/// One `shellac log` line from a `/log/stream` object; None for the greeting.
pub fn render_log_line(v: &Value) -> Option<String> {
    if v.get("streaming").is_some() {
        return None;
    }
    if let Some(n) = v.get("dropped") {
        return Some(format!(
            "-- {n} transactions dropped: this reader was too slow --"
        ));
    }
    let time = v["time"].as_str().unwrap_or("");
    // 2000-10-10T13:55:36.123Z → 13:55:36.123
    let clock = time.get(11..23).unwrap_or(time);
    let decision = match v["reason"].as_str() {
        Some(r) => format!("{}({r})", v["cache"].as_str().unwrap_or("?")),
        None => v["cache"].as_str().unwrap_or("?").to_string(),
    };
    Some(format!(
        "{clock} {} {} {}{} {} {decision} backend={}{} ttfb={} time={} {}{}{}",
        v["client"].as_str().unwrap_or("-"),
        v["method"].as_str().unwrap_or("-"),
        v["host"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map_or(String::new(), |h| h.to_string()),
        v["url"].as_str().unwrap_or("-"),
        v["status"],
        v["backend"].as_str().unwrap_or("-"),
        v["site"]
            .as_str()
            .map_or(String::new(), |s| format!(" site={s}")),
        duration_us(&v["ttfb_us"]),
        duration_us(&v["duration_us"]),
        human_bytes(v["bytes"].as_u64().unwrap_or(0)),
        if v["complete"].as_bool() == Some(false) {
            " (incomplete)"
        } else {
            ""
        },
        match v["vcl"].as_str() {
            Some(t) => format!(" vcl=[{t}]"),
            None => String::new(),
        }
    ))
}

/// `shellac log`: prints transactions as they finish until interrupted or the server closes.
/// `--json` prints the objects as received.
pub fn log(client: &AdminClient, query: &str, raw_json: bool) -> io::Result<()> {
    let (status, reader) = client.open("GET", &format!("/log/stream?{query}"))?;
    if status != 200 {
        let mut body = String::new();
        let mut reader = reader;
        let _ = io::Read::read_to_string(&mut reader, &mut body);
        return Err(io::Error::other(format!(
            "status {status}: {}",
            body.trim()
        )));
    }
    let mut stdout = io::stdout().lock();
    for line in reader.lines() {
        let line = line?;
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if raw_json {
            if v.get("streaming").is_none() {
                writeln!(stdout, "{line}")?;
            }
        } else if let Some(text) = render_log_line(&v) {
            writeln!(stdout, "{text}")?;
        }
        stdout.flush()?;
    }
    Ok(())
}

/// `shellac inspect` text from a `GET /cache` answer: one block per variant, one line per
/// tier holding it.
pub fn render_inspect(v: &Value) -> String {
    let mut out = String::new();
    let vary: Vec<&str> = v["vary"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let _ = write!(out, "{}", v["key"]["url"].as_str().unwrap_or("?"));
    if !vary.is_empty() {
        let _ = write!(out, "  (vary: {})", vary.join(", "));
    }
    if v["hit_for_miss"].as_bool() == Some(true) {
        out.push_str("  [hit-for-miss: requests pass]");
    }
    if v["shared"].as_str() == Some("unreachable") {
        out.push_str("  [shared tier: Redis unreachable, not shown]");
    }
    out.push('\n');
    let variants = v["variants"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if variants.is_empty() {
        out.push_str("  not cached\n");
    }
    let secs = |x: &Value| x.as_u64().map_or("-".to_string(), |s| format!("{s}s"));
    for var in variants {
        let selection: Vec<String> = var["selection"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, value)| format!("{name}={}", value.as_str().unwrap_or("(absent)")))
            .collect();
        let _ = writeln!(
            out,
            "variant {}{}{}",
            var["variant"].as_str().unwrap_or("?"),
            if selection.is_empty() { "" } else { "  " },
            selection.join("  ")
        );
        for c in var["copies"].as_array().into_iter().flatten() {
            let _ = writeln!(
                out,
                "  {:<6} {} {:<7} {} (headers {} + body {}, body in {})  age {}  ttl {} ({} left)",
                c["tier"].as_str().unwrap_or("?"),
                c["status"],
                c["state"].as_str().unwrap_or("?"),
                human_bytes(c["size_bytes"].as_u64().unwrap_or(0)),
                c["header_bytes"],
                c["body_bytes"],
                c["body_in"].as_str().unwrap_or("?"),
                secs(&c["age_seconds"]),
                secs(&c["ttl_seconds"]),
                secs(&c["ttl_left_seconds"]),
            );
            let _ = writeln!(
                out,
                "         grace left {}  keep left {}  stale-if-error left {}  hit in memory {}{}",
                secs(&c["grace_left_seconds"]),
                secs(&c["keep_left_seconds"]),
                secs(&c["stale_if_error_left_seconds"]),
                if c["hit_in_memory"].as_bool() == Some(true) {
                    "yes"
                } else {
                    "no"
                },
                if c["banned"].as_bool() == Some(true) {
                    "  BANNED (dropped at next lookup)"
                } else {
                    ""
                },
            );
            let tags: Vec<&str> = c["tags"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut extra = Vec::new();
            if !tags.is_empty() {
                extra.push(format!("tags: {}", tags.join(" ")));
            }
            if let Some(e) = c["etag"].as_str() {
                extra.push(format!("etag: {e}"));
            }
            if let Some(lm) = c["last_modified"].as_str() {
                extra.push(format!("last-modified: {lm}"));
            }
            if !extra.is_empty() {
                let _ = writeln!(out, "         {}", extra.join("  "));
            }
        }
    }
    out
}

/// `shellac inspect`: prints what is cached for `url` (text, or the JSON as received).
/// Ok(false) when nothing is cached (the CLI exits 1, for scripts).
pub fn inspect(
    client: &AdminClient,
    url: &str,
    host: Option<&str>,
    raw_json: bool,
) -> io::Result<bool> {
    if host.is_none() && url.starts_with('/') {
        // The admin API's words are `host=HOST`; the command's are `--host`.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a path needs --host HOST (the Host the requests carry): `shellac inspect {url} --host www.example.com`, or the whole URL: `shellac inspect http://www.example.com{url}`"
            ),
        ));
    }
    let mut path = format!("/cache?url={}", encode(url));
    if let Some(h) = host {
        let _ = write!(path, "&host={}", encode(h));
    }
    let resp = client.request("GET", &path)?;
    let value: Value = serde_json::from_str(&resp.body).map_err(|_| {
        io::Error::other(format!(
            "GET /cache: status {}: {}",
            resp.status,
            resp.body.trim()
        ))
    })?;
    if resp.status != 200 && resp.status != 404 {
        return Err(io::Error::other(
            value["error"]
                .as_str()
                .unwrap_or(resp.body.trim())
                .to_string(),
        ));
    }
    let text = if raw_json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        )
    } else {
        render_inspect(&value)
    };
    let mut stdout = io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = stdout.write_all(text.as_bytes());
    Ok(resp.status == 200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stat_screen() {
        let live = json!({
            "uptime_seconds": 3725,
            "hit_ratio": {"hit_ratio": 0.5, "hit_ratio_10s": 0.75, "hit_ratio_100s": null, "hit_ratio_1000s": 1.0},
            "ttfb_us_10s": {"p50": 120, "p90": 2500, "p99": null},
            "counters": [
                {"name": "client_req", "value": 10, "gauge": false, "rate": 2.5, "avg": 0.1, "description": "Client requests received"},
                {"name": "cache_miss", "value": 0, "gauge": false, "rate": 0.0, "avg": 0.0, "description": "Misses"},
                {"name": "n_object", "value": 3, "gauge": true, "rate": 0.0, "avg": 0.0, "description": "Objects"},
            ]
        });
        let s = render_stat(&live, false);
        assert!(s.starts_with("Uptime 0d+01:02:05   Hit ratio: 10s  75.0%  100s   -     1000s 100.0%  (all  50.0%)"), "{s}");
        assert!(s.contains("TTFB (10s): p50 120µs  p90 2.5ms  p99 -"), "{s}");
        assert!(s.contains("client_req"));
        assert!(s.contains("2.50"));
        assert!(!s.contains("cache_miss"), "zero counters hidden");
        assert!(render_stat(&live, true).contains("cache_miss"));
    }

    #[test]
    fn log_lines() {
        let v = json!({"time": "2000-10-10T13:55:36.123Z", "client": "127.0.0.1", "method": "GET",
            "url": "/a", "host": "example.com", "status": 200, "bytes": 5, "duration_us": 1500,
            "ttfb_us": 900, "cache": "pass", "reason": "no-store", "backend": "app", "complete": true});
        assert_eq!(
            render_log_line(&v).unwrap(),
            "13:55:36.123 127.0.0.1 GET example.com/a 200 pass(no-store) backend=app ttfb=900µs time=1.5ms 5B"
        );
        assert_eq!(
            render_log_line(&json!({"dropped": 7})).unwrap(),
            "-- 7 transactions dropped: this reader was too slow --"
        );
        assert_eq!(render_log_line(&json!({"streaming": true})), None);
    }

    #[test]
    fn top_screen_ends_with_the_windows_totals() {
        let top = json!({"by": "url", "sort": "requests", "window": 60, "collecting": true,
            "rows": [{"key": "www.example.com/a", "requests": 3, "misses": 1, "bytes": 30}],
            "totals": {"requests": 40, "misses": 9, "bytes": 20480, "seconds": 60}});
        let s = render_top(&top);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "Top url by requests over the last 60 s");
        assert_eq!(
            lines[2],
            "         3          1        30B  www.example.com/a"
        );
        assert_eq!(
            lines[3],
            "        40          9      20KiB  (all requests, last 60 s)"
        );
        assert_eq!(lines.len(), 4);
        let old_server = json!({"by": "url", "sort": "requests", "window": 60, "rows": []});
        assert_eq!(render_top(&old_server).lines().count(), 2);
    }

    /// Issue 31: `shellac stat` lists every site; `--site NAME` shows one site's counters
    /// (change per second from the previous screen) or names the sites there are.
    #[test]
    fn stat_by_site() {
        let live = |req: u64| {
            json!({"uptime_seconds": 10, "hit_ratio": {}, "ttfb_us_10s": {}, "counters": [],
                "sites": [{"name": "blog", "req": req, "hit": 3, "miss": 1, "pass": 0, "rewrite": 0, "hit_ratio": 0.75},
                          {"name": "shop", "req": 0, "hit": 0, "miss": 0, "pass": 0, "rewrite": 0, "hit_ratio": null}]})
        };
        let s = render_stat(&live(4), false);
        let rows: Vec<Vec<&str>> = s
            .lines()
            .skip_while(|l| !l.starts_with("SITE "))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows[1], ["blog", "4", "3", "1", "0", "0", "75.0%"], "{s}");
        assert_eq!(rows[2], ["shop", "0", "0", "0", "0", "0", "-"], "{s}");
        let (before, now) = (live(4), live(14));
        let one = render_site_stat(&now, "blog", Some((&before, 2.0))).unwrap();
        assert!(
            one.starts_with("Uptime 0d+00:00:10   Site blog: hit ratio 75.0% since start\n"),
            "{one}"
        );
        let req: Vec<&str> = one
            .lines()
            .find(|l| l.starts_with("site_req "))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(req[..4], ["site_req", "14", "5.00", "1.40"], "{one}");
        assert!(!one.contains("shop"), "{one}");
        assert_eq!(
            render_site_stat(&now, "nope", None).unwrap_err(),
            "--site nope: no [[site]] of that name; there are: blog, shop"
        );
        let v = json!({"time": "2000-10-10T13:55:36.123Z", "client": "127.0.0.1", "method": "GET",
            "url": "/a", "host": "blog.test", "status": 200, "bytes": 5, "duration_us": 1500,
            "ttfb_us": 900, "cache": "hit", "backend": null, "site": "blog", "complete": true});
        assert!(
            render_log_line(&v)
                .unwrap()
                .contains(" backend=- site=blog ttfb="),
            "{:?}",
            render_log_line(&v)
        );
    }

    #[test]
    fn encoding() {
        assert_eq!(encode("^/a b?c=1"), "%5E%2Fa%20b%3Fc%3D1");
    }
}
