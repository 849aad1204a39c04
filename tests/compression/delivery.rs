//! Each client gets its representation: `ETag`, 304 and Range per representation, uncacheable
//! answers and passes, HTTP/1.0 clients, a 304 refresh, ranges and If-Range over a decoded
//! representation, and ESI pages whose fragments are stored in different codings.

use super::*;

/// Validators and ranges per representation: `If-None-Match` with the weak (gzip) or the
/// strong (identity) ETag gets a 304 with `Vary` and the ETag of the representation that
/// client gets, from either client; a gzip client's Range is cut from the stored gzip bytes;
/// an identity client's from the decoded bytes, whose length was stored with the gzip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etag_304_and_range_per_representation() {
    let origin = page_origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let stored = get_with(shellac.addr, "/r", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&stored));
    for ae in ["gzip", "identity"] {
        for inm in ["W/\"v1\"", "\"v1\"", "\"other\", W/\"v1\""] {
            let r = get_with(
                shellac.addr,
                "/r",
                &[("accept-encoding", ae), ("if-none-match", inm)],
            )
            .await;
            assert_eq!(r.status, 304, "{ae} {inm}");
            assert!(varies_on_coding(&r), "{ae} {inm}: a 304 varies too");
            let etag = if ae == "gzip" { "W/\"v1\"" } else { "\"v1\"" };
            assert_eq!(r.header("etag"), Some(etag), "{ae} {inm}");
            assert!(r.body.is_empty());
        }
        let r = get_with(
            shellac.addr,
            "/r",
            &[("accept-encoding", ae), ("if-none-match", "\"v2\"")],
        )
        .await;
        assert_eq!(r.status, 200, "{ae}");
    }
    let r = get_with(
        shellac.addr,
        "/r",
        &[("accept-encoding", "gzip"), ("range", "bytes=0-9")],
    )
    .await;
    assert_eq!(r.status, 206);
    assert_eq!(r.body, stored.body[..10]);
    assert_eq!(
        r.header("content-range"),
        Some(&*format!("bytes 0-9/{}", stored.body.len()))
    );
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    // HEAD for an identity client: the decoded representation's fields, no body.
    let mut conn = Conn::open(shellac.addr).await;
    let r = conn.send("HEAD", "/r", &[], b"").await;
    assert_eq!(r.status, 200);
    assert!(r.header("content-encoding").is_none());
    assert_eq!(r.header("content-length"), Some(&*page().len().to_string()));
    assert!(r.body.is_empty());
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

/// A response that is not stored is gzipped for a client that takes gzip (as it streams)
/// and left as it is for one that does not; gzip the origin sends to a fill's
/// `Accept-Encoding: gzip` is decoded for a client without it; a pass asks the origin with
/// the codings the client takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncacheable_answers_and_passes_follow_the_client() {
    let zipped = gzip(page().as_bytes());
    let origin = Origin::start(move |s| {
        let ae = s
            .headers
            .get("accept-encoding")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        if s.path == "/cookie" {
            Reply::ok(&page())
                .header("content-type", "text/html")
                .header("set-cookie", "session=1")
        } else if s.path == "/private" && ae.contains("gzip") {
            Reply::ok("")
                .body(ReplyBody::Bytes(zipped.clone()))
                .cc("private")
                .header("content-type", "text/html")
                .header("content-encoding", "gzip")
        } else {
            Reply::ok(&page())
                .cc("no-store")
                .header("content-type", "text/html")
                .header("x-ae", &ae)
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let r = get_with(shellac.addr, "/private", &[]).await;
    assert!(is_identity_page(&r), "{:?}", r.headers);
    let r = get_with(shellac.addr, "/private", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&r));
    let r = get_with(shellac.addr, "/nostore", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&r), "{:?}", r.headers);
    let r = get_with(shellac.addr, "/nostore", &[]).await;
    assert!(is_identity_page(&r), "{:?}", r.headers);
    assert_eq!(shellac.stat("compress_gzip").await, 1);
    assert_eq!(shellac.stat("compress_gunzip").await, 1);
    // Regression (bench/ab2009.sh, phpinfo()): a page the storage decision refuses (here for
    // its Set-Cookie; phpinfo() has no freshness) was gzipped at fetch and decoded again for
    // a client without gzip; it is sent as it came, and gzipped for a client that takes gzip.
    let r = get_with(shellac.addr, "/cookie", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&r), "{:?}", r.headers);
    assert_eq!(shellac.stat("compress_gzip").await, 2);
    for _ in 0..2 {
        let r = get_with(shellac.addr, "/cookie", &[]).await;
        assert!(is_identity_page(&r), "{:?}", r.headers);
    }
    assert_eq!(shellac.stat("compress_gzip").await, 2);
    assert_eq!(shellac.stat("compress_gunzip").await, 1);
    let mut conn = Conn::open(shellac.addr).await;
    let r = conn
        .send(
            "POST",
            "/pass",
            &[("accept-encoding", "gzip, deflate, br, zstd")],
            b"x",
        )
        .await;
    assert_eq!(r.header("x-ae"), Some("zstd, br, gzip"));
    shellac.stop().await;
}

/// An HTTP/1.0 client without gzip gets stored gzip decoded, its end marked by the close
/// (HTTP/1.0 has no chunked coding).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http10_client_gets_the_decoded_body_until_the_close() {
    let origin = page_origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let stored = get_with(shellac.addr, "/h10", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&stored));
    let seen = common::exchange(
        shellac.addr,
        b"GET /h10 HTTP/1.0\r\nUser-Agent: c1\r\n\r\n",
        std::time::Duration::from_secs(5),
    )
    .await;
    assert!(seen.closed, "{}", seen.text);
    let (head, body) = seen.text.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("content-encoding"),
        "{head}"
    );
    assert_eq!(body, page());
    shellac.stop().await;
}

/// A 304 that refreshes a stored gzip copy Shellac made keeps what describes the stored
/// bytes: their coding (a 304's `Content-Encoding` does not recode them) and a weak `ETag`
/// (the origin's new strong one names its bytes, not the gzip made of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_304_refresh_keeps_the_stored_coding_and_a_weak_etag() {
    let origin = Origin::start(|s| {
        if s.headers.contains_key("if-none-match") {
            Reply::ok("")
                .status(304)
                .cc("no-cache")
                .header("etag", "\"v2\"")
                .header("content-encoding", "gzip, rot13")
        } else {
            Reply::ok(&page())
                .cc("no-cache")
                .header("content-type", "text/html")
                .header("etag", "\"v1\"")
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let first = get_with(shellac.addr, "/reval", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&first));
    assert_eq!(first.header("etag"), Some("W/\"v1\""));
    let second = get_with(shellac.addr, "/reval", &[("accept-encoding", "gzip")]).await;
    assert!(
        origin.last().headers.contains_key("if-none-match"),
        "revalidated"
    );
    assert!(is_gzip_page(&second), "{:?}", second.headers);
    assert_eq!(second.header("etag"), Some("W/\"v2\""));
    let third = get_with(shellac.addr, "/reval", &[]).await;
    assert!(is_identity_page(&third), "{:?}", third.headers);
    // The identity is named by the origin's new strong ETag.
    assert_eq!(third.header("etag"), Some("\"v2\""));
    shellac.stop().await;
}

/// Regression (issue 29): a Range on a gzip-stored object delivered decoded was answered 200
/// with the whole body. It is answered 206 over the decoded bytes (their length stored with
/// the gzip): a first, a middle, an open and a suffix range, an unsatisfiable one
/// (416 over the decoded length), several ranges (one 200); for a gzip the origin sent as
/// well as for one Shellac made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_over_a_decoded_representation_is_a_206_over_its_bytes() {
    let zipped = gzip(page().as_bytes());
    let origin = Origin::start(move |s| {
        let reply = if s.path == "/made" {
            Reply::ok(&page()).header("etag", "\"v1\"")
        } else {
            Reply::ok("")
                .body(ReplyBody::Bytes(zipped.clone()))
                .header("content-encoding", "gzip")
                .header("etag", "\"gz\"")
        };
        reply.cc("max-age=60").header("content-type", "text/html")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let page = page().into_bytes();
    let len = page.len();
    for path in ["/made", "/origin"] {
        let stored = get_with(shellac.addr, path, &[("accept-encoding", "gzip")]).await;
        assert_eq!(stored.header("content-encoding"), Some("gzip"), "{path}");
        for (range, start, end) in [
            ("bytes=0-9", 0, 9),
            ("bytes=100-4099", 100, 4099),
            (&*format!("bytes={}-", len - 7), len - 7, len - 1),
            ("bytes=-5", len - 5, len - 1),
        ] {
            let r = get_with(shellac.addr, path, &[("range", range)]).await;
            assert_eq!(r.status, 206, "{path} {range}: {:?}", r.headers);
            assert!(r.cache_status().contains("hit"), "{path} {range}");
            assert!(r.header("content-encoding").is_none(), "{path} {range}");
            assert!(varies_on_coding(&r), "{path} {range}");
            assert_eq!(
                r.header("content-range"),
                Some(&*format!("bytes {start}-{end}/{len}")),
                "{path} {range}"
            );
            assert_eq!(
                r.header("content-length"),
                Some(&*(end - start + 1).to_string())
            );
            assert_eq!(r.body, page[start..=end], "{path} {range}");
        }
        let mut conn = Conn::open(shellac.addr).await;
        let r = conn
            .send("HEAD", path, &[("range", "bytes=10-19")], b"")
            .await;
        // Range is for GET (RFC 9110 §14.2): a HEAD gets the whole representation's fields.
        assert_eq!(r.status, 200, "{path} HEAD");
        assert_eq!(r.header("content-length"), Some(&*len.to_string()));
        assert!(r.body.is_empty());
        let r = get_with(shellac.addr, path, &[("range", &*format!("bytes={len}-"))]).await;
        assert_eq!(r.status, 416, "{path}");
        assert_eq!(r.header("content-range"), Some(&*format!("bytes */{len}")));
        // Several ranges: decoded, the whole body; from the identity representation built
        // in the background once the object is hot (a stored object), a multipart 206.
        let r = get_with(shellac.addr, path, &[("range", "bytes=0-1, 5-6")]).await;
        match r.status {
            200 => assert!(
                is_identity_page(&r),
                "{path}: several ranges, the whole body"
            ),
            206 => assert!(
                r.header("content-type")
                    .is_some_and(|t| t.starts_with("multipart/byteranges")),
                "{path}: {:?}",
                r.headers
            ),
            s => panic!("{path}: several ranges: {s}"),
        }
    }
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// `If-Range` with the identity's strong ETag is answered from the identity bytes — even
/// to a client that takes gzip (it holds part of the identity, RFC 9110 §13.1.5); the weak
/// gzip ETag never matches `If-Range` (strong comparison): the whole representation; an
/// identity ETag that is not the stored one: the whole representation too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_range_with_the_identity_etag_is_answered_from_the_identity() {
    let origin = page_origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let stored = get_with(shellac.addr, "/ir", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&stored));
    let page = page().into_bytes();
    for ae in ["gzip", "identity"] {
        let r = get_with(
            shellac.addr,
            "/ir",
            &[
                ("accept-encoding", ae),
                ("range", "bytes=20-29"),
                ("if-range", "\"v1\""),
            ],
        )
        .await;
        assert_eq!(r.status, 206, "{ae}: {:?}", r.headers);
        assert!(r.header("content-encoding").is_none(), "{ae}");
        assert_eq!(r.header("etag"), Some("\"v1\""), "{ae}");
        assert_eq!(r.body, page[20..30], "{ae}");
        assert_eq!(
            r.header("content-range"),
            Some(&*format!("bytes 20-29/{}", page.len()))
        );
    }
    let r = get_with(
        shellac.addr,
        "/ir",
        &[
            ("accept-encoding", "gzip"),
            ("range", "bytes=20-29"),
            ("if-range", "W/\"v1\""),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "a weak validator never matches If-Range");
    assert!(is_gzip_page(&r));
    let r = get_with(
        shellac.addr,
        "/ir",
        &[("range", "bytes=20-29"), ("if-range", "\"v0\"")],
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(is_identity_page(&r));
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

/// A Range on a miss whose body is decoded as it streams (varnishtest g00005): its length
/// is not known until the end, so one closed range is a 206 with `Content-Range: bytes
/// a-b/*` cut from the decoded bytes as they come (as Varnish); an open range gets the
/// whole body; the stored object then answers with its decoded length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_on_a_miss_decoded_as_it_streams_is_a_206_of_unknown_length() {
    let zipped = gzip(page().as_bytes());
    let origin = Origin::start(move |_| {
        Reply::ok("")
            .body(ReplyBody::Bytes(zipped.clone()))
            .header("content-encoding", "gzip")
            .header("content-type", "text/html")
            .cc("max-age=60")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let page = page();
    let r = get_with(shellac.addr, "/m1", &[("range", "bytes=3-5")]).await;
    assert_eq!(r.status, 206, "{:?}", r.headers);
    assert!(r.cache_status().contains("fwd=miss"));
    assert_eq!(r.header("content-range"), Some("bytes 3-5/*"));
    assert!(r.header("content-encoding").is_none());
    assert_eq!(r.body, page.as_bytes()[3..=5]);
    let r = get_with(shellac.addr, "/m2", &[("range", "bytes=10-")]).await;
    assert_eq!(r.status, 200, "an open range: the whole body");
    assert_eq!(r.body, page.as_bytes());
    let r = get_with(shellac.addr, "/m1", &[("range", "bytes=3-5")]).await;
    assert_eq!(r.status, 206);
    assert!(r.cache_status().contains("hit"));
    assert_eq!(
        r.header("content-range"),
        Some(&*format!("bytes 3-5/{}", page.len()))
    );
    assert_eq!(r.body, page.as_bytes()[3..=5]);
    shellac.stop().await;
}

/// ESI + compression (issue 29): a page whose fragments come from the origin in identity,
/// gzip, br and zstd (the last two although the fill asked for gzip) is assembled from
/// their identity bytes — gzip decoded, br and zstd decoded too (`filter/decode.rs`) —
/// and sent gzipped on the fly to a gzip client, identity to an identity client, both with
/// `Vary: Accept-Encoding`, for a page stored identity and for a page the origin gzipped,
/// on the miss and on the hit. A client without br gets an origin's br body decoded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esi_pages_with_fragments_of_mixed_encodings() {
    let esi_page = r#"<p><esi:include src="/f-id"/>|<esi:include src="/f-gz"/>|<esi:include src="/f-br"/>|<esi:include src="/f-zstd"/></p>"#;
    let origin = Origin::start(move |s| {
        let (body, coding) = match s.path.as_str() {
            "/page" => (esi_page.as_bytes().to_vec(), None),
            "/gzpage" => (gzip(esi_page.as_bytes()), Some("gzip")),
            "/f-id" => (b"ID".to_vec(), None),
            "/f-gz" => (gzip(b"GZ"), Some("gzip")),
            "/f-br" => (br(b"BR"), Some("br")),
            "/f-zstd" => (zstd::encode_all(&b"ZS"[..], 3).unwrap(), Some("zstd")),
            _ => (br(&page().into_bytes()), Some("br")),
        };
        let reply = Reply::ok("")
            .body(ReplyBody::Bytes(body))
            .header("content-type", "text/html")
            .cc("max-age=60");
        match coding {
            Some(c) => reply.header("content-encoding", c),
            None => reply,
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.rules.push(shellac::config::rules::RuleConfig {
            name: "esi".into(),
            esi: true,
            ..Default::default()
        })
    })
    .await;
    let want = "<p>ID|GZ|BR|ZS</p>";
    for round in ["miss", "hit"] {
        for path in ["/page", "/gzpage"] {
            let r = get_with(shellac.addr, path, &[("accept-encoding", "gzip")]).await;
            assert_eq!(r.status, 200, "{path} {round}: {:?}", r.headers);
            assert_eq!(r.header("content-encoding"), Some("gzip"), "{path} {round}");
            assert!(varies_on_coding(&r), "{path} {round}");
            assert_eq!(gunzip(&r.body), want.as_bytes(), "{path} {round}");
            let r = get_with(shellac.addr, path, &[]).await;
            assert_eq!(r.status, 200, "{path} {round}");
            assert!(r.header("content-encoding").is_none(), "{path} {round}");
            assert!(varies_on_coding(&r), "{path} {round}");
            assert_eq!(r.text(), want, "{path} {round}");
        }
    }
    let stats = shellac.stats().await;
    assert!(stats["compress_decode"] >= 2, "br and zstd decoded");
    assert_eq!(stats["compress_decode_invalid"], 0);
    // An origin's br for a client without br: decoded (a miss, then a hit).
    for _ in 0..2 {
        let r = get_with(shellac.addr, "/other", &[]).await;
        assert!(r.header("content-encoding").is_none(), "{:?}", r.headers);
        assert_eq!(r.body, page().as_bytes());
    }
    let r = get_with(shellac.addr, "/other", &[("accept-encoding", "br")]).await;
    assert_eq!(r.header("content-encoding"), Some("br"));
    shellac.stop().await;
}
