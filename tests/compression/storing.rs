//! What is stored: an identity page gzipped once, a miss decoded as it streams, an origin's
//! gzip kept; broken gzip, br and zstd never stored or served whole; incompressible, small and
//! `no-transform` bodies left alone.

use super::*;

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
