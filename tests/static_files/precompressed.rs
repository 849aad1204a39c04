//! Precompressed siblings (`precompressed = true`) when the files origin's answers are
//! cached: each class of client gets its own sibling from the cache.

use std::time::Duration;

use super::PASS;
use super::common::*;

/// `style.css` (4 KB of text) with real `.gz`, `.br` and `.zst` siblings, and `brief.css`
/// with a `.br` one only; the site's files modified long ago (cached copies stay fresh).
fn precompressed_site() -> (TempDir, Vec<u8>) {
    use std::io::Write;
    let dir = TempDir::new("files");
    let www = dir.0.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let plain: Vec<u8> = (0..200u32)
        .flat_map(|i| format!(".c{i} {{ color: #{i:06x} }}\n").into_bytes())
        .collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).unwrap();
    let mut br = Vec::new();
    brotli::BrotliCompress(&mut &plain[..], &mut br, &Default::default()).unwrap();
    let zst = zstd::encode_all(&plain[..], 3).unwrap();
    let long_ago = std::time::UNIX_EPOCH + Duration::from_secs(1_577_836_800);
    for (name, bytes) in [
        ("style.css", &plain[..]),
        ("style.css.gz", &gz.finish().unwrap()[..]),
        ("style.css.br", &br[..]),
        ("style.css.zst", &zst[..]),
        ("brief.css", &plain[..]),
        ("brief.css.br", &br[..]),
    ] {
        std::fs::write(www.join(name), bytes).unwrap();
        std::fs::File::options()
            .write(true)
            .open(www.join(name))
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    }
    (dir, plain)
}

/// The representation a response carries, decoded by its `Content-Encoding`.
fn decoded(r: &Resp) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match r.header("content-encoding") {
        None => out.extend_from_slice(&r.body),
        Some("gzip") => {
            flate2::read::GzDecoder::new(&r.body[..])
                .read_to_end(&mut out)
                .unwrap();
        }
        Some("br") => brotli::BrotliDecompress(&mut &r.body[..], &mut out).unwrap(),
        Some("zstd") => out = zstd::decode_all(&r.body[..]).unwrap(),
        Some(other) => panic!("coding {other}"),
    }
    out
}

/// Issue 31: precompressed siblings chosen by `Accept-Encoding` hold for cached copies too.
/// Each class of client (gzip, identity, br, zstd) gets from the cache the sibling the files
/// origin picks for it (its bytes, its own strong `ETag`, `Vary: Accept-Encoding`), not one
/// stored gzip decoded for the others; conditionals and Range apply to the representation
/// sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precompressed_siblings_from_the_cache_per_coding() {
    let (dir, plain) = precompressed_site();
    let www = dir.0.join("www");
    // h2c too: HTTP/2 hits take the full path, not the HTTP/1.1 fast hit.
    let sh = Shellac::start_files(&www, |c| {
        c.backends[0].precompressed = true;
        c.http2.h2c = shellac::config::http2::H2c::All;
        let mut pass = shellac::config::rules::RuleConfig::default();
        pass.request_header.insert("x-pass".into(), String::new());
        pass.pass = true;
        c.rules.push(pass);
    })
    .await;
    let file = |suffix: &str| std::fs::read(www.join(format!("style.css{suffix}"))).unwrap();
    let clients = [
        ("gzip", Some("gzip"), file(".gz")),
        ("identity", None, file("")),
        ("br", Some("br"), file(".br")),
        ("gzip, deflate, br", Some("br"), file(".br")),
        ("zstd", Some("zstd"), file(".zst")),
        ("", None, file("")),
    ];
    // The origin's own answers (passed): the ETag of each sibling.
    let mut etags = Vec::new();
    for (ae, ce, bytes) in &clients {
        let r = get_with(sh.addr, "/style.css", &[("accept-encoding", ae), PASS]).await;
        assert_eq!((r.status, r.header("content-encoding")), (200, *ce), "{ae}");
        assert_eq!(&r.body[..], &bytes[..], "{ae}");
        etags.push(r.header("etag").unwrap().to_string());
    }
    for round in ["miss", "hit"] {
        for ((ae, ce, bytes), etag) in clients.iter().zip(&etags) {
            let r = get_with(sh.addr, "/style.css", &[("accept-encoding", ae)]).await;
            let what = format!("{round} {ae:?}: {}", r.cache_status());
            assert_eq!(r.status, 200, "{what}");
            if round == "hit" {
                assert!(r.cache_status().contains("hit"), "{what}");
            }
            assert_eq!(r.header("content-encoding"), *ce, "{what}");
            assert_eq!(&r.body[..], &bytes[..], "{what}");
            assert_eq!(r.header("etag"), Some(etag.as_str()), "{what}");
            assert!(!etag.starts_with("W/"), "{what}");
            assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{what}");
            assert_eq!(r.header("content-type"), Some("text/css"), "{what}");
        }
    }
    // Range and conditionals over the representation each client is sent.
    for ((ae, ce, bytes), etag) in clients.iter().zip(&etags) {
        let r = get_with(
            sh.addr,
            "/style.css",
            &[("accept-encoding", ae), ("range", "bytes=0-9")],
        )
        .await;
        assert_eq!((r.status, r.header("content-encoding")), (206, *ce), "{ae}");
        let range = format!("bytes 0-9/{}", bytes.len());
        assert_eq!(r.header("content-range"), Some(range.as_str()), "{ae}");
        assert_eq!(&r.body[..], &bytes[..10], "{ae}");
        let r = get_with(
            sh.addr,
            "/style.css",
            &[("accept-encoding", ae), ("if-none-match", etag)],
        )
        .await;
        assert_eq!(r.status, 304, "{ae}");
        assert_eq!(r.header("etag"), Some(etag.as_str()), "{ae}");
    }
    // Over HTTP/2 (the full path's hits): the same representation per class of client.
    for ((ae, ce, bytes), etag) in clients.iter().zip(&etags) {
        let r = super::common::h2::h2_get(sh.addr, "/style.css", &[("accept-encoding", ae)]).await;
        let what = format!("h2 {ae:?}: {}", r.cache_status());
        assert!(r.cache_status().contains("hit"), "{what}");
        assert_eq!(r.header("content-encoding"), *ce, "{what}");
        assert_eq!(&r.body[..], &bytes[..], "{what}");
        assert_eq!(r.header("etag"), Some(etag.as_str()), "{what}");
    }
    // Another representation's ETag does not validate this one.
    let r = get_with(
        sh.addr,
        "/style.css",
        &[
            ("accept-encoding", "identity"),
            ("if-none-match", &etags[2]),
        ],
    )
    .await;
    assert_eq!((r.status, &r.body[..]), (200, &plain[..]));
    // Only a `.br` sibling: a gzip client is sent the file gzipped by Shellac (a transformed
    // representation: its ETag weak), an identity client the file itself.
    let brief = std::fs::read(www.join("brief.css")).unwrap();
    for round in ["miss", "hit"] {
        let mut etags = std::collections::HashMap::new();
        for ae in ["identity", "gzip", "br"] {
            let r = get_with(sh.addr, "/brief.css", &[("accept-encoding", ae)]).await;
            let what = format!("{round} {ae:?}: {}", r.cache_status());
            assert_eq!(r.status, 200, "{what}");
            let ce = if ae == "identity" { None } else { Some(ae) };
            assert_eq!(r.header("content-encoding"), ce, "{what}");
            assert_eq!(decoded(&r), brief, "{what}");
            assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{what}");
            etags.insert(ae, r.header("etag").unwrap().to_string());
        }
        assert!(!etags["identity"].starts_with("W/"), "{etags:?}");
        assert_eq!(
            etags["gzip"],
            format!("W/{}", etags["identity"]),
            "{etags:?}"
        );
        assert!(etags["br"].ends_with("-br\""), "{etags:?}");
    }
}
