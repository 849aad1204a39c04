//! The framing and status rules every backend answer is held to, whatever its kind, before
//! the proxy sees it (RFC 9112 §6: what hyper does not enforce on responses).

use http::Response;

/// The statuses a backend response may have besides 200-599.
#[derive(Clone, Copy, Debug, Default)]
pub struct Statuses {
    /// 101, when the request asked to `upgrade`.
    pub upgrade: bool,
    /// Any three digits from 200 to 999: a request made under a VCL program, as Varnish
    /// takes them (1xx other than 101 never reach here: hyper consumes them).
    pub any_three_digit: bool,
}

/// The framing and status rules hyper does not enforce on responses (RFC 9112 §6): a status
/// from 200 to 599 (to 999 with `any_three_digit`), or 101 when the request asked to
/// `upgrade` (hyper consumes other 1xx);
/// `Transfer-Encoding` exactly `chunked` (any other coding would reach clients undecoded,
/// since Shellac rebuilds framing) and never together with `Content-Length`; one valid
/// `Content-Length` (identical repeats allowed).
pub fn check_response<B>(resp: &Response<B>, allowed: Statuses) -> Result<(), &'static str> {
    let status = resp.status().as_u16();
    let top = if allowed.any_three_digit { 1000 } else { 600 };
    if !((200..top).contains(&status) || (status == 101 && allowed.upgrade)) {
        return Err("status");
    }
    let headers = resp.headers();
    let mut te = headers.get_all(http::header::TRANSFER_ENCODING).iter();
    let has_te = match (te.next(), te.next()) {
        (None, _) => false,
        (Some(v), None) if v.as_bytes().trim_ascii().eq_ignore_ascii_case(b"chunked") => true,
        _ => return Err("transfer-encoding"),
    };
    let mut length: Option<&[u8]> = None;
    for v in headers.get_all(http::header::CONTENT_LENGTH) {
        for item in v.as_bytes().split(|b| *b == b',').map(<[u8]>::trim_ascii) {
            if item.is_empty() || item.len() > 19 || !item.iter().all(u8::is_ascii_digit) {
                return Err("content-length");
            }
            match length {
                Some(prev) if prev != item => return Err("content-length"),
                _ => length = Some(item),
            }
        }
    }
    if has_te && length.is_some() {
        return Err("content-length-and-transfer-encoding");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_status(status: u16) -> Response<()> {
        let mut r = Response::new(());
        *r.status_mut() = http::StatusCode::from_u16(status).unwrap();
        r
    }

    /// 200-599 always; 600-999 only for a request made under VCL (Varnish takes any three
    /// digits: trunk v00050's backend answers 998); 101 only to an upgrade.
    #[test]
    fn statuses_a_backend_may_answer() {
        let plain = Statuses::default();
        let vcl = Statuses {
            any_three_digit: true,
            ..plain
        };
        let upgrade = Statuses {
            upgrade: true,
            ..plain
        };
        for (status, plain_ok, vcl_ok) in [
            (200, true, true),
            (599, true, true),
            (600, false, true),
            (998, false, true),
            (999, false, true),
            (101, false, false),
            (100, false, false),
            (199, false, false),
        ] {
            assert_eq!(
                check_response(&with_status(status), plain).is_ok(),
                plain_ok,
                "{status}"
            );
            assert_eq!(
                check_response(&with_status(status), vcl).is_ok(),
                vcl_ok,
                "{status}"
            );
        }
        assert!(check_response(&with_status(101), upgrade).is_ok());
        assert_eq!(check_response(&with_status(600), upgrade), Err("status"));
    }
}
