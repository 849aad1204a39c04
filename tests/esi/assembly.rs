//! A page assembled: nested includes and removals, the access log's sub-request lines,
//! `esi.max_includes`, an `https://` include, the parser's settings, `include_timeout`, loops,
//! `alt` / `onerror`, a late failure, allowed hosts, Surrogate-Control, the sub-requests'
//! hygiene, the page's freshness, and what is not ESI passing as it is.

use super::*;

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
