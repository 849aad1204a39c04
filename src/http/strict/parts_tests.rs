//! Unit tests of `Parts`: what the strict parser notes of a head is what httparse reads in it.

use super::*;

/// What httparse (hyper's parser) reads in `head`: method, path, version, fields.
type Read = (Vec<u8>, Vec<u8>, u8, Vec<(Vec<u8>, Vec<u8>)>);

fn httparse_reads(head: &[u8]) -> Read {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut fields);
    assert!(
        matches!(req.parse(head), Ok(httparse::Status::Complete(n)) if n == head.len()),
        "{:?}",
        String::from_utf8_lossy(head)
    );
    let fields = req
        .headers
        .iter()
        .map(|f| (f.name.as_bytes().to_vec(), f.value.to_vec()))
        .collect();
    let method = req.method.unwrap_or_default().as_bytes().to_vec();
    let path = req.path.unwrap_or_default().as_bytes().to_vec();
    (method, path, req.version.unwrap_or(9), fields)
}

fn parts_read(parts: &Parts, head: &[u8]) -> Option<Read> {
    let fields = parts
        .fields(head)?
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect();
    let version = if parts.http10() { 0 } else { 1 };
    Some((
        parts.method(head).to_vec(),
        parts.target(head).to_vec(),
        version,
        fields,
    ))
}

/// The parts the scanner keeps are what httparse reads in the same head, whether the head
/// came in one read or in two (parsed again whole); a head with more fields than the parts
/// hold says so.
#[test]
fn parts_are_what_httparse_reads() {
    let heads = [
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n".to_string(),
        "HEAD /x?y=1&z={2} HTTP/1.1\r\nhost:a.example:8080\r\nUser-Agent: wrk\r\n\r\n".into(),
        "GET /p HTTP/1.1\r\nHost: \t a \t\r\nX-Empty:\r\nX-Spaces:   \r\nX-Obs: caf\u{e9} \r\n\r\n"
            .into(),
        "GET /a%2Fb HTTP/1.0\r\nAccept: */*\r\n\r\n".into(),
        "GET / HTTP/1.7\r\nHost: a\r\nContent-Length: 0\r\n\r\n".into(),
        "POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n".into(),
        "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n".into(),
        "GET http://b.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n".into(),
        format!(
            "GET / HTTP/1.1\r\nHost: a\r\n{}\r\n",
            (1..MAX_PART_FIELDS).fold(String::new(), |s, i| s + &format!("F{i}: {i}\r\n"))
        ),
    ];
    for text in heads {
        for split in [text.len(), text.len() / 2, 5] {
            let mut bytes = text.clone().into_bytes();
            let mut s = Scanner::new(Limits::default());
            s.keep_parts();
            if split < bytes.len() {
                assert_eq!(s.scan(&bytes[..split]), Scan::Incomplete, "{text:?}");
            }
            let Scan::Head(n, head) = s.scan(&bytes) else {
                panic!("refused: {text:?}");
            };
            assert_eq!(n, bytes.len());
            if head.later_minor {
                as_http11(&mut bytes);
            }
            let parts = s.parts().expect("kept");
            assert_eq!(
                parts_read(parts, &bytes),
                Some(httparse_reads(&bytes)),
                "{text:?}"
            );
        }
    }
    let over = format!(
        "GET / HTTP/1.1\r\nHost: a\r\n{}\r\n",
        (0..MAX_PART_FIELDS).fold(String::new(), |s, i| s + &format!("F{i}: {i}\r\n"))
    );
    let mut s = Scanner::new(Limits::default());
    s.keep_parts();
    assert!(matches!(s.scan(over.as_bytes()), Scan::Head(..)));
    let parts = s.parts().expect("kept");
    assert!(parts.fields(over.as_bytes()).is_none());
    // The next head starts afresh.
    let next = b"GET /n HTTP/1.1\r\nHost: a\r\n\r\n";
    assert!(matches!(s.scan(next), Scan::Head(..)));
    let parts = s.parts().expect("kept");
    assert_eq!(parts.fields(next).map(|f| f.len()), Some(1));
    assert_eq!(parts.target(next), b"/n");
}

/// The parts say whether the target has an escape (`%`): the fast hit normalises only one
/// that has.
#[test]
fn parts_say_whether_the_target_has_escapes() {
    let mut s = Scanner::new(Limits::default());
    s.keep_parts();
    for (head, escapes) in [
        (&b"GET /file6k.png HTTP/1.1\r\nHost: a\r\n\r\n"[..], false),
        (b"GET /a%2fb?x=%41 HTTP/1.1\r\nHost: a\r\n\r\n", true),
        (b"GET /q?%20 HTTP/1.1\r\nHost: a\r\n\r\n", true),
        (b"GET /p?a=b HTTP/1.1\r\nHost: a%41\r\n\r\n", false),
    ] {
        assert!(matches!(s.scan(head), Scan::Head(..)));
        let parts = s.parts().expect("kept");
        assert_eq!(
            parts.target_escapes(),
            escapes,
            "{:?}",
            String::from_utf8_lossy(head)
        );
        let target = std::str::from_utf8(parts.target(head)).unwrap();
        if !escapes {
            assert_eq!(crate::http::target::normalise(target), None, "{target}");
        }
    }
}

/// Without `keep_parts` the scanner keeps none (no memory per connection).
#[test]
fn parts_only_when_kept() {
    let mut s = Scanner::new(Limits::default());
    assert!(matches!(
        s.scan(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
        Scan::Head(..)
    ));
    assert!(s.parts().is_none());
}
