//! The request line (`method SP request-target SP HTTP-version`) and its target: origin,
//! absolute, authority (CONNECT) and asterisk (OPTIONS) forms, and the authority's syntax.

use super::Violation;
use super::tokens::{REG_NAME, is_target_byte, is_tchar};

/// The request line at the start of `data` (without its CRLF) when it is complete, at most
/// `max` bytes and valid: what the access log shows of a refused request (else `-`).
pub fn valid_request_line(data: &[u8], max: usize) -> Option<&[u8]> {
    let window = &data[..data.len().min(max.saturating_add(2))];
    let end = memchr::memchr(b'\n', window)?;
    let line = data[..end].strip_suffix(b"\r")?;
    request_line(line).ok()?;
    Some(line)
}

/// A valid request line: where its method and target end, and its version.
#[derive(Clone, Copy, Debug)]
pub(super) struct RequestLine {
    /// The method is `line[..method_end]`, the target `line[method_end + 1..target_end]`.
    pub method_end: usize,
    pub target_end: usize,
    pub http10: bool,
    pub later_minor: bool,
    /// The target has a `%` (percent-escapes to decode or normalise).
    pub escapes: bool,
}

/// `method SP request-target SP HTTP-version`. Says whether it is HTTP/1.0, and whether it
/// is a later HTTP/1 minor version, read as HTTP/1.1: "A recipient that receives a message
/// with a major version number that it implements and a minor version number higher than
/// what it implements SHOULD process the message as if it were in the highest minor version
/// within that major version to which the recipient is conformant" (RFC 9110 §2.5). Another
/// major version is not supported (505).
pub(super) fn request_line(line: &[u8]) -> Result<RequestLine, Violation> {
    // One pass over each part, each byte looked up once (the method's tchars, the target's
    // bytes up to the space after it): the same refusals as finding both spaces first and
    // checking the parts after (`check_target`), ~150 fewer instructions for a typical line
    // (callgrind, bench/RESULTS.md "fourteenth stop: user").
    let sp1 = line
        .iter()
        .position(|b| !is_tchar(*b))
        .unwrap_or(line.len());
    match line.get(sp1) {
        Some(b' ') if sp1 > 0 => {}
        // No method, or a byte that is not a tchar in it.
        Some(b' ') => return Err(Violation::BadMethod),
        Some(_) if line[sp1..].contains(&b' ') => return Err(Violation::BadMethod),
        _ => return Err(Violation::BadRequestLine),
    }
    let method = &line[..sp1];
    let rest = &line[sp1 + 1..];
    let mut escapes = false;
    let sp2 = rest
        .iter()
        .position(|b| {
            escapes |= *b == b'%';
            !is_target_byte(*b)
        })
        .unwrap_or(rest.len());
    match rest.get(sp2) {
        Some(b' ') => {}
        // A byte no target may have, before the space that ends it.
        Some(_) if rest[sp2..].contains(&b' ') => return Err(Violation::BadTarget),
        _ => return Err(Violation::BadRequestLine),
    }
    let target = &rest[..sp2];
    let version = &rest[sp2 + 1..];
    let (is_connect, is_options) = match method.len() {
        7 => (method == b"CONNECT", method == b"OPTIONS"),
        _ => (false, false),
    };
    // An origin-form target without escapes is valid as its bytes are; anything else is
    // checked whole.
    if escapes || is_connect || target.first() != Some(&b'/') {
        check_target(target, is_connect, is_options)?;
    }
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
        escapes,
    })
}

/// An HTTP/2 `:path` (RFC 9113 §8.3.1): origin-form, or `*` for OPTIONS, with only the bytes
/// and escapes an HTTP/1.1 request target may have.
pub fn check_path(path: &[u8], is_options: bool) -> Result<(), Violation> {
    match path.first() {
        Some(b'/') => check_target(path, false, is_options),
        Some(b'*') if path.len() == 1 && is_options => Ok(()),
        _ => Err(Violation::BadTarget),
    }
}

/// Whether a field value has no leading or trailing space or tab (RFC 9113 §8.2.1: malformed
/// in HTTP/2; HTTP/1.1 trims them as optional whitespace).
pub fn trimmed_value(value: &[u8]) -> bool {
    !matches!(value.first(), Some(b' ' | b'\t')) && !matches!(value.last(), Some(b' ' | b'\t'))
}

/// origin-form, absolute-form (http/https, no userinfo), authority-form for CONNECT,
/// asterisk-form for OPTIONS (RFC 9112 §3.2). Percent-escapes must be two hex digits.
pub(super) fn check_target(
    target: &[u8],
    is_connect: bool,
    is_options: bool,
) -> Result<(), Violation> {
    if target.is_empty() {
        return Err(Violation::BadTarget);
    }
    let mut i = 0;
    while i < target.len() {
        let b = target[i];
        if b == b'%' {
            let ok = target
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
            if !ok {
                return Err(Violation::BadTarget);
            }
            i += 3;
        } else if is_target_byte(b) {
            i += 1;
        } else {
            return Err(Violation::BadTarget);
        }
    }
    if is_connect {
        return if valid_authority(target) && target.contains(&b':') {
            Ok(())
        } else {
            Err(Violation::BadTarget)
        };
    }
    match target[0] {
        b'/' => Ok(()),
        b'*' if target.len() == 1 && is_options => Ok(()),
        _ => {
            let lower_starts =
                |p: &[u8]| target.len() >= p.len() && target[..p.len()].eq_ignore_ascii_case(p);
            let rest = if lower_starts(b"http://") {
                &target[7..]
            } else if lower_starts(b"https://") {
                &target[8..]
            } else {
                return Err(Violation::BadTarget);
            };
            let end = rest
                .iter()
                .position(|b| matches!(b, b'/' | b'?'))
                .unwrap_or(rest.len());
            if valid_authority(&rest[..end]) {
                Ok(())
            } else {
                Err(Violation::BadTarget)
            }
        }
    }
}

/// `uri-host [ ":" port ]` (RFC 3986 §3.2.2, no userinfo): a bracketed IP literal or a
/// reg-name of unreserved / pct-encoded / sub-delims characters; port up to 5 digits.
pub fn valid_authority(a: &[u8]) -> bool {
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
        // One pass over the reg-name (runs of its characters, escapes between them); it ends
        // at the port's colon or the end.
        let mut i = 0;
        loop {
            i += a[i..]
                .iter()
                .position(|b| !REG_NAME[*b as usize])
                .unwrap_or(a.len() - i);
            if a.get(i) == Some(&b'%')
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
