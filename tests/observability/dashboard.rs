//! The web dashboard: assets built into the binary, the JSON it polls, and (when Debian's
//! `chromium` is installed) the real page in headless Chromium receiving data under load.
//! Without chromium that test skips, or fails where `SHELLAC_REQUIRE_TOOLS=1` (`.ci/run`).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::*;

fn origin_handler(s: &Seen) -> Reply {
    match s.path.as_str() {
        p if p.starts_with("/img") => Reply::ok("image bytes").cc("max-age=60"),
        _ => Reply::ok("page").cc("no-store"),
    }
}

/// Sends a request every 20 ms until `stop`.
fn load(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut conn = Conn::open(addr).await;
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) && n < 10_000 {
            let path = if n.is_multiple_of(3) {
                "/page"
            } else {
                "/img/logo.png"
            };
            conn.send("GET", path, &[], b"").await;
            n += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        n
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_assets_and_data() {
    let origin = Origin::start(origin_handler).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let page = get(shellac.admin, "/").await;
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    let html = page.text();
    assert!(html.contains(r#"<script src="/dashboard.js"></script>"#));
    let js = get(shellac.admin, "/dashboard.js").await;
    assert_eq!(js.status, 200);
    assert!(js.text().contains("/api/dashboard"));
    for text in [&html, &js.text()] {
        assert!(
            !text.contains("src=\"http")
                && !text.contains("href=\"http")
                && !text.contains("import "),
            "nothing is fetched from elsewhere"
        );
    }
    assert!(
        get(shellac.admin, "/help")
            .await
            .text()
            .contains("GET /metrics")
    );

    // Under a little load the series fill in (one point per sampled second; bounded wait).
    let stop = Arc::new(AtomicBool::new(false));
    let client = load(shellac.addr, stop.clone());
    let mut data = serde_json::Value::Null;
    for _ in 0..100 {
        data = serde_json::from_slice(&get(shellac.admin, "/api/dashboard").await.body).unwrap();
        let req: f64 = data["series"]["req_per_s"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_f64())
            .sum();
        if req > 0.0 && !data["top_urls"].as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    client.await.unwrap();
    let s = &data["series"];
    let n = s["t"].as_array().unwrap().len();
    assert!(n >= 1, "{data}");
    for key in [
        "req_per_s",
        "hit_ratio",
        "bytes_per_s",
        "backend_errors_per_s",
        "ttfb_p50_us",
        "ttfb_p99_us",
        "cache_bytes",
        "objects",
    ] {
        assert_eq!(s[key].as_array().unwrap().len(), n, "{key}");
    }
    assert_eq!(data["backends"][0]["name"], "default");
    assert_eq!(data["backends"][0]["healthy"], true);
    assert_eq!(data["storage"]["objects"], 1);
    assert_eq!(
        data["top_urls"][0]["key"], "test.example/img/logo.png",
        "{data}"
    );
    assert!(data["hit_ratio"]["10s"].as_f64().unwrap() > 0.0);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_page_loads_without_token_but_data_needs_it() {
    let origin = Origin::start(origin_handler).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.admin_token = Some("dashboard-token".into());
    })
    .await;
    assert_eq!(get(shellac.admin, "/").await.status, 200);
    assert_eq!(get(shellac.admin, "/dashboard.js").await.status, 200);
    assert_eq!(get(shellac.admin, "/api/dashboard").await.status, 401);
    let ok = get_with(
        shellac.admin,
        "/api/dashboard",
        &[("authorization", "Bearer dashboard-token")],
    )
    .await;
    assert_eq!(ok.status, 200);
    shellac.stop().await;
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Runs headless Chromium with `args` (bounded: killed after 90 s); returns stdout.
fn run_chromium(bin: &str, args: &[String]) -> String {
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-dev-shm-usage",
            "--no-first-run",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    for _ in 0..900 {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Ok(None) = child.try_wait() {
        let _ = child.kill();
    }
    let _ = child.wait();
    reader.join().unwrap_or_default()
}

/// Attribute `name` of the first element whose opening tag contains `marker`.
fn attribute(dom: &str, marker: &str, name: &str) -> Option<String> {
    let at = dom.find(marker)?;
    let tag_start = dom[..at].rfind('<')?;
    let tag_end = at + dom[at..].find('>')?;
    let tag = &dom[tag_start..tag_end];
    let key = format!("{name}=\"");
    let v = tag.find(&key)? + key.len();
    Some(tag[v..v + tag[v..].find('"')?].to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_headless_chromium_receives_data() {
    let Some(bin) = tools::require(chromium(), "chromium", "chromium") else {
        return;
    };
    let origin = Origin::start(origin_handler).await;
    // Every request is the one site's (issue 31: the Sites panel and the top URLs' site menu).
    let shellac = Shellac::start(origin.addr, |c| {
        c.sites = vec![shellac::config::site::SiteConfig {
            name: "shop".into(),
            default: true,
            cache: true,
            ..Default::default()
        }];
    })
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let client = load(shellac.addr, stop.clone());
    // Let the sampler take a few one-second samples so the charts have a series to draw.
    for _ in 0..100 {
        let d: serde_json::Value =
            serde_json::from_slice(&get(shellac.admin, "/api/dashboard").await.body).unwrap();
        if d["series"]["t"].as_array().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Then sparse traffic (issue 32: the hit-ratio line fell apart into dots): silence until
    // a second without lookups follows one with them, then one hit, until its second is in.
    stop.store(true, Ordering::Relaxed);
    client.await.unwrap();
    let hit_ratio = |d: &serde_json::Value| -> Vec<Option<f64>> {
        d["series"]["hit_ratio"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64())
            .collect()
    };
    let mut gap = false;
    for _ in 0..100 {
        let d: serde_json::Value =
            serde_json::from_slice(&get(shellac.admin, "/api/dashboard").await.body).unwrap();
        let r = hit_ratio(&d);
        if r.windows(2).any(|w| w[0].is_some() && w[1].is_none()) {
            gap = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gap, "a second without lookups after the load");
    get(shellac.addr, "/img/logo.png").await;
    for _ in 0..100 {
        let d: serde_json::Value =
            serde_json::from_slice(&get(shellac.admin, "/api/dashboard").await.body).unwrap();
        let r = hit_ratio(&d);
        let after_gap = r
            .windows(2)
            .position(|w| w[0].is_some() && w[1].is_none())
            .is_some_and(|i| r[i + 1..].iter().any(Option::is_some));
        if after_gap {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The top URLs table ranks the last 60 s. Chromium can take longer than that to start
    // and poll on a loaded machine (a trivial --dump-dom took 31 s at load 26 here, and the
    // table was once empty), so a request a second keeps /img/logo.png in it until the page
    // is dumped. The hit-ratio line stays one line (the charts show 300 s).
    let trickle_stop = Arc::new(AtomicBool::new(false));
    let trickle = {
        let (stop, addr) = (trickle_stop.clone(), shellac.addr);
        tokio::spawn(async move {
            for _ in 0..300 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                get(addr, "/img/logo.png").await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    // One Chromium run dumps the DOM and takes a screenshot for people to look at (target/ is
    // not in git): a second run for the screenshot cost one more Chromium start (~4 s of CPU
    // here, tens of seconds of wall time on a loaded machine).
    let url = format!("http://{}/", shellac.admin);
    let shot = concat!(env!("CARGO_MANIFEST_DIR"), "/target/dashboard.png").to_string();
    let dom = tokio::task::spawn_blocking(move || {
        run_chromium(
            bin,
            &[
                "--virtual-time-budget=4000".into(),
                "--window-size=1400,1100".into(),
                "--dump-dom".into(),
                format!("--screenshot={shot}"),
                url,
            ],
        )
    })
    .await
    .unwrap();
    trickle_stop.store(true, Ordering::Relaxed);
    trickle.await.unwrap();

    let updates: u64 = attribute(&dom, "<body", "data-updates")
        .or_else(|| attribute(&dom, "data-updates", "data-updates"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(updates >= 2, "the page polled and rendered data: {dom}");
    for chart in [
        "chart-req",
        "chart-hit",
        "chart-bytes",
        "chart-ttfb",
        "chart-storage",
    ] {
        let points: u64 = attribute(&dom, &format!("id=\"{chart}\""), "data-points")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!(points > 0, "{chart} drew no points");
    }
    assert!(dom.contains("/img/logo.png"), "top URLs table filled");
    assert!(dom.contains(">default<"), "backends table filled");
    assert!(
        dom.contains("<tbody id=\"sites\"><tr><td>shop</td>")
            && !dom.contains("id=\"sites-panel\" hidden"),
        "the Sites panel lists the site: {dom}"
    );
    assert!(
        dom.contains("<option value=\"shop\">shop</option>"),
        "the top URLs' site menu offers it: {dom}"
    );
    assert!(dom.contains("live ·"), "status shows live");
    // Issue 32: the header said `connections 0 · 0 idle released`.
    assert!(
        dom.contains("client connections <b id=\"conns\">")
            && dom.contains(" open, ")
            && dom.contains(" of them idle</b>"),
        "{dom}"
    );
    assert!(
        !dom.contains("idle released") && !dom.contains("parked"),
        "{dom}"
    );
    // Issue 32: the TTFB line fell to 0 when idle. A second without responses has no TTFB
    // sample (null in the series, a gap or a short carry on the chart), never a 0.
    let d: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/api/dashboard").await.body).unwrap();
    let p50 = d["series"]["ttfb_p50_us"].as_array().unwrap();
    assert!(p50.iter().any(|v| v.is_null()), "an idle second: {p50:?}");
    assert!(
        p50.iter()
            .all(|v| v.is_null() || v.as_u64().is_some_and(|us| us > 0)),
        "{p50:?}"
    );
    let lowest: f64 = attribute(&dom, "id=\"chart-ttfb\"", "data-lowest")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(lowest > 0.0, "the TTFB chart drew a 0: {dom}");
    // Issue 32: the hit ratio of sparse traffic is one line (the last value carried over a
    // second without lookups), not dots.
    assert_eq!(
        attribute(&dom, "id=\"chart-hit\"", "data-segments").as_deref(),
        Some("1"),
        "{dom}"
    );
    // Issue 32: axis ticks were max / 4 (`59 / 44.3 / 29.5`) and the TTFB axis mixed `0 µs`
    // with ms: every axis starts at 0 and climbs by 1, 2, 2.5 or 5 times a power of ten, all
    // its labels in one unit.
    for chart in [
        "chart-req",
        "chart-hit",
        "chart-bytes",
        "chart-ttfb",
        "chart-storage",
    ] {
        let ticks = attribute(&dom, &format!("id=\"{chart}\""), "data-ticks").unwrap_or_default();
        let labels: Vec<(f64, &str)> = ticks
            .split('|')
            .map(|l| {
                let unit_at = l
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(l.len());
                (l[..unit_at].parse::<f64>().expect(l), l[unit_at..].trim())
            })
            .collect();
        assert!(labels.len() >= 2, "{chart}: {ticks}");
        assert_eq!(labels[0].0, 0.0, "{chart}: {ticks}");
        assert!(
            labels.iter().all(|l| l.1 == labels[0].1),
            "{chart}: one unit: {ticks}"
        );
        let step = labels[1].0;
        let mantissa = step / 10f64.powf(step.log10().floor());
        assert!(
            [1.0, 2.0, 2.5, 5.0]
                .iter()
                .any(|m| (m - mantissa).abs() < 1e-9),
            "{chart}: step {step}: {ticks}"
        );
        for (i, (v, _)) in labels.iter().enumerate() {
            assert!((v - step * i as f64).abs() < 1e-9, "{chart}: {ticks}");
        }
    }
    // Issue 32: five charts in a grid of three columns left an empty cell.
    assert_eq!(
        attribute(&dom, "<body", "data-holes").as_deref(),
        Some("0"),
        "no row of panels stops short of the right edge: {dom}"
    );
    // Regression (issue 23, defect 6): the backends table was clipped at 1400 px.
    assert_eq!(
        attribute(&dom, "<body", "data-clipped").as_deref(),
        Some(""),
        "no panel is cut off at 1400 px"
    );
    shellac.stop().await;
}

/// Issue 32: a stretch of more than five seconds without a sample (no request, so no hit
/// ratio and no TTFB) must break the hit-ratio and TTFB lines — never drawn as 0, nor joined
/// across the gap — while a shorter one carries the last value; a value alone between gaps is
/// a dot. The charts are drawn by the script `GET /dashboard.js` serves, in headless
/// Chromium, on series of 40 seconds with a 3 s and a 10 s stretch without values and a lone
/// value after the long one (waiting for real idle seconds would make the test slow).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_lines_break_after_more_than_five_seconds_without_a_sample() {
    let Some(bin) = tools::require(chromium(), "chromium", "chromium") else {
        return;
    };
    let page = Arc::new(std::sync::Mutex::new(String::new()));
    let served = page.clone();
    let origin = Origin::start(move |_| {
        let html = served.lock().map(|p| p.clone()).unwrap_or_default();
        Reply::ok(&html)
            .cc("no-store")
            .header("content-type", "text/html; charset=utf-8")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let script =
        String::from_utf8(get(shellac.admin, "/dashboard.js").await.body.to_vec()).unwrap();
    assert!(script.contains("function chart("), "{script}");
    // Seconds 0-39: values with 3 s without at 4-6 (carried), then 10 s without at 10-19 (5
    // carried, then a gap), values at 20-32, 6 s without at 33-38 (5 carried, a gap), and a
    // lone value at 39, the newest.
    let test = r#"
        const t = Array.from({ length: 40 }, (_, i) => 1000 + i);
        const shape = (a, b) => t.map((_, i) =>
          (i >= 4 && i <= 6) || (i >= 10 && i <= 19) || (i >= 33 && i <= 38) ? null
            : i < 10 ? a : b);
        chart("hit", t, [{ values: shape(0.5, 0.8), color: COLORS.c }], "ratio", true);
        chart("ttfb", t, [{ values: shape(1500, 2500), color: COLORS.c }], "micros", true);
        document.body.dataset.drawn = "yes";
    "#;
    *page.lock().unwrap() = format!(
        "<!doctype html><html><body><span id=\"status\"></span><select id=\"top-site\"></select>\
         <canvas id=\"hit\" style=\"width:600px;height:160px\"></canvas>\
         <canvas id=\"ttfb\" style=\"width:600px;height:160px\"></canvas>\
         <script>{script}</script><script>{test}</script></body></html>"
    );
    let url = format!("http://{}/gap.html", shellac.addr);
    let dom = tokio::task::spawn_blocking(move || {
        run_chromium(
            bin,
            &[
                "--virtual-time-budget=2000".into(),
                "--window-size=800,600".into(),
                "--dump-dom".into(),
                url,
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(
        attribute(&dom, "<body", "data-drawn").as_deref(),
        Some("yes"),
        "{dom}"
    );
    for (chart, lowest) in [("hit", 0.5), ("ttfb", 1500.0)] {
        let attr = |name: &str| {
            attribute(&dom, &format!("id=\"{chart}\""), name)
                .unwrap_or_else(|| panic!("{chart}: no {name}: {dom}"))
        };
        // Three pieces: 0-14 (4-6 and 10-14 carried), 20-37 (33-37 carried), the lone 39 (a
        // dot): the last 5 s of the 10 s stretch and the last second of the 6 s one are gaps.
        assert_eq!(attr("data-segments"), "3", "{chart}: {dom}");
        assert_eq!(attr("data-dots"), "1", "{chart}: the lone value: {dom}");
        assert_eq!(attr("data-points"), (15 + 18 + 1).to_string(), "{chart}");
        // Nothing fell to 0 in the gaps.
        let drawn: f64 = attr("data-lowest").parse().unwrap();
        assert_eq!(drawn, lowest, "{chart}: {dom}");
    }
    shellac.stop().await;
}
