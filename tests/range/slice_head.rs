//! A plain `HEAD` on a sliced URL reads no slice (docs/slices.md): the head a `GET` would get,
//! from the stored first slice's fields (a hit, nothing asked) or from one byte asked of the
//! origin (`Range: bytes=a-a`, `slice_head_fetch`, nothing stored), which is checked as a slice
//! is — another version invalidates the slices and the `HEAD` gets the new one's head. A
//! `Range` on a `HEAD` is ignored, as on any `HEAD`.

use std::sync::atomic::Ordering;

use super::common::*;
use super::slices::{asked, origin, ranged, sliced, stored};

const MIB: u64 = 1 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_head_reads_no_slice() {
    const LEN: u64 = 6 * MIB;
    let (origin, file) = origin(LEN).await;
    let shellac = Shellac::start(origin.addr, sliced).await;
    // Learnt by a GET passed through whole (nothing stored).
    let r = get(shellac.addr, "/movie.mp4").await;
    assert_eq!((r.status, r.body.len() as u64), (200, LEN));
    assert_eq!(shellac.stat("slice_learnt").await, 1);
    let sent = file.sent.load(Ordering::SeqCst);

    // No slice stored: one byte asked, the GET's head answered, nothing stored.
    let inserted = shellac.stat("cache_insert").await;
    let r = request(shellac.addr, "HEAD", "/movie.mp4", &[], b"").await;
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
    assert_eq!(r.header("content-length"), Some(LEN.to_string().as_str()));
    assert_eq!(r.header("etag"), Some("\"v1\""));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert_eq!(r.header("content-type"), Some("video/mp4"));
    assert_eq!(r.header("content-range"), None);
    assert!(
        r.cache_status().contains("fwd=miss"),
        "{}",
        r.cache_status()
    );
    // A Range on a HEAD is ignored (range handling is defined for GET only, RFC 9110 §14.2).
    let r = request(
        shellac.addr,
        "HEAD",
        "/movie.mp4",
        &[("range", &format!("bytes={}-{}", 2 * MIB, 2 * MIB + 9))],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some(LEN.to_string().as_str()));
    assert_eq!(r.header("content-range"), None);
    assert_eq!(asked(&origin)[1..], ["bytes=0-0", "bytes=0-0"]);
    assert_eq!(file.sent.load(Ordering::SeqCst), sent + 2, "two bytes sent");
    let stats = shellac.stats().await;
    assert_eq!(stats["slice_head_fetch"], 2);
    assert_eq!(stats["slice_fetch"], 0);
    assert_eq!(stats["cache_insert"], inserted);

    // The file changes: the byte asked shows the new version, every slice is invalidated
    // and the HEAD is answered with the new version's head.
    file.version.store(2, Ordering::SeqCst);
    let r = request(shellac.addr, "HEAD", "/movie.mp4", &[], b"").await;
    assert_eq!(r.status, 200, "{:?}", asked(&origin));
    assert_eq!(r.header("etag"), Some("\"v2\""), "{:?}", asked(&origin));
    assert!(r.body.is_empty());
    let stats = shellac.stats().await;
    assert_eq!(stats["slice_validator_mismatch"], 1);
    assert_eq!(stats["slice_head_fetch"], 3);

    // Slice 0 stored by a GET: a HEAD is a hit from its fields, nothing asked. The GET reads
    // 10 bytes of the slice; its fill completes and stores it after the answer (a request in
    // between follows the fill: `fwd=miss`), so the test waits for the store.
    let inserted = shellac.stat("cache_insert").await;
    let r = ranged(&shellac, 0, 9).await;
    assert_eq!(r.header("etag"), Some("\"v2\""));
    stored(&shellac, inserted + 1).await;
    let r = ranged(&shellac, 0, 9).await;
    assert_eq!(r.status, 206);
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    let before = origin.count();
    let r = request(shellac.addr, "HEAD", "/movie.mp4", &[], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some(LEN.to_string().as_str()));
    assert_eq!(r.header("etag"), Some("\"v2\""));
    assert!(r.header("age").is_some());
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(origin.count(), before, "{:?}", asked(&origin));
    assert_eq!(shellac.stat("slice_head_fetch").await, 3);
    shellac.stop().await;
}
