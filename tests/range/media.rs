//! Big media in slices with seeks (issue 31): `?start=` on an MP4 (fast start, or its moov
//! after its mdat) or an FLV larger than `max_object_size` is cut from its slices, reading
//! only the slices the cut needs — the origin's Range requests show which.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::common::*;
use super::slices::{answer_range, disk_at, sliced};
use shellac::config::Config;
use shellac::mp4::sample::{Options, movie_with};
use shellac::mp4::{Cut, Scan};

const MIB: u64 = 1 << 20;

const RULES: &str = r#"
[[backend]]
host = "h"

[[rule]]
path = '\.mp4$'
mp4 = true

[[rule]]
path = '\.flv$'
flv = true
"#;

/// An origin serving `files` (path, bytes; any query) with Range, `max-age=3600` and a
/// strong ETag.
pub(super) async fn media_origin(files: Vec<(&'static str, Vec<u8>)>) -> Origin {
    let files = Arc::new(files);
    Origin::start(move |seen| {
        let path = seen.path.split('?').next().unwrap_or("");
        let Some((name, file)) = files.iter().find(|(p, _)| path == *p) else {
            return Reply::ok("").status(404);
        };
        let len = file.len() as u64;
        let reply = |status: u16, body: Vec<u8>| {
            Reply::ok("")
                .status(status)
                .body(ReplyBody::Bytes(body))
                .cc("max-age=3600")
                .header("etag", &format!("\"{}\"", &name[1..]))
                .header("content-type", "video/mp4")
        };
        let asked = seen.headers.get("range").and_then(|r| r.to_str().ok());
        answer_range(
            asked,
            len,
            |a, b| file[a as usize..=b as usize].to_vec(),
            reply,
        )
    })
    .await
}

/// The sample movie at `scale` (10,000: over 12 MiB), fast start or its moov after its mdat.
fn movie(fast_start: bool, scale: u32) -> Vec<u8> {
    movie_with(Options {
        fast_start,
        co64: false,
        scale,
        lead: 0,
    })
    .bytes()
}

/// A 10 MiB FLV file (its bytes say where they are).
fn flv_clip() -> Vec<u8> {
    (0..10 * MIB).map(|i| (i % 251) as u8).collect()
}

/// An origin serving `files` and a Shellac slicing them with the `mp4` and `flv` rules.
async fn sliced_media(files: Vec<(&'static str, Vec<u8>)>) -> (Origin, Shellac) {
    let origin = media_origin(files).await;
    let rules = Config::parse(RULES, "rules.toml").unwrap().rules;
    let shellac = Shellac::start(origin.addr, move |c| {
        sliced(c);
        c.rules = rules;
    })
    .await;
    (origin, shellac)
}

/// The slices (by index) the origin was asked for `path`, each asked once.
fn slices_asked(origin: &Origin, path: &str) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for s in origin
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.path == path)
    {
        if let Some(r) = s.headers.get("range").and_then(|v| v.to_str().ok()) {
            let (a, _) = r
                .strip_prefix("bytes=")
                .and_then(|r| r.split_once('-'))
                .unwrap();
            let a: u64 = a.parse().unwrap();
            assert!(out.insert(a / MIB), "slice {} asked twice", a / MIB);
        }
    }
    out
}

/// Slices `a ..= b` of the bytes `from .. to` (exclusive).
fn covering(from: u64, to: u64) -> BTreeSet<u64> {
    (from / MIB..=(to - 1) / MIB).collect()
}

/// The cut of `file` at `start` .. `end` as the MP4 filter makes it from a stored copy, and
/// the answer: its head then the media data.
fn mp4_answer(file: &[u8], start: f64, end: Option<f64>) -> (Cut, Vec<u8>) {
    // Fast start without an end: the rest of the file; else up to the cut's end.
    let (cut, bounded) = match shellac::mp4::scan(file, 1 << 24) {
        Scan::Ready(l) => (shellac::mp4::cut_span(file, &l, start, end), end.is_some()),
        Scan::MoovAfterMdat(l) => {
            let mut read = shellac::mp4::late::read_in(file);
            let moov = l.find_moov(file.len() as u64, 1 << 24, &mut read).unwrap();
            (l.cut(file, &moov, start, end), true)
        }
        other => panic!("{other:?}"),
    };
    let cut = cut.unwrap().unwrap();
    let to = match (bounded, cut.to) {
        (true, Some(to)) => to,
        _ => file.len() as u64,
    };
    let mut out = cut.head.clone();
    out.extend_from_slice(&file[cut.from as usize..to as usize]);
    (cut, out)
}

/// `?start=` on sliced big media: the cut is made from the slices that hold the moov (at the
/// front, or after the mdat) and those that hold the kept media data; the slices before the
/// kept data are never asked for. FLV: the header, then only the slices from the offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeks_on_sliced_media_read_only_the_slices_the_cut_needs() {
    let (fast, late) = (movie(true, 10_000), movie(false, 10_000));
    let flv = flv_clip();
    assert!(fast.len() as u64 > 12 * MIB);
    let (origin, shellac) = sliced_media(vec![
        ("/fast.mp4", fast.clone()),
        ("/late.mp4", late.clone()),
        ("/clip.flv", flv.clone()),
    ])
    .await;
    // Learnt by a plain GET each (passed through whole).
    for (path, file) in [
        ("/fast.mp4", &fast),
        ("/late.mp4", &late),
        ("/clip.flv", &flv),
    ] {
        let r = get(shellac.addr, path).await;
        assert!(r.body.as_ref() == file.as_slice(), "{path}");
    }
    assert_eq!(shellac.stat("slice_learnt").await, 3);

    // Fast start: slice 0 (the moov), then the slices from the keyframe at 1.0 s on.
    let (cut, want) = mp4_answer(&fast, 1.5, None);
    assert!(cut.from > 3 * MIB, "{}", cut.from);
    let r = get(shellac.addr, "/fast.mp4?start=1.5").await;
    assert_eq!(r.status, 200);
    assert!(r.body.as_ref() == want.as_slice(), "fast.mp4 not cut");
    assert_eq!(
        r.header("content-length"),
        Some(want.len().to_string().as_str())
    );
    assert_eq!(r.header("etag"), Some("W/\"fast.mp4\""));
    let mut need = covering(cut.from, fast.len() as u64);
    need.insert(0);
    assert_eq!(slices_asked(&origin, "/fast.mp4"), need);
    // With an end: from the slices already stored; nothing asked.
    let (_, want) = mp4_answer(&fast, 1.5, Some(2.05));
    let r = get(shellac.addr, "/fast.mp4?start=1.5&end=2.05").await;
    assert!(
        r.body.as_ref() == want.as_slice(),
        "fast.mp4 not cut to its end"
    );
    assert_eq!(slices_asked(&origin, "/fast.mp4"), need);

    // The moov after the mdat: slice 0 (ftyp, the mdat header), the last slice (the moov),
    // the slices of the kept data up to the mdat's end; the same answer as fast start.
    let (cut, want_late) = mp4_answer(&late, 1.5, None);
    let r = get(shellac.addr, "/late.mp4?start=1.5").await;
    assert!(r.body.as_ref() == want_late.as_slice(), "late.mp4 not cut");
    let (_, want_fast) = mp4_answer(&fast, 1.5, None);
    assert!(want_late == want_fast);
    let mut need = covering(cut.from, cut.to.unwrap());
    need.extend([0, (late.len() as u64 - 1) / MIB]);
    assert_eq!(slices_asked(&origin, "/late.mp4"), need);

    // FLV: the header, then the file from the offset: only the slices from it.
    let start = 7 * MIB + 5;
    let r = get(shellac.addr, &format!("/clip.flv?start={start}")).await;
    let mut want = b"FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00".to_vec();
    want.extend_from_slice(&flv[start as usize..]);
    assert!(r.body.as_ref() == want.as_slice(), "clip.flv not cut");
    assert_eq!(
        slices_asked(&origin, "/clip.flv"),
        covering(start, 10 * MIB)
    );

    let stats = shellac.stats().await;
    assert_eq!(stats["mp4_seek"], 3, "{stats:?}");
    assert_eq!(stats["mp4_seek_whole"], 0, "{stats:?}");
    assert_eq!(stats["flv_seek"], 1, "{stats:?}");
    shellac.stop().await;
}

/// A cut MP4 read from the disk tier: stored, then the proxy restarted (its memory tier
/// empty), then `?start=` from the copy on disk — the late moov read out of order through the
/// disk body's chunks (`filter/mp4_source.rs`), the fast-start file cut as it streams from
/// disk; nothing asked of the origin again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_mp4_is_read_from_the_disk_tier_after_a_restart() {
    let (fast, late) = (movie(true, 1_000), movie(false, 1_000));
    // Over shellac::cache::disk::INLINE_MAX (1 MiB): read back from disk, the body stays
    // there (`Body::Disk`, read in 256 KiB chunks) instead of coming back to memory.
    assert!(late.len() as u64 > shellac::cache::disk::INLINE_MAX);
    let origin = media_origin(vec![
        ("/fast.mp4", fast.clone()),
        ("/late.mp4", late.clone()),
    ])
    .await;
    let dir = TempDir::new("media-disk");
    let data = dir.path("cache.dat");
    let start = || async {
        let rules = Config::parse(RULES, "rules.toml").unwrap().rules;
        Shellac::start(origin.addr, |c| {
            c.rules = rules;
            c.storage.disk = Some(disk_at(data.clone()));
        })
        .await
    };
    let shellac = start().await;
    for path in ["/fast.mp4", "/late.mp4"] {
        assert_eq!(get(shellac.addr, path).await.status, 200);
    }
    assert!(
        eventually(std::time::Duration::from_secs(10), || async {
            shellac.stat("n_object_disk").await >= 2
        })
        .await,
        "both written to disk"
    );
    shellac.stop().await;

    let shellac = start().await;
    let (_, want) = mp4_answer(&late, 1.5, None);
    let r = get(shellac.addr, "/late.mp4?start=1.5").await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert!(
        r.body.as_ref() == want.as_slice(),
        "late.mp4 from disk not cut"
    );
    assert!(want == mp4_answer(&fast, 1.5, None).1);
    let (_, want) = mp4_answer(&fast, 1.5, Some(2.05));
    let r = get(shellac.addr, "/fast.mp4?start=1.5&end=2.05").await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert!(
        r.body.as_ref() == want.as_slice(),
        "fast.mp4 from disk not cut"
    );
    let (_, want) = mp4_answer(&late, 2.05, Some(2.5));
    let r = get(shellac.addr, "/late.mp4?start=2.05&end=2.5").await;
    assert!(
        r.body.as_ref() == want.as_slice(),
        "late.mp4 from disk not cut to its end"
    );
    // Cut before the head from the disk tier too: its length known, a Range cut from it.
    assert_eq!(
        r.header("content-length"),
        Some(want.len().to_string().as_str())
    );
    let (a, b) = (want.len() - 1000, want.len() - 1);
    let r = get_with(
        shellac.addr,
        "/late.mp4?start=2.05&end=2.5",
        &[("range", &format!("bytes={a}-"))],
    )
    .await;
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes {a}-{b}/{}", want.len()).as_str())
    );
    assert!(r.body.as_ref() == &want[a..=b]);
    assert_eq!(origin.count(), 2);
    let stats = shellac.stats().await;
    assert!(stats["cache_hit_disk"] >= 2, "{stats:?}");
    assert_eq!(stats["mp4_seek_whole"], 0, "{stats:?}");
    shellac.stop().await;
}

/// A seek on sliced media answers as nginx's range filter answers the `mp4` / `flv` module's
/// output: a `Range` is cut from the cut answer (206 with its `Content-Range`, 416 past its
/// end, several ranges a 200), `If-Range` compared with its weakened `ETag` (never a match:
/// the whole cut answer). A HEAD gets the GET's head (its `Content-Length` included) reading
/// only the `moov`'s slices (an MP4) or none (an FLV). `Cache-Status` is a miss when any
/// slice had before the head was fetched — the `moov`'s too, not only the first data slice.
/// Counters `slice_seek` and `slice_seek_slices`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seek_on_sliced_media_answers_range_head_and_cache_status_over_the_cut() {
    let fast = movie(true, 10_000);
    let flv = flv_clip();
    let (origin, shellac) = sliced_media(vec![
        ("/fast.mp4", fast.clone()),
        ("/head.mp4", fast.clone()),
        ("/clip.flv", flv.clone()),
    ])
    .await;
    for path in ["/fast.mp4", "/head.mp4", "/clip.flv"] {
        assert_eq!(get(shellac.addr, path).await.status, 200, "{path}");
    }
    assert_eq!(shellac.stat("slice_learnt").await, 3);
    let (cut, want) = mp4_answer(&fast, 1.5, None);
    let head_len = cut.head.len();
    let len = want.len() as u64;

    // HEAD: the GET's head, from the moov's slice alone (slice 0); no media data read.
    let r = request(shellac.addr, "HEAD", "/head.mp4?start=1.5", &[], b"").await;
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
    assert_eq!(r.header("content-length"), Some(len.to_string().as_str()));
    assert_eq!(r.header("etag"), Some("W/\"head.mp4\""));
    assert!(
        r.cache_status().contains("fwd=miss"),
        "{}",
        r.cache_status()
    );
    assert_eq!(slices_asked(&origin, "/head.mp4"), BTreeSet::from([0]));
    assert_eq!(shellac.stat("slice_seek_slices").await, 1);
    let g = get(shellac.addr, "/head.mp4?start=1.5").await;
    assert!(g.body.as_ref() == want.as_slice());
    assert_eq!(g.header("content-length"), r.header("content-length"));
    assert_eq!(g.header("etag"), r.header("etag"));
    // An FLV seek's HEAD reads no slice at all.
    let start = 7 * MIB + 5;
    let flv_len = 13 + 10 * MIB - start;
    let r = request(
        shellac.addr,
        "HEAD",
        &format!("/clip.flv?start={start}"),
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-length"),
        Some(flv_len.to_string().as_str())
    );
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert!(slices_asked(&origin, "/clip.flv").is_empty());

    // Cache-Status: the cut's first data slice stored (by a plain Range), its moov slice not:
    // a miss, as the moov's slice was fetched.
    let data = cut.from / MIB;
    let r = get_with(
        shellac.addr,
        "/fast.mp4",
        &[("range", &format!("bytes={}-{}", data * MIB, data * MIB))],
    )
    .await;
    assert_eq!(r.status, 206);
    assert!(
        eventually(std::time::Duration::from_secs(10), || async {
            let r = get_with(
                shellac.addr,
                "/fast.mp4",
                &[("range", &format!("bytes={}-{}", cut.from, cut.from))],
            )
            .await;
            r.cache_status().contains("hit")
        })
        .await,
        "the data slice stored"
    );
    let r = get(shellac.addr, "/fast.mp4?start=1.5").await;
    assert!(r.body.as_ref() == want.as_slice());
    assert!(
        r.cache_status().contains("fwd=miss"),
        "{}",
        r.cache_status()
    );
    let mut need = covering(cut.from, fast.len() as u64);
    need.insert(0);
    assert_eq!(slices_asked(&origin, "/fast.mp4"), need);
    // Every slice stored: a hit.
    assert!(
        eventually(std::time::Duration::from_secs(10), || async {
            get(shellac.addr, "/fast.mp4?start=1.5")
                .await
                .cache_status()
                .contains("hit")
        })
        .await,
        "a seek from stored slices is a hit"
    );

    // Range over the cut answer: in its head, across head and data, a suffix.
    let hl = head_len as u64;
    for (spec, (a, b)) in [
        ("bytes=10-99".to_string(), (10, 99)),
        (
            format!("bytes={}-{}", hl - 5, hl + 3 * MIB),
            (hl - 5, hl + 3 * MIB),
        ),
        (format!("bytes={}-{}", hl + 7, hl + 7), (hl + 7, hl + 7)),
        ("bytes=-100".to_string(), (len - 100, len - 1)),
        (format!("bytes={}-", len - 1), (len - 1, len - 1)),
    ] {
        let r = get_with(shellac.addr, "/fast.mp4?start=1.5", &[("range", &spec)]).await;
        assert_eq!(r.status, 206, "{spec}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes {a}-{b}/{len}").as_str()),
            "{spec}"
        );
        assert!(
            r.body.as_ref() == &want[a as usize..=b as usize],
            "{spec}: other bytes"
        );
    }
    // If-Range: the cut's weak ETag, or the file's strong one, never names the cut answer.
    for validator in ["W/\"fast.mp4\"", "\"fast.mp4\""] {
        let r = get_with(
            shellac.addr,
            "/fast.mp4?start=1.5",
            &[("range", "bytes=0-9"), ("if-range", validator)],
        )
        .await;
        assert_eq!(r.status, 200, "{validator}");
        assert!(r.body.as_ref() == want.as_slice());
    }
    // Past the end: 416 over the cut answer's length; several ranges: the whole answer.
    let r = get_with(
        shellac.addr,
        "/fast.mp4?start=1.5",
        &[("range", &format!("bytes={len}-"))],
    )
    .await;
    assert_eq!(r.status, 416);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes */{len}").as_str())
    );
    let r = get_with(
        shellac.addr,
        "/fast.mp4?start=1.5",
        &[("range", "bytes=0-1,5-6")],
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.body.as_ref() == want.as_slice());
    assert_eq!(
        slices_asked(&origin, "/fast.mp4"),
        need,
        "nothing asked again"
    );

    // FLV: the header's bytes and the first of the file's from the offset: one slice.
    let r = get_with(
        shellac.addr,
        &format!("/clip.flv?start={start}"),
        &[("range", "bytes=0-20")],
    )
    .await;
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 0-20/{flv_len}").as_str())
    );
    let mut want_flv = b"FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00".to_vec();
    want_flv.extend_from_slice(&flv[start as usize..start as usize + 8]);
    assert!(r.body.as_ref() == want_flv.as_slice());
    assert_eq!(slices_asked(&origin, "/clip.flv"), BTreeSet::from([7]));
    let r = get_with(
        shellac.addr,
        &format!("/clip.flv?start={start}"),
        &[("range", "bytes=0-5")],
    )
    .await;
    assert_eq!(r.status, 206);
    assert!(r.body.as_ref() == &want_flv[..6]);

    let stats = shellac.stats().await;
    // HEAD, GET of head.mp4; 2 FLV + HEAD; fast.mp4: 1 miss, at least 1 hit, 5 ranges,
    // 2 If-Range, 416, several ranges.
    assert!(stats["slice_seek"] >= 15, "{stats:?}");
    assert!(
        stats["slice_seek_slices"] >= need.len() as u64 + 2,
        "{stats:?}"
    );
    assert_eq!(stats["mp4_seek_whole"], 0, "{stats:?}");
    shellac.stop().await;
}
