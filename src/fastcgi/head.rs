//! The CGI response head at the start of an application's STDOUT (RFC 3875 §6): header
//! lines ended by LF or CRLF up to an empty line, `Status:` for the status code, `Location:`
//! alone meaning a redirect. Read as nginx and Caddy read it: a `Location` without `Status` is
//! a 302 to that location (RFC 3875's "local redirect", re-run inside the server, is not
//! done: no FastCGI web server in the field does it either).

use crate::http::strict::trim_ows as trim;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

/// A parsed CGI response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgiHead {
    /// From `Status:`; 302 for a `Location` without it; otherwise 200.
    pub status: StatusCode,
    /// Every other field, in order (`Status` removed).
    pub fields: HeaderMap,
}

/// Why an application's response head is refused (the client gets a 502).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("FastCGI response head larger than {0} bytes")]
    TooLarge(usize),
    #[error("FastCGI response head has a line that is not a field: {0:?}")]
    NotAField(String),
    #[error("FastCGI response head has an invalid Status: {0:?}")]
    Status(String),
    #[error("FastCGI response head has more than {0} fields")]
    TooManyFields(usize),
}

/// Reads the head at the start of `stdout`: `Ok(None)` while it is incomplete (and under
/// `max_size`), else the head and how many bytes it took (the body starts there).
pub fn parse(
    stdout: &[u8],
    max_size: usize,
    max_fields: usize,
) -> Result<Option<(CgiHead, usize)>, HeadError> {
    let mut fields = HeaderMap::new();
    let mut status: Option<StatusCode> = None;
    let mut at = 0;
    loop {
        let Some(nl) = memchr::memchr(b'\n', &stdout[at..]) else {
            if stdout.len() > max_size {
                return Err(HeadError::TooLarge(max_size));
            }
            return Ok(None);
        };
        let line_end = at + nl;
        if line_end + 1 > max_size {
            return Err(HeadError::TooLarge(max_size));
        }
        let line = stdout[at..line_end]
            .strip_suffix(b"\r")
            .unwrap_or(&stdout[at..line_end]);
        at = line_end + 1;
        if line.is_empty() {
            break;
        }
        let shown = || {
            String::from_utf8_lossy(line)
                .chars()
                .take(80)
                .collect::<String>()
        };
        let colon = memchr::memchr(b':', line).ok_or_else(|| HeadError::NotAField(shown()))?;
        let name =
            HeaderName::from_bytes(&line[..colon]).map_err(|_| HeadError::NotAField(shown()))?;
        let value = trim(&line[colon + 1..]);
        if name == "status" {
            let code = value.split(|b| *b == b' ').next().unwrap_or_default();
            let parsed = std::str::from_utf8(code)
                .ok()
                .and_then(|c| c.parse::<u16>().ok())
                .filter(|c| (200..=599).contains(c))
                .and_then(|c| StatusCode::from_u16(c).ok());
            status = Some(parsed.ok_or_else(|| HeadError::Status(shown()))?);
            continue;
        }
        let value = HeaderValue::from_bytes(value).map_err(|_| HeadError::NotAField(shown()))?;
        if fields.len() >= max_fields {
            return Err(HeadError::TooManyFields(max_fields));
        }
        fields.append(name, value);
    }
    let status = status.unwrap_or(if fields.contains_key(http::header::LOCATION) {
        StatusCode::FOUND
    } else {
        StatusCode::OK
    });
    Ok(Some((CgiHead { status, fields }, at)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &str) -> Result<Option<(CgiHead, usize)>, HeadError> {
        parse(s.as_bytes(), 8192, 100)
    }

    #[test]
    fn php_heads() {
        let (h, n) =
            head("X-Powered-By: PHP/8.2.7\r\nContent-type: text/html; charset=UTF-8\r\n\r\n<html>")
                .unwrap()
                .unwrap();
        assert_eq!(h.status, StatusCode::OK);
        assert_eq!(h.fields["content-type"], "text/html; charset=UTF-8");
        assert_eq!(n, 67);
        let (h, _) = head("Status: 404 Not Found\nContent-Type: text/plain\n\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.status, StatusCode::NOT_FOUND);
        assert!(!h.fields.contains_key("status"));
        let (h, _) = head("Location: https://example.org/\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.status, StatusCode::FOUND);
        let (h, _) = head("Status: 301 Moved Permanently\r\nLocation: /new\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.status, StatusCode::MOVED_PERMANENTLY);
        let (h, _) = head("Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.fields.get_all("set-cookie").iter().count(), 2);
    }

    #[test]
    fn an_incomplete_head_waits_and_a_huge_one_is_refused() {
        assert_eq!(head("Content-Type: text/html\r\n"), Ok(None));
        assert_eq!(
            parse(&vec![b'a'; 9000], 8192, 100),
            Err(HeadError::TooLarge(8192))
        );
        let many: String = (0..101).map(|i| format!("X-{i}: v\n")).collect::<String>() + "\n";
        assert_eq!(head(&many), Err(HeadError::TooManyFields(100)));
    }

    #[test]
    fn broken_heads_are_refused() {
        assert!(matches!(head("<html>\n\n"), Err(HeadError::NotAField(_))));
        assert!(matches!(
            head("Bad Name: x\n\n"),
            Err(HeadError::NotAField(_))
        ));
        assert!(matches!(head("Status: abc\n\n"), Err(HeadError::Status(_))));
        assert!(matches!(head("Status: 99\n\n"), Err(HeadError::Status(_))));
        assert!(matches!(head("Status: 103\n\n"), Err(HeadError::Status(_))));
        assert!(matches!(
            head("X: a\x01b\n\n"),
            Err(HeadError::NotAField(_))
        ));
    }
}
