//! Unit tests of `wire.rs`.

use super::*;

/// `r` through the wire: encoded, read back as a view, filled into a record.
fn trip(r: &Record) -> Record {
    let mut bytes = Vec::new();
    encode(r, &mut bytes);
    let mut input = &bytes[..];
    let view = View::parse(&mut input).unwrap();
    assert!(input.is_empty());
    let mut out = Record::sample();
    out.set_backend(Some("something else"));
    view.fill(&mut out);
    out
}

#[test]
fn a_record_survives_the_trip() {
    let mut r = Record::sample();
    r.push_request_header(Some(b"http://ref.example/"));
    r.push_request_header(None);
    r.push_response_header(Some(b"shellac; hit"));
    r.client = "2001:db8::7".parse().unwrap();
    r.version = Version::HTTP_10;
    r.started = anchor().0 + Duration::from_millis(1500);
    let out = trip(&r);
    assert_eq!(
        (
            out.client,
            out.method.clone(),
            out.version,
            out.status,
            out.bytes
        ),
        (r.client, Method::GET, Version::HTTP_10, 200, 1234)
    );
    assert_eq!(
        (out.duration, out.ttfb, out.complete),
        (r.duration, r.ttfb, true)
    );
    assert_eq!(out.decision, r.decision);
    assert_eq!(
        (out.target(), out.path(), out.query()),
        ("/a/b?x=1", "/a/b", Some("x=1"))
    );
    assert_eq!(
        (out.host(), out.user_agent(), out.backend()),
        ("example.com", Some("curl/8.0"), Some("app"))
    );
    assert_eq!(
        (
            out.request_header(0),
            out.request_header(1),
            out.response_header(0)
        ),
        (Some("http://ref.example/"), None, Some("shellac; hit"))
    );
    assert_eq!(out.started, r.started);
    assert_eq!(out.time, anchor().1 + Duration::from_millis(1500));
    assert_eq!((out.esi_level, out.esi_parent()), (0, None));
    let mut include = Record::sample();
    include.set_esi(3, "/page");
    let out = trip(&include);
    assert_eq!((out.esi_level, out.esi_parent()), (3, Some("/page")));

    let mut second = Record::sample();
    second.method = Method::from_bytes(b"PURGE").unwrap();
    second.decision.reason = None;
    let out = trip(&second);
    assert_eq!(out.method.as_str(), "PURGE");
    assert_eq!(out.decision.reason, None);
    assert_eq!(out.request_header(0), None);
}

#[test]
fn records_follow_each_other_in_a_chunk() {
    let mut bytes = Vec::new();
    let mut a = Record::sample();
    a.status = 201;
    encode(&a, &mut bytes);
    a.status = 404;
    a.set_backend(None);
    encode(&a, &mut bytes);
    let mut input = &bytes[..];
    let first = View::parse(&mut input).unwrap();
    let second = View::parse(&mut input).unwrap();
    assert!(input.is_empty());
    assert_eq!((first.status, first.backend()), (201, Some(&b"app"[..])));
    assert_eq!((second.status, second.backend()), (404, None));
}

#[test]
fn a_span_outside_the_text_reads_as_absent() {
    let r = Record::sample();
    let mut bytes = Vec::new();
    encode(&r, &mut bytes);
    // The target span is the first of the six in the head: point it past the end.
    let spans_at = 60;
    bytes[spans_at + 4..spans_at + 8].copy_from_slice(&u32::MAX.wrapping_sub(1).to_le_bytes());
    let mut input = &bytes[..];
    let view = View::parse(&mut input).unwrap();
    assert_eq!(view.target(), b"");
    assert!(!view.has_request_line());
    assert_eq!(view.path(), b"/a/b");
}

#[test]
fn a_cut_chunk_ends_without_a_record() {
    let mut bytes = Vec::new();
    encode(&Record::sample(), &mut bytes);
    for cut in 0..bytes.len() {
        let mut input = &bytes[..cut];
        assert!(View::parse(&mut input).is_none(), "cut at {cut}");
    }
}
