//! Files served as any origin's responses: types and validators, a directory's index (or a
//! slash, or 403), conditionals and ranges passed and cached, precompressed siblings chosen
//! by `Accept-Encoding` with `Vary`.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_served_with_types_and_validators() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |_| {}).await;
    for (path, ty, body) in [
        ("/app.js", "text/javascript", "console.log(1);\n"),
        ("/mod.mjs", "text/javascript", "export {};\n"),
        ("/data.json", "application/json", "{\"a\":1}"),
        ("/noext", "application/octet-stream", "raw"),
    ] {
        let r = get(sh.addr, path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some(ty), "{path}");
        assert_eq!(r.text(), body, "{path}");
        assert!(r.header("etag").is_some_and(|e| e.starts_with('"')));
        assert!(r.header("last-modified").is_some());
        assert_eq!(r.header("accept-ranges"), Some("bytes"));
    }
    let head = request(sh.addr, "HEAD", "/text.txt", &[PASS], b"").await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("36"));
    assert!(head.body.is_empty());
    let post = request(sh.addr, "POST", "/text.txt", &[], b"x").await;
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow"), Some("GET, HEAD"));
    assert_eq!(get(sh.addr, "/missing.txt").await.status, 404);
    // The open-file cache answered the second look-up of a path.
    get(sh.addr, "/app.js?again").await;
    let v: serde_json::Value =
        serde_json::from_slice(&get(sh.admin, "/backends").await.body).unwrap();
    let b = &v["backends"][0];
    assert!(b["files_cache_hit"].as_u64().unwrap() >= 1, "{b}");
    assert!(b["files_cache_miss"].as_u64().unwrap() >= 1, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_get_their_index_a_slash_or_403() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |_| {}).await;
    let r = get(sh.addr, "/docs?x=1").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/docs/?x=1"));
    let r = get(sh.addr, "/docs/").await;
    assert_eq!((r.status, r.text().as_str()), (200, "<h1>docs</h1>"));
    assert_eq!(r.header("content-type"), Some("text/html"));
    assert_eq!(
        get(sh.addr, "/empty/").await.status,
        403,
        "no index, no listing"
    );
    assert_eq!(get(sh.addr, "/text.txt/").await.status, 404);
}

/// Conditionals and ranges, passed (answered by the files origin) and cached (answered by
/// the proxy from the stored copy): the same answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditionals_and_ranges_passed_and_cached() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |_| {}).await;
    let first = get(sh.addr, "/text.txt").await;
    let etag = first.header("etag").unwrap().to_string();
    let lm = first.header("last-modified").unwrap().to_string();
    for pass in [true, false] {
        let with = |h: &[(&'static str, &str)]| {
            let mut v: Vec<(&str, String)> = h.iter().map(|(k, v)| (*k, v.to_string())).collect();
            if pass {
                v.push((PASS.0, PASS.1.to_string()));
            }
            v
        };
        let send = |h: Vec<(&'static str, String)>| async move {
            let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
            get_with(sh.addr, "/text.txt", &h).await
        };
        let r = send(with(&[("if-none-match", &etag)])).await;
        assert_eq!(r.status, 304, "pass={pass}");
        let r = send(with(&[("if-modified-since", &lm)])).await;
        assert_eq!(r.status, 304, "pass={pass}");
        let r = send(with(&[("if-match", "\"other\"")])).await;
        assert_eq!(r.status, 412, "pass={pass}");
        let r = send(with(&[("range", "bytes=0-3")])).await;
        assert_eq!((r.status, r.text().as_str()), (206, "0123"), "pass={pass}");
        assert_eq!(r.header("content-range"), Some("bytes 0-3/36"));
        let r = send(with(&[("range", "bytes=0-1,-2")])).await;
        assert_eq!(r.status, 206, "pass={pass}");
        let ct = r.header("content-type").unwrap();
        assert!(ct.starts_with("multipart/byteranges; boundary="), "{ct}");
        let text = r.text();
        assert!(
            text.contains("Content-Range: bytes 0-1/36\r\n\r\n01\r\n"),
            "{text}"
        );
        assert!(
            text.contains("Content-Range: bytes 34-35/36\r\n\r\nyz\r\n"),
            "{text}"
        );
        assert_eq!(
            r.header("content-length"),
            Some(r.body.len().to_string().as_str())
        );
        let r = send(with(&[("range", "bytes=100-")])).await;
        assert_eq!(r.status, 416, "pass={pass}");
        assert_eq!(r.header("content-range"), Some("bytes */36"));
        let r = send(with(&[("range", "bytes=0-3"), ("if-range", "\"stale\"")])).await;
        assert_eq!((r.status, r.body.len()), (200, 36), "pass={pass}");
        let r = send(with(&[("range", "bytes=0-3"), ("if-range", &etag)])).await;
        assert_eq!(r.status, 206, "pass={pass}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precompressed_siblings_by_accept_encoding_with_vary() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |_| {}).await;
    for (ae, body, ce) in [
        ("br, gzip", "BROTLI-BYTES", Some("br")),
        ("gzip", "GZIP-BYTES", Some("gzip")),
        ("identity", "body{color:red}", None),
    ] {
        let r = get_with(sh.addr, "/style.css", &[("accept-encoding", ae), PASS]).await;
        assert_eq!(r.status, 200, "{ae}");
        assert_eq!(r.text(), body, "{ae}");
        assert_eq!(r.header("content-encoding"), ce, "{ae}");
        assert_eq!(r.header("content-type"), Some("text/css"), "{ae}");
        assert!(
            r.header("vary")
                .is_some_and(|v| v.contains("Accept-Encoding")),
            "{ae}"
        );
    }
    let r = get_with(sh.addr, "/app.js", &[("accept-encoding", "gzip"), PASS]).await;
    assert_eq!(r.header("vary"), None, "no sibling, no Vary");
}
