//! ESI under VCL: `do_esi`, `req.esi_level`, `req_top.*`, `obj.can_esi`, `resp.do_esi`, a
//! passed page, and VCL 2's `esi` statement.

use super::*;

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
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
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
