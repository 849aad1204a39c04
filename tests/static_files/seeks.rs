//! FLV and MP4 pseudo-streaming (nginx's `flv` and `mp4`) from a document root: `?start=`
//! cut from the one stored copy and from disk when passed, a `moov` after the `mdat`, and the
//! process's bound on the bytes seeks hold (`server.mp4_moov_memory`, gauge `mp4_moov_bytes`).

use std::time::Duration;

use super::common::*;
use super::{PASS, pass_rule, site, write_old};

/// What a seek to `at` seconds answers for the fast-start `movie`: its rewritten head, then
/// the media data from the first kept sample to the end.
fn cut_answer(movie: &[u8], at: f64) -> Vec<u8> {
    let shellac::mp4::Scan::Ready(layout) = shellac::mp4::scan(movie, 1 << 20) else {
        panic!("the sample movie");
    };
    let cut = shellac::mp4::cut(movie, &layout, at).unwrap().unwrap();
    let mut want = cut.head.clone();
    want.extend_from_slice(&movie[cut.from as usize..]);
    want
}

/// A Shellac serving `www` with the seek rule `seek`, then the `X-Pass` rule.
async fn seek_files(www: &std::path::Path, seek: shellac::config::rules::RuleConfig) -> Shellac {
    Shellac::start_files(www, move |c| {
        c.rules.push(seek);
        c.rules.push(pass_rule());
    })
    .await
}

/// nginx's `flv`: `?start=BYTE` answers the FLV header, then the file from that byte — from
/// the one stored copy (the seek is not part of the cache key) and from disk when passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flv_start_sends_the_header_then_the_file_from_the_offset() {
    const HEADER: &[u8] = b"FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00";
    let dir = site();
    let www = dir.0.join("www");
    // A generated FLV file: the header, then 300 KB of tags (bytes that say where they are).
    let mut video = HEADER.to_vec();
    video.extend((0..300_000u32).map(|i| (i % 251) as u8));
    // Modified long ago: fresh by the Last-Modified heuristic, so the seeks are hits.
    write_old(&www.join("clip.flv"), &video);
    let sh = seek_files(
        &www,
        shellac::config::rules::RuleConfig {
            path: Some(r"\.flv$".into()),
            flv: true,
            ..Default::default()
        },
    )
    .await;
    let whole = get(sh.addr, "/clip.flv").await;
    assert_eq!((whole.status, whole.body.len()), (200, video.len()));
    for (start, via) in [(1000usize, "cache"), (250_000, "cache"), (1000, "disk")] {
        let headers: &[(&str, &str)] = if via == "disk" { &[PASS] } else { &[] };
        let r = get_with(sh.addr, &format!("/clip.flv?start={start}"), headers).await;
        assert_eq!(r.status, 200, "{start} {via}");
        let mut want = HEADER.to_vec();
        want.extend_from_slice(&video[start..]);
        assert_eq!(r.body.len(), want.len(), "{start} {via}");
        assert!(r.body[..] == want[..], "{start} {via}: other bytes");
        if via == "cache" {
            assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
        }
    }
    // The answer's length is known: a Content-Length, and a Range cut from the answer (as
    // nginx's range filter takes the flv module's output); If-Range with the weakened ETag
    // never matches it; past its end, 416.
    let start = 250_000usize;
    let answer_len = HEADER.len() + video.len() - start;
    let mut want = HEADER.to_vec();
    want.extend_from_slice(&video[start..]);
    let path = format!("/clip.flv?start={start}");
    let r = get(sh.addr, &path).await;
    assert_eq!(
        r.header("content-length"),
        Some(answer_len.to_string().as_str())
    );
    let etag = r.header("etag").expect("an ETag").to_string();
    assert!(etag.starts_with("W/"), "{etag}");
    for (spec, (a, b)) in [
        ("bytes=5-20", (5, 20)),
        ("bytes=-7", (answer_len - 7, answer_len - 1)),
    ] {
        let r = get_with(sh.addr, &path, &[("range", spec)]).await;
        assert_eq!(r.status, 206, "{spec}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes {a}-{b}/{answer_len}").as_str())
        );
        assert!(r.body[..] == want[a..=b], "{spec}: other bytes");
        assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    }
    let r = get_with(
        sh.addr,
        &path,
        &[("range", "bytes=5-20"), ("if-range", &etag)],
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.body[..] == want[..]);
    let modified = whole.header("last-modified").expect("Last-Modified");
    let r = get_with(
        sh.addr,
        &path,
        &[("range", "bytes=5-20"), ("if-range", modified)],
    )
    .await;
    assert_eq!(
        r.status, 206,
        "If-Range: the file's date names the answer too"
    );
    assert!(r.body[..] == want[5..=20]);
    let past = format!("bytes={answer_len}-");
    let r = get_with(sh.addr, &path, &[("range", &past)]).await;
    assert_eq!(r.status, 416);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes */{answer_len}").as_str())
    );
    // Passed (the file read from disk): the Range is not sent to the backend (it is of the
    // answer, not of the file) and is cut from the answer, whose length the file's tells.
    let r = get_with(sh.addr, &path, &[PASS, ("range", "bytes=5-20")]).await;
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 5-20/{answer_len}").as_str())
    );
    assert!(r.body[..] == want[5..=20], "passed: other bytes");
    let r = request(sh.addr, "HEAD", &path, &[PASS], b"").await;
    assert_eq!(
        r.header("content-length"),
        Some(answer_len.to_string().as_str())
    );
    // An offset past the end, or none, is the whole file, as nginx does.
    let r = get(sh.addr, &format!("/clip.flv?start={}", video.len() + 5)).await;
    assert!(r.body[..] == video[..]);
    // `start=0` is the file as it is, from the one stored copy (a seek: no key of its own).
    let r = get(sh.addr, "/clip.flv?start=0").await;
    assert!(r.body[..] == video[..]);
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(sh.stat("flv_seek").await, 13);
}

/// MP4 `?start=SECONDS` (nginx's `mp4`): the file cut at the keyframe at or before the time,
/// from the cache and from disk; before the second keyframe, the file as it is; a file whose
/// moov is after its mdat cut from the cache (its moov read out of order: the same answer as
/// its fast-start twin's, `mp4_seek_whole` not moved), on the miss that stores it and passed
/// (held as it streams until its moov is in); `&end=SECONDS` ends it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mp4_start_cuts_the_movie_at_the_keyframe_before() {
    let dir = site();
    let www = dir.0.join("www");
    let movie = shellac::mp4::sample::movie(true);
    let late = shellac::mp4::sample::movie(false);
    std::fs::write(www.join("movie.mp4"), &movie).unwrap();
    std::fs::write(www.join("late.mp4"), &late).unwrap();
    let sh = seek_files(
        &www,
        shellac::config::rules::RuleConfig {
            path: Some(r"\.mp4$".into()),
            mp4: true,
            ..Default::default()
        },
    )
    .await;
    let shellac::mp4::Scan::Ready(layout) = shellac::mp4::scan(&movie, 1 << 20) else {
        panic!("the sample movie");
    };
    let cut = shellac::mp4::cut(&movie, &layout, 1.5).unwrap().unwrap();
    let mut want = cut.head.clone();
    want.extend_from_slice(&movie[cut.from as usize..]);
    for via in ["disk", "cache", "cache"] {
        let headers: &[(&str, &str)] = if via == "disk" { &[PASS] } else { &[] };
        let r = get_with(sh.addr, "/movie.mp4?start=1.5", headers).await;
        assert_eq!(r.status, 200, "{via}");
        assert_eq!(r.header("content-type"), Some("video/mp4"));
        assert!(r.body[..] == want[..], "{via}: not the cut movie");
    }
    // From the stored copy the cut is made before the head: a Content-Length, a HEAD with
    // the GET's head, a Range cut from the answer (If-Range with the weakened ETag: the whole
    // answer), 416 past its end.
    let len = want.len();
    let r = get(sh.addr, "/movie.mp4?start=1.5").await;
    assert_eq!(r.header("content-length"), Some(len.to_string().as_str()));
    let etag = r.header("etag").expect("an ETag").to_string();
    assert!(etag.starts_with("W/"), "{etag}");
    let head = request(sh.addr, "HEAD", "/movie.mp4?start=1.5", &[], b"").await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), r.header("content-length"));
    assert_eq!(head.header("etag"), Some(etag.as_str()));
    for (spec, (a, b)) in [
        ("bytes=3-40".to_string(), (3, 40)),
        (format!("bytes={}-", len - 9), (len - 9, len - 1)),
        (
            format!("bytes={}-{}", cut.head.len() - 2, cut.head.len() + 5),
            (cut.head.len() - 2, cut.head.len() + 5),
        ),
    ] {
        let r = get_with(sh.addr, "/movie.mp4?start=1.5", &[("range", &spec)]).await;
        assert_eq!(r.status, 206, "{spec}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes {a}-{b}/{len}").as_str())
        );
        assert!(r.body[..] == want[a..=b], "{spec}: other bytes");
    }
    let r = get_with(
        sh.addr,
        "/movie.mp4?start=1.5",
        &[("range", "bytes=3-40"), ("if-range", &etag)],
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.body[..] == want[..]);
    let past = format!("bytes={len}-");
    let r = get_with(sh.addr, "/movie.mp4?start=1.5", &[("range", &past)]).await;
    assert_eq!(r.status, 416);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes */{len}").as_str())
    );
    let r = get(sh.addr, "/movie.mp4?start=0.5").await;
    assert!(r.body[..] == movie[..]);
    let r = get(sh.addr, "/movie.mp4").await;
    assert!(r.body[..] == movie[..]);
    // The moov after the mdat: cut on the miss that fetches and stores it (the body held as
    // it streams until its moov is in), then from the cache as the fast-start file is, and
    // passed (it streams): never sent whole.
    for _ in 0..2 {
        let r = get(sh.addr, "/late.mp4?start=1.5").await;
        assert_eq!(r.status, 200);
        assert!(r.body[..] == want[..], "late.mp4: not the cut movie");
    }
    let r = get(sh.addr, "/late.mp4").await;
    assert!(r.body[..] == late[..]);
    let r = get_with(sh.addr, "/late.mp4?start=1.5", &[PASS]).await;
    assert!(r.body[..] == want[..], "late.mp4 passed: not the cut movie");
    // Passed with a Range: not sent to the backend (it is of the answer); the answer's length
    // is not known up front while it streams, so a closed range is cut from it as it comes,
    // `Content-Range: bytes 0-99/*` (RFC 9110 §14.4), as any streamed body of unknown length.
    let r = get_with(
        sh.addr,
        "/late.mp4?start=1.5",
        &[PASS, ("range", "bytes=0-99")],
    )
    .await;
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 0-99/*"));
    assert!(
        r.body[..] == want[..100],
        "late.mp4 passed with a Range: not the cut movie's bytes"
    );
    assert_eq!(sh.stat("mp4_seek_whole").await, 0);
    // `&end=SECONDS`: the tables and the data end with the last sample before it; the
    // stored copy is the one without arguments.
    let cut = shellac::mp4::cut_span(&movie, &layout, 1.5, Some(2.05))
        .unwrap()
        .unwrap();
    let mut want = cut.head.clone();
    want.extend_from_slice(&movie[cut.from as usize..cut.to.unwrap() as usize]);
    for via in ["disk", "cache"] {
        let headers: &[(&str, &str)] = if via == "disk" { &[PASS] } else { &[] };
        let r = get_with(sh.addr, "/movie.mp4?start=1.5&end=2.05", headers).await;
        assert_eq!(r.status, 200, "{via}");
        assert!(
            r.body[..] == want[..],
            "{via}: not the movie from 1.5 to 2.05 s"
        );
    }
    // From the cache with an end too: the data stops in the mdat.
    let r = get(sh.addr, "/late.mp4?start=1.5&end=2.05").await;
    assert!(
        r.body[..] == want[..],
        "late.mp4: not the movie from 1.5 to 2.05 s"
    );
    assert_eq!(sh.stat("mp4_seek").await, 18);
    assert_eq!(sh.stat("mp4_seek_whole").await, 0);
}

/// A file whose moov comes after its mdat and ends past `mp4_max_moov_size` is sent whole on
/// the miss that streams it and on the hits on its stored copy alike (`mp4_seek_whole`), as
/// nginx refuses a moov it cannot buffer on every request; one within the bound is cut on
/// both. The process's bound on held bytes (`server.mp4_moov_memory`): a seek that would pass
/// it is sent whole (`mp4_seek_memory`), passed or cached, and nothing stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_moov_past_the_bound_is_sent_whole_on_miss_and_hit_and_held_bytes_are_bounded() {
    let dir = site();
    let www = dir.0.join("www");
    // Over 1 MiB (the least `server.mp4_moov_memory`), its moov over 4 KiB into the file
    // (the least `mp4_max_moov_size`).
    let movie = |fast_start| {
        shellac::mp4::sample::movie_with(shellac::mp4::sample::Options {
            fast_start,
            co64: false,
            scale: 1_000,
            lead: 0,
        })
        .bytes()
    };
    let (late, movie) = (movie(false), movie(true));
    assert!(late.len() > 1 << 20);
    for name in ["late.mp4", "within.mp4"] {
        // Modified long ago: fresh by the Last-Modified heuristic, so the seeks are hits.
        write_old(&www.join(name), &late);
    }
    let shellac::mp4::Scan::MoovAfterMdat(l) = shellac::mp4::scan(&late, 1 << 20) else {
        panic!("the sample movie");
    };
    let shellac::mp4::Scan::Ready(layout) = shellac::mp4::scan(&movie, 1 << 20) else {
        panic!("the sample movie");
    };
    // A bound the moov fits but its end is past.
    let bound = l.mdat_end.unwrap() + 8;
    assert!((layout.moov.len() as u64) < bound && bound < late.len() as u64);
    let want = cut_answer(&movie, 1.5);
    let rules = |c: &mut shellac::config::Config| {
        c.rules.push(shellac::config::rules::RuleConfig {
            path: Some(r"^/late\.mp4$".into()),
            mp4: true,
            mp4_max_moov_size: Some(shellac::config::units::Size(bound)),
            ..Default::default()
        });
        c.rules.push(shellac::config::rules::RuleConfig {
            path: Some(r"^/within\.mp4$".into()),
            mp4: true,
            ..Default::default()
        });
        c.rules.push(pass_rule());
    };
    let sh = Shellac::start_files(&www, rules).await;
    for (i, via) in ["miss", "hit", "hit"].iter().enumerate() {
        let r = get(sh.addr, "/late.mp4?start=1.5").await;
        assert_eq!(r.status, 200);
        assert!(
            r.body[..] == late[..],
            "{via}: not sent whole: {} of {} (cut: {}) {}",
            r.body.len(),
            late.len(),
            want.len(),
            r.cache_status()
        );
        assert_eq!(
            r.cache_status().contains("hit"),
            *via == "hit",
            "{}",
            r.cache_status()
        );
        assert_eq!(sh.stat("mp4_seek_whole").await, i as u64 + 1);
    }
    for via in ["miss", "hit"] {
        let r = get(sh.addr, "/within.mp4?start=1.5").await;
        assert!(r.body[..] == want[..], "{via}: within the bound, not cut");
    }
    assert_eq!(sh.stat("mp4_seek_whole").await, 3);
    assert_eq!(sh.stat("mp4_seek_memory").await, 0);
    sh.stop().await;

    // Less room for all seeks than this file's body up to its moov: passed or on the miss
    // that stores it (held as it streams), sent whole, counted; from the stored copy only
    // its first bytes are held (the moov is read out of order): cut.
    let sh = Shellac::start_files(&www, |c| {
        rules(c);
        c.server.mp4_moov_memory = shellac::config::units::Size(1 << 20);
    })
    .await;
    for headers in [&[PASS][..], &[]] {
        let r = get_with(sh.addr, "/within.mp4?start=1.5", headers).await;
        assert_eq!(r.status, 200);
        assert!(r.body[..] == late[..], "not sent whole");
    }
    assert_eq!(sh.stat("mp4_seek_memory").await, 2);
    assert_eq!(sh.stat("mp4_seek_whole").await, 2);
    let r = get(sh.addr, "/within.mp4?start=1.5").await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert!(r.body[..] == want[..], "the hit: not cut");
    assert_eq!(sh.stat("mp4_seek_memory").await, 2);
    sh.stop().await;
}

/// The gauge `mp4_moov_bytes` (`/stats` and `/metrics`) is what MP4 seeks hold now: a miss
/// on a file whose `moov` comes after its `mdat` holds the body as it streams until that
/// `moov` is in — the origin stops after its first 256 KiB, and the gauge shows them held
/// (within `server.mp4_moov_memory`); once the rest comes the cut is sent and it is 0 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bytes_mp4_seeks_hold_are_a_gauge() {
    const FIRST: usize = 256 * 1024;
    let movie = |fast_start| {
        shellac::mp4::sample::movie_with(shellac::mp4::sample::Options {
            fast_start,
            co64: false,
            scale: 1_000,
            lead: 0,
        })
        .bytes()
    };
    let (late, fast) = (movie(false), movie(true));
    assert!(late.len() > 2 * FIRST);
    // The cut of the late-moov file is the fast-start file's cut.
    let want = cut_answer(&fast, 1.5);
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let (file, g) = (late.clone(), gate.clone());
    let origin = Origin::start(move |_| {
        Reply::ok("")
            .body(ReplyBody::Gated {
                first: file[..FIRST].to_vec(),
                gate: g.clone(),
                rest: file[FIRST..].to_vec(),
            })
            .cc("max-age=3600")
            .header("content-type", "video/mp4")
    })
    .await;
    let sh = Shellac::start(origin.addr, |c| {
        c.rules.push(shellac::config::rules::RuleConfig {
            path: Some(r"\.mp4$".into()),
            mp4: true,
            ..Default::default()
        });
        c.server.mp4_moov_memory = shellac::config::units::Size(4 << 20);
    })
    .await;
    assert_eq!(sh.stat("mp4_moov_bytes").await, 0);
    let addr = sh.addr;
    let seek = tokio::spawn(async move { get(addr, "/late.mp4?start=1.5").await });
    assert!(
        eventually(Duration::from_secs(10), || async {
            sh.stat("mp4_moov_bytes").await >= FIRST as u64
        })
        .await,
        "the first {FIRST} bytes held: {}",
        sh.stat("mp4_moov_bytes").await
    );
    let held = sh.stat("mp4_moov_bytes").await;
    assert!(held <= 4 << 20, "{held}");
    let metrics = get(sh.admin, "/metrics").await.text();
    assert!(
        metrics.contains("# TYPE shellac_mp4_moov_bytes gauge")
            && metrics.contains(&format!("shellac_mp4_moov_bytes {held}")),
        "{metrics}"
    );
    gate.notify_one();
    let r = seek.await.unwrap();
    assert_eq!(r.status, 200);
    assert!(
        r.body[..] == want[..],
        "cut: {} bytes, want {}",
        r.body.len(),
        want.len()
    );
    assert_eq!(sh.stat("mp4_seek_whole").await, 0);
    assert!(
        eventually(Duration::from_secs(10), || async {
            sh.stat("mp4_moov_bytes").await == 0
        })
        .await,
        "given back: {}",
        sh.stat("mp4_moov_bytes").await
    );
    sh.stop().await;
}
