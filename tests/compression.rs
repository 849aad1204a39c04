//! Content codings end to end (issue 29, docs/compression.md): real origins sending identity,
//! gzip and broken gzip; clients with many `Accept-Encoding` shapes; one stored object per
//! URL gzipped once and decoded for clients without gzip; `Vary`, `ETag`, 304 and Range per
//! representation; `no-transform`, small and incompressible bodies left alone.

mod common;

use std::io::{Read, Write};

use http_body_util::BodyExt;

use common::pages::{gunzip, page, page_origin, varies_on_coding};
use common::{Conn, Origin, Reply, ReplyBody, Resp, Shellac, get_with};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Whether `r` is the page as gzip (and says so).
fn is_gzip_page(r: &Resp) -> bool {
    r.header("content-encoding") == Some("gzip") && gunzip(&r.body) == page().as_bytes()
}

/// Whether `r` is the page in identity.
fn is_identity_page(r: &Resp) -> bool {
    r.header("content-encoding").is_none() && r.body == page().as_bytes()
}

/// Store once, serve many: the first request (a gzip client) stores the page gzipped; every
/// other client shape is served from that one object — gzip as stored, identity decoded —
/// with `Vary: Accept-Encoding` and no second fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_page_is_gzipped_once_and_served_to_every_client() {
    let origin = page_origin().await;
    // No br or zstd representation is built while the shapes run (several prefer them:
    // built in the background, one could answer a later shape; tested below).
    let shellac = Shellac::start(origin.addr, |c| c.compression.hot_hits = 1000).await;
    // curl --compressed's field (curl 8 built with brotli and zstd).
    let first = get_with(
        shellac.addr,
        "/page",
        &[("accept-encoding", "deflate, gzip, br, zstd")],
    )
    .await;
    assert!(first.cache_status().contains("fwd=miss"));
    assert!(is_gzip_page(&first), "{:?}", first.headers);
    assert!(varies_on_coding(&first));
    assert_eq!(first.header("etag"), Some("W/\"v1\""));
    assert!(first.body.len() < page().len() / 4);
    assert_eq!(
        origin.last().headers["accept-encoding"],
        "gzip",
        "a fill asks the origin for gzip"
    );
    // (shape, takes gzip)
    let shapes: [(&[(&str, &str)], bool); 14] = [
        (&[("accept-encoding", "gzip, deflate, br, zstd")], true),
        (&[("accept-encoding", "gzip, deflate")], true),
        (&[("accept-encoding", "GZIP")], true),
        (&[("accept-encoding", "x-gzip")], true),
        (&[("accept-encoding", "*")], true),
        (&[("accept-encoding", "br;q=1, gzip;q=0.1")], true),
        (
            &[("accept-encoding", "deflate"), ("accept-encoding", "gzip")],
            true,
        ),
        (
            &[("accept-encoding", "gzip"), ("via", "1.1 other-proxy")],
            true,
        ),
        (&[], false),
        (&[("accept-encoding", "")], false),
        (&[("accept-encoding", "identity")], false),
        (&[("accept-encoding", "br, zstd")], false),
        (&[("accept-encoding", "gzip;q=0, br")], false),
        (&[("accept-encoding", "*;q=0, identity")], false),
    ];
    for (fields, takes_gzip) in shapes {
        let r = get_with(shellac.addr, "/page", fields).await;
        assert_eq!(r.status, 200);
        assert!(
            r.cache_status().contains("hit"),
            "{fields:?}: {}",
            r.cache_status()
        );
        assert!(varies_on_coding(&r), "{fields:?}");
        if takes_gzip {
            assert!(is_gzip_page(&r), "{fields:?}: {:?}", r.headers);
            assert_eq!(r.body, first.body, "the stored bytes");
        } else {
            assert!(is_identity_page(&r), "{fields:?}: {:?}", r.headers);
            // The decoded length and the origin's strong ETag were stored with the gzip.
            assert_eq!(r.header("content-length"), Some(&*page().len().to_string()));
            assert_eq!(r.header("etag"), Some("\"v1\""));
        }
    }
    assert_eq!(origin.count(), 1, "one fetch for every client");
    let stats = shellac.stats().await;
    assert_eq!(stats["compress_gzip"], 1, "compressed once");
    assert_eq!(stats["compress_gunzip"], 6);
    assert!(
        stats["cache_hit_fast"] >= 1,
        "gzip clients stay on the fast path"
    );
    assert!(stats["compress_gzip_bytes_out"] < stats["compress_gzip_bytes_in"] / 4);
    shellac.stop().await;
}

/// A client without gzip that misses gets the page decoded as the fill streams it; the
/// stored copy is gzip, and a gzip client then hits it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_miss_without_gzip_is_decoded_as_it_streams() {
    let origin = Origin::start(|_| {
        Reply::ok("")
            .body(ReplyBody::Bytes(page().into_bytes()))
            .cc("max-age=60")
            .header("content-type", "application/json")
            .chunked()
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let first = get_with(shellac.addr, "/data", &[]).await;
    assert!(first.cache_status().contains("fwd=miss"));
    assert!(is_identity_page(&first), "{:?}", first.headers);
    assert!(varies_on_coding(&first));
    let second = get_with(shellac.addr, "/data", &[("accept-encoding", "gzip")]).await;
    assert!(second.cache_status().contains("hit"));
    assert!(is_gzip_page(&second), "{:?}", second.headers);
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

/// An origin's gzip is stored as it came (the origin's bytes and ETag) — even though it
/// forgot `Vary: Accept-Encoding` — and decoded for clients without gzip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origins_gzip_is_kept_and_decoded_for_clients_without_it() {
    let zipped = gzip(page().as_bytes());
    let body = zipped.clone();
    let origin = Origin::start(move |_| {
        Reply::ok("")
            .body(ReplyBody::Bytes(body.clone()))
            .cc("max-age=60")
            .header("content-type", "text/html")
            .header("content-encoding", "gzip")
            .header("etag", "\"gz\"")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let identity = get_with(shellac.addr, "/o", &[("accept-encoding", "identity")]).await;
    assert!(is_identity_page(&identity), "{:?}", identity.headers);
    assert!(varies_on_coding(&identity));
    assert_eq!(identity.header("etag"), Some("W/\"gz\""));
    let gz = get_with(shellac.addr, "/o", &[("accept-encoding", "gzip")]).await;
    assert!(gz.cache_status().contains("hit"));
    assert_eq!(gz.body, zipped, "the origin's bytes");
    assert_eq!(gz.header("etag"), Some("\"gz\""));
    assert_eq!(
        gz.header("content-length"),
        Some(&*zipped.len().to_string())
    );
    assert!(varies_on_coding(&gz));
    assert_eq!(origin.count(), 1);
    let stats = shellac.stats().await;
    assert_eq!(stats["compress_gzip_checked"], 1);
    assert_eq!(stats["compress_gzip"], 0);
    assert_eq!(stats["compress_gzip_invalid"], 0);
    shellac.stop().await;
}

/// Sends one GET: the status, the `Cache-Status`, and the body (`Err` when it ends in an
/// error: cut).
async fn fetch_body(
    shellac: &Shellac,
    path: &str,
    ae: &str,
) -> (u16, String, Result<Vec<u8>, String>) {
    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn
        .send_head("GET", path, &[("accept-encoding", ae)], b"")
        .await;
    let status = resp.status().as_u16();
    let cache_status = resp
        .headers()
        .get("cache-status")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = match resp.into_body().collect().await {
        Ok(b) => Ok(b.to_bytes().to_vec()),
        Err(e) => Err(e.to_string()),
    };
    (status, cache_status, body)
}

/// Broken gzip from an origin — corrupt in the middle, or truncated — is never stored nor
/// delivered as if whole, to a gzip client or a decoded one; it is counted. (A request that
/// comes while the failed fill is still settling may be answered with the fill's error
/// instead: also never the body as if whole.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_gzip_from_an_origin_is_never_stored_or_served_whole() {
    let good = gzip(page().as_bytes());
    let mut corrupt = good.clone();
    let middle = corrupt.len() / 2;
    for b in &mut corrupt[middle..middle + 16] {
        *b ^= 0x5a;
    }
    let truncated = good[..good.len() - 8].to_vec();
    let origin = Origin::start(move |s| {
        let body = if s.path.starts_with("/corrupt") {
            corrupt.clone()
        } else {
            truncated.clone()
        };
        Reply::ok("")
            .body(ReplyBody::Bytes(body))
            .cc("max-age=60")
            .header("content-type", "text/html")
            .header("content-encoding", "gzip")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    for path in ["/corrupt", "/truncated"] {
        for ae in ["gzip", "identity", "gzip", "identity"] {
            let (status, cache_status, got) = fetch_body(&shellac, path, ae).await;
            assert!(
                !cache_status.contains("hit"),
                "{path}: stored: {cache_status}"
            );
            if status != 200 {
                assert!(status >= 500, "{path} {ae}: {status}");
                continue;
            }
            match got {
                Err(_) => {}
                // A gzip client may have all the bytes the origin sent; they must not
                // decode as a whole body.
                Ok(bytes) => {
                    assert_eq!(ae, "gzip", "{path}: decoded broken gzip delivered whole");
                    let mut out = Vec::new();
                    assert!(
                        flate2::read::GzDecoder::new(&bytes[..])
                            .read_to_end(&mut out)
                            .is_err(),
                        "{path}: a body that decodes"
                    );
                    panic!("{path}: broken gzip ended as if whole");
                }
            }
        }
    }
    assert!(shellac.stat("compress_gzip_invalid").await >= 2);
    shellac.stop().await;
}

/// br or zstd from an origin (stored as it came, per class of client) that is truncated is
/// checked as the fill streams it (`TestDecode`): never stored, never ended as if whole for
/// a br / zstd client (its last bytes are held back until the body is known whole, so the
/// response is cut), counted; a whole one is stored and hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_br_and_zstd_from_an_origin_are_never_stored_or_served_whole() {
    let page = page().into_bytes();
    let good_br = br(&page);
    let good_zstd = zstd::encode_all(&page[..], 3).unwrap();
    let origin = Origin::start(move |s| {
        let (body, coding) = match s.path.as_str() {
            "/br-truncated" => (good_br[..good_br.len() - 4].to_vec(), "br"),
            "/br-junk" => ([&good_br[..], b"junk"].concat(), "br"),
            "/zstd-truncated" => (good_zstd[..good_zstd.len() - 4].to_vec(), "zstd"),
            "/br-good" => (good_br.clone(), "br"),
            _ => (good_zstd.clone(), "zstd"),
        };
        Reply::ok("")
            .body(ReplyBody::Bytes(body))
            .cc("max-age=60")
            .header("content-type", "text/html")
            .header("content-encoding", coding)
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    for (path, ae) in [
        ("/br-truncated", "br"),
        ("/br-junk", "br"),
        ("/zstd-truncated", "zstd"),
    ] {
        for _ in 0..2 {
            let (status, cache_status, got) = fetch_body(&shellac, path, ae).await;
            assert!(
                !cache_status.contains("hit"),
                "{path}: stored: {cache_status}"
            );
            assert!(
                status >= 500 || got.is_err(),
                "{path}: {status}, ended as if whole"
            );
        }
    }
    assert!(shellac.stat("compress_decode_invalid").await >= 3);
    for (path, ae) in [("/br-good", "br"), ("/zstd-good", "zstd")] {
        for round in ["miss", "hit"] {
            let (status, cache_status, got) = fetch_body(&shellac, path, ae).await;
            assert_eq!(status, 200, "{path} {round}");
            assert_eq!(
                cache_status.contains("hit"),
                round == "hit",
                "{path} {round}: {cache_status}"
            );
            assert!(got.is_ok_and(|b| !b.is_empty()), "{path} {round}");
        }
    }
    assert!(shellac.stat("compress_decode_checked").await >= 5);
    shellac.stop().await;
}

/// Bodies that gain nothing or must not change: an image, a page under `min_length`, a
/// `no-transform` page, and everything when `[compression]` is off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incompressible_small_and_no_transform_bodies_are_left_alone() {
    let origin = Origin::start(|s| {
        let (ct, body, cc) = match s.path.as_str() {
            "/img" => ("image/png", page(), "max-age=60"),
            "/small" => ("text/html", "x".repeat(511), "max-age=60"),
            _ => ("text/html", page(), "max-age=60, no-transform"),
        };
        Reply::ok(&body).cc(cc).header("content-type", ct)
    })
    .await;
    let on = Shellac::start(origin.addr, |_| {}).await;
    let off = Shellac::start(origin.addr, |c| c.compression.enabled = false).await;
    for (shellac, paths) in [
        (&on, &["/img", "/small", "/nt"][..]),
        (&off, &["/img", "/small", "/nt", "/page"][..]),
    ] {
        for path in paths {
            for _ in 0..2 {
                let r = get_with(shellac.addr, path, &[("accept-encoding", "gzip")]).await;
                assert_eq!(r.header("content-encoding"), None, "{path}");
                assert!(r.header("content-length").is_some(), "{path}");
                assert!(!varies_on_coding(&r), "{path}");
            }
        }
    }
    assert_eq!(on.stat("compress_gzip").await, 0);
    assert_eq!(off.stat("compress_gzip").await, 0);
    on.stop().await;
    off.stop().await;
}

/// `no-transform` gzip from an origin reaches even a client without gzip as gzip (RFC 9110
/// §7.7), from the full path and the fast path alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_transform_gzip_is_never_decoded() {
    let zipped = gzip(page().as_bytes());
    let body = zipped.clone();
    let origin = Origin::start(move |_| {
        Reply::ok("")
            .body(ReplyBody::Bytes(body.clone()))
            .cc("max-age=60, no-transform")
            .header("content-type", "text/html")
            .header("content-encoding", "gzip")
    })
    .await;
    let on = Shellac::start(origin.addr, |_| {}).await;
    for _ in 0..3 {
        let r = get_with(on.addr, "/ntgz", &[]).await;
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        assert_eq!(r.body, zipped);
    }
    assert_eq!(on.stat("compress_gunzip").await, 0);
    assert!(on.stat("cache_hit_fast").await >= 1);
    on.stop().await;
}

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
    assert!(head.starts_with("HTTP/1.0 200"), "{head}");
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

/// Gets `path` with `ae` until the response is in `coding` (a representation is built in the
/// background), at most `tries` times; the last response.
async fn until_coded(shellac: &Shellac, path: &str, ae: &str, coding: &str) -> Resp {
    let mut r = get_with(shellac.addr, path, &[("accept-encoding", ae)]).await;
    for _ in 0..200 {
        if r.header("content-encoding") == Some(coding) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        r = get_with(shellac.addr, path, &[("accept-encoding", ae)]).await;
    }
    r
}

/// Hot objects get br and zstd representations built in the background (issue 29): the
/// first hits by a client that prefers br get gzip (nothing is compressed on the request
/// path), then br — with a weak ETag, `Vary`, its own length and Range over its bytes; a
/// zstd client likewise, in a window of at most 8 MB; gzip and identity clients are served
/// as before; a purge of the URL takes the representations with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_objects_get_br_and_zstd_representations_built_in_the_background() {
    let origin = page_origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let stored = get_with(shellac.addr, "/hot", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&stored));
    let first = get_with(shellac.addr, "/hot", &[("accept-encoding", "gzip, br")]).await;
    assert!(is_gzip_page(&first), "not built on the request path");
    let br = until_coded(&shellac, "/hot", "gzip, deflate, br", "br").await;
    assert_eq!(
        br.header("content-encoding"),
        Some("br"),
        "{:?}",
        br.headers
    );
    let mut identity = Vec::new();
    brotli::Decompressor::new(&br.body[..], 4096)
        .read_to_end(&mut identity)
        .expect("valid br");
    assert_eq!(identity, page().as_bytes());
    assert!(br.body.len() < stored.body.len(), "smaller than the gzip");
    assert_eq!(br.header("etag"), Some("W/\"v1\""));
    assert!(varies_on_coding(&br));
    assert_eq!(
        br.header("content-length"),
        Some(&*br.body.len().to_string())
    );
    let r = get_with(
        shellac.addr,
        "/hot",
        &[("accept-encoding", "br"), ("range", "bytes=0-9")],
    )
    .await;
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(r.body, br.body[..10]);
    assert_eq!(
        r.header("content-range"),
        Some(&*format!("bytes 0-9/{}", br.body.len()))
    );

    let zstd = until_coded(&shellac, "/hot", "gzip, deflate, br, zstd", "zstd").await;
    assert_eq!(zstd.header("content-encoding"), Some("zstd"));
    let mut d = zstd::stream::Decoder::new(&zstd.body[..]).unwrap();
    d.window_log_max(23).unwrap();
    let mut identity = Vec::new();
    d.read_to_end(&mut identity)
        .expect("zstd within an 8 MB window");
    assert_eq!(identity, page().as_bytes());

    // The others as before; a client that prefers gzip by q-value gets gzip.
    let gz = get_with(shellac.addr, "/hot", &[("accept-encoding", "gzip")]).await;
    assert_eq!(gz.body, stored.body);
    let gz = get_with(
        shellac.addr,
        "/hot",
        &[("accept-encoding", "br;q=0.5, zstd;q=0.5, gzip")],
    )
    .await;
    assert_eq!(gz.body, stored.body);
    let id = get_with(shellac.addr, "/hot", &[]).await;
    assert!(is_identity_page(&id));
    assert_eq!(origin.count(), 1);
    let stats = shellac.stats().await;
    assert_eq!(stats["compress_br"], 1);
    assert_eq!(stats["compress_zstd"], 1);
    assert_eq!(stats["compress_gzip"], 1);
    assert!(stats["compress_encoded_served"] >= 3);
    assert_eq!(stats["compress_encode_dropped"], 0);

    // A purge takes them with the object: the next br client gets the new gzip.
    let mut conn = Conn::open(shellac.addr).await;
    let purged = conn.send("PURGE", "/hot", &[], b"").await;
    assert_eq!(purged.status, 200);
    let after = get_with(shellac.addr, "/hot", &[("accept-encoding", "br, gzip")]).await;
    assert!(after.cache_status().contains("fwd=miss"));
    let after = get_with(shellac.addr, "/hot", &[("accept-encoding", "br, gzip")]).await;
    assert!(is_gzip_page(&after), "{:?}", after.headers);
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// `[compression] encodings = []`: nothing is built, br clients get gzip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_representations_when_no_encodings_are_configured() {
    let origin = page_origin().await;
    let shellac = Shellac::start(origin.addr, |c| c.compression.encodings = Vec::new()).await;
    for _ in 0..4 {
        let r = get_with(
            shellac.addr,
            "/cold",
            &[("accept-encoding", "br, zstd, gzip")],
        )
        .await;
        assert!(is_gzip_page(&r));
    }
    let stats = shellac.stats().await;
    assert_eq!(stats["compress_br"] + stats["compress_zstd"], 0);
    assert!(
        stats["cache_hit_fast"] >= 1,
        "br clients stay on the fast path"
    );
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

/// The disk tier at `path` (8 MiB, every object admitted).
fn on_disk(config: &mut shellac::config::Config, path: &std::path::Path) {
    config.storage.disk = Some(shellac::config::DiskConfig {
        path: path.to_path_buf(),
        size: shellac::config::units::Size(8 << 20),
        region_size: shellac::config::units::Size(1 << 20),
        admission: shellac::config::Admission::Always,
        on_open_error: Default::default(),
    });
}

/// Waits (bounded) until the disk tier has indexed at least `n` objects.
async fn wait_disk_objects(shellac: &Shellac, n: u64) {
    for _ in 0..400 {
        if shellac.stat("n_object_disk").await >= n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the disk tier indexed fewer than {n} objects");
}

/// Representations live in the tiers like any body (issue 29): a br representation built
/// before a restart is read back from the disk tier for the first br client after it — the
/// same bytes, nothing built or fetched again (`compress_encoded_read_back`) — and promoted
/// to memory. An object stored identity under an older configuration (its type was not
/// listed then) gets br and gzip representations once `[compression]` lists it, each from
/// the identity bytes, with a weak ETag and `Vary`; identity clients still get it as stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn representations_are_read_back_from_disk_and_built_for_identity_objects() {
    let origin = Origin::start(|s| {
        let kind = if s.path == "/old" {
            "text/plain"
        } else {
            "text/html"
        };
        Reply::ok(&page())
            .cc("max-age=600")
            .header("content-type", kind)
            .header("etag", "\"v1\"")
    })
    .await;
    let dir = common::TempDir::new("compression-disk");
    let data = dir.path("cache.dat");
    let shellac = Shellac::start(origin.addr, |c| {
        on_disk(c, &data);
        c.compression.types = vec!["text/html".into()];
    })
    .await;
    let stored = get_with(shellac.addr, "/hot", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&stored));
    let br = until_coded(&shellac, "/hot", "gzip, br", "br").await;
    assert_eq!(br.header("content-encoding"), Some("br"));
    let old = get_with(shellac.addr, "/old", &[("accept-encoding", "gzip, br")]).await;
    assert!(is_identity_page(&old), "text/plain is not listed yet");
    // /hot, its br representation and /old.
    wait_disk_objects(&shellac, 3).await;
    shellac.stop().await;

    let shellac = Shellac::start(origin.addr, |c| on_disk(c, &data)).await;
    let again = get_with(shellac.addr, "/hot", &[("accept-encoding", "gzip, br")]).await;
    assert_eq!(
        again.header("content-encoding"),
        Some("br"),
        "{:?}",
        again.headers
    );
    assert_eq!(again.body, br.body, "the stored representation");
    assert_eq!(again.header("etag"), Some("W/\"v1\""));
    let stats = shellac.stats().await;
    assert_eq!(stats["compress_encoded_read_back"], 1);
    assert_eq!(stats["compress_br"], 0, "nothing built again");
    // Promoted: the next one is served from memory.
    let from_memory = get_with(shellac.addr, "/hot", &[("accept-encoding", "br")]).await;
    assert_eq!(from_memory.body, br.body);
    assert_eq!(shellac.stat("compress_encoded_read_back").await, 1);

    // Stored identity before text/plain was listed: representations built now.
    let old_br = until_coded(&shellac, "/old", "gzip, br", "br").await;
    assert_eq!(old_br.header("content-encoding"), Some("br"));
    let mut identity = Vec::new();
    brotli::Decompressor::new(&old_br.body[..], 4096)
        .read_to_end(&mut identity)
        .expect("valid br");
    assert_eq!(identity, page().as_bytes());
    assert_eq!(old_br.header("etag"), Some("W/\"v1\""));
    assert!(varies_on_coding(&old_br));
    let old_gz = until_coded(&shellac, "/old", "gzip", "gzip").await;
    assert_eq!(gunzip(&old_gz.body), page().as_bytes());
    assert_eq!(old_gz.header("etag"), Some("W/\"v1\""));
    let old_id = get_with(shellac.addr, "/old", &[]).await;
    assert!(is_identity_page(&old_id));
    assert_eq!(old_id.header("etag"), Some("\"v1\""));
    assert_eq!(origin.count(), 2, "nothing fetched again");
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

fn br(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        w.write_all(data).unwrap();
    }
    out
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

/// A hot stored gzip object gets an identity representation for clients without gzip
/// (bench/ab2009.sh "phpinfo cached by a rule": every such hit decoded the gzip): the first
/// hits are decoded as before, then one built in the background serves them as stored — the
/// identity's length and strong `ETag`, `Vary`, no decoding per hit (`compress_gunzip` stops
/// counting) — and a purge takes it with the object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_gzip_object_gets_an_identity_representation_for_clients_without_gzip() {
    let origin = page_origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let stored = get_with(shellac.addr, "/idhot", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&stored));
    let first = get_with(shellac.addr, "/idhot", &[]).await;
    assert!(is_identity_page(&first), "{:?}", first.headers);
    let mut built = false;
    for _ in 0..200 {
        let r = get_with(shellac.addr, "/idhot", &[]).await;
        assert!(is_identity_page(&r), "{:?}", r.headers);
        if shellac.stat("compress_identity").await == 1 {
            built = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(built, "an identity representation is built");
    let decoded = shellac.stat("compress_gunzip").await;
    let served = shellac.stat("compress_encoded_served").await;
    for _ in 0..3 {
        let r = get_with(shellac.addr, "/idhot", &[]).await;
        assert!(is_identity_page(&r), "{:?}", r.headers);
        assert_eq!(
            r.header("etag"),
            Some("\"v1\""),
            "the identity's strong ETag"
        );
        assert_eq!(r.header("content-length"), Some(&*page().len().to_string()));
        assert!(varies_on_coding(&r));
    }
    assert_eq!(
        shellac.stat("compress_gunzip").await,
        decoded,
        "no decoding per hit"
    );
    assert_eq!(shellac.stat("compress_encoded_served").await, served + 3);
    // Gzip clients still get the stored gzip.
    let gz = get_with(shellac.addr, "/idhot", &[("accept-encoding", "gzip")]).await;
    assert_eq!(gz.body, stored.body);
    // A range over it is over the identity bytes.
    let r = get_with(shellac.addr, "/idhot", &[("range", "bytes=0-9")]).await;
    assert_eq!(r.status, 206);
    assert_eq!(r.body, page().as_bytes()[..10]);
    assert_eq!(origin.count(), 1);
    let mut conn = Conn::open(shellac.addr).await;
    assert_eq!(conn.send("PURGE", "/idhot", &[], b"").await.status, 200);
    let after = get_with(shellac.addr, "/idhot", &[]).await;
    assert!(after.cache_status().contains("fwd=miss"));
    assert!(is_identity_page(&after));
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}
