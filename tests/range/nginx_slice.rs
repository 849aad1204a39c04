//! nginx's own slice tests (nginx-tests `slice.t`) carried over to Shellac's slices. nginx's
//! test slices a 16-byte file in 2-byte slices; here the file is 16 half-MiB steps (8 MiB,
//! over `max_object_size`) in 1 MiB slices: nginx's byte `n` is byte `n * 512 KiB` here, so
//! every range falls in the same slices as in nginx's test, and each assertion keeps its
//! meaning (which slices a range needs, which are already held).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use super::common::*;
use super::slices::{answer_range, asked, bytes, origin, sliced};

/// nginx's one byte, scaled.
const H: u64 = 512 * 1024;
const LEN: u64 = 16 * H;

/// nginx's `Range` spec (`1-2`, `2-`, `-10`, `3-3,4-4`) on the scaled file.
fn spec(nginx: &str) -> String {
    let one = |r: &str| {
        let (a, b) = r.split_once('-').unwrap();
        let s = |n: &str| {
            if n.is_empty() {
                String::new()
            } else {
                (n.parse::<u64>().unwrap() * H).to_string()
            }
        };
        format!("{}-{}", s(a), s(b))
    };
    let ranges: Vec<String> = nginx.split(',').map(one).collect();
    format!("bytes={}", ranges.join(","))
}

/// Asks `path` for nginx's range `r` with `extra` fields.
async fn ask(sh: &Shellac, path: &str, r: &str, extra: &[(&str, &str)]) -> Resp {
    let range = spec(r);
    let mut fields = vec![("range", range.as_str())];
    fields.extend_from_slice(extra);
    get_with(sh.addr, path, &fields).await
}

/// What the origin is asked for a request: nothing, the whole file (`-`), a Range as the
/// client sent it (`=` and nginx's spec), or slices by index.
enum Asks {
    Nothing,
    Whole,
    Forwarded(&'static str),
    Slices(&'static [u64]),
}

/// URL, nginx's range, request fields, status, nginx's bytes of a 206, the origin's asks.
type Case<'a> = (
    &'a str,
    &'a str,
    Vec<(&'a str, &'a str)>,
    u16,
    Option<(u64, u64)>,
    Asks,
);

/// slice.t's ranges, conditionals and If-Range, each on a URL of its own (nginx's `?single`,
/// `?median`...), with what each asks of the origin. nginx's slice module knows a location
/// is sliced from its configuration; Shellac learns it from the first answer that shows the
/// length (the whole file passed through, or the client's Range forwarded), whose bytes are
/// not stored as slices: the next request in that slice is a miss where nginx has a hit
/// (slices.md "How a URL becomes sliced"; docs/sites.md "Where Shellac differs").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_slice_t_ranges_within_and_across_slices() {
    let (origin, _file) = origin(LEN).await;
    let sh = Shellac::start(origin.addr, sliced).await;
    let slice = |i: u64| format!("bytes={}-{}", i * 2 * H, (i + 1) * 2 * H - 1);
    // "no range": the whole file.
    let r = get(sh.addr, "/t").await;
    assert_eq!(r.status, 200);
    assert!(r.body[..] == bytes(1, 0, LEN - 1)[..]);
    let etag = r.header("etag").unwrap().to_string();
    let lm = r.header("last-modified").unwrap().to_string();
    let mut seen = origin.count();
    use Asks::*;
    // URL, nginx's range ("" none), fields, status, nginx's bytes a..=b of a 206 (16: to
    // the end), what the origin is asked. nginx's cache status in comments.
    let cases: Vec<Case> = vec![
        ("/t?single", "0-0", vec![], 206, Some((0, 0)), Whole), // MISS
        ("/t?single", "0-0", vec![], 206, Some((0, 0)), Slices(&[0])), // HIT
        ("/t?single", "1-1", vec![], 206, Some((1, 1)), Nothing), // HIT
        ("/t?single", "2-2", vec![], 206, Some((2, 2)), Slices(&[1])), // MISS
        ("/t?single", "2-2", vec![], 206, Some((2, 2)), Nothing), // HIT
        (
            "/t?median",
            "2-2",
            vec![],
            206,
            Some((2, 2)),
            Forwarded("2-2"),
        ), // MISS
        ("/t?median", "0-0", vec![], 206, Some((0, 0)), Slices(&[0])), // MISS
        // A range across two slices.
        (
            "/t?range",
            "1-2",
            vec![],
            206,
            Some((1, 2)),
            Forwarded("1-2"),
        ), // MISS
        ("/t?range", "0-0", vec![], 206, Some((0, 0)), Slices(&[0])), // HIT
        ("/t?range", "2-2", vec![], 206, Some((2, 2)), Slices(&[1])), // HIT
        (
            "/t?mrange",
            "3-4",
            vec![],
            206,
            Some((3, 4)),
            Forwarded("3-4"),
        ), // MISS
        ("/t?mrange", "2-3", vec![], 206, Some((2, 3)), Slices(&[1])), // HIT
        ("/t?mrange", "4-5", vec![], 206, Some((4, 5)), Slices(&[2])), // HIT
        (
            "/t?first",
            "2-",
            vec![],
            206,
            Some((2, 16)),
            Forwarded("2-"),
        ), // MISS
        (
            "/t?first",
            "4-",
            vec![],
            206,
            Some((4, 16)),
            Slices(&[2, 3, 4, 5, 6, 7]),
        ), // HIT
        // Several ranges: "we want 206, but 200 is also fine".
        ("/t?many", "3-3,4-4", vec![], 200, None, Whole),
        (
            "/t?last",
            "-10",
            vec![],
            206,
            Some((6, 16)),
            Forwarded("-10"),
        ),
        // Conditionals, then If-Range.
        (
            "/t?inm",
            "",
            vec![("if-none-match", &etag)],
            304,
            None,
            Whole,
        ),
        (
            "/t?inm",
            "",
            vec![("if-none-match", "\"bad\"")],
            200,
            None,
            Slices(&[0, 1, 2, 3, 4, 5, 6, 7]),
        ),
        ("/t?im", "", vec![("if-match", &etag)], 200, None, Whole),
        (
            "/t?im",
            "",
            vec![("if-match", "\"bad\"")],
            412,
            None,
            Nothing,
        ),
        (
            "/t?if",
            "3-4",
            vec![("if-range", &etag)],
            206,
            Some((3, 4)),
            Whole,
        ),
        (
            "/t?iflm",
            "3-4",
            vec![("if-range", &lm)],
            206,
            Some((3, 4)),
            Whole,
        ),
        (
            "/t?ifb",
            "3-4",
            vec![("if-range", "\"bad\"")],
            200,
            None,
            Whole,
        ),
        // "first slice isn't known".
        (
            "/t?skip",
            "6-7",
            vec![("if-range", &etag)],
            206,
            Some((6, 7)),
            Whole,
        ),
        (
            "/t?skip",
            "6-7",
            vec![("if-range", &etag)],
            206,
            Some((6, 7)),
            Slices(&[3]),
        ), // HIT
        ("/t?skip", "2-3", vec![], 206, Some((2, 3)), Slices(&[1])), // MISS
    ];
    for (path, r, extra, status, want, asks) in cases {
        let got = if r.is_empty() {
            get_with(sh.addr, path, &extra).await
        } else {
            ask(&sh, path, r, &extra).await
        };
        let what = format!("{path} {r} {extra:?}");
        assert_eq!(got.status, status, "{what}");
        if let (206, Some((a, b))) = (status, want) {
            let (first, last) = (a * H, if b == 16 { LEN - 1 } else { b * H });
            assert!(
                got.body[..] == bytes(1, first, last)[..],
                "{what}: other bytes"
            );
            assert_eq!(
                got.header("content-range"),
                Some(format!("bytes {first}-{last}/{LEN}").as_str()),
                "{what}"
            );
        } else if status == 200 {
            assert!(got.body[..] == bytes(1, 0, LEN - 1)[..], "{what}: the file");
        }
        let want_asks: Vec<String> = match asks {
            Nothing => vec![],
            Whole => vec!["-".to_string()],
            Forwarded(r) => vec![spec(r)],
            Slices(s) => s.iter().map(|&i| slice(i)).collect(),
        };
        assert_eq!(asked(&origin)[seen..], want_asks[..], "{what}");
        seen = origin.count();
    }
}

/// A GET of `path` with `range`: its status, the body bytes that came, whether it was cut.
async fn read_cut(sh: &Shellac, path: &str, range: &str) -> (u16, Vec<u8>, bool) {
    use http_body_util::BodyExt;
    let resp = Conn::open(sh.addr)
        .await
        .send_head("GET", path, &[("range", range)], b"")
        .await;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut got = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => got.extend_from_slice(f.data_ref().map_or(&[][..], |d| d.as_ref())),
            Err(_) => return (status, got, true),
        }
    }
    (status, got, false)
}

/// slice.t's "invalid ranges": a slice whose answer is not the slice asked — a `200`, a
/// `Content-Range` that cannot be read, of unknown length, or of other bytes — is never
/// stored nor sent as that slice. (slice.t's "bad range - etag", another entity tag on one
/// slice: the next test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_slice_t_invalid_slice_answers_are_refused() {
    let mode = Arc::new(AtomicU8::new(0));
    let m = mode.clone();
    let origin = Origin::start(move |seen| {
        let asked = seen.headers.get("range").and_then(|r| r.to_str().ok());
        let bad = m.load(Ordering::SeqCst);
        let reply = |status: u16, body: Vec<u8>| {
            Reply::ok("")
                .status(status)
                .body(ReplyBody::Bytes(body))
                .cc("max-age=3600")
                .header("etag", "\"v1\"")
                .header("content-type", "video/mp4")
        };
        // Slice 1 (bytes 2H..) goes wrong as `mode` says; everything else is the file.
        match (asked, bad) {
            (Some(r), 1..) if r.starts_with(&format!("bytes={}-", 2 * H)) => {
                // The bytes are the file's; what is wrong is the status or the labels.
                let body = bytes(1, 2 * H, 4 * H - 1);
                let (a, b) = (2 * H, 4 * H - 1);
                match bad {
                    1 => reply(200, bytes(1, 0, LEN - 1)),
                    3 => reply(206, body).header("content-range", "bytes"),
                    4 => reply(206, body).header("content-range", &format!("bytes {a}-{b}/*")),
                    _ => reply(206, bytes(1, a + 1, b + 1))
                        .header("content-range", &format!("bytes {}-{}/{LEN}", a + 1, b + 1)),
                }
            }
            _ => answer_range(asked, LEN, |a, b| bytes(1, a, b), reply),
        }
    })
    .await;
    let sh = Shellac::start(origin.addr, sliced).await;
    for bad in [1u8, 3, 4, 5] {
        let path = format!("/bad{bad}");
        // Learnt from a whole GET; slice 0 stored.
        mode.store(0, Ordering::SeqCst);
        assert_eq!(get(sh.addr, &path).await.status, 200);
        let r = get_with(sh.addr, &path, &[("range", "bytes=0-9")]).await;
        assert_eq!(r.status, 206);
        mode.store(bad, Ordering::SeqCst);
        // The bad answer is never sent as slice 1 of version 1: what comes is the origin's
        // own answer, labelled as it labels it (a 200's bytes cut to the range; a Range
        // forwarded once the URL is no longer taken for sliced).
        let r = get_with(sh.addr, &path, &[("range", &spec("2-2"))]).await;
        assert_eq!(r.status, 206, "{bad}");
        if r.header("content-range") == Some(format!("bytes {}-{}/{LEN}", 2 * H, 2 * H).as_str()) {
            assert!(
                r.body[..] == bytes(1, 2 * H, 2 * H)[..],
                "{bad}: the byte asked"
            );
        }
        // A response across slices 0 and 1: the file's bytes in their place, whole or
        // cut where a slice went wrong (the client never gets another slice's bytes).
        let (status, got, cut) = read_cut(&sh, &path, &spec("0-3")).await;
        assert_eq!(status, 206, "{bad}");
        assert!(
            got[..] == bytes(1, 0, 3 * H)[..got.len()],
            "{bad}: other bytes"
        );
        assert!(
            cut || got.len() as u64 == 3 * H + 1,
            "{bad}: short and not cut"
        );
        // Nothing bad was stored: the origin well again, slice 1 is version 1's.
        mode.store(0, Ordering::SeqCst);
        let r = get_with(sh.addr, &path, &[("range", &spec("2-3"))]).await;
        assert_eq!(r.status, 206);
        assert!(
            r.body[..] == bytes(1, 2 * H, 3 * H)[..],
            "{bad}: slice 1 as stored"
        );
    }
    let stats = sh.stats().await;
    assert_eq!(stats["slice_range_ignored"], 1);
    // The slices invalidated for the bad answers, counted (4 as measured on this tree).
    assert_eq!(stats["slice_validator_mismatch"], 4);
}

/// slice.t's "bad range - etag": one slice answered with another entity tag (and another
/// version's bytes) while its neighbours are version 1's. No response mixes the two: the
/// URL's slices are invalidated, and a response across that slice and a stored one of
/// version 1 is never assembled from both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_slice_t_another_etag_on_one_slice_never_mixes_versions() {
    let other = Arc::new(AtomicU8::new(0));
    let o = other.clone();
    let origin = Origin::start(move |seen| {
        let asked = seen.headers.get("range").and_then(|r| r.to_str().ok());
        let on = o.load(Ordering::SeqCst) == 1;
        let reply = |etag: &'static str| {
            move |status: u16, body: Vec<u8>| {
                Reply::ok("")
                    .status(status)
                    .body(ReplyBody::Bytes(body))
                    .cc("max-age=3600")
                    .header("etag", etag)
                    .header("content-type", "video/mp4")
            }
        };
        match asked {
            Some(r) if on && r.starts_with(&format!("bytes={}-", 2 * H)) => {
                answer_range(asked, LEN, |a, b| bytes(2, a, b), reply("\"other\""))
            }
            _ => answer_range(asked, LEN, |a, b| bytes(1, a, b), reply("\"v1\"")),
        }
    })
    .await;
    let sh = Shellac::start(origin.addr, sliced).await;
    let path = "/etag";
    assert_eq!(get(sh.addr, path).await.status, 200);
    let r = get_with(sh.addr, path, &[("range", "bytes=0-9")]).await;
    assert_eq!(r.status, 206);
    other.store(1, Ordering::SeqCst);
    // Slice 1 comes with the other tag: the client gets what the origin sent for its byte.
    let r = get_with(sh.addr, path, &[("range", &spec("2-2"))]).await;
    assert_eq!(r.status, 206);
    assert_eq!(r.body[..], bytes(2, 2 * H, 2 * H)[..]);
    for round in 0..3 {
        let (status, got, cut) = read_cut(&sh, path, &spec("0-3")).await;
        let v1 = got[..] == bytes(1, 0, 3 * H)[..got.len()];
        let v2 = got[..] == bytes(2, 0, 3 * H)[..got.len()];
        assert_eq!(status, 206, "round {round}");
        assert!(
            v1 || v2,
            "round {round}: bytes of two versions in one response"
        );
        assert!(
            cut || got.len() as u64 == 3 * H + 1,
            "round {round}: short and not cut"
        );
    }
    assert!(sh.stats().await["slice_validator_mismatch"] >= 1);
    sh.stop().await;
}
