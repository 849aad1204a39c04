//! Range requests answered from cached objects (RFC 9110 §14, RFC 9111 §3.3–3.4).

mod common;

use common::*;

const BODY: &str = "0123456789abcdefghijklmnopqrstuvwxyz";

async fn cached() -> (Origin, Shellac) {
    let origin = Origin::start(|_| {
        Reply::ok(BODY)
            .cc("max-age=60")
            .header("etag", "\"r1\"")
            .header("content-type", "text/plain")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/file").await;
    (origin, shellac)
}

/// RFC 9110 §14.2, §15.3.7: a single satisfiable range is 206 with Content-Range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_ranges_from_cache() {
    let (origin, shellac) = cached().await;
    for (range, want, cr) in [
        ("bytes=0-9", "0123456789", "bytes 0-9/36"),
        ("bytes=30-", "uvwxyz", "bytes 30-35/36"),
        ("bytes=-3", "xyz", "bytes 33-35/36"),
        ("bytes=0-", BODY, "bytes 0-35/36"),
        ("bytes=34-100", "yz", "bytes 34-35/36"),
    ] {
        let r = get_with(shellac.addr, "/file", &[("range", range)]).await;
        assert_eq!(r.status, 206, "{range}: bytes=0- must be 206 too");
        assert_eq!(r.text(), want, "{range}");
        assert_eq!(r.header("content-range"), Some(cr));
        assert_eq!(
            r.header("content-length"),
            Some(want.len().to_string().as_str())
        );
    }
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

/// RFC 9110 §14.6: several ranges are a multipart/byteranges body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multiple_ranges_are_multipart() {
    let (_origin, shellac) = cached().await;
    let r = get_with(shellac.addr, "/file", &[("range", "bytes=0-1, 10-11")]).await;
    assert_eq!(r.status, 206);
    let ct = r.header("content-type").unwrap().to_string();
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .expect(&ct)
        .to_string();
    let text = r.text();
    assert!(
        text.contains(&format!(
            "--{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/36\r\n\r\n01\r\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("Content-Range: bytes 10-11/36\r\n\r\nab\r\n"),
        "{text}"
    );
    assert!(text.ends_with(&format!("--{boundary}--\r\n")));
    assert_eq!(r.header("content-length").unwrap(), text.len().to_string());
    shellac.stop().await;
}

/// RFC 9110 §15.5.17: unsatisfiable → 416 with `Content-Range: bytes */len`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsatisfiable_is_416() {
    let (_origin, shellac) = cached().await;
    let r = get_with(shellac.addr, "/file", &[("range", "bytes=100-200")]).await;
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */36"));
    // Garbage ranges are ignored: the whole representation (RFC 9110 §14.2).
    assert_eq!(
        get_with(shellac.addr, "/file", &[("range", "bytes=z-")])
            .await
            .status,
        200
    );
    shellac.stop().await;
}

/// RFC 9110 §13.1.5: If-Range with a stale validator gets the whole representation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_range() {
    let (_origin, shellac) = cached().await;
    assert_eq!(
        get_with(
            shellac.addr,
            "/file",
            &[("range", "bytes=0-0"), ("if-range", "\"r1\"")]
        )
        .await
        .status,
        206
    );
    let r = get_with(
        shellac.addr,
        "/file",
        &[("range", "bytes=0-0"), ("if-range", "\"old\"")],
    )
    .await;
    assert_eq!((r.status, r.text().len()), (200, 36));
    shellac.stop().await;
}

/// RFC 9111 §3.4 spirit: a Range request on a miss fetches the whole object once (no Range to
/// the backend), answers the range, and the object is then cached whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_on_a_miss_fetches_the_whole_object() {
    let origin = Origin::start(|_| Reply::ok(BODY).cc("max-age=60")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let r = get_with(shellac.addr, "/file", &[("range", "bytes=0-")]).await;
    assert_eq!(r.status, 206);
    assert_eq!(r.text(), BODY);
    let r = get_with(shellac.addr, "/file", &[("range", "bytes=5-7")]).await;
    assert_eq!((r.status, r.text().as_str()), (206, "567"));
    assert_eq!(origin.count(), 1);
    assert!(
        !origin.last().headers.contains_key("range"),
        "the backend was asked for the whole object"
    );
    shellac.stop().await;
}
