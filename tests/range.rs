//! Range requests answered from cached objects (RFC 9110 §14, RFC 9111 §3.3–3.4).

mod common;
#[path = "range/media.rs"]
mod media;
#[path = "range/nginx_mp4.rs"]
mod nginx_mp4;
#[path = "range/nginx_slice.rs"]
mod nginx_slice;
#[path = "range/slice_head.rs"]
mod slice_head;
#[path = "range/slice_rules.rs"]
mod slice_rules;
#[path = "range/slices.rs"]
mod slices;

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

/// A Range from byte 0 on a miss fetches the whole object once (no Range to the backend),
/// answers the range, and the object is then cached whole (other ranges: partial content,
/// below).
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

/// An origin that honours `Range` (one range) and `If-Range` on `BODY`, with an ETag that
/// the test can change; `Cache-Control: max-age=60`.
fn ranged_origin(
    etag: std::sync::Arc<std::sync::Mutex<&'static str>>,
) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    move |s| {
        let tag = *etag.lock().unwrap();
        let body = if tag == "\"r1\"" {
            BODY.to_string()
        } else {
            BODY.to_uppercase()
        };
        let full = Reply::ok(&body).cc("max-age=60").header("etag", tag);
        let Some(range) = s.headers.get("range").and_then(|v| v.to_str().ok()) else {
            return full;
        };
        if s.headers.get("if-range").is_some_and(|v| v != tag) {
            return full;
        }
        let spec = range.trim_start_matches("bytes=");
        let len = body.len();
        let (a, b) = match spec.split_once('-') {
            Some(("", n)) => (len - n.parse::<usize>().unwrap(), len - 1),
            Some((a, "")) => (a.parse().unwrap(), len - 1),
            Some((a, b)) => (a.parse().unwrap(), b.parse::<usize>().unwrap().min(len - 1)),
            None => return full,
        };
        Reply::ok(&body[a..=b])
            .status(206)
            .cc("max-age=60")
            .header("etag", tag)
            .header("content-range", &format!("bytes {a}-{b}/{len}"))
    }
}

/// Issue 23 (RFC 9111 §3.3): a Range miss that does not start at byte 0 is forwarded, and its
/// 206 stored and reused for that range and every range inside it (cache-tests.fyi
/// partial-store-partial-reuse-partial and its -byterange, -absent, -suffix forms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_content_is_stored_and_reused() {
    let etag = std::sync::Arc::new(std::sync::Mutex::new("\"r1\""));
    let origin = Origin::start(ranged_origin(etag)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let first = get_with(shellac.addr, "/file", &[("range", "bytes=-5")]).await;
    assert_eq!((first.status, first.text().as_str()), (206, "vwxyz"));
    assert_eq!(first.header("content-range"), Some("bytes 31-35/36"));
    assert_eq!(origin.last().headers["range"], "bytes=-5");
    for (range, want, cr) in [
        ("bytes=-5", "vwxyz", "bytes 31-35/36"),
        ("bytes=32-34", "wxy", "bytes 32-34/36"),
        ("bytes=33-", "xyz", "bytes 33-35/36"),
        ("bytes=-1", "z", "bytes 35-35/36"),
    ] {
        let r = get_with(shellac.addr, "/file", &[("range", range)]).await;
        assert_eq!((r.status, r.text().as_str()), (206, want), "{range}");
        assert_eq!(r.header("content-range"), Some(cr), "{range}");
        assert!(
            r.cache_status().contains("hit"),
            "{range}: {}",
            r.cache_status()
        );
    }
    let r = get_with(shellac.addr, "/file", &[("range", "bytes=40-50")]).await;
    assert_eq!(
        (r.status, r.header("content-range")),
        (416, Some("bytes */36"))
    );
    assert_eq!(origin.count(), 1);
    assert_eq!(shellac.stat("cache_partial_hit").await, 5);
    shellac.stop().await;
}

/// Issue 23 (RFC 9111 §3.4): pieces that share a strong validator are combined; a request for
/// the whole representation fetches only the bytes they lack (`Range` + `If-Range`) and is
/// answered in full (cache-tests.fyi partial-store-partial-complete); the pieces then become
/// one stored object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pieces_are_combined_and_completed() {
    let etag = std::sync::Arc::new(std::sync::Mutex::new("\"r1\""));
    let origin = Origin::start(ranged_origin(etag)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let a = get_with(shellac.addr, "/file", &[("range", "bytes=10-19")]).await;
    assert_eq!(a.text(), "abcdefghij");
    let b = get_with(shellac.addr, "/file", &[("range", "bytes=20-35")]).await;
    assert_eq!(b.text(), "klmnopqrstuvwxyz");
    assert_eq!(b.cache_status(), "shellac; fwd=partial; stored");
    assert_eq!(origin.last().headers["if-range"], "\"r1\"");
    // One piece now: a range across the two earlier ones is a hit.
    let across = get_with(shellac.addr, "/file", &[("range", "bytes=15-25")]).await;
    assert_eq!(across.text(), "fghijklmnop");
    assert!(
        across.cache_status().contains("hit"),
        "{}",
        across.cache_status()
    );
    // The whole representation: only bytes 0-9 are fetched.
    let whole = get(shellac.addr, "/file").await;
    assert_eq!((whole.status, whole.text().as_str()), (200, BODY));
    assert_eq!(whole.header("content-length"), Some("36"));
    assert_eq!(whole.header("content-range"), None);
    assert_eq!(whole.cache_status(), "shellac; fwd=partial; stored");
    assert_eq!(origin.last().headers["range"], "bytes=0-9");
    assert_eq!(origin.last().headers["if-range"], "\"r1\"");
    assert_eq!(shellac.stat("cache_partial_completed").await, 1);
    // Stored whole: a hit, and so is any range.
    let again = get(shellac.addr, "/file").await;
    assert!(
        again.cache_status().contains("hit"),
        "{}",
        again.cache_status()
    );
    assert_eq!(again.text(), BODY);
    let r = get_with(shellac.addr, "/file", &[("range", "bytes=0-2")]).await;
    assert_eq!((r.status, r.text().as_str()), (206, "012"));
    assert_eq!(origin.count(), 3);
    shellac.stop().await;
}

/// A piece of another representation (the ETag changed: If-Range fails, the origin answers
/// 200) replaces the pieces: the full answer is stored, and the client gets its range of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_representation_replaces_the_pieces() {
    let etag = std::sync::Arc::new(std::sync::Mutex::new("\"r1\""));
    let origin = Origin::start(ranged_origin(etag.clone())).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get_with(shellac.addr, "/file", &[("range", "bytes=10-19")]).await;
    *etag.lock().unwrap() = "\"r2\"";
    let r = get_with(shellac.addr, "/file", &[("range", "bytes=20-22")]).await;
    assert_eq!((r.status, r.text().as_str()), (206, "KLM"));
    let r = get_with(shellac.addr, "/file", &[("range", "bytes=10-12")]).await;
    assert_eq!(r.text(), "ABC", "the old piece is gone");
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// An object too large to store whole (`max_object_size`) was fetched whole once; later
/// ranges of it — from byte 0 too — go to the backend as ranges and their pieces are kept
/// (a video's seeks), and PURGE removes them with the URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_of_an_object_too_large_to_store_are_kept_as_pieces() {
    let etag = std::sync::Arc::new(std::sync::Mutex::new("\"r1\""));
    let origin = Origin::start(ranged_origin(etag)).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.cache.max_object_size = shellac::config::units::Size(16);
    })
    .await;
    let whole = get(shellac.addr, "/file").await;
    assert!(
        whole.cache_status().contains("too-large"),
        "{}",
        whole.cache_status()
    );
    for _ in 0..2 {
        let r = get_with(shellac.addr, "/file", &[("range", "bytes=0-3")]).await;
        assert_eq!((r.status, r.text().as_str()), (206, "0123"));
    }
    assert_eq!(origin.count(), 2, "the second range was a hit");
    assert_eq!(origin.last().headers["range"], "bytes=0-3");
    let purge = request(shellac.addr, "PURGE", "/file", &[], b"").await;
    assert_eq!(purge.status, 200);
    get_with(shellac.addr, "/file", &[("range", "bytes=0-3")]).await;
    assert_eq!(origin.count(), 3, "purged with the URL");
    shellac.stop().await;
}
