//! HTTP building blocks below the proxy: the strict HTTP/1 request scanner (`strict`),
//! target normalisation (`target`), `Accept-Encoding` negotiation (`accept_encoding`),
//! conditional and Range requests against validators (`conditional`),
//! Cache-Control, structured fields (RFC 8941) and date parsing, how `Vary` compares field
//! values (`selecting`), header hygiene (hop-by-hop, forwarding fields), cheap field lookups
//! (`fields`), the field edits a changed body makes (`transform`), and which statuses are
//! server errors ([`is_server_error`]).

pub mod accept_encoding;
pub mod base64;
pub mod cache_control;
pub mod conditional;
pub mod date;
pub mod fields;
pub mod headers;
pub mod selecting;
pub mod server_name;
pub mod strict;
pub mod structured;
pub mod surrogate_control;
pub mod target;
pub mod transform;

/// Whether a response of `status` is processed as a server error: a 5xx, or a status past 599
/// (RFC 9110 §15: 600-999 are invalid, and "a client that receives a response with an invalid
/// status code SHOULD process the response as if it had a 5xx (Server Error) status code").
/// A backend's 600-999 reaches the proxy only under VCL, which takes any three digits as
/// Varnish does (`backend::framing`); stale-if-error answers it as it answers a 5xx.
pub fn is_server_error(status: ::http::StatusCode) -> bool {
    status.as_u16() >= 500
}

#[cfg(test)]
mod tests {
    use ::http::StatusCode;

    /// 500-599 and the invalid 600-999 are server errors; nothing below 500 is.
    #[test]
    fn statuses_past_599_are_server_errors() {
        for (code, error) in [(200, false), (404, false), (499, false), (500, true)] {
            assert_eq!(
                super::is_server_error(StatusCode::from_u16(code).unwrap()),
                error
            );
        }
        for code in [503, 599, 600, 700, 998, 999] {
            assert!(
                super::is_server_error(StatusCode::from_u16(code).unwrap()),
                "{code}"
            );
        }
    }
}
