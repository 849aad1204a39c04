//! nginx's own mp4 tests (nginx-tests `mp4.t`) carried over: the same two movies (made by
//! ffmpeg as nginx's test makes them, `fixtures/README.md`: a 10 s and a 20 s video track,
//! a keyframe every second, one with its `moov` after its `mdat`, one with fast start),
//! asked the same `?start=` / `&end=` and checked by the durations the answer's tracks
//! declare (nginx reads them with ffprobe). Where Shellac answers otherwise on purpose — a
//! cut at the keyframe, a file it cannot cut sent whole rather than a 500 — the test says
//! so and docs/sites.md "Where Shellac differs from nginx" gives the reason.

use super::common::*;
use super::media::media_origin;
use shellac::config::Config;
use shellac::mp4::sample::{Options, movie_with};

const RULES: &str = r#"
[[backend]]
host = "h"

[[rule]]
path = '\.mp4$'
mp4 = true
"#;

/// `-movflags` not given: the `moov` after the `mdat` (nginx's `test.mp4`).
const MOOV_LAST: &[u8] = include_bytes!("fixtures/moov_last.mp4");
/// `-movflags +faststart` (nginx's `no_mdat.mp4`).
const FAST_START: &[u8] = include_bytes!("fixtures/faststart.mp4");

/// The boxes of `b`, in order: (kind, payload).
fn boxes(mut b: &[u8]) -> Vec<([u8; 4], &[u8])> {
    let mut out = Vec::new();
    while b.len() >= 8 {
        let size = u32::from_be_bytes(b[..4].try_into().unwrap()) as usize;
        let kind: [u8; 4] = b[4..8].try_into().unwrap();
        let (head, size) = match size {
            0 => (8, b.len()),
            1 => (
                16,
                u64::from_be_bytes(b[8..16].try_into().unwrap()) as usize,
            ),
            n => (8, n),
        };
        assert!(
            size >= head && size <= b.len(),
            "a box runs past its parent"
        );
        out.push((kind, &b[head..size]));
        b = &b[size..];
    }
    out
}

fn child<'a>(b: &'a [u8], kind: &[u8; 4]) -> &'a [u8] {
    boxes(b)
        .into_iter()
        .find(|(k, _)| k == kind)
        .unwrap_or_else(|| panic!("no {}", String::from_utf8_lossy(kind)))
        .1
}

fn be32(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_be_bytes(b[at..at + 4].try_into().unwrap()))
}

/// Each track's duration in seconds to a tenth, as nginx's test prints ffprobe's
/// (`"%.1f %.1f"`): the `mdhd`'s, checked against the sum of its `stts` (what ffprobe
/// falls back on), so header and table agree.
fn durations(file: &[u8]) -> String {
    let moov = child(file, b"moov");
    let mut out = Vec::new();
    for (kind, trak) in boxes(moov) {
        if &kind != b"trak" {
            continue;
        }
        let mdia = child(trak, b"mdia");
        let mdhd = child(mdia, b"mdhd");
        let (scale, duration) = match mdhd[0] {
            0 => (be32(mdhd, 12), be32(mdhd, 16)),
            _ => (
                be32(mdhd, 20),
                u64::from_be_bytes(mdhd[24..32].try_into().unwrap()),
            ),
        };
        let stts = child(child(child(mdia, b"minf"), b"stbl"), b"stts");
        let table: u64 = (0..be32(stts, 4) as usize)
            .map(|i| be32(stts, 8 + 8 * i) * be32(stts, 12 + 8 * i))
            .sum();
        let (d, t) = (duration as f64 / scale as f64, table as f64 / scale as f64);
        assert!((d - t).abs() < 0.05, "mdhd {d} s, stts {t} s");
        out.push(format!("{d:.1}"));
    }
    out.join(" ")
}

/// mp4.t's questions and the durations they get: nginx's answer where Shellac gives it,
/// else Shellac's (with nginx's in the comment).
const ASKED: [(&str, &str); 13] = [
    ("start=0.0", "10.0 20.0"),
    ("start=2", "8.0 18.0"),
    // nginx: 2.9 12.9 — it starts at 7.1 on a frame that is no keyframe (its default
    // mp4_start_key_frame off); Shellac at the keyframe before, 7.0.
    ("start=7.1", "3.0 13.0"),
    ("start=6&end=9", "3.0 3.0"),
    // nginx: 2.9 2.9 (from 2.7); Shellac from the keyframe at 2.0 to 5.6.
    ("start=2.7&end=5.6", "3.6 3.6"),
    ("end=9", "9.0 9.0"),
    ("end=5.6", "5.6 5.6"),
    // "zero range", "negative range": the end is ignored, the start kept.
    ("start=1&end=1", "9.0 19.0"),
    ("start=1&end=0", "9.0 19.0"),
    // "end beyond short track", "end beyond EOF": no 500.
    ("end=11", "10.0 11.0"),
    ("end=21", "10.0 20.0"),
    // "start beyond short track": the long track from 11 s, the short one left empty.
    ("start=11", "0.0 9.0"),
    // "start beyond EOF": nginx 500; Shellac the file as it is (counted, logged).
    ("start=21", "10.0 20.0"),
];

/// mp4.t on both movies, from the one stored copy of each: the durations after each cut,
/// a `HEAD` with the `GET`'s length, a Range over the cut, and what is sent whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_mp4_t_durations_after_a_cut() {
    let origin = media_origin(vec![
        ("/test.mp4", MOOV_LAST.to_vec()),
        ("/no_mdat.mp4", FAST_START.to_vec()),
    ])
    .await;
    let rules = Config::parse(RULES, "rules.toml").unwrap().rules;
    let sh = Shellac::start(origin.addr, move |c| c.rules = rules).await;
    for (path, file) in [("/test.mp4", MOOV_LAST), ("/no_mdat.mp4", FAST_START)] {
        assert_eq!(durations(file), "10.0 20.0");
        for (query, want) in ASKED {
            let uri = format!("{path}?{query}");
            let r = get(sh.addr, &uri).await;
            assert_eq!(r.status, 200, "{uri}");
            assert_eq!(durations(&r.body), want, "{uri}");
            if ["start=0.0", "start=21"].contains(&query) {
                assert!(r.body[..] == file[..], "{uri}: the file as it is");
            }
            let head = request(sh.addr, "HEAD", &uri, &[], b"").await;
            assert_eq!(head.status, 200, "HEAD {uri}");
            assert_eq!(
                head.header("content-length"),
                Some(r.body.len().to_string().as_str()),
                "HEAD {uri}"
            );
            assert!(head.body.is_empty());
        }
        // The first ask (`start=0.0`) stored the file without its argument: every other
        // seek came from that copy.
        assert_eq!(origin.count_path(path), 1, "{path}");
        // A Range is of the cut answer (as nginx's range filter takes the mp4 module's).
        let cut = get(sh.addr, &format!("{path}?start=2")).await;
        let len = cut.body.len();
        let r = get_with(
            sh.addr,
            &format!("{path}?start=2"),
            &[("range", "bytes=0-99")],
        )
        .await;
        assert_eq!(r.status, 206);
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes 0-99/{len}").as_str())
        );
        assert!(r.body[..] == cut.body[..100]);
        // Values nginx does not read as seconds are no seek: the file, as it is.
        for bad in ["start=abc", "start=-5", "start=1e1", "end=x"] {
            let r = get(sh.addr, &format!("{path}?{bad}")).await;
            assert_eq!(r.status, 200, "{bad}");
            assert!(r.body[..] == file[..], "{path}?{bad}");
        }
    }
    // Per movie: 13 seeks asked by GET and HEAD, two more for the Range; `start=21` sent
    // whole by GET and HEAD.
    assert_eq!(sh.stat("mp4_seek").await, 2 * (13 * 2 + 2));
    assert_eq!(sh.stat("mp4_seek_whole").await, 2 * 2);
}

/// The file with every chunk offset of its `co64` boxes set to `offset`.
fn with_chunks_at(mut file: Vec<u8>, offset: u64) -> Vec<u8> {
    let found: Vec<usize> = file
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"co64")
        .map(|(i, _)| i)
        .collect();
    assert!(!found.is_empty(), "a co64 box");
    for at in found {
        // After the kind: version and flags (4), the entry count (4), then the offsets.
        let n = be32(&file, at + 8) as usize;
        for i in 0..n {
            let e = at + 12 + 8 * i;
            file[e..e + 8].copy_from_slice(&offset.to_be_bytes());
        }
    }
    file
}

/// mp4.t's "co64 chunk beyond EOF" (nginx 500) and a file without a `moov`: Shellac sends
/// them as they are, on GET and HEAD, counted in `mp4_seek_whole` — never an error, never
/// a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_nginx_refuses_are_sent_whole() {
    let co64 = movie_with(Options {
        fast_start: true,
        co64: true,
        scale: 1,
        lead: 0,
    })
    .bytes();
    let beyond = with_chunks_at(co64, 0xffff_ffff_f00f_fbe7);
    // ftyp, then an mdat and nothing after it.
    let mut no_moov = b"\x00\x00\x00\x10ftypisom\x00\x00\x02\x00".to_vec();
    no_moov.extend_from_slice(b"\x00\x00\x00\x18mdat");
    no_moov.extend_from_slice(&[7u8; 16]);
    let origin = media_origin(vec![
        ("/beyond.mp4", beyond.clone()),
        ("/no_moov.mp4", no_moov.clone()),
    ])
    .await;
    let rules = Config::parse(RULES, "rules.toml").unwrap().rules;
    let sh = Shellac::start(origin.addr, move |c| c.rules = rules).await;
    for (path, file) in [("/beyond.mp4", &beyond), ("/no_moov.mp4", &no_moov)] {
        let uri = format!("{path}?start=1.5");
        let r = get(sh.addr, &uri).await;
        assert_eq!(r.status, 200, "{uri}");
        assert!(r.body[..] == file[..], "{uri}: the file as it is");
        let r = get(sh.addr, &uri).await;
        assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
        assert!(r.body[..] == file[..], "{uri}: the stored copy as it is");
        let head = request(sh.addr, "HEAD", &uri, &[], b"").await;
        assert_eq!(head.status, 200);
        assert_eq!(
            head.header("content-length"),
            Some(file.len().to_string().as_str())
        );
    }
    assert_eq!(sh.stat("mp4_seek").await, 6);
    assert_eq!(sh.stat("mp4_seek_whole").await, 6);
}
