//! Big media in slices (`cache.slice`, issue 31): an object larger than `max_object_size`
//! cached as 1 MiB slices fetched by Range on demand, against a real origin serving a
//! generated 40 MiB file that counts the body bytes it sends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::common::*;
use shellac::config::units::Size;
use shellac::config::{Admission, Config, DiskConfig};

const MIB: u64 = 1 << 20;

/// Byte `i` of version `v` of the file: two versions differ at every byte.
fn byte(v: u64, i: u64) -> u8 {
    ((i.wrapping_mul(31) ^ (i >> 11)).wrapping_add(v * 101) % 251) as u8
}

pub(super) fn bytes(v: u64, start: u64, end: u64) -> Vec<u8> {
    (start..=end).map(|i| byte(v, i)).collect()
}

/// The origin's state: the file's version (its ETag), whether it ignores Range, and the
/// body bytes it sent.
#[derive(Clone, Default)]
pub(super) struct File {
    pub(super) version: Arc<AtomicU64>,
    ignore_range: Arc<AtomicBool>,
    /// Answers after 300 ms (concurrent clients then meet while a slice is fetched).
    slow: Arc<AtomicBool>,
    /// Says `max-age=0` (no freshness of its own: only a rule's `ttl` stores it).
    pub(super) expired: Arc<AtomicBool>,
    pub(super) sent: Arc<AtomicU64>,
}

/// `bytes=a-b`, `bytes=a-` or `bytes=-n` of a `len`-byte file.
pub(super) fn range(header: &str, len: u64) -> Option<(u64, u64)> {
    let spec = header.strip_prefix("bytes=")?;
    let (a, b) = spec.split_once('-')?;
    if a.is_empty() {
        let n: u64 = b.parse().ok()?;
        return Some((len - n.min(len), len - 1));
    }
    let a: u64 = a.parse().ok()?;
    let b: u64 = if b.is_empty() {
        len - 1
    } else {
        b.parse::<u64>().ok()?.min(len - 1)
    };
    (a <= b).then_some((a, b))
}

pub(super) async fn origin(len: u64) -> (Origin, File) {
    let file = File::default();
    file.version.store(1, Ordering::SeqCst);
    let f = file.clone();
    let origin = Origin::start(move |seen| {
        let v = f.version.load(Ordering::SeqCst);
        let reply = |status: u16, body: Vec<u8>| {
            f.sent.fetch_add(body.len() as u64, Ordering::SeqCst);
            let delay = if f.slow.load(Ordering::SeqCst) {
                Duration::from_millis(300)
            } else {
                Duration::ZERO
            };
            Reply::ok("")
                .delay(delay)
                .status(status)
                .body(ReplyBody::Bytes(body))
                .cc(if f.expired.load(Ordering::SeqCst) {
                    "max-age=0"
                } else {
                    "max-age=3600"
                })
                .header("etag", &format!("\"v{v}\""))
                .header("last-modified", "Sat, 01 Jan 2022 00:00:00 GMT")
                .header("content-type", "video/mp4")
        };
        let asked = seen
            .headers
            .get("range")
            .and_then(|r| r.to_str().ok())
            .filter(|_| !f.ignore_range.load(Ordering::SeqCst));
        answer_range(asked, len, |a, b| bytes(v, a, b), reply)
    })
    .await;
    (origin, file)
}

/// An origin's answer to `asked` (a `Range` header; `None`: the whole file) on a `len`-byte
/// file (`len > 0`) whose bytes `a ..= b` are `part(a, b)`: a 206 with Content-Range, a 416
/// with `bytes */len`, or a 200 with Accept-Ranges. `reply(status, body)` adds the file's own
/// headers (validators, freshness, type).
pub(super) fn answer_range(
    asked: Option<&str>,
    len: u64,
    part: impl Fn(u64, u64) -> Vec<u8>,
    reply: impl Fn(u16, Vec<u8>) -> Reply,
) -> Reply {
    match asked.map(|r| range(r, len)) {
        Some(Some((a, b))) => {
            reply(206, part(a, b)).header("content-range", &format!("bytes {a}-{b}/{len}"))
        }
        Some(None) => Reply::ok("")
            .status(416)
            .header("content-range", &format!("bytes */{len}")),
        None => reply(200, part(0, len - 1)).header("accept-ranges", "bytes"),
    }
}

/// A disk tier of 64 MiB in 8 MiB regions at `path`, admitting every object.
pub(super) fn disk_at(path: std::path::PathBuf) -> DiskConfig {
    DiskConfig {
        path,
        size: Size(64 * MIB),
        region_size: Size(8 * MIB),
        admission: Admission::Always,
        on_open_error: Default::default(),
    }
}

pub(super) fn sliced(c: &mut Config) {
    // The memory tier evicts per shard (8 here: 4 per CPU), and a shard is picked by a hash
    // seeded per process: 64 MiB (8 MiB shards) let a test's ~26 slices of 1 MiB crowd one
    // shard now and then, evict a slice and ask it again ("slice N asked twice", ~1 run in 10).
    // 256 MiB gives 32 MiB shards, more than any test here stores in all.
    c.cache.memory_size = Size(256 * MIB);
    c.cache.max_object_size = Size(4 * MIB);
    c.cache.slice = true;
    c.cache.slice_size = Size(MIB);
}

/// The Ranges the origin was asked, in order.
pub(super) fn asked(origin: &Origin) -> Vec<String> {
    origin
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| {
            s.headers
                .get("range")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_string()
        })
        .collect()
}

/// Waits (bounded) until `n` objects were stored: a slice read in part by its client is
/// still completed and stored by its fill.
pub(super) async fn stored(shellac: &Shellac, n: u64) {
    assert!(
        eventually(Duration::from_secs(10), || async {
            shellac.stat("cache_insert").await >= n
        })
        .await,
        "{n} objects stored"
    );
}

pub(super) async fn ranged(shellac: &Shellac, a: u64, b: u64) -> Resp {
    get_with(
        shellac.addr,
        "/movie.mp4",
        &[("range", &format!("bytes={a}-{b}"))],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seek_costs_one_slice() {
    const LEN: u64 = 40 * MIB;
    let (origin, file) = origin(LEN).await;
    let shellac = Shellac::start(origin.addr, sliced).await;

    // A seek past max_object_size of a URL not known yet: asked as its slice at once.
    let a = 5 * MIB + 100;
    let r = ranged(&shellac, a, a + 99).await;
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes {a}-{}/{LEN}", a + 99).as_str())
    );
    assert_eq!(r.header("content-length"), Some("100"));
    assert_eq!(r.body.as_ref(), bytes(1, a, a + 99).as_slice());
    assert_eq!(
        asked(&origin),
        vec![format!("bytes={}-{}", 5 * MIB, 6 * MIB - 1)]
    );
    assert_eq!(file.sent.load(Ordering::SeqCst), MIB);
    stored(&shellac, 1).await;

    // The same slice again: a hit, nothing asked.
    let r = ranged(&shellac, a + 1000, a + 5000).await;
    assert_eq!(r.body.as_ref(), bytes(1, a + 1000, a + 5000).as_slice());
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(origin.count(), 1);

    // Another seek costs one slice; a range across a held and a missing slice only the
    // missing one.
    let b = 20 * MIB + 7;
    let r = ranged(&shellac, b, b + 10).await;
    assert_eq!(r.body.as_ref(), bytes(1, b, b + 10).as_slice());
    assert_eq!(origin.count(), 2);
    let r = ranged(&shellac, 6 * MIB - 10, 6 * MIB + 10).await;
    assert_eq!(
        r.body.as_ref(),
        bytes(1, 6 * MIB - 10, 6 * MIB + 10).as_slice()
    );
    assert_eq!(origin.count(), 3);
    assert_eq!(
        asked(&origin)[2],
        format!("bytes={}-{}", 6 * MIB, 7 * MIB - 1)
    );

    // A suffix range, an open range of the last slice, and a range past the end.
    let r = get_with(shellac.addr, "/movie.mp4", &[("range", "bytes=-10")]).await;
    assert_eq!(r.status, 206);
    assert_eq!(r.body.as_ref(), bytes(1, LEN - 10, LEN - 1).as_slice());
    let r = get_with(
        shellac.addr,
        "/movie.mp4",
        &[("range", &format!("bytes={}-", LEN - 5))],
    )
    .await;
    assert_eq!(r.body.as_ref(), bytes(1, LEN - 5, LEN - 1).as_slice());
    let r = ranged(&shellac, LEN, LEN + 10).await;
    assert_eq!(r.status, 416);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes */{LEN}").as_str())
    );
    assert_eq!(origin.count(), 4);

    // HEAD asks one byte of the first slice (not stored), no slice; a conditional request is
    // answered from what is known, nothing asked.
    let sent = file.sent.load(Ordering::SeqCst);
    let r = request(shellac.addr, "HEAD", "/movie.mp4", &[], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some(LEN.to_string().as_str()));
    let r = get_with(shellac.addr, "/movie.mp4", &[("if-none-match", "\"v1\"")]).await;
    assert_eq!(r.status, 304);
    assert_eq!(asked(&origin)[4..], ["bytes=0-0".to_string()]);
    assert_eq!(file.sent.load(Ordering::SeqCst), sent + 1);

    let stats = shellac.stats().await;
    assert_eq!(stats["slice_learnt"], 1);
    assert_eq!(stats["slice_fetch"], 4);
    assert_eq!(stats["slice_head_fetch"], 1);
    assert_eq!(stats["slice_validator_mismatch"], 0);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_get_is_assembled_from_slices_once_known() {
    const LEN: u64 = 10 * MIB + 123;
    let (origin, file) = origin(LEN).await;
    let shellac = Shellac::start(origin.addr, sliced).await;
    // The first GET shows the length: passed through whole, the URL learnt.
    let r = get(shellac.addr, "/movie.mp4").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len() as u64, LEN);
    assert!(
        r.cache_status().contains("too-large"),
        "{}",
        r.cache_status()
    );
    assert_eq!(shellac.stat("slice_learnt").await, 1);
    // From then on: slices, 11 of them, and the same bytes.
    let r = get(shellac.addr, "/movie.mp4").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some(LEN.to_string().as_str()));
    assert!(
        r.cache_status().contains("detail=slice"),
        "{}",
        r.cache_status()
    );
    assert!(r.body.as_ref() == bytes(1, 0, LEN - 1).as_slice());
    assert_eq!(shellac.stat("slice_fetch").await, 11);
    let r = get(shellac.addr, "/movie.mp4").await;
    assert!(r.body.as_ref() == bytes(1, 0, LEN - 1).as_slice());
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(origin.count(), 12);
    assert_eq!(file.sent.load(Ordering::SeqCst), 2 * LEN);
    // PURGE removes the slices with the URL.
    let r = request(shellac.addr, "PURGE", "/movie.mp4", &[], b"").await;
    assert_eq!(r.status, 200);
    let r = ranged(&shellac, 0, 9).await;
    assert_eq!(r.body.as_ref(), bytes(1, 0, 9).as_slice());
    assert_eq!(origin.count(), 13);
    shellac.stop().await;
}

/// The goal of issue 31: a range-seek workload over a file above `max_object_size` costs the
/// origin at most 1.1 bytes per byte the clients get.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_seek_workload_costs_at_most_1_1_origin_bytes_per_client_byte() {
    const LEN: u64 = 40 * MIB;
    let (origin, file) = origin(LEN).await;
    let shellac = Shellac::start(origin.addr, sliced).await;
    let mut client = 0u64;
    // Viewers seek (a fixed pseudo-random sequence) and read 6 MiB on in 1 MiB requests, as a
    // player does; later viewers seek where earlier ones did too.
    let mut x: u64 = 12345;
    for _ in 0..16 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let seek = 1 + (x >> 20) % (LEN - 6 * MIB - 1);
        for step in 0..6 {
            let a = seek + step * MIB;
            let r = ranged(&shellac, a, a + MIB - 1).await;
            assert_eq!(r.status, 206);
            assert!(r.body.as_ref() == bytes(1, a, a + MIB - 1).as_slice());
            client += r.body.len() as u64;
        }
    }
    let sent = file.sent.load(Ordering::SeqCst);
    let ratio = sent as f64 / client as f64;
    println!("origin bytes {sent}, client bytes {client}: {ratio:.3} origin bytes per client byte");
    assert!(ratio <= 1.1, "{ratio}");
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etag_change_invalidates_every_slice() {
    const LEN: u64 = 12 * MIB;
    let (origin, file) = origin(LEN).await;
    let shellac = Shellac::start(origin.addr, sliced).await;
    let r = ranged(&shellac, 5 * MIB, 5 * MIB + 9).await;
    assert_eq!(r.body.as_ref(), bytes(1, 5 * MIB, 5 * MIB + 9).as_slice());
    let r = ranged(&shellac, 8 * MIB, 8 * MIB + 9).await;
    assert_eq!(r.body.as_ref(), bytes(1, 8 * MIB, 8 * MIB + 9).as_slice());
    stored(&shellac, 2).await;

    // The file changes. A range starting in a held slice and running into one that is not
    // held: its head went out with version 1, so the response is cut at the change — the
    // client never gets bytes of two versions.
    file.version.store(2, Ordering::SeqCst);
    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn
        .send_head(
            "GET",
            "/movie.mp4",
            &[("range", &format!("bytes={}-{}", 6 * MIB - 10, 6 * MIB + 9))],
            b"",
        )
        .await;
    assert_eq!(resp.status(), 206);
    use http_body_util::BodyExt;
    let mut got = Vec::new();
    let mut body = resp.into_body();
    let mut failed = false;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => got.extend_from_slice(f.data_ref().map_or(&[][..], |d| d.as_ref())),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "a response spanning two versions must be cut");
    assert!(got.len() < 20);
    assert_eq!(
        got,
        bytes(1, 6 * MIB - 10, 6 * MIB - 10 + got.len() as u64 - 1)
    );
    assert_eq!(shellac.stat("slice_validator_mismatch").await, 1);

    // Every slice of version 1 is gone: the slice held before is fetched again, as version 2.
    let r = ranged(&shellac, 5 * MIB, 5 * MIB + 9).await;
    assert_eq!(r.status, 206);
    assert_eq!(r.body.as_ref(), bytes(2, 5 * MIB, 5 * MIB + 9).as_slice());
    assert_eq!(r.header("etag"), Some("\"v2\""));

    // A change seen at the first slice of a response restarts it: served whole as version 3.
    file.version.store(3, Ordering::SeqCst);
    let r = ranged(&shellac, 10 * MIB, 10 * MIB + 9).await;
    assert_eq!(r.status, 206);
    assert_eq!(r.body.as_ref(), bytes(3, 10 * MIB, 10 * MIB + 9).as_slice());
    assert_eq!(shellac.stat("slice_validator_mismatch").await, 2);
    let r = ranged(&shellac, 5 * MIB, 5 * MIB + 9).await;
    assert_eq!(r.body.as_ref(), bytes(3, 5 * MIB, 5 * MIB + 9).as_slice());
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_ignoring_range_is_passed_through_uncached() {
    const LEN: u64 = 6 * MIB;
    let (origin, file) = origin(LEN).await;
    file.ignore_range.store(true, Ordering::SeqCst);
    let shellac = Shellac::start(origin.addr, sliced).await;
    for _ in 0..2 {
        let r = ranged(&shellac, 5 * MIB, 5 * MIB + 99).await;
        assert_eq!(r.status, 206);
        assert_eq!(r.body.as_ref(), bytes(1, 5 * MIB, 5 * MIB + 99).as_slice());
    }
    let stats = shellac.stats().await;
    assert_eq!(stats["slice_range_ignored"], 1);
    assert_eq!(stats["slice_learnt"], 0);
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_live_in_the_disk_tier_across_a_restart() {
    const LEN: u64 = 12 * MIB;
    let (origin, _file) = origin(LEN).await;
    let dir = TempDir::new("slices");
    let data = dir.path("cache.dat");
    let start = || async {
        Shellac::start(origin.addr, |c| {
            sliced(c);
            c.storage.disk = Some(disk_at(data.clone()));
        })
        .await
    };
    let shellac = start().await;
    for a in [5 * MIB, 7 * MIB, 9 * MIB] {
        let r = ranged(&shellac, a, a + 9).await;
        assert_eq!(r.body.as_ref(), bytes(1, a, a + 9).as_slice());
    }
    stored(&shellac, 3).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            shellac.stat("n_object_disk").await >= 3
        })
        .await,
        "slices written to disk"
    );
    shellac.stop().await;
    assert_eq!(origin.count(), 3);

    // After a restart the URL is learnt again from one slice; the others come from disk.
    let shellac = start().await;
    let r = ranged(&shellac, 5 * MIB + 1, 5 * MIB + 9).await;
    assert_eq!(
        r.body.as_ref(),
        bytes(1, 5 * MIB + 1, 5 * MIB + 9).as_slice()
    );
    assert_eq!(origin.count(), 4);
    let r = ranged(&shellac, 7 * MIB, 9 * MIB + 9).await;
    assert!(r.body.as_ref() == bytes(1, 7 * MIB, 9 * MIB + 9).as_slice());
    assert_eq!(
        origin.count(),
        5,
        "only slice 8 was never stored: {:?}",
        asked(&origin)
    );
    assert!(shellac.stat("cache_hit_disk").await + shellac.stat("slice_hit").await >= 2);
    shellac.stop().await;
}

/// A slice miss is coalesced like any miss: clients that want one slice at once share its
/// fetch (whoever comes late finds it stored: one origin request either way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_wanting_one_slice_share_its_fetch() {
    const LEN: u64 = 12 * MIB;
    let (origin, file) = origin(LEN).await;
    let shellac = Shellac::start(origin.addr, sliced).await;
    let r = ranged(&shellac, 5 * MIB, 5 * MIB + 9).await;
    assert_eq!(r.status, 206);
    stored(&shellac, 1).await;
    file.slow.store(true, Ordering::SeqCst);
    let (a, b, c) = tokio::join!(
        ranged(&shellac, 8 * MIB, 8 * MIB + 9),
        ranged(&shellac, 8 * MIB + 100, 8 * MIB + 199),
        ranged(&shellac, 8 * MIB + 1000, 9 * MIB - 1),
    );
    assert_eq!(a.body.as_ref(), bytes(1, 8 * MIB, 8 * MIB + 9).as_slice());
    assert_eq!(
        b.body.as_ref(),
        bytes(1, 8 * MIB + 100, 8 * MIB + 199).as_slice()
    );
    assert!(c.body.as_ref() == bytes(1, 8 * MIB + 1000, 9 * MIB - 1).as_slice());
    assert_eq!(origin.count(), 2, "{:?}", asked(&origin));
    shellac.stop().await;
}

/// The fields of every request the origin was asked, as (path, Range, the field `name`).
fn asked_with(origin: &Origin, name: &str) -> Vec<(String, String, String)> {
    let field = |s: &Seen, n: &str| {
        s.headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_string()
    };
    origin
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| (s.path.clone(), field(s, "range"), field(s, name)))
        .collect()
}

/// Issue 31: a sliced URL goes through the policy like any request: vcl_hit or vcl_miss
/// for its first slice, vcl_backend_fetch's backend request for every slice it fetches (the
/// probe's, the first, and those read while the client reads), vcl_backend_response's
/// storage decision for the response that makes a URL sliced (a program that refuses to
/// store it leaves the URL unsliced), and vcl_hit's `return (pass)` passes the request as
/// the client sent it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliced_requests_go_through_vcl_hit_miss_and_the_backend_subroutines() {
    const LEN: u64 = 10 * MIB;
    let (origin, _file) = origin(LEN).await;
    let vcl = r#"vcl 4.1;
backend default { ${origin0} }
sub vcl_hit {
    set req.http.X-Seen = "hit";
    if (req.http.X-Pass) { return (pass); }
}
sub vcl_miss { set req.http.X-Seen = "miss"; }
sub vcl_backend_fetch { set bereq.http.X-Slice-Test = "from-vcl"; }
sub vcl_backend_response {
    if (bereq.url ~ "^/private") {
        set beresp.uncacheable = true;
        return (deliver);
    }
}
sub vcl_deliver { set resp.http.X-Seen = req.http.X-Seen; }
"#;
    let shellac = super::common::vcl::start_vcl_with("slices", vcl, &[origin.addr], sliced).await;

    // The probe (a Range past max_object_size of a URL not known yet): vcl_miss, then the
    // slice asked with vcl_backend_fetch's field.
    let a = 5 * MIB + 100;
    let r = ranged(&shellac, a, a + 99).await;
    assert_eq!(r.status, 206);
    assert!(
        r.body.as_ref() == bytes(1, a, a + 99).as_slice(),
        "{} {:?}",
        r.status,
        asked(&origin)
    );
    assert_eq!(r.header("x-seen"), Some("miss"));
    stored(&shellac, 1).await;

    // The same slice: vcl_hit, nothing asked.
    let r = ranged(&shellac, a + 10, a + 20).await;
    assert!(
        r.body.as_ref() == bytes(1, a + 10, a + 20).as_slice(),
        "{} {:?}",
        r.status,
        asked(&origin)
    );
    assert_eq!(r.header("x-seen"), Some("hit"), "{}", r.cache_status());
    assert_eq!(origin.count(), 1);

    // A slice not stored: vcl_miss, asked with the field.
    let b = 8 * MIB + 1;
    let r = ranged(&shellac, b, b + 9).await;
    assert!(
        r.body.as_ref() == bytes(1, b, b + 9).as_slice(),
        "{} {:?}",
        r.status,
        asked(&origin)
    );
    assert_eq!(r.header("x-seen"), Some("miss"));
    assert_eq!(origin.count(), 2);

    // A first slice stored (vcl_hit) and the next one fetched as the client reads: that
    // fetch carries the field too.
    let r = ranged(&shellac, 6 * MIB - 10, 6 * MIB + 10).await;
    assert!(
        r.body.as_ref() == bytes(1, 6 * MIB - 10, 6 * MIB + 10).as_slice(),
        "{} {:?}",
        r.status,
        asked(&origin)
    );
    assert_eq!(r.header("x-seen"), Some("hit"));
    assert_eq!(origin.count(), 3);
    for (path, range, field) in asked_with(&origin, "x-slice-test") {
        assert_eq!(field, "from-vcl", "{path} {range}");
        assert!(range.starts_with("bytes="), "{range}");
    }
    assert_eq!(
        asked_with(&origin, "x-slice-test")[2].1,
        format!("bytes={}-{}", 6 * MIB, 7 * MIB - 1)
    );

    // vcl_hit's pass: the client's request as it is, not a slice.
    let r = get_with(
        shellac.addr,
        "/movie.mp4",
        &[("range", &format!("bytes={a}-{}", a + 9)), ("x-pass", "1")],
    )
    .await;
    assert!(
        r.body.as_ref() == bytes(1, a, a + 9).as_slice(),
        "{} {:?}",
        r.status,
        asked(&origin)
    );
    assert_eq!(origin.count(), 4);
    assert_eq!(
        asked_with(&origin, "x-slice-test")[3].1,
        format!("bytes={a}-{}", a + 9)
    );

    // A response the program refuses to store never makes its URL sliced: each request
    // goes to the origin (a probe, or a whole GET).
    for _ in 0..2 {
        let r = get_with(
            shellac.addr,
            "/private/movie.mp4",
            &[("range", &format!("bytes={a}-{}", a + 9))],
        )
        .await;
        assert_eq!(r.status, 206);
        assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    }
    let r = get(shellac.addr, "/private/whole.mp4").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len() as u64, LEN);
    let r = get_with(
        shellac.addr,
        "/private/whole.mp4",
        &[("range", "bytes=100-199")],
    )
    .await;
    assert_eq!(r.status, 206);
    assert_eq!(origin.count(), 8);
    assert_eq!(shellac.stat("slice_learnt").await, 1);
    shellac.stop().await;
}

/// The start of a test that a policy runs on every slice fetch (VCL here, TOML rules in
/// slice_rules.rs), on a sliced `/movie.mp4` of at least 8 MiB: a probe learns the URL and its
/// slice (5) is stored; then slices 5 to 7 are asked at once — 5 from the cache, 6 and 7
/// fetched while the client reads, each a backend fetch of its own — and slice 7 is stored
/// (slice 6 is the one the tests' policies leave uncacheable). The probe's answer.
pub(super) async fn probe_then_slices_5_to_7(shellac: &Shellac, origin: &Origin) -> Resp {
    let probe = ranged(shellac, 5 * MIB, 5 * MIB + 9).await;
    assert_eq!(probe.status, 206);
    stored(shellac, 1).await;
    let (a, b) = (5 * MIB, 8 * MIB - 1);
    let r = ranged(shellac, a, b).await;
    assert_eq!(r.status, 206);
    assert!(
        r.body.as_ref() == bytes(1, a, b).as_slice(),
        "{:?}",
        asked(origin)
    );
    assert_eq!(origin.count(), 3, "{:?}", asked(origin));
    stored(shellac, 2).await;
    probe
}

/// Issue 31: every slice fetched is a backend fetch of its own, as in Varnish:
/// vcl_backend_response runs for each (not only for the response that made the URL sliced),
/// its changes are what is stored, and a slice it makes uncacheable is sent but not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_slice_fetch_runs_vcl_backend_response() {
    const LEN: u64 = 10 * MIB;
    let (origin, _file) = origin(LEN).await;
    let vcl = r#"vcl 4.1;
backend default { ${origin0} }
sub vcl_backend_response {
    set beresp.http.X-Policy = "ran " + beresp.http.Content-Range;
    if (beresp.http.Content-Range ~ "^bytes 6291456-") {
        set beresp.uncacheable = true;
        return (deliver);
    }
}
"#;
    let shellac =
        super::common::vcl::start_vcl_with("slices-bresp", vcl, &[origin.addr], sliced).await;
    // Slices 6 and 7 each fetched through vcl_backend_response.
    probe_then_slices_5_to_7(&shellac, &origin).await;
    // Slice 7 was stored as the policy left it.
    let r = ranged(&shellac, 7 * MIB, 7 * MIB + 9).await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(
        r.header("x-policy"),
        Some(format!("ran bytes {}-{}/{LEN}", 7 * MIB, 8 * MIB - 1).as_str())
    );
    assert_eq!(origin.count(), 3);
    // Slice 6, which the policy made uncacheable, was sent but not stored: asked again.
    let r = ranged(&shellac, 6 * MIB, 6 * MIB + 9).await;
    assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    assert!(r.body.as_ref() == bytes(1, 6 * MIB, 6 * MIB + 9).as_slice());
    assert_eq!(origin.count(), 4, "{:?}", asked(&origin));
    assert_eq!(shellac.stat("cache_insert").await, 2);
    shellac.stop().await;
}
