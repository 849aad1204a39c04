//! The framing and status rules every backend answer is held to, whatever its kind, before
//! the proxy sees it (RFC 9112 §6: what hyper does not enforce on responses).

use http::Response;

/// The framing and status rules hyper does not enforce on responses (RFC 9112 §6): a status
/// from 200 to 599, or 101 when the request asked to `upgrade` (hyper consumes other 1xx);
/// `Transfer-Encoding` exactly `chunked` (any other coding would reach clients undecoded,
/// since Shellac rebuilds framing) and never together with `Content-Length`; one valid
/// `Content-Length` (identical repeats allowed).
pub fn check_response<B>(resp: &Response<B>, upgrade: bool) -> Result<(), &'static str> {
    let status = resp.status().as_u16();
    if !((200..600).contains(&status) || (status == 101 && upgrade)) {
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
