//! Edge Side Includes end to end (issue 29, docs/esi.md): a real origin, the real proxy.
//! Pages nested, failing, looping and cross-host; `alt` and `onerror`; the sub-requests'
//! hygiene; includes fetched in parallel (shown by what the origin saw while no fragment had
//! finished, not by timing); parsed once (the counters); VCL's `do_esi` and `req.esi_level`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::vcl::start_vcl;
use common::*;
use http_body_util::BodyExt;
use shellac::config::Config;
use shellac::config::rules::RuleConfig;
use tokio::sync::Notify;

/// The origin every test shares the shape of: pages and fragments by path.
fn site(s: &Seen) -> Reply {
    let page = |body: &str| {
        Reply::ok(body)
            .cc("max-age=60")
            .header("content-type", "text/html")
    };
    match s.path.as_str() {
        "/page" => page(r#"<html><esi:include src="/a"/>-<esi:include src="b"/></html>"#),
        "/a" => page("A"),
        "/b" => page("B"),
        "/nested" => page(r#"<p>[<esi:include src="/mid"/>]"#),
        "/mid" => page(r#"<b>(<esi:include src="/a"/><esi:remove>gone</esi:remove>)"#),
        "/loop" => page(r#"<x><esi:include src="/loop"/>y"#),
        "/bad" => Reply::ok("broken").status(500),
        "/missing" => Reply::ok("not here").status(404),
        "/alt" => page("ALT"),
        "/with-alt" => page(r#"<p><esi:include src="/bad" alt="/alt"/></p>"#),
        "/continue" => page(r#"<p>1<esi:include src="/bad" onerror="continue"/>2</p>"#),
        "/first-fails" => page(r#"<esi:include src="/bad"/><p>rest</p>"#),
        "/late-fails" => page(r#"<p>start<esi:include src="/bad"/>end</p>"#),
        "/404-alt" => page(r#"<p><esi:include src="/missing" alt="/alt"/></p>"#),
        "/cross" => page(
            r#"<p><esi:include src="http://evil.example/steal" onerror="continue"/><esi:include src="http://frag.example/a"/></p>"#,
        ),
        "/sc" => Reply::ok(r#"<p><esi:include src="/a"/></p>"#)
            .cc("max-age=0")
            .header(
                "surrogate-control",
                r#"content="ESI/1.0";shellac, max-age=120, no-store;cdn"#,
            ),
        "/json" => Reply::ok(r#"{"a": "<esi:include src=/a/>"}"#).cc("max-age=60"),
        "/malformed" => page(r#"<p><esi:include/>ok</p>"#),
        "/short" => Reply::ok(r#"<p><esi:include src="/short-frag"/></p>"#).cc("max-age=300"),
        "/short-frag" => Reply::ok("S").cc("max-age=5"),
        "/hygiene" => page(r#"<esi:include src="/echo"/>"#),
        "/echo" => Reply::ok("E").cc("no-store"),
        // Long enough for `[compression]` to gzip an identity page at fetch.
        "/big" => page(&format!(
            "<html>{}<esi:include src=\"/a\"/>{}</html>",
            "x".repeat(600),
            "y".repeat(600)
        )),
        "/gz" => Reply {
            body: ReplyBody::Bytes(gzip(
                br#"<p><esi:include src="/a"/>:<esi:include src="/gzfrag"/></p>"#,
            )),
            ..page("")
        }
        .header("content-encoding", "gzip"),
        "/gzfrag" => Reply {
            body: ReplyBody::Bytes(gzip(b"G")),
            ..page("")
        }
        .header("content-encoding", "gzip"),
        _ => Reply::ok("?").status(404),
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// ESI on for every response (a rule with `esi = true` and no matcher).
fn esi_rule(config: &mut Config) {
    config.rules.push(RuleConfig {
        name: "esi".into(),
        esi: true,
        ..Default::default()
    });
}

/// ESI on for the paths `path` (a regex) matches only.
fn esi_on(config: &mut Config, path: &str) {
    config.rules.push(RuleConfig {
        name: "esi".into(),
        path: Some(path.into()),
        esi: true,
        ..Default::default()
    });
}

async fn get_text(shellac: &Shellac, path: &str) -> (u16, String) {
    let r = get(shellac.addr, path).await;
    (r.status, r.text())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_is_assembled_and_a_hit_never_parses_again() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    let r = get(shellac.addr, "/page").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "<html>A-B</html>");
    assert!(
        r.header("shellac-esi").is_none(),
        "the program field is internal"
    );
    assert!(r.header("content-length").is_none());
    // Parsed: the page and its two fragments; one of them held ESI.
    assert_eq!(shellac.stat("esi_parsed").await, 3);
    assert_eq!(shellac.stat("esi_programs").await, 1);
    let seen = origin.count();
    for _ in 0..3 {
        assert_eq!(
            get_text(&shellac, "/page").await,
            (200, "<html>A-B</html>".into())
        );
    }
    assert_eq!(origin.count(), seen, "hits: no origin request");
    assert_eq!(
        shellac.stat("esi_parsed").await,
        3,
        "a hit never parses again"
    );
    assert_eq!(shellac.stat("esi_includes").await, 8);
    assert_eq!(
        shellac.stat("cache_hit_fast").await,
        0,
        "the fast path steps aside"
    );
    // HEAD: the assembled page's fields, no body, no include fetched.
    let head = request(shellac.addr, "HEAD", "/page", &[], b"").await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(shellac.stat("esi_includes").await, 8);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_includes_and_removals() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    assert_eq!(
        get_text(&shellac, "/nested").await,
        (200, "<p>[<b>(A)]".into())
    );
    // Again from the cache: the same page.
    assert_eq!(
        get_text(&shellac, "/nested").await,
        (200, "<p>[<b>(A)]".into())
    );
    shellac.stop().await;
}

/// Every include is an access-log line of its own, marked: its depth and the page that
/// included it (`%{esi_level}x`, `%{esi_parent}x`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_log_lines_mark_esi_sub_requests() {
    let dir = temp_dir("esi-log");
    let path = dir.join("access.log");
    let origin = Origin::start(site).await;
    let log = path.to_str().unwrap().to_string();
    let shellac = Shellac::start(origin.addr, |c| {
        esi_rule(c);
        c.log.access_log = log;
        c.log.format = "%U %{esi_level}x %{esi_parent}x %>s".into();
    })
    .await;
    assert_eq!(get_text(&shellac, "/nested").await.1, "<p>[<b>(A)]");
    // Lines from different workers may interleave: compare sorted.
    let mut lines = wait_lines(&path, 3).await;
    lines.sort();
    assert_eq!(
        lines,
        vec!["/a 2 /mid 200", "/mid 1 /nested 200", "/nested 0 - 200"]
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// `esi.max_includes`: a client's page and its fragments together fetch at most that many
/// includes; the rest fail (`esi_include_limited`), here left out (`onerror="continue"`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_tree_fetches_at_most_max_includes() {
    let origin = Origin::start(|s| match s.path.as_str() {
        "/many" => Reply::ok(&format!(
            "<p>{}</p>",
            r#"<esi:include src="/a" onerror="continue"/>"#.repeat(5)
        ))
        .cc("max-age=60"),
        // Two levels: the page's include and its fragment's share one budget.
        "/tree" => Reply::ok(r#"<p><esi:include src="/branch"/>|<esi:include src="/b" onerror="continue"/></p>"#)
            .cc("max-age=60"),
        "/branch" => Reply::ok(r#"<i><esi:include src="/a" onerror="continue"/><esi:include src="/a" onerror="continue"/></i>"#)
            .cc("max-age=60"),
        _ => site(s),
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        esi_rule(c);
        c.esi.max_includes = 3;
    })
    .await;
    assert_eq!(
        get_text(&shellac, "/many").await,
        (200, "<p>AAA</p>".into())
    );
    assert_eq!(shellac.stat("esi_include_limited").await, 2);
    // A new client request has a new budget: /branch, then of its two /a and the page's /b,
    // two more fit.
    let (status, body) = get_text(&shellac, "/tree").await;
    assert_eq!(status, 200);
    let fetched = body.matches('A').count() + body.matches('B').count();
    assert!(
        body.starts_with("<p><i>") && body.ends_with("</p>"),
        "{body}"
    );
    assert_eq!(fetched, 2, "{body}");
    assert_eq!(shellac.stat("esi_include_limited").await, 3);
    shellac.stop().await;
}

/// An `https://` include is fetched (Varnish ignores it): its host is a backend's, reached
/// over TLS (here a second Shellac terminating TLS for `secure.test`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_include_is_fetched_from_a_tls_origin() {
    use common::tls::{Pki, tls_table};
    let pki = Pki::new("esi-https");
    let inner = Origin::start(|s| Reply::ok(&format!("secure {}", s.path)).cc("max-age=60")).await;
    let cert = pki.leaf("secure", &["secure.test"]);
    let tls = Config::parse(
        &format!(
            "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
            tls_table(&[&cert], "")
        ),
        "t.toml",
    )
    .unwrap()
    .tls;
    let tls_origin = Shellac::start(inner.addr, |c| c.tls = tls).await;
    let port = tls_origin.tls_addrs()[0].port();
    let origin = Origin::start(|s| match s.path.as_str() {
        "/page" => {
            Reply::ok(r#"<p><esi:include src="https://secure.test/frag"/></p>"#).cc("max-age=60")
        }
        _ => Reply::ok("?").status(404),
    })
    .await;
    let text = format!(
        "[[backend]]\nname = \"default\"\nhost = \"127.0.0.1\"\n\
         [[backend]]\nname = \"secure\"\nhost = \"127.0.0.1\"\nport = {port}\n\
         host_header = \"secure.test\"\n\
         tls = {{ server_name = \"secure.test\", ca = \"{}\" }}\n\
         [[rule]]\nname = \"to-secure\"\nhost = \"secure.test\"\ndirector = \"secure\"\n\
         [[rule]]\nname = \"esi\"\nesi = true\n",
        pki.ca_file.display()
    );
    let parsed = Config::parse(&text, "t.toml").unwrap();
    let shellac = Shellac::start(origin.addr, move |c| {
        c.backends.push(parsed.backends[1].clone());
        c.rules = parsed.rules.clone();
    })
    .await;
    assert_eq!(
        get_text(&shellac, "/page").await,
        (200, "<p>secure /frag</p>".into())
    );
    assert_eq!(inner.count(), 1, "the fragment came through the TLS origin");
    assert_eq!(shellac.stat("esi_include_refused").await, 0);
    // Varnish's `+esi_ignore_https` warning ("https:// treated as http://"), counted.
    assert_eq!(shellac.stat("esi_warnings").await, 1);
    shellac.stop().await;
    tls_origin.stop().await;
}

/// The parser's settings end to end: a body not starting with `<` is parsed only with
/// `esi.disable_xml_check`; a UTF-8 byte-order mark before the `<` is removed (and the page
/// parsed) only with `esi.remove_bom`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xml_check_and_byte_order_mark_settings() {
    let pages = |s: &Seen| match s.path.as_str() {
        "/text" => Reply::ok(r#"x <esi:include src="/a"/> y"#).cc("max-age=60"),
        "/bom" => Reply::ok("\u{feff}<p><esi:include src=\"/a\"/></p>").cc("max-age=60"),
        _ => site(s),
    };
    let origin = Origin::start(pages).await;
    let plain = Shellac::start(origin.addr, esi_rule).await;
    assert_eq!(
        get_text(&plain, "/text").await,
        (200, r#"x <esi:include src="/a"/> y"#.into())
    );
    assert_eq!(
        get_text(&plain, "/bom").await,
        (200, "\u{feff}<p><esi:include src=\"/a\"/></p>".into())
    );
    assert_eq!(plain.stat("esi_not_xml").await, 2);
    plain.stop().await;
    let origin = Origin::start(pages).await;
    let set = Shellac::start(origin.addr, |c| {
        esi_rule(c);
        c.esi.disable_xml_check = true;
        c.esi.remove_bom = true;
    })
    .await;
    assert_eq!(get_text(&set, "/text").await, (200, "x A y".into()));
    assert_eq!(get_text(&set, "/bom").await, (200, "<p>A</p>".into()));
    set.stop().await;
}

/// `esi.include_timeout`: a fragment whose origin does not answer in time fails (here left
/// out, `onerror="continue"`) instead of holding the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fragment_past_include_timeout_fails() {
    let origin = Origin::start(|s| match s.path.as_str() {
        "/slow-frag" => Reply::ok("late").delay(Duration::from_secs(20)),
        "/waits" => Reply::ok(r#"<p>1<esi:include src="/slow-frag" onerror="continue"/>2</p>"#)
            .cc("max-age=60"),
        _ => site(s),
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        esi_rule(c);
        c.esi.include_timeout = shellac::config::units::Dur(Duration::from_millis(300));
    })
    .await;
    assert_eq!(
        get_text(&shellac, "/waits").await,
        (200, "<p>12</p>".into())
    );
    assert_eq!(shellac.stat("esi_include_failed").await, 1);
    assert_eq!(shellac.stat("esi_include_dropped").await, 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_include_loop_ends_at_the_depth_limit() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, |c| {
        esi_rule(c);
        c.esi.max_depth = 3;
    })
    .await;
    // Levels 0..=3 each add x and y; level 3's include is not fetched.
    assert_eq!(
        get_text(&shellac, "/loop").await,
        (200, "<x><x><x><x>yyyy".into())
    );
    assert!(shellac.stat("esi_depth_limited").await >= 1);
    assert_eq!(
        origin.count_path("/loop"),
        1,
        "one fetch, the rest are hits"
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_fragments_use_alt_then_onerror_then_fail_the_page() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    assert_eq!(
        get_text(&shellac, "/with-alt").await,
        (200, "<p>ALT</p>".into())
    );
    assert_eq!(shellac.stat("esi_include_alt").await, 1);
    // With alt (or onerror) a 4xx fails the fragment too (W3C ESI).
    assert_eq!(
        get_text(&shellac, "/404-alt").await,
        (200, "<p>ALT</p>".into())
    );
    assert_eq!(
        get_text(&shellac, "/continue").await,
        (200, "<p>12</p>".into())
    );
    assert!(shellac.stat("esi_include_dropped").await >= 1);
    // Before the first byte: the page fails.
    let r = get(shellac.addr, "/first-fails").await;
    assert_eq!(r.status, 503);
    assert_eq!(shellac.stat("esi_page_failed").await, 1);
    // After it: the fragment is left out (esi.late_failure = "drop").
    assert_eq!(
        get_text(&shellac, "/late-fails").await,
        (200, "<p>startend</p>".into())
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_failure_can_cut_the_response() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, |c| {
        esi_rule(c);
        c.esi.late_failure = shellac::config::esi::LateFailure::Abort;
    })
    .await;
    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn.send_head("GET", "/late-fails", &[], b"").await;
    assert_eq!(resp.status(), 200);
    let body = resp.into_body().collect().await;
    assert!(body.is_err(), "the body is cut");
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn includes_reach_only_allowed_hosts() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, |c| {
        esi_rule(c);
        c.esi.hosts = vec!["frag.example".into()];
    })
    .await;
    assert_eq!(get_text(&shellac, "/cross").await, (200, "<p>A</p>".into()));
    assert_eq!(shellac.stat("esi_include_refused").await, 1);
    let seen = origin.seen.lock().unwrap().clone();
    assert!(seen.iter().all(|s| s.path != "/steal"), "never fetched");
    let frag = seen
        .iter()
        .find(|s| s.path == "/a")
        .expect("fragment fetched");
    assert_eq!(frag.headers["host"], "frag.example");
    shellac.stop().await;
    // `"*"`: every host, as Varnish (the include still goes to a configured backend).
    let shellac = Shellac::start(origin.addr, |c| {
        esi_rule(c);
        c.esi.hosts = vec!["*".into()];
    })
    .await;
    // `/steal` is fetched (a 404 here: dropped by its `onerror="continue"`).
    assert_eq!(get_text(&shellac, "/cross").await, (200, "<p>A</p>".into()));
    assert_eq!(shellac.stat("esi_include_refused").await, 0);
    let seen = origin.seen.lock().unwrap().clone();
    assert!(seen.iter().any(|s| s.path == "/steal"), "fetched");
    shellac.stop().await;
}

/// `esi.surrogate_control`: Shellac names itself upstream, the origin's `Surrogate-Control`
/// turns ESI on and sets the stored lifetime (here over `Cache-Control: max-age=0`; the
/// `no-store` for another device does not apply); the field never reaches the client. Off,
/// nothing is assembled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn surrogate_control_turns_esi_on_when_enabled() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, |c| c.esi.surrogate_control = true).await;
    for _ in 0..2 {
        let r = get(shellac.addr, "/sc").await;
        assert_eq!((r.status, r.text()), (200, "<p>A</p>".into()));
        assert!(r.header("surrogate-control").is_none());
    }
    let seen = origin.seen.lock().unwrap().clone();
    let pages: Vec<_> = seen.iter().filter(|s| s.path == "/sc").collect();
    assert_eq!(pages.len(), 1, "stored for Surrogate-Control's max-age");
    assert_eq!(shellac.stat("esi_surrogate").await, 1);
    assert_eq!(
        pages[0].headers["surrogate-capability"],
        r#"shellac="ESI/1.0""#
    );
    shellac.stop().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let r = get(shellac.addr, "/sc").await;
    assert_eq!(r.text(), r#"<p><esi:include src="/a"/></p>"#);
    let seen = origin.seen.lock().unwrap().clone();
    assert!(
        seen.last()
            .is_some_and(|s| !s.headers.contains_key("surrogate-capability"))
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_requests_are_plain_gets() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    let r = get_with(
        shellac.addr,
        "/hygiene",
        &[
            ("range", "bytes=0-3"),
            ("if-none-match", "\"x\""),
            ("if-modified-since", "Sat, 28 Nov 2026 00:00:00 GMT"),
            ("accept-encoding", "br"),
            ("cookie", "session=1"),
        ],
    )
    .await;
    // The conditionals are not answered from the page's validators; the Range is cut
    // from the assembled page (`a_range_is_cut_from_the_assembled_page`).
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 0-3/*"));
    assert_eq!(r.text(), "E");
    let echo = origin.last();
    assert_eq!(echo.path, "/echo");
    assert_eq!(echo.method, "GET");
    for name in ["range", "if-none-match", "if-modified-since"] {
        assert!(
            echo.headers.get(name).is_none(),
            "{name} reached the fragment's origin"
        );
    }
    // The client's codings are not the fragment's (a fill asks for gzip on its own).
    assert_ne!(
        echo.headers.get("accept-encoding").map(|v| v.as_bytes()),
        Some(&b"br"[..])
    );
    assert_eq!(echo.headers["cookie"], "session=1");
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_fresh_no_longer_than_its_shortest_part() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    // The first delivery's head goes out once the page's first bytes (`<p>`) are ready: the
    // fragment is usually fetched after it, not known then, and a cache after Shellac must ask
    // again (`no-cache`); on a loaded machine the fragment can already be in when the head is
    // made, and then its freshness bounds the page's. From then on the fragment is stored, and
    // the page's head is made with its freshness.
    let first = get(shellac.addr, "/short").await;
    assert_eq!(first.text(), "<p>S</p>");
    let cc = first.header("cache-control").unwrap_or("");
    assert!(cc == "no-cache" || max_age(cc) <= 5, "{cc}");
    let r = get(shellac.addr, "/short").await;
    assert_eq!(r.text(), "<p>S</p>");
    let cc = r.header("cache-control").unwrap_or("");
    assert!(max_age(cc) <= 5, "{cc}");
    shellac.stop().await;
}

/// The `max-age` of a `Cache-Control` value (the test fails without one).
fn max_age(cc: &str) -> u64 {
    cc.split("max-age=")
        .nth(1)
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no max-age in {cc:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_markup_or_not_esi_passes_as_it_is() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    assert_eq!(
        get_text(&shellac, "/json").await,
        (200, r#"{"a": "<esi:include src=/a/>"}"#.into())
    );
    assert_eq!(shellac.stat("esi_not_xml").await, 1);
    let r = get(shellac.addr, "/malformed").await;
    assert_eq!((r.status, r.text()), (200, "<p>ok</p>".into()));
    assert!(shellac.stat("esi_errors").await >= 1);
    shellac.stop().await;
}

/// All includes of a page are requested before any of them has finished, and the page's
/// first bytes reach the client while none has: the fragments' bodies are held back by the
/// origin until the test lets them go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn includes_are_fetched_in_parallel_and_the_page_and_fragments_stream() {
    let gates: Arc<Vec<Arc<Notify>>> = Arc::new((0..4).map(|_| Arc::new(Notify::new())).collect());
    let g = gates.clone();
    let origin = Origin::start(move |s| {
        let frag = |i: usize| {
            Reply::ok("").cc("max-age=60").body(ReplyBody::Gated {
                first: format!("f{i}:").into_bytes(),
                gate: g[i].clone(),
                rest: b"done".to_vec(),
            })
        };
        match s.path.as_str() {
            "/par" => Reply::ok(
                "<p>head</p><esi:include src=\"/f0\"/><esi:include src=\"/f1\"/>\
                 <esi:include src=\"/f2\"/><esi:include src=\"/f3\"/>",
            )
            .cc("max-age=60"),
            "/f0" => frag(0),
            "/f1" => frag(1),
            "/f2" => frag(2),
            "/f3" => frag(3),
            _ => Reply::ok("?").status(404),
        }
    })
    .await;
    // ESI on for the page only: its fragments are plain bodies that stream.
    let shellac = Shellac::start(origin.addr, |config: &mut Config| {
        esi_on(config, "^/par$");
    })
    .await;
    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn.send_head("GET", "/par", &[], b"").await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let first = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("first bytes before any fragment finished")
        .expect("a frame")
        .expect("data");
    assert_eq!(first.into_data().expect("data"), "<p>head</p>");
    // Every fragment was requested, none has finished.
    for _ in 0..200 {
        if origin.count() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        origin.count(),
        5,
        "the four includes are in flight together"
    );
    // The first fragment streams: its first bytes come while the rest of it is held back
    // at the origin.
    let next = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("a fragment's first bytes before its end")
        .expect("a frame")
        .expect("data");
    assert_eq!(next.into_data().expect("data"), "f0:");
    for g in gates.iter() {
        g.notify_one();
    }
    let rest = body.collect().await.expect("body").to_bytes();
    assert_eq!(rest, "donef1:donef2:donef3:done");
    shellac.stop().await;
}

/// `esi.concurrency` bounds the includes of one page in flight: with 2, the page's four
/// uncached fragments are requested two at a time — the third only once the first has ended,
/// the fourth once the second has — and the page still comes whole, in page order. Each
/// fragment's origin notes how many fragments had been let finish when it was asked (no
/// timing is asserted: without the bound the last two are asked before any is let finish).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_includes_in_flight_are_bounded_by_concurrency() {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let gates: Arc<Vec<Arc<Notify>>> = Arc::new((0..4).map(|_| Arc::new(Notify::new())).collect());
    let released = Arc::new(AtomicUsize::new(0));
    let asked: Arc<Mutex<Vec<(String, usize)>>> = Arc::default();
    let (g, r, a) = (gates.clone(), released.clone(), asked.clone());
    let origin = Origin::start(move |s| {
        let frag = |i: usize| {
            if let Ok(mut asked) = a.lock() {
                asked.push((s.path.clone(), r.load(Ordering::SeqCst)));
            }
            Reply::ok("").cc("max-age=60").body(ReplyBody::Gated {
                first: format!("f{i}:").into_bytes(),
                gate: g[i].clone(),
                rest: b"done".to_vec(),
            })
        };
        match s.path.as_str() {
            "/bounded" => Reply::ok(
                "<p><esi:include src=\"/g0\"/><esi:include src=\"/g1\"/>\
                 <esi:include src=\"/g2\"/><esi:include src=\"/g3\"/></p>",
            )
            .cc("max-age=60"),
            "/g0" => frag(0),
            "/g1" => frag(1),
            "/g2" => frag(2),
            "/g3" => frag(3),
            _ => Reply::ok("?").status(404),
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |config: &mut Config| {
        config.esi.concurrency = 2;
        esi_on(config, "^/bounded$");
    })
    .await;
    let addr = shellac.addr;
    let page = tokio::spawn(async move { get(addr, "/bounded").await });
    // Let the fragments finish one by one in page order, each once the origin has seen as
    // many requests as the bound lets in (the page, then two fragments, then one more per
    // fragment finished).
    for (i, gate) in gates.iter().enumerate() {
        let seen = (1 + 2 + i).min(5);
        for _ in 0..400 {
            if origin.count() >= seen {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(origin.count() >= seen, "request {seen} never came");
        released.fetch_add(1, Ordering::SeqCst);
        gate.notify_one();
    }
    let r = tokio::time::timeout(Duration::from_secs(20), page)
        .await
        .expect("the page ends")
        .expect("the client task");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "<p>f0:donef1:donef2:donef3:done</p>");
    let asked = asked.lock().expect("asked").clone();
    let when = |path: &str| {
        asked
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, n)| *n)
            .unwrap_or_else(|| panic!("{path} was never asked: {asked:?}"))
    };
    assert_eq!((when("/g0"), when("/g1")), (0, 0), "{asked:?}");
    assert!(when("/g2") >= 1, "a third include in flight: {asked:?}");
    assert!(when("/g3") >= 2, "a third include in flight: {asked:?}");
    shellac.stop().await;
}

/// A page being fetched (a miss) is parsed as it arrives, not read whole first: its bytes
/// before an include, and the include, reach the client while the origin still holds the
/// rest of the page back. Its head went out before its end, so it is sent `no-cache` (the
/// freshness of its includes still to come is not known).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_being_fetched_is_assembled_as_it_arrives() {
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let origin = Origin::start(move |s| match s.path.as_str() {
        "/slow-page" => Reply::ok("").cc("max-age=60").body(ReplyBody::Gated {
            first: b"<p>head</p><esi:include src=\"/a\"/>".to_vec(),
            gate: g.clone(),
            rest: b"<p>tail</p><esi:include src=\"/b\"/>".to_vec(),
        }),
        _ => site(s),
    })
    .await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn.send_head("GET", "/slow-page", &[], b"").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap_or("")),
        Some("no-cache")
    );
    let mut body = resp.into_body();
    let mut got = Vec::new();
    while got != b"<p>head</p>A" {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("the page's first bytes and include before its end was fetched")
            .expect("a frame")
            .expect("data");
        got.extend_from_slice(&frame.into_data().expect("data"));
        assert!(b"<p>head</p>A".starts_with(&got), "{got:?}");
    }
    gate.notify_one();
    let rest = body.collect().await.expect("body").to_bytes();
    assert_eq!(rest, "<p>tail</p>B");
    // Stored with its program: the hit is the same page.
    assert_eq!(
        get_text(&shellac, "/slow-page").await,
        (200, "<p>head</p>A<p>tail</p>B".into())
    );
    assert_eq!(shellac.stat("esi_programs").await, 1);
    shellac.stop().await;
}

/// A page that turns out to hold no ESI keeps its `Content-Length` on the miss too (Varnish
/// 2.1.5 e00000, e00009).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_without_esi_keeps_its_length_on_the_miss() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    for _ in 0..2 {
        let r = get(shellac.addr, "/json").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some("30"));
        assert_eq!(r.text(), r#"{"a": "<esi:include src=/a/>"}"#);
    }
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vcl_do_esi_and_esi_level() {
    let origin = Origin::start(|s| {
        let level = s
            .headers
            .get("x-level")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_string();
        match s.path.as_str() {
            "/v" => Reply::ok(r#"<v><esi:include src="/vf"/></v>"#).cc("max-age=60"),
            "/vf" => Reply::ok(&format!("level={level}")).cc("max-age=60"),
            _ => Reply::ok("?").status(404),
        }
    })
    .await;
    let shellac = start_vcl(
        "esi",
        r#"vcl 4.0;
backend default { ${origin0} }
sub vcl_recv { set req.http.X-Level = req.esi_level; }
sub vcl_backend_response { if (bereq.url == "/v") { set beresp.do_esi = true; } }
"#,
        &[origin.addr],
    )
    .await;
    assert_eq!(
        get_text(&shellac, "/v").await,
        (200, "<v>level=1</v>".into())
    );
    shellac.stop().await;
}

/// VCL's view of ESI, as Varnish's: `req_top.*` in an include is the client's request (as its
/// vcl_recv left it; trunk e00030), `obj.can_esi` says the object is an ESI page,
/// `resp.do_esi = false` in vcl_deliver sends the page unassembled, and an HTTP/1.0 request
/// without `Host` is looked up by the address it came to, as the built-in vcl_hash does
/// (trunk e00012).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vcl_req_top_can_esi_resp_do_esi_and_the_key_without_host() {
    let origin = Origin::start(|s| {
        let field = |n: &str| {
            s.headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_string()
        };
        match s.path.as_str() {
            "/t" | "/raw" => Reply::ok(r#"<t><esi:include src="/tf"/></t>"#).cc("max-age=60"),
            "/tf" => {
                Reply::ok(&format!("{}|{}", field("top-url"), field("top-foo"))).cc("no-store")
            }
            _ => Reply::ok("?").status(404),
        }
    })
    .await;
    let shellac = start_vcl(
        "esitop",
        r#"vcl 4.1;
backend default { ${origin0} }
sub vcl_recv {
    if (req.esi_level == 0) { set req.http.foo = "bar"; }
    set req.http.top-url = req_top.url;
    set req.http.top-foo = req_top.http.foo;
}
sub vcl_backend_response { if (bereq.url != "/tf") { set beresp.do_esi = true; } }
sub vcl_deliver {
    set resp.http.can-esi = obj.can_esi;
    if (req.url == "/raw") { set resp.do_esi = false; }
}
"#,
        &[origin.addr],
    )
    .await;
    for _ in 0..2 {
        let r = get(shellac.addr, "/t").await;
        assert_eq!((r.status, r.text()), (200, "<t>/t|bar</t>".into()));
        assert_eq!(r.header("can-esi"), Some("true"));
    }
    let r = get(shellac.addr, "/raw").await;
    assert_eq!(r.text(), r#"<t><esi:include src="/tf"/></t>"#);
    let _ = raw(
        shellac.addr,
        b"GET /t HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    let before = origin.seen.lock().unwrap().len();
    let text = raw(shellac.addr, b"GET /t HTTP/1.0\r\n\r\n").await;
    assert!(text.starts_with("HTTP/1.0 200"), "{text}");
    let pages = origin.seen.lock().unwrap()[before..]
        .iter()
        .filter(|s| s.path == "/t")
        .count();
    assert_eq!(pages, 0, "the page is the one stored for Host: 127.0.0.1");
    shellac.stop().await;
}

/// Regression (Varnish's e00000): `obj.can_esi` read true on the first, streamed request of
/// a body that holds no ESI. Varnish fetches an ESI object whole before vcl_deliver, so it
/// answers from the parse: false for a body that is not XML or has no ESI element, true for
/// a page with one. Shellac's deliver step now waits for the parse's answer (no include
/// starts before it), on the miss as on the hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn varnish_e00000_can_esi_on_the_first_request_is_the_parses_answer() {
    let origin = Origin::start(|s| match s.path.as_str() {
        "/text" => Reply::ok("-This is a test: Hello world\n").cc("max-age=60"),
        "/plain" => Reply::ok("<p>no ESI here</p>").cc("max-age=60"),
        "/page" => Reply::ok(r#"<p><esi:include src="/frag"/></p>"#).cc("max-age=60"),
        "/frag" => Reply::ok("frag").cc("max-age=60"),
        _ => Reply::ok("?").status(404),
    })
    .await;
    let shellac = start_vcl(
        "canesi",
        r#"vcl 4.1;
backend default { ${origin0} }
sub vcl_backend_response { set beresp.do_esi = true; }
sub vcl_deliver {
    set resp.http.can-esi = obj.can_esi;
    set resp.http.do-esi = resp.do_esi;
}
"#,
        &[origin.addr],
    )
    .await;
    for (path, body, esi) in [
        ("/text", "-This is a test: Hello world\n", "false"),
        ("/plain", "<p>no ESI here</p>", "false"),
        ("/page", "<p>frag</p>", "true"),
    ] {
        for round in ["miss", "hit"] {
            let r = get(shellac.addr, path).await;
            assert_eq!((r.status, r.text()), (200, body.into()), "{path} {round}");
            assert_eq!(r.header("can-esi"), Some(esi), "{path} {round}");
            assert_eq!(r.header("do-esi"), Some(esi), "{path} {round}");
        }
    }
    shellac.stop().await;
}

/// Regression: a page VCL passes (`return (pass)`) with `beresp.do_esi` went out with its
/// ESI markup unprocessed (Varnish's e00018). Its include is not a client request, and its
/// bytes are counted once, as the page's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_passed_by_vcl_is_assembled() {
    let origin = Origin::start(site).await;
    let shellac = start_vcl(
        "esipass",
        r#"vcl 4.1;
backend default { ${origin0} }
sub vcl_recv { if (req.url == "/page") { return (pass); } }
sub vcl_backend_response { set beresp.do_esi = true; }
"#,
        &[origin.addr],
    )
    .await;
    for _ in 0..2 {
        assert_eq!(
            get_text(&shellac, "/page").await,
            (200, "<html>A-B</html>".into())
        );
    }
    assert_eq!(shellac.stat("client_req").await, 2);
    assert_eq!(shellac.stat("esi_includes").await, 4);
    assert_eq!(
        shellac.stat("s_resp_bytes").await,
        2 * "<html>A-B</html>".len() as u64
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vcl_2_esi_statement() {
    let origin = Origin::start(site).await;
    let shellac = start_vcl(
        "esi2",
        r#"backend default { ${origin0} }
sub vcl_fetch { esi; }
"#,
        &[origin.addr],
    )
    .await;
    assert_eq!(
        get_text(&shellac, "/page").await,
        (200, "<html>A-B</html>".into())
    );
    shellac.stop().await;
}

fn gunzip(data: &[u8]) -> String {
    use std::io::Read;
    let mut out = String::new();
    flate2::read::GzDecoder::new(data)
        .read_to_string(&mut out)
        .expect("a whole gzip stream");
    out
}

/// With `[compression]` on: an identity page long enough to be gzipped is not at fetch (its
/// program is over the bytes stored), an origin's gzip page is decoded at fetch and parsed, a
/// gzip fragment is decoded for the sub-request; the assembled page — here of one identity
/// and one gzip-stored fragment — is gzipped on the fly for a gzip client and sent identity
/// to an identity client, both with `Vary: Accept-Encoding`, from the same stored objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esi_pages_and_content_codings() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    let want = format!("<html>{}A{}</html>", "x".repeat(600), "y".repeat(600));
    for round in 0..2 {
        for ae in ["gzip", "identity"] {
            for (path, want) in [("/big", want.as_str()), ("/gz", "<p>A:G</p>")] {
                let r = get_with(shellac.addr, path, &[("accept-encoding", ae)]).await;
                assert_eq!(r.status, 200, "{path} {ae} {round}");
                assert_eq!(r.header("vary"), Some("Accept-Encoding"));
                let body = if ae == "gzip" {
                    assert_eq!(r.header("content-encoding"), Some("gzip"));
                    gunzip(&r.body)
                } else {
                    assert!(r.header("content-encoding").is_none(), "{path} {ae}");
                    r.text()
                };
                assert_eq!(body, want, "{path} {ae} {round}");
            }
        }
    }
    assert_eq!(shellac.stat("esi_program_damaged").await, 0);
    shellac.stop().await;
}

/// The disk tier: a page's program is stored with it on disk; after a restart the page is
/// read back from disk and assembled from its stored program (never parsed again), its
/// fragments read back too — no origin request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_esi_page_survives_a_restart_on_the_disk_tier() {
    use shellac::config::units::Size;
    use shellac::config::{Admission, DiskConfig};
    let origin = Origin::start(site).await;
    let dir = TempDir::new("esi-disk");
    let data = dir.path("cache.dat");
    let with_disk = |c: &mut Config| {
        esi_rule(c);
        c.storage.disk = Some(DiskConfig {
            path: data.clone(),
            size: Size(8 << 20),
            region_size: Size(1 << 20),
            admission: Admission::Always,
            on_open_error: Default::default(),
        });
    };
    let shellac = Shellac::start(origin.addr, with_disk).await;
    assert_eq!(
        get_text(&shellac, "/page").await,
        (200, "<html>A-B</html>".into())
    );
    for _ in 0..400 {
        if shellac.stat("n_object_disk").await >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(shellac.stat("n_object_disk").await, 3, "page and fragments");
    shellac.stop().await;
    let seen = origin.count();

    let shellac = Shellac::start(origin.addr, with_disk).await;
    let r = get(shellac.addr, "/page").await;
    assert_eq!((r.status, r.text()), (200, "<html>A-B</html>".into()));
    assert!(
        r.cache_status().ends_with("detail=disk"),
        "{}",
        r.cache_status()
    );
    assert_eq!(
        origin.count(),
        seen,
        "nothing fetched again after the restart"
    );
    assert_eq!(
        shellac.stat("esi_parsed").await,
        0,
        "the stored program is used"
    );
    assert_eq!(shellac.stat("esi_program_damaged").await, 0);
    assert_eq!(shellac.stat("esi_includes").await, 2);
    shellac.stop().await;
}

/// Under VCL a page goes out gzip only when Varnish would have stored it gzip (the per-page
/// mark, `esi::stored::GZIP`): the origin sent it gzip (and `do_gunzip` was not set) or
/// `beresp.do_gzip` gzipped it. Such a page is gzip to a gzip client and decoded for the
/// others, `Vary: Accept-Encoding` on both, on the miss and on the hit; an identity page, or
/// a gzip one `do_gunzip` decoded, is identity to every client with no `Vary` (trunk
/// e00028). Held for a page with includes and for one without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_goes_out_gzip_only_when_it_came_or_was_made_gzip() {
    let origin = Origin::start(|s| {
        let gz = |body: &[u8]| {
            Reply {
                body: ReplyBody::Bytes(gzip(body)),
                ..Reply::ok("").cc("max-age=60")
            }
            .header("content-encoding", "gzip")
        };
        match s.path.as_str() {
            "/plain" | "/made" => Reply::ok(r#"<p><esi:include src="/f"/></p>"#).cc("max-age=60"),
            "/came" | "/decoded" => gz(br#"<p><esi:include src="/f"/></p>"#),
            "/bare" => gz(b"<p>no markup</p>"),
            "/f" => Reply::ok("F").cc("max-age=60"),
            _ => Reply::ok("?").status(404),
        }
    })
    .await;
    let shellac = start_vcl(
        "esi-gzip-mark",
        r#"vcl 4.1;
backend default { ${origin0} }
sub vcl_backend_response {
    if (bereq.url != "/f") { set beresp.do_esi = true; }
    if (bereq.url == "/made") { set beresp.do_gzip = true; }
    if (bereq.url == "/decoded") { set beresp.do_gunzip = true; }
}
"#,
        &[origin.addr],
    )
    .await;
    for round in 0..2 {
        for (path, want, gzipped) in [
            ("/plain", "<p>F</p>", false),
            ("/decoded", "<p>F</p>", false),
            ("/made", "<p>F</p>", true),
            ("/came", "<p>F</p>", true),
            ("/bare", "<p>no markup</p>", true),
        ] {
            for ae in ["gzip", "identity"] {
                let r = get_with(shellac.addr, path, &[("accept-encoding", ae)]).await;
                let at = format!("{path} {ae} round {round}");
                assert_eq!(r.status, 200, "{at}");
                let vary = gzipped.then_some("Accept-Encoding");
                assert_eq!(r.header("vary"), vary, "{at}");
                let body = if gzipped && ae == "gzip" {
                    assert_eq!(r.header("content-encoding"), Some("gzip"), "{at}");
                    gunzip(&r.body)
                } else {
                    assert!(r.header("content-encoding").is_none(), "{at}");
                    r.text()
                };
                assert_eq!(body, want, "{at}");
            }
        }
    }
    shellac.stop().await;
}

/// One closed Range over an assembled page is cut from the assembled bytes (`206`,
/// `Content-Range: bytes a-b/*`: the page's length is known only at its end), on the hit and
/// on the miss, after a gzip page is decoded for the client; an open range, several ranges or
/// `If-Range` get the whole page (trunk e00015).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_is_cut_from_the_assembled_page() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    // `/page` assembles to "<html>A-B</html>", `/gz` (gzip at the origin) to "<p>A:G</p>".
    for round in 0..2 {
        for (path, want) in [("/page", "tml>A"), ("/gz", ">A:G<")] {
            let r = get_with(shellac.addr, path, &[("range", "bytes=2-6")]).await;
            let at = format!(
                "{path} round {round}: {:?} {}",
                r.header("content-range"),
                r.text()
            );
            assert_eq!(r.status, 206, "{at}");
            assert_eq!(r.header("content-range"), Some("bytes 2-6/*"), "{at}");
            assert!(r.header("content-length").is_none(), "{at}");
            assert_eq!(r.text(), want, "{at}");
        }
    }
    for range in ["bytes=2-", "bytes=0-1,3-4"] {
        let r = get_with(shellac.addr, "/page", &[("range", range)]).await;
        assert_eq!(
            (r.status, r.text()),
            (200, "<html>A-B</html>".into()),
            "{range}"
        );
    }
    let r = get_with(
        shellac.addr,
        "/page",
        &[("range", "bytes=2-6"), ("if-range", "\"x\"")],
    )
    .await;
    assert_eq!((r.status, r.text()), (200, "<html>A-B</html>".into()));
    // Past the page's end: what there is of it.
    let r = get_with(shellac.addr, "/page", &[("range", "bytes=10-99")]).await;
    assert_eq!((r.status, r.text()), (206, "/html>".into()));
    shellac.stop().await;
}

/// The origin of the stall tests: `/stalls` and `/stalls2` send their head and `part`, then
/// nothing more (their gate is never opened); the pages include them among stored fragments.
fn stalling(stuck: Arc<Notify>) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    move |s| {
        let page = |body: &str| Reply::ok(body).cc("max-age=60");
        match s.path.as_str() {
            "/stalls" | "/stalls2" => Reply::ok("").cc("max-age=60").body(ReplyBody::Gated {
                first: b"part".to_vec(),
                gate: stuck.clone(),
                rest: b"never".to_vec(),
            }),
            "/stall-page" => page(
                r#"<p><esi:include src="/stalls"/>|<esi:include src="/a"/>|<esi:include src="/b"/>|<esi:include src="/c"/></p>"#,
            ),
            "/stall-page2" => {
                page(r#"<p><esi:include src="/a"/>|<esi:include src="/stalls2"/>|</p>"#)
            }
            "/c" => page("C"),
            _ => site(s),
        }
    }
}

/// A fragment whose origin sends its head and part of its body, then stalls: the page keeps
/// its order and its bound (with `esi.concurrency = 2` the stalled fragment and the stored
/// one read in place behind it hold both places: `/c` is not asked for while it stalls);
/// past the backend's `between_bytes_timeout` the fragment fails as a failure after the
/// page's first byte does — its bytes so far stay, the rest is left out
/// (`esi.late_failure = "drop"`) — and the page goes on and ends. The stalled fragment is not
/// stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fragment_that_stalls_mid_body_is_dropped_at_the_between_bytes_timeout() {
    let stuck = Arc::new(Notify::new());
    let origin = Origin::start(stalling(stuck.clone())).await;
    let shellac = Shellac::start(origin.addr, |c| {
        esi_rule(c);
        c.esi.concurrency = 2;
        c.backends[0].between_bytes_timeout =
            shellac::config::units::Dur(Duration::from_millis(1500));
    })
    .await;
    // Stored: read in place by the page.
    assert_eq!(get_text(&shellac, "/a").await, (200, "A".into()));
    assert_eq!(get_text(&shellac, "/b").await, (200, "B".into()));
    let addr = shellac.addr;
    let page = tokio::spawn(async move { get(addr, "/stall-page").await });
    assert!(
        eventually(Duration::from_secs(10), || async {
            origin.count_path("/stalls") == 1
        })
        .await,
        "the stalling fragment is asked for"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        origin.count_path("/c"),
        0,
        "a third include in flight while the first stalls"
    );
    let r = tokio::time::timeout(Duration::from_secs(30), page)
        .await
        .expect("the page ends")
        .expect("the client task");
    assert_eq!((r.status, r.text()), (200, "<p>part|A|B|C</p>".into()));
    assert_eq!(shellac.stat("esi_include_failed").await, 1);
    assert_eq!(shellac.stat("esi_include_dropped").await, 1);
    assert_eq!(origin.count_path("/c"), 1);
    // Not stored: asked for again.
    let page = tokio::spawn(async move { get(addr, "/stall-page").await });
    let r = tokio::time::timeout(Duration::from_secs(30), page)
        .await
        .expect("the page ends")
        .expect("the client task");
    assert_eq!((r.status, r.text()), (200, "<p>part|A|B|C</p>".into()));
    assert_eq!(origin.count_path("/stalls"), 2);
    shellac.stop().await;
}

/// The same stall with `esi.late_failure = "abort"`, the fragment asked for by the page while
/// another client's request is already fetching it (the page's sub-request follows that
/// fetch): at the backend's `between_bytes_timeout` both responses are cut — the page after
/// the bytes it had sent (its head went out with `<p>A|`), the other client's after `part` —
/// and neither hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_fragment_that_stalls_cuts_the_page_with_late_failure_abort() {
    let stuck = Arc::new(Notify::new());
    let origin = Origin::start(stalling(stuck.clone())).await;
    let shellac = Shellac::start(origin.addr, |c| {
        esi_on(c, "^/stall-page2$");
        c.esi.late_failure = shellac::config::esi::LateFailure::Abort;
        c.backends[0].between_bytes_timeout =
            shellac::config::units::Dur(Duration::from_millis(1500));
    })
    .await;
    assert_eq!(get_text(&shellac, "/a").await, (200, "A".into()));
    // Another client fetches the fragment first: head and `part`, then the stall.
    let mut direct = Conn::open(shellac.addr).await;
    let resp = direct.send_head("GET", "/stalls2", &[], b"").await;
    assert_eq!(resp.status(), 200);
    let mut direct = resp.into_body();
    let first = tokio::time::timeout(Duration::from_secs(10), direct.frame())
        .await
        .expect("the fragment's first bytes")
        .expect("a frame")
        .expect("data");
    assert_eq!(first.into_data().expect("data"), "part");
    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn.send_head("GET", "/stall-page2", &[], b"").await;
    assert_eq!(resp.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(30), resp.into_body().collect())
        .await
        .expect("the page ends");
    assert!(body.is_err(), "the page is cut");
    let rest = tokio::time::timeout(Duration::from_secs(30), direct.collect())
        .await
        .expect("the fragment's response ends");
    assert!(rest.is_err(), "the fragment's own response is cut");
    assert_eq!(
        origin.count_path("/stalls2"),
        1,
        "the page followed the fetch"
    );
    assert_eq!(shellac.stat("esi_include_failed").await, 1);
    shellac.stop().await;
}

/// Issue 29: a page ESI is on for that holds no ESI markup, sent gzip by its origin, is stored
/// as any gzip object (its identity gzipped once, when stored): its hits are plain hits (no
/// assembly: `esi_pages` stays 0), the same gzip bytes with `Content-Length` on every hit to a
/// client that takes gzip, and the page's bytes exactly, with their length, to one that does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_gzip_page_without_esi_is_stored_and_hit_as_a_plain_page() {
    let text = format!("<html>{}</html>", "no esi here; ".repeat(100));
    let gz = gzip(text.as_bytes());
    let origin = Origin::start(move |s| match s.path.as_str() {
        "/noesi" => Reply::ok("")
            .cc("max-age=60")
            .header("content-type", "text/html")
            .header("content-encoding", "gzip")
            .body(ReplyBody::Bytes(gz.clone())),
        _ => site(s),
    })
    .await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    let gzip_client = [("accept-encoding", "gzip")];
    let miss = get_with(shellac.addr, "/noesi", &gzip_client).await;
    assert_eq!(miss.status, 200);
    assert_eq!(gunzip(&miss.body), text);
    assert!(
        eventually(Duration::from_secs(10), || async {
            get_with(shellac.addr, "/noesi", &gzip_client)
                .await
                .cache_status()
                .contains("hit")
        })
        .await,
        "stored"
    );
    let a = get_with(shellac.addr, "/noesi", &gzip_client).await;
    let b = get_with(shellac.addr, "/noesi", &gzip_client).await;
    for r in [&a, &b] {
        assert!(r.cache_status().contains("hit"), "{:?}", r.headers);
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        let len = r.body.len().to_string();
        assert_eq!(r.header("content-length"), Some(len.as_str()));
        assert_eq!(gunzip(&r.body), text);
    }
    assert_eq!(a.body, b.body, "the stored bytes, as they are");
    let plain = get(shellac.addr, "/noesi").await;
    assert!(plain.cache_status().contains("hit"));
    assert_eq!(plain.header("content-encoding"), None);
    let len = text.len().to_string();
    assert_eq!(plain.header("content-length"), Some(len.as_str()));
    assert_eq!(plain.text(), text, "byte for byte");
    assert_eq!(shellac.stat("esi_pages").await, 0, "never assembled");
    assert_eq!(origin.count_path("/noesi"), 1);
    shellac.stop().await;
}

/// Issue 29 (stop 38's 1.35×): a gzip client's hit on a page an `esi = true` rule marks, which
/// held no ESI and is stored as a plain gzip object, takes the same path as the same page
/// unmarked: a fast hit each time (`cache_hit_fast`), not the full path and no assembly, with
/// the same fields. The rule acts in the response phase only, so it never keeps a URL off the
/// fast path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_gzip_page_without_esi_is_a_fast_hit_as_the_unmarked_page_is() {
    let text = format!("<html>{}</html>", "no esi here; ".repeat(100));
    let gz = gzip(text.as_bytes());
    let origin = Origin::start(move |_| {
        Reply::ok("")
            .cc("max-age=60")
            .header("content-type", "text/html")
            .header("content-encoding", "gzip")
            .header("vary", "Accept-Encoding")
            .body(ReplyBody::Bytes(gz.clone()))
    })
    .await;
    let shellac = Shellac::start(origin.addr, |config: &mut Config| {
        esi_on(config, "^/marked$");
    })
    .await;
    let gzip_client = [("accept-encoding", "gzip")];
    let mut heads = Vec::new();
    for path in ["/marked", "/unmarked"] {
        assert!(
            eventually(Duration::from_secs(10), || async {
                get_with(shellac.addr, path, &gzip_client)
                    .await
                    .cache_status()
                    .contains("hit")
            })
            .await,
            "{path} stored"
        );
        let (hits, fast) = (
            shellac.stat("cache_hit").await,
            shellac.stat("cache_hit_fast").await,
        );
        let mut last = None;
        for _ in 0..3 {
            let r = get_with(shellac.addr, path, &gzip_client).await;
            assert!(r.cache_status().contains("hit"), "{path}: {:?}", r.headers);
            assert_eq!(r.header("content-encoding"), Some("gzip"), "{path}");
            assert_eq!(gunzip(&r.body), text, "{path}");
            last = Some(r);
        }
        assert_eq!(shellac.stat("cache_hit").await - hits, 3, "{path}");
        assert_eq!(
            shellac.stat("cache_hit_fast").await - fast,
            3,
            "{path}: every hit a fast hit"
        );
        let mut names: Vec<String> = last
            .expect("three hits")
            .headers
            .keys()
            .map(|n| n.as_str().to_string())
            .collect();
        names.sort();
        heads.push(names);
    }
    assert_eq!(heads[0], heads[1], "the same fields on both hits");
    assert_eq!(shellac.stat("esi_pages").await, 0, "never assembled");
    assert_eq!(origin.count_path("/marked"), 1);
    assert_eq!(origin.count_path("/unmarked"), 1);
    shellac.stop().await;
}
