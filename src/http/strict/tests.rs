//! Unit tests of the strict parser: the vectors per rule, limits, chunked bodies, stream
//! boundaries across arbitrary read splits.

use super::tokens::{REG_NAME, is_field_byte};
use super::*;

fn head(text: &str) -> Result<Head, Violation> {
    check_head(text.as_bytes(), &Limits::default())
}

fn get(fields: &str) -> Result<Head, Violation> {
    head(&format!("GET / HTTP/1.1\r\nHost: a\r\n{fields}\r\n"))
}

#[test]
fn plain_requests_pass() {
    assert_eq!(
        get("").unwrap(),
        Head {
            framing: Framing::None,
            upgrade: false,
            later_minor: false
        }
    );
    assert_eq!(
        get("Content-Length: 5\r\n").unwrap().framing,
        Framing::Length(5)
    );
    assert_eq!(
        get("Content-Length: 5, 5\r\n").unwrap().framing,
        Framing::Length(5)
    );
    assert_eq!(
        get("transfer-encoding:  CHUNKED \r\n").unwrap().framing,
        Framing::Chunked
    );
    assert!(head("GET / HTTP/1.0\r\n\r\n").is_ok());
    assert!(head("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n").is_ok());
    assert!(head("GET http://a.example:8080/x?y HTTP/1.1\r\nHost: b\r\n\r\n").is_ok());
    assert!(head("GET /a%2Fb?c={d}|e HTTP/1.1\r\nHost: [::1]:80\r\n\r\n").is_ok());
    assert!(head("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n").is_ok());
    assert!(
        get("X-Obs: caf\u{e9}\r\n").is_ok(),
        "obs-text in values is allowed"
    );
    assert!(
        get("Connection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n")
            .unwrap()
            .upgrade
    );
}

#[test]
fn framing_attacks_are_refused() {
    use Violation::*;
    for (fields, want) in [
        (
            "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n",
            LengthAndChunked,
        ),
        ("Content-Length: +2\r\n", BadContentLength),
        ("Content-Length: 0x2\r\n", BadContentLength),
        ("Content-Length: \r\n", BadContentLength),
        ("Content-Length: 1 2\r\n", BadContentLength),
        ("Content-Length: 1, 2\r\n", ConflictingContentLength),
        (
            "Content-Length: 1\r\nContent-Length: 2\r\n",
            ConflictingContentLength,
        ),
        (
            "Content-Length: 99999999999999999999999\r\n",
            BadContentLength,
        ),
        ("Content-Length: 2,\r\n", BadContentLength),
        ("Transfer-Encoding: ,chunked\r\n", BadTransferEncoding),
        ("Transfer-Encoding: chunked,\r\n", BadTransferEncoding),
        (
            "Transfer-Encoding: chunked, chunked\r\n",
            BadTransferEncoding,
        ),
        ("Transfer-Encoding: \"chunked\"\r\n", BadTransferEncoding),
        ("Transfer-Encoding: chunked;q=1\r\n", BadTransferEncoding),
        (
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            BadTransferEncoding,
        ),
        (
            "Transfer-Encoding: gzip, chunked\r\n",
            UnknownTransferCoding,
        ),
        ("Transfer-Encoding: identity\r\n", UnknownTransferCoding),
        ("Transfer-Encoding: chunk\r\n", UnknownTransferCoding),
        ("Transfer-Encoding: \r\n", BadTransferEncoding),
        ("Transfer-Encoding : chunked\r\n", SpaceBeforeColon),
        ("Transfer-Encoding:\x0bchunked\r\n", BadFieldValue),
        ("Transfer-Encoding: chunked\rX: y\r\n", BadFieldValue),
        ("X: y\r\n Transfer-Encoding: chunked\r\n", ObsFold),
        ("\tX: y\r\n", ObsFold),
        (": y\r\n", BadFieldName),
        ("X y: z\r\n", SpaceBeforeColon),
        ("X\x00: z\r\n", BadFieldName),
        ("X: a\x00b\r\n", BadFieldValue),
        ("X: a\x7fb\r\n", BadFieldValue),
        ("Host: b\r\n", DuplicateHost),
        ("Connection: Content-Length\r\n", ConnectionNamesEndToEnd),
        ("Connection: close, host\r\n", ConnectionNamesEndToEnd),
        ("Connection: X-Forwarded-For\r\n", ConnectionNamesEndToEnd),
        ("Connection: a b\r\n", BadConnection),
        ("Connection: ,\r\n", BadConnection),
    ] {
        assert_eq!(get(fields), Err(want), "{fields:?}");
    }
    assert_eq!(
        head("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Err(TransferEncodingHttp10)
    );
}

#[test]
fn request_line_and_host_rules() {
    use Violation::*;
    for (text, want) in [
        ("GET / HTTP/1.1\r\n\r\n", MissingHost),
        ("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", BadHost),
        ("GET / HTTP/1.1\r\nHost: a@b\r\n\r\n", BadHost),
        ("GET / HTTP/1.1\r\nHost: \r\n\r\n", BadHost),
        ("GET / HTTP/1.1\r\nHost: a:x\r\n\r\n", BadHost),
        ("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", BadMethod),
        (" GET / HTTP/1.1\r\nHost: a\r\n\r\n", BadMethod),
        ("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", BadVersion),
        ("GET / http/1.1\r\nHost: a\r\n\r\n", BadVersion),
        ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", VersionNotSupported),
        ("GET / HTTP/0.9\r\nHost: a\r\n\r\n", VersionNotSupported),
        ("GET / HTTP/1.x\r\nHost: a\r\n\r\n", BadVersion),
        ("GET / HTTP/1.10\r\nHost: a\r\n\r\n", BadVersion),
        // RFC 9112 §2.3: one digit on each side of the dot, `HTTP` in upper case.
        ("GET / HTTP/01.1\r\nHost: a\r\n\r\n", BadVersion),
        ("GET / HTTP/10.1\r\nHost: a\r\n\r\n", BadVersion),
        ("GET / HTTP/1\r\nHost: a\r\n\r\n", BadVersion),
        ("GET / Http/1.1\r\nHost: a\r\n\r\n", BadVersion),
        ("GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("GET /a\\b HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("GET /%4 HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("GET a HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("GET * HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("GET /\u{e9} HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        ("GET / HTTP/1.1\r\nHost: a\r\nX\r\n\r\n", BadFieldName),
    ] {
        assert_eq!(head(text), Err(want), "{text:?}");
    }
}

/// A later HTTP/1 minor version is read as HTTP/1.1 (RFC 9110 §2.5), with HTTP/1.1's
/// rules: Host required, Transfer-Encoding framing. The gate rewrites the digit in place.
#[test]
fn later_minor_versions_read_as_http11() {
    let h = head("GET / HTTP/1.2\r\nHost: a\r\n\r\n").unwrap();
    assert!(h.later_minor);
    assert!(!get("").unwrap().later_minor);
    assert_eq!(head("GET / HTTP/1.9\r\n\r\n"), Err(Violation::MissingHost));
    let chunked = head("POST / HTTP/1.5\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(chunked.unwrap().framing, Framing::Chunked);
    assert_eq!(
        head(
            "POST / HTTP/1.3\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
        ),
        head(
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
        ),
        "the same smuggling rules as HTTP/1.1"
    );
    let mut line = b"GET /x HTTP/1.7\r\nHost: a\r\n\r\n".to_vec();
    as_http11(&mut line);
    assert_eq!(&line[..], b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
}

#[test]
fn authorities() {
    for ok in [
        &b"a"[..],
        b"a.example:8080",
        b"a:",
        b"a%20b:80",
        b"127.0.0.1",
        b"[::1]",
        b"[::1]:443",
        b"xn--bcher-kva.example",
    ] {
        assert!(valid_authority(ok), "{}", String::from_utf8_lossy(ok));
    }
    for bad in [
        &b""[..],
        b":80",
        b"a:123456",
        b"a:x",
        b"a b",
        b"a@b",
        b"a/b",
        b"[]",
        b"[::1]x",
        b"[::1",
        b"a%2",
        b"a:80:80",
    ] {
        assert!(!valid_authority(bad), "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn limits() {
    let limits = Limits {
        max_request_line: 32,
        max_header_size: 128,
        max_headers: 3,
        max_field_size: 200,
        max_body_size: 10,
    };
    let check = |t: &str| check_head(t.as_bytes(), &limits);
    assert_eq!(
        check(&format!(
            "GET /{} HTTP/1.1\r\nHost: a\r\n\r\n",
            "x".repeat(40)
        )),
        Err(Violation::UriTooLong)
    );
    assert_eq!(
        check("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"),
        Err(Violation::TooManyHeaders)
    );
    assert_eq!(
        check(&format!(
            "GET / HTTP/1.1\r\nHost: a\r\nA: {}\r\n\r\n",
            "x".repeat(120)
        )),
        Err(Violation::HeaderTooLarge)
    );
    assert_eq!(
        check("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n"),
        Err(Violation::BodyTooLarge)
    );
    let mut s = Scanner::new(limits);
    assert_eq!(
        s.scan(b"GET /xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
        Scan::Reject(Violation::UriTooLong)
    );
    let mut s = Scanner::new(limits);
    let chunked = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert!(matches!(s.scan(chunked), Scan::Head(..)));
    assert_eq!(s.scan(b"6\r\nabcdef\r\n"), Scan::Body(11));
    assert_eq!(s.scan(b"5\r\n"), Scan::Body(1));
    assert_eq!(s.scan(b"\r\n"), Scan::Reject(Violation::BodyTooLarge));
}

/// `server.max_field_size` (Varnish's `http_req_hdr_len`): one field line longer than the
/// limit is refused 431 however small the head, at the limit it passes, and a line still
/// arriving is refused once it is past the limit.
#[test]
fn max_field_size_bounds_each_field_line() {
    let limits = Limits {
        max_field_size: 40,
        ..Limits::default()
    };
    let at = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "y".repeat(37));
    assert!(check_head(at.as_bytes(), &limits).is_ok());
    let over = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "y".repeat(38));
    assert_eq!(
        check_head(over.as_bytes(), &limits),
        Err(Violation::HeaderTooLarge)
    );
    assert_eq!(Violation::HeaderTooLarge.status(), 431);
    let mut s = Scanner::new(limits);
    let partial = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}", "y".repeat(60));
    assert_eq!(
        s.scan(partial.as_bytes()),
        Scan::Reject(Violation::HeaderTooLarge)
    );
}

/// Runs a whole stream through a scanner, one byte at a time if `bytewise`, holding partial
/// heads like the gate does. Returns the heads seen and the first violation.
fn stream(input: &[u8], bytewise: bool) -> (usize, Option<Violation>) {
    let mut s = Scanner::new(Limits::default());
    let mut held: Vec<u8> = Vec::new();
    let mut heads = 0;
    let step = if bytewise { 1 } else { input.len().max(1) };
    for piece in input.chunks(step) {
        held.extend_from_slice(piece);
        loop {
            match s.scan(&held) {
                Scan::Head(n, _) => {
                    heads += 1;
                    held.drain(..n);
                }
                Scan::Body(n) => {
                    held.drain(..n);
                }
                Scan::Incomplete => break,
                Scan::Reject(v) => return (heads, Some(v)),
            }
            if held.is_empty() {
                break;
            }
        }
    }
    (heads, None)
}

#[test]
fn chunked_bodies() {
    let ok = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;ext=1;q=\"a\\\"b\";flag\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n\
        GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    for bytewise in [false, true] {
        assert_eq!(stream(ok, bytewise), (2, None));
    }
    let prefix = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (body, want) in [
        ("5\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
        ("5 \r\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
        ("+5\r\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
        ("0x5\r\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
        ("\r\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
        ("11111111111111111\r\n", Violation::BadChunkSize),
        ("5 ;a\r\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
        ("5;\r\nhello\r\n0\r\n\r\n", Violation::BadChunkExtension),
        ("5;a b\r\nhello\r\n0\r\n\r\n", Violation::BadChunkExtension),
        (
            "5;a=\"b\r\nhello\r\n0\r\n\r\n",
            Violation::BadChunkExtension,
        ),
        (
            "5;a=\x01\r\nhello\r\n0\r\n\r\n",
            Violation::BadChunkExtension,
        ),
        ("5\r\nhelloX\r\n0\r\n\r\n", Violation::BadChunkData),
        ("5\r\nhello\n0\r\n\r\n", Violation::BadChunkData),
        ("5\r\nhello\r\n0\r\n X: y\r\n\r\n", Violation::BadTrailer),
        ("5\r\nhello\r\n0\r\nX : y\r\n\r\n", Violation::BadTrailer),
        ("5\r\nhello\r\n0\r\nX: \x00\r\n\r\n", Violation::BadTrailer),
        ("5\r\nhello\r\n0\r\n\rX", Violation::BadTrailer),
    ] {
        let input = format!("{prefix}{body}");
        for bytewise in [false, true] {
            assert_eq!(
                stream(input.as_bytes(), bytewise),
                (1, Some(want)),
                "{body:?} bytewise={bytewise}"
            );
        }
    }
    let long_ext = format!("{prefix}1;a={}\r\nx\r\n0\r\n\r\n", "b".repeat(2000));
    assert_eq!(
        stream(long_ext.as_bytes(), false),
        (1, Some(Violation::BadChunkExtension))
    );
}

#[test]
fn stream_boundaries() {
    // Content-Length bodies are skipped exactly; leading empty lines are allowed.
    let input = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 26\r\n\r\n\
        GET /smuggled HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(stream(input, false), (2, None));
    assert_eq!(stream(input, true), (2, None));
    assert_eq!(
        stream(
            b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\nHost: a\n\n",
            false
        ),
        (1, Some(Violation::BareLf))
    );
    assert_eq!(
        stream(b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", true),
        (1, None)
    );
    assert_eq!(stream(b"\n", false), (0, Some(Violation::BareLf)));
    let many = [&b"\r\n"[..]; 9].concat();
    assert_eq!(stream(&many, false), (0, Some(Violation::BadRequestLine)));
    let eight = [
        &[&b"\r\n"[..]; 8].concat()[..],
        b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    ]
    .concat();
    assert_eq!(stream(&eight, true), (1, None));
}

#[test]
fn field_run_matches_the_byte_rule() {
    // Deterministic pseudo-random bytes, biased towards printable ones.
    let mut x: u32 = 12345;
    for _ in 0..2000 {
        let len = (x % 40) as usize;
        let mut v = Vec::new();
        for _ in 0..len {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let r = (x >> 16) as u8;
            v.push(if r.is_multiple_of(5) {
                r
            } else {
                b'a' + r % 26
            });
        }
        for from in 0..=len.min(3) {
            let want = v[from..]
                .iter()
                .position(|b| !is_field_byte(*b))
                .map_or(len, |n| from + n);
            assert_eq!(field_run(&v, from), want, "{v:?} from {from}");
        }
    }
}

#[test]
fn violation_codes_round_trip() {
    for v in Violation::ALL {
        assert_eq!(Violation::from_code(*v as u8), Some(*v));
        assert!((400..600).contains(&v.status()));
    }
    assert_eq!(Violation::from_code(0), None);
}

/// The byte tables built by `alnum_and` are exactly RFC 9110's tchar and RFC 3986's
/// reg-name characters (without `%`).
#[test]
fn byte_tables_match_the_grammars() {
    for b in 0..=255u8 {
        let tchar = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        assert_eq!(is_tchar(b), tchar, "tchar {b:#04x}");
        let unreserved = b.is_ascii_alphanumeric() || b"-._~".contains(&b);
        let sub_delim = b"!$&'()*+,;=".contains(&b);
        assert_eq!(
            REG_NAME[b as usize],
            unreserved || sub_delim,
            "reg-name {b:#04x}"
        );
    }
}

#[test]
fn request_line_of_a_refused_request() {
    let line = |d: &str, max| valid_request_line(d.as_bytes(), max).map(|l| l.to_vec());
    let ok = |s: &str| Some(s.as_bytes().to_vec());
    assert_eq!(
        line("GET /a?b HTTP/1.1\r\nHost: x\r\n", 100),
        ok("GET /a?b HTTP/1.1")
    );
    assert_eq!(line("POST / HTTP/1.0\r\n", 15), ok("POST / HTTP/1.0"));
    // Too long, incomplete, bare LF, or not a valid request line: not shown.
    assert_eq!(line("POST / HTTP/1.0\r\n", 14), None);
    assert_eq!(line("GET /a HTTP/1.1", 100), None);
    assert_eq!(line("GET /a HTTP/1.1\nHost: x\r\n", 100), None);
    assert_eq!(line("GET /a HTTP/2.0\r\n", 100), None);
    assert_eq!(line("GET /a b HTTP/1.1\r\n", 100), None);
    assert_eq!(line("\x16\x03\x01\r\n", 100), None);
    assert_eq!(
        Violation::LengthAndChunked.refused_reason(),
        "refused:content-length-and-transfer-encoding"
    );
}

/// Fuzzing regression (`request_stream`, corpus `regress-line-at-limit-split-crlf`): a request
/// line of exactly `max_request_line` bytes was refused (414) when its CR arrived in one read
/// and its LF in the next, and accepted when both came together.
#[test]
fn request_line_at_the_limit_with_crlf_split_across_reads() {
    let limits = Limits {
        max_request_line: 16,
        ..Limits::default()
    };
    let line = format!("GET /{} HTTP/1.1", "x".repeat(16 - "GET / HTTP/1.1".len()));
    assert_eq!(line.len(), 16);
    let mut s = Scanner::new(limits);
    let first = format!("{line}\r");
    assert_eq!(s.scan(first.as_bytes()), Scan::Incomplete);
    let whole = format!("{line}\r\nHost: a\r\n\r\n");
    assert!(matches!(s.scan(whole.as_bytes()), Scan::Head(n, _) if n == whole.len()));
    // One byte more is too long, with or without the CR.
    let long = format!(
        "GET /{} HTTP/1.1\r",
        "x".repeat(17 - "GET / HTTP/1.1".len())
    );
    let mut s = Scanner::new(limits);
    assert_eq!(s.scan(long.as_bytes()), Scan::Reject(Violation::UriTooLong));
    assert_eq!(
        parse_head(&long.as_bytes()[..long.len() - 1], &limits),
        Err(Violation::UriTooLong)
    );
    assert_eq!(parse_head(first.as_bytes(), &limits), Ok(None));
}
