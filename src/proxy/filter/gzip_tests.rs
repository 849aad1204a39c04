//! The gzip filters over scripted bodies: round trips in any chunking, origin gzip checked,
//! malformed gzip failed and counted, bounded output for a body that inflates a thousandfold.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderValue};

use super::gzip::{Gunzip, Gzip, OUT, TestGunzip};
use super::{BodyFilter, Chain, Chunks, FilterError};
use crate::stats::Counters;

/// A body given as chunks, each ready at once.
struct Given(VecDeque<Bytes>);

impl Chunks for Given {
    fn poll_chunk(&mut self, _: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>> {
        Poll::Ready(self.0.pop_front().map(Ok))
    }
}

/// Runs `filter` over `chunks` with response fields `fields`: the fields after its head,
/// then every chunk out (or the error that ended them).
fn run(
    filter: Box<dyn BodyFilter>,
    fields: &mut HeaderMap,
    chunks: Vec<Bytes>,
) -> (Vec<Bytes>, Option<FilterError>) {
    let mut chain = Chain::default();
    chain.push(filter);
    let effect = chain.effect(StatusCode::OK, fields);
    chain.head(effect, fields);
    let mut body = chain.over(Given(chunks.into()));
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    let mut out = Vec::new();
    loop {
        match body.poll_chunk(&mut cx) {
            Poll::Ready(Some(Ok(c))) => out.push(c),
            Poll::Ready(Some(Err(e))) => return (out, Some(e)),
            Poll::Ready(None) => return (out, None),
            Poll::Pending => panic!("a given body never waits"),
        }
    }
}

fn joined(chunks: &[Bytes]) -> Vec<u8> {
    chunks.iter().flat_map(|c| c.iter().copied()).collect()
}

fn gzipped(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn page() -> Vec<u8> {
    (0..4000)
        .flat_map(|i| format!("<li>item {i}</li>\n").into_bytes())
        .collect()
}

fn html(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
    for (n, v) in pairs {
        h.append(*n, HeaderValue::from_static(v));
    }
    h
}

/// `data` cut into chunks of `size`.
fn cut(data: &[u8], size: usize) -> Vec<Bytes> {
    data.chunks(size).map(Bytes::copy_from_slice).collect()
}

#[test]
fn gzip_then_gunzip_gives_the_body_back_in_any_chunking() {
    let counters = Arc::new(Counters::default());
    let data = page();
    for size in [1, 7, 1000, 100_000] {
        let mut fields = html(&[("content-length", "99"), ("etag", "\"v1\"")]);
        let (zipped, err) = run(
            Box::new(Gzip::new(6, counters.clone())),
            &mut fields,
            cut(&data, size),
        );
        assert!(err.is_none());
        assert_eq!(fields["content-encoding"], "gzip");
        assert_eq!(fields["vary"], "Accept-Encoding");
        assert_eq!(
            fields["etag"], "W/\"v1\"",
            "a transformed body's ETag is weak"
        );
        assert!(!fields.contains_key(header::CONTENT_LENGTH));
        let zipped = joined(&zipped);
        assert!(zipped.len() < data.len() / 4, "{} bytes", zipped.len());
        let (plain, err) = run(
            Box::new(Gunzip::new(counters.clone())),
            &mut fields,
            cut(&zipped, size),
        );
        assert!(err.is_none());
        assert!(!fields.contains_key(header::CONTENT_ENCODING));
        assert_eq!(joined(&plain), data, "chunks of {size}");
    }
    assert_eq!(counters.compress_gzip.get(), 4);
    assert_eq!(counters.compress_gunzip.get(), 4);
    assert_eq!(counters.compress_gzip_invalid.get(), 0);
}

#[test]
fn gzip_leaves_coded_and_no_transform_bodies_alone() {
    let counters = Arc::new(Counters::default());
    for pairs in [
        &[("content-encoding", "br")][..],
        &[("content-encoding", "gzip")][..],
        &[("cache-control", "public, no-transform")][..],
    ] {
        let mut fields = html(pairs);
        let before = fields.clone();
        let (out, err) = run(
            Box::new(Gzip::new(6, counters.clone())),
            &mut fields,
            vec![Bytes::from_static(b"as it came")],
        );
        assert!(err.is_none());
        assert_eq!(fields, before);
        assert_eq!(joined(&out), b"as it came");
    }
    assert_eq!(counters.compress_gzip.get(), 0);
}

#[test]
fn gunzip_passes_identity_through() {
    let counters = Arc::new(Counters::default());
    let mut fields = html(&[("content-length", "5")]);
    let (out, err) = run(
        Box::new(Gunzip::new(counters.clone())),
        &mut fields,
        vec![Bytes::from_static(b"plain")],
    );
    assert!(err.is_none());
    assert_eq!(joined(&out), b"plain");
    assert_eq!(fields["content-length"], "5");
    assert_eq!(counters.compress_gunzip.get(), 0);
}

#[test]
fn an_origins_gzip_is_checked_and_passed_through_unchanged() {
    let counters = Arc::new(Counters::default());
    let zipped = gzipped(&page());
    // Two members one after the other are one gzip body (RFC 1952 §2.2).
    let mut two = zipped.clone();
    two.extend_from_slice(&gzipped(b"tail"));
    for body in [zipped, two] {
        let mut fields = html(&[("content-encoding", "gzip"), ("etag", "\"o\"")]);
        let (out, err) = run(
            Box::new(TestGunzip::new(counters.clone())),
            &mut fields,
            cut(&body, 333),
        );
        assert!(err.is_none());
        assert_eq!(joined(&out), body);
        assert_eq!(
            fields["etag"], "\"o\"",
            "the origin's bytes, the origin's ETag"
        );
        assert_eq!(fields["vary"], "Accept-Encoding");
    }
    assert_eq!(counters.compress_gzip_checked.get(), 2);
}

#[test]
fn malformed_gzip_fails_the_body_and_is_counted() {
    let counters = Arc::new(Counters::default());
    let good = gzipped(&page());
    let mut corrupt = good.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0xff;
    let mut bad_crc = good.clone();
    let n = bad_crc.len();
    bad_crc[n - 6] ^= 1;
    let truncated = good[..good.len() - 3].to_vec();
    let mut junk_after = good.clone();
    junk_after.extend_from_slice(b"<html>");
    let cases = [
        ("not gzip", b"<html>hello</html>".to_vec()),
        ("corrupt", corrupt),
        ("crc", bad_crc),
        ("truncated", truncated),
        ("junk after the end", junk_after),
    ];
    for (what, body) in cases {
        for checker in [true, false] {
            let filter: Box<dyn BodyFilter> = if checker {
                Box::new(TestGunzip::new(counters.clone()))
            } else {
                Box::new(Gunzip::new(counters.clone()))
            };
            let mut fields = html(&[("content-encoding", "gzip")]);
            let (_, err) = run(filter, &mut fields, cut(&body, 500));
            assert!(err.is_some(), "{what} (checker: {checker}) passed as valid");
        }
    }
    assert_eq!(counters.compress_gzip_invalid.get(), 10);
}

#[test]
fn a_body_that_inflates_a_thousandfold_comes_out_in_bounded_chunks() {
    let counters = Arc::new(Counters::default());
    let zeros = vec![0u8; 8 << 20];
    let bomb = gzipped(&zeros);
    assert!(bomb.len() < 16 << 10, "{}", bomb.len());
    let mut fields = html(&[("content-encoding", "gzip")]);
    let (out, err) = run(
        Box::new(Gunzip::new(counters)),
        &mut fields,
        vec![Bytes::from(bomb)],
    );
    assert!(err.is_none());
    assert!(out.iter().all(|c| c.len() <= OUT));
    assert_eq!(out.iter().map(Bytes::len).sum::<usize>(), zeros.len());
}

/// `Vary: Accept-Encoding` is joined to the origin's last `Vary` line, as Varnish does
/// (varnishtest g00007: `Vary: qux, Accept-Encoding`), and not added twice.
#[test]
fn vary_accept_encoding_joins_the_last_vary_line() {
    let vary = |lines: &[&str]| {
        let mut fields = HeaderMap::new();
        for l in lines {
            fields.append(header::VARY, HeaderValue::from_str(l).unwrap());
        }
        super::gzip::vary_accept_encoding(&mut fields);
        fields
            .get_all(header::VARY)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(vary(&[]), ["Accept-Encoding"]);
    assert_eq!(vary(&["qux"]), ["qux, Accept-Encoding"]);
    assert_eq!(vary(&["a", "b"]), ["a", "b, Accept-Encoding"]);
    assert_eq!(
        vary(&["fubar, accept-encoding"]),
        ["fubar, accept-encoding"]
    );
    assert_eq!(vary(&["*"]), ["*"]);
}

/// br and zstd bodies decoded for a client without them (`decode.rs`): in any chunking,
/// in bounded steps, several zstd frames as one body; a truncated body, or data
/// after a br stream's end, fails (counted); `no-transform` and other codings pass.
#[test]
fn br_and_zstd_are_decoded_in_any_chunking_and_malformed_ones_fail() {
    use super::Decode;
    let page = page();
    let mut br = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut br, 4096, 5, 22);
        w.write_all(&page).unwrap();
    }
    let zstd = zstd::encode_all(&page[..], 3).unwrap();
    for (coding, body) in [("br", &br), ("zstd", &zstd)] {
        for size in [1, 7, 4096, body.len()] {
            let counters = Arc::new(Counters::default());
            let mut fields = html(&[("content-encoding", coding)]);
            let chunks = body.chunks(size).map(Bytes::copy_from_slice).collect();
            let (out, err) = run(Box::new(Decode::new(counters.clone())), &mut fields, chunks);
            assert!(err.is_none(), "{coding} {size}: {err:?}");
            assert_eq!(joined(&out), page, "{coding} {size}");
            assert!(out.iter().all(|c| c.len() <= OUT));
            assert!(fields.get(header::CONTENT_ENCODING).is_none());
            assert_eq!(counters.compress_decode.get(), 1);
        }
        // Truncated (br has no checksum: a flipped bit may decode to other bytes).
        for bad in [
            body[..body.len() / 2].to_vec(),
            body[..body.len() - 1].to_vec(),
        ] {
            let counters = Arc::new(Counters::default());
            let mut fields = html(&[("content-encoding", coding)]);
            let (_, err) = run(
                Box::new(Decode::new(counters.clone())),
                &mut fields,
                vec![Bytes::from(bad)],
            );
            assert!(err.is_some(), "{coding}");
            assert_eq!(counters.compress_decode_invalid.get(), 1, "{coding}");
        }
    }
    // Two zstd frames are one body; data after a br stream fails it.
    let two = [zstd.clone(), zstd.clone()].concat();
    let counters = Arc::new(Counters::default());
    let mut fields = html(&[("content-encoding", "zstd")]);
    let (out, err) = run(
        Box::new(Decode::new(counters.clone())),
        &mut fields,
        vec![Bytes::from(two)],
    );
    assert!(err.is_none());
    assert_eq!(joined(&out), [page.clone(), page.clone()].concat());
    let mut fields = html(&[("content-encoding", "br")]);
    let (_, err) = run(
        Box::new(Decode::new(counters.clone())),
        &mut fields,
        vec![Bytes::from(br.clone()), Bytes::from_static(b"junk")],
    );
    assert!(err.is_some());
    // no-transform, gzip: as they are.
    for pairs in [
        &[
            ("content-encoding", "br"),
            ("cache-control", "no-transform"),
        ][..],
        &[("content-encoding", "gzip")][..],
    ] {
        let mut fields = html(pairs);
        let (out, err) = run(
            Box::new(Decode::new(counters.clone())),
            &mut fields,
            vec![Bytes::from_static(b"as is")],
        );
        assert!(err.is_none());
        assert_eq!(joined(&out), b"as is");
        assert!(fields.get(header::CONTENT_ENCODING).is_some());
    }
}

/// An origin's br or zstd checked as a fill stores it (`decode.rs`, `TestDecode`): in any
/// chunking it passes unchanged, still encoded, each chunk held until the next is checked;
/// a truncated body, or data after a br stream's end, fails it before its last bytes go out
/// (counted), so nothing malformed is stored.
#[test]
fn an_origins_br_and_zstd_are_checked_before_they_are_stored() {
    use super::TestDecode;
    let page = page();
    let mut br = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut br, 4096, 5, 22);
        w.write_all(&page).unwrap();
    }
    let zstd = zstd::encode_all(&page[..], 3).unwrap();
    let two = [zstd.clone(), zstd.clone()].concat();
    for (coding, body) in [("br", &br), ("zstd", &zstd), ("zstd", &two)] {
        for size in [1, 7, 4096, body.len()] {
            let counters = Arc::new(Counters::default());
            let mut fields = html(&[("content-encoding", coding)]);
            let chunks = body.chunks(size).map(Bytes::copy_from_slice).collect();
            let (out, err) = run(
                Box::new(TestDecode::new(counters.clone())),
                &mut fields,
                chunks,
            );
            assert!(err.is_none(), "{coding} {size}: {err:?}");
            assert_eq!(&joined(&out), body, "{coding} {size}: passed as it came");
            assert_eq!(
                fields.get(header::CONTENT_ENCODING).unwrap(),
                coding,
                "still encoded"
            );
            assert_eq!(counters.compress_decode_checked.get(), 1);
            assert_eq!(counters.compress_decode_invalid.get(), 0);
        }
        for bad in [
            // (Less than half: half of two zstd frames is one whole frame.)
            vec![Bytes::copy_from_slice(&body[..body.len() / 2 - 1])],
            body[..body.len() - 1]
                .chunks(64)
                .map(Bytes::copy_from_slice)
                .collect(),
        ] {
            let counters = Arc::new(Counters::default());
            let mut fields = html(&[("content-encoding", coding)]);
            let sent: usize = bad.iter().map(Bytes::len).sum();
            let (out, err) = run(
                Box::new(TestDecode::new(counters.clone())),
                &mut fields,
                bad,
            );
            assert!(err.is_some(), "{coding}: truncated");
            assert!(
                joined(&out).len() < sent,
                "{coding}: its last bytes held back"
            );
            assert_eq!(counters.compress_decode_invalid.get(), 1, "{coding}");
        }
    }
    let counters = Arc::new(Counters::default());
    let mut fields = html(&[("content-encoding", "br")]);
    let (_, err) = run(
        Box::new(TestDecode::new(counters.clone())),
        &mut fields,
        vec![Bytes::from(br.clone()), Bytes::from_static(b"junk")],
    );
    assert!(err.is_some(), "data after a br stream");
    // Identity and gzip pass unchecked.
    for coding in [None, Some("gzip")] {
        let counters = Arc::new(Counters::default());
        let mut fields = html(
            &coding
                .map(|c| ("content-encoding", c))
                .into_iter()
                .collect::<Vec<_>>(),
        );
        let (out, err) = run(
            Box::new(TestDecode::new(counters.clone())),
            &mut fields,
            vec![Bytes::from_static(b"not checked")],
        );
        assert!(err.is_none());
        assert_eq!(joined(&out), b"not checked");
        assert_eq!(counters.compress_decode_checked.get(), 0);
    }
}
