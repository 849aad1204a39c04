//! What is stored and how a page goes out: content codings (gzip at fetch and on delivery),
//! the disk tier across a restart, a Range cut from the assembled page, and gzip pages marked
//! for ESI that hold none.

use super::*;

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
