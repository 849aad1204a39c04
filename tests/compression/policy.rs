//! What the operator decides: VCL's `do_gzip`, `do_gunzip` and `can_gzip`, a rule's
//! `compress`, and a gzip level per media type.

use super::*;

/// VCL with Varnish's semantics: nothing is compressed unless `beresp.do_gzip` says so;
/// `beresp.do_gunzip` stores an origin's gzip decoded; `req.can_gzip` reads q-values; a
/// fill asks for gzip (`http_gzip_support`), and stored gzip is decoded for clients
/// without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vcl_do_gzip_do_gunzip_and_can_gzip() {
    let zipped = gzip(page().as_bytes());
    let origin = Origin::start(move |s| {
        let reply = if s.path.starts_with("/gz") {
            Reply::ok("")
                .body(ReplyBody::Bytes(zipped.clone()))
                .header("content-encoding", "gzip")
        } else {
            Reply::ok(&page())
        };
        reply
            .cc("max-age=60")
            .header("content-type", "text/html")
            .header(
                "x-ae",
                s.headers
                    .get("accept-encoding")
                    .map_or("", |v| v.to_str().unwrap()),
            )
    })
    .await;
    let vcl = r#"vcl 4.1;
backend default { ${origin0} }
sub vcl_backend_response {
    if (bereq.url ~ "^/zip") { set beresp.do_gzip = true; }
    if (bereq.url ~ "^/gzdecode") { set beresp.do_gunzip = true; }
}
sub vcl_recv {
    if (req.url ~ "^/gznoae") { unset req.http.Accept-Encoding; }
}
sub vcl_deliver { set resp.http.can-gzip = req.can_gzip; }
"#;
    let shellac = common::vcl::start_vcl("compression", vcl, &[origin.addr]).await;
    // Not asked to: stored identity, as Varnish does, though text/html.
    let r = get_with(shellac.addr, "/plain", &[("accept-encoding", "gzip")]).await;
    assert!(is_identity_page(&r), "{:?}", r.headers);
    assert_eq!(r.header("x-ae"), Some("gzip"), "a fill asks for gzip");
    assert_eq!(r.header("can-gzip"), Some("true"));
    // do_gzip: stored gzip, decoded for a client without gzip.
    let r = get_with(shellac.addr, "/zip", &[("accept-encoding", "gzip;q=0.5")]).await;
    assert!(is_gzip_page(&r), "{:?}", r.headers);
    let r = get_with(shellac.addr, "/zip", &[]).await;
    assert!(is_identity_page(&r), "{:?}", r.headers);
    assert_eq!(r.header("can-gzip"), Some("false"));
    // do_gunzip: the origin's gzip stored decoded; everyone gets identity.
    let r = get_with(shellac.addr, "/gzdecode", &[("accept-encoding", "gzip")]).await;
    assert!(is_identity_page(&r), "{:?}", r.headers);
    // An origin's gzip kept, decoded for a client without gzip.
    let r = get_with(shellac.addr, "/gzkeep", &[("accept-encoding", "br")]).await;
    assert!(is_identity_page(&r), "{:?}", r.headers);
    assert_eq!(r.header("can-gzip"), Some("false"));
    let r = get_with(
        shellac.addr,
        "/gzkeep",
        &[("accept-encoding", "gzip;q=0.0000001")],
    )
    .await;
    assert!(is_gzip_page(&r), "{:?}", r.headers);
    assert_eq!(r.header("can-gzip"), Some("true"));
    let stats = shellac.stats().await;
    assert_eq!(stats["compress_gzip"], 1);
    assert_eq!(
        stats["compress_gunzip"], 3,
        "one at fetch (do_gunzip), two at delivery"
    );
    // A VCL that unsets the request's Accept-Encoding decides, as in Varnish (which reads
    // it when it delivers): a gzip client gets the stored gzip decoded.
    let r = get_with(shellac.addr, "/gznoae", &[("accept-encoding", "gzip")]).await;
    assert!(is_identity_page(&r), "{:?}", r.headers);
    // One it leaves as washed leaves the client's preferences: the gzip do_gzip made gets
    // a br representation for clients that prefer br (issue 29: under VCL too).
    let r = until_coded(&shellac, "/zip", "gzip, deflate, br", "br").await;
    assert_eq!(r.header("content-encoding"), Some("br"), "{:?}", r.headers);
    assert_eq!(r.header("etag"), None);
    let mut identity = Vec::new();
    brotli::Decompressor::new(&r.body[..], 4096)
        .read_to_end(&mut identity)
        .expect("valid br");
    assert_eq!(identity, page().as_bytes());
    // Nothing is made of what the VCL left identity.
    for _ in 0..4 {
        let r = get_with(shellac.addr, "/plain", &[("accept-encoding", "gzip, br")]).await;
        assert!(is_identity_page(&r), "{:?}", r.headers);
    }
    assert_eq!(shellac.stat("compress_br").await, 1);
    shellac.stop().await;
}

/// A rule's `compress = false` keeps a path as the origin sent it; `compress = true` gzips a
/// type `[compression]` would not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_says_compress_or_not() {
    let origin = Origin::start(|s| {
        let ct = if s.path.starts_with("/bin") {
            "application/octet-stream"
        } else {
            "text/html"
        };
        Reply::ok(&page())
            .cc("max-age=60")
            .header("content-type", ct)
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.rules = shellac::config::Config::parse(
            "[[rule]]\npath = \"^/raw/\"\ncompress = false\n\n[[rule]]\npath = \"^/bin/\"\ncompress = true\n\n[[backend]]\nhost = \"127.0.0.1\"\n",
            "rules.toml",
        )
        .expect("rules")
        .rules;
    })
    .await;
    let r = get_with(shellac.addr, "/raw/page", &[("accept-encoding", "gzip")]).await;
    assert!(is_identity_page(&r), "{:?}", r.headers);
    assert!(r.header("content-length").is_some());
    let r = get_with(shellac.addr, "/bin/blob", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&r), "{:?}", r.headers);
    let r = get_with(shellac.addr, "/bin/blob", &[]).await;
    assert!(is_identity_page(&r), "{:?}", r.headers);
    shellac.stop().await;
}

/// `[compression] levels`: a type's own gzip level over `gzip_level` (the same page as
/// `text/html` at level 1 and as `text/css` at the default 9 of this configuration: the
/// first is the larger).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_media_type_gets_its_own_gzip_level() {
    let origin = Origin::start(|s| {
        let t = if s.path == "/fast" {
            "text/html"
        } else {
            "text/css"
        };
        Reply::ok(&page())
            .cc("max-age=60")
            .header("content-type", t)
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.compression.gzip_level = 9;
        c.compression.levels.insert(
            "text/html".into(),
            shellac::config::compression::GzipLevel(1),
        );
    })
    .await;
    let fast = get_with(shellac.addr, "/fast", &[("accept-encoding", "gzip")]).await;
    let small = get_with(shellac.addr, "/small", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&fast) && is_gzip_page(&small));
    assert!(
        fast.body.len() > small.body.len(),
        "level 1: {} bytes, level 9: {}",
        fast.body.len(),
        small.body.len()
    );
    shellac.stop().await;
}
