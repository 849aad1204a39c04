//! The request line and authority checks (`line.rs`), one pass per part, against the
//! find-the-spaces-first versions they replaced (kept here as the reference): the same
//! result, refusal for refusal, on every line of a grid of methods × targets × versions and on
//! many short strings of the bytes that matter.

use super::Violation;
use super::line::{RequestLine, check_target, request_line, valid_authority};
use super::tokens::{REG_NAME, is_tchar};

/// The request line as checked before (both spaces found first, the parts checked after).
fn reference_request_line(line: &[u8]) -> Result<RequestLine, Violation> {
    let sp1 = line
        .iter()
        .position(|b| *b == b' ')
        .ok_or(Violation::BadRequestLine)?;
    let method = &line[..sp1];
    if method.is_empty() || !method.iter().all(|b| is_tchar(*b)) {
        return Err(Violation::BadMethod);
    }
    let rest = &line[sp1 + 1..];
    let sp2 = rest
        .iter()
        .position(|b| *b == b' ')
        .ok_or(Violation::BadRequestLine)?;
    let target = &rest[..sp2];
    let version = &rest[sp2 + 1..];
    check_target(target, method == b"CONNECT", method == b"OPTIONS")?;
    let (http10, later_minor) = match version {
        b"HTTP/1.1" => (false, false),
        b"HTTP/1.0" => (true, false),
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', d2] if d2.is_ascii_digit() => (false, true),
        [b'H', b'T', b'T', b'P', b'/', d1, b'.', d2]
            if d1.is_ascii_digit() && d2.is_ascii_digit() =>
        {
            return Err(Violation::VersionNotSupported);
        }
        _ => return Err(Violation::BadVersion),
    };
    Ok(RequestLine {
        method_end: sp1,
        target_end: sp1 + 1 + sp2,
        http10,
        later_minor,
        escapes: target.contains(&b'%'),
    })
}

/// The authority check as it was (byte by byte).
fn reference_valid_authority(a: &[u8]) -> bool {
    let host_end = if a.first() == Some(&b'[') {
        let Some(close) = a.iter().position(|b| *b == b']') else {
            return false;
        };
        let literal = &a[1..close];
        if literal.is_empty()
            || !literal
                .iter()
                .all(|b| b.is_ascii_hexdigit() || matches!(b, b':' | b'.' | b'v' | b'V'))
        {
            return false;
        }
        close + 1
    } else {
        let mut i = 0;
        while i < a.len() {
            let b = a[i];
            if REG_NAME[b as usize] {
                i += 1;
            } else if b == b'%'
                && a.get(i + 1..i + 3)
                    .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
            {
                i += 3;
            } else {
                break;
            }
        }
        if i == 0 {
            return false;
        }
        i
    };
    match &a[host_end..] {
        [] => true,
        [b':', port @ ..] => port.len() <= 5 && port.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

type Outcome = Result<(usize, usize, bool, bool, bool), Violation>;

fn outcome(r: Result<RequestLine, Violation>) -> Outcome {
    r.map(|l| {
        (
            l.method_end,
            l.target_end,
            l.http10,
            l.later_minor,
            l.escapes,
        )
    })
}

fn same_line(line: &[u8]) {
    assert_eq!(
        outcome(request_line(line)),
        outcome(reference_request_line(line)),
        "{:?}",
        String::from_utf8_lossy(line)
    );
}

/// Strings of up to `max` bytes from `alphabet`, from a fixed-seed generator: `n` of them.
fn strings(alphabet: &[u8], max: usize, n: usize) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n).map(move |_| {
        let len = (next() % (max as u64 + 1)) as usize;
        (0..len)
            .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
            .collect()
    })
}

#[test]
fn request_lines_are_judged_as_before() {
    let methods: [&[u8]; 10] = [
        b"GET",
        b"HEAD",
        b"CONNECT",
        b"OPTIONS",
        b"",
        b"G(T",
        b"GE\x01",
        b"g",
        b"POST",
        b"M-SEARCH",
    ];
    let targets: [&[u8]; 24] = [
        b"/",
        b"/file6k.png",
        b"/a?b=c&d",
        b"/a%2Fb",
        b"/a%2",
        b"/a%zz",
        b"/a%41%",
        b"*",
        b"**",
        b"",
        b"http://a.example:8080/x?y",
        b"HTTPS://a.example",
        b"http://a b",
        b"ftp://a",
        b"a.example:443",
        b"a.example",
        b"[::1]:443",
        b"/a#b",
        b"/a\"b",
        b"/a\\b",
        b"/caf\xc3\xa9",
        b"/a\x7fb",
        b"/a\tb",
        b"/{x}|^`",
    ];
    let versions: [&[u8]; 10] = [
        b"HTTP/1.1",
        b"HTTP/1.0",
        b"HTTP/1.9",
        b"HTTP/2.0",
        b"HTTP/1.",
        b"http/1.1",
        b"HTTP/1.1 ",
        b"",
        b"HTTP/11",
        b"HTTP/1.1\r",
    ];
    let mut lines = 0;
    for m in methods {
        for t in targets {
            for v in versions {
                let mut line = m.to_vec();
                line.push(b' ');
                line.extend_from_slice(t);
                line.push(b' ');
                line.extend_from_slice(v);
                same_line(&line);
                // Tabs for spaces, missing spaces, doubled spaces.
                same_line(&[m, t, v].join(&b'\t'));
                same_line(&[m, t].concat());
                same_line(&[m, b" ", t, b"  ", v].concat());
                same_line(&[m, b"  ", t, b" ", v].concat());
                lines += 5;
            }
        }
    }
    assert_eq!(lines, 10 * 24 * 10 * 5);
    // Short strings of the bytes that steer the checks.
    let alphabet = b"GET /%4a*:HP.1[]\"#\x01\x80CONT";
    for line in strings(alphabet, 14, 200_000) {
        same_line(&line);
    }
}

#[test]
fn authorities_are_judged_as_before() {
    for a in [
        &b"127.0.0.1:8080"[..],
        b"a.example",
        b"a.example:",
        b"a.example:123456",
        b"a%41b:80",
        b"a%4",
        b"%41",
        b"[::1]",
        b"[::1]:80",
        b"[]",
        b"",
        b":80",
        b"a b",
        b"a@b",
        b"a/b",
    ] {
        assert_eq!(
            valid_authority(a),
            reference_valid_authority(a),
            "{:?}",
            String::from_utf8_lossy(a)
        );
    }
    let alphabet = b"a1.%4fF:[]-@ /\x80";
    for a in strings(alphabet, 12, 200_000) {
        assert_eq!(
            valid_authority(&a),
            reference_valid_authority(&a),
            "{:?}",
            String::from_utf8_lossy(&a)
        );
    }
}
