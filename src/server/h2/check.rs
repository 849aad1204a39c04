//! What the strict HTTP/1.1 gate checks, for HTTP/2 requests: the rules of RFC 9113 §8 the h2
//! library leaves to the application, and Shellac's own limits, applied to a decoded request
//! before the pipeline sees it. Then the request is put in the form the pipeline reads for
//! HTTP/1.1 (origin-form target, `Host`, one `Cookie` field), so everything after behaves as
//! over HTTP/1.1.
//!
//! Already refused by h2 (a stream or connection error before Shellac sees the request):
//! missing, repeated, unknown or misplaced pseudo-header fields, `:status` in a request,
//! connection-specific fields (`Connection`, `Keep-Alive`, `Proxy-Connection`,
//! `Transfer-Encoding`, `Upgrade`), `TE` other than `trailers`, field names that are not
//! lower-case tokens, control bytes in values, a `Content-Length` that is not a number or
//! disagrees with the `DATA` received, header lists over `SETTINGS_MAX_HEADER_LIST_SIZE`.

use http::header::{self, HeaderValue};
use http::{Method, Request};

use crate::http::strict::{self, Limits, Violation};

/// A refused request: why, whether it is malformed in RFC 9113's sense (the stream is then
/// reset with `PROTOCOL_ERROR` after the answer), and its request line for the access log.
#[derive(Debug)]
pub(super) struct Refusal {
    pub violation: Violation,
    pub malformed: bool,
    pub line: String,
}

/// Checks `req` and rewrites it as the pipeline reads an HTTP/1.1 request.
pub(super) fn request<B>(req: Request<B>, limits: &Limits) -> Result<Request<B>, Refusal> {
    let (mut parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("", |p| p.as_str())
        .to_owned();
    let refuse = |violation: Violation, malformed: bool| Refusal {
        violation,
        malformed,
        line: format!(
            "{} {} HTTP/2.0",
            parts.method,
            if path.is_empty() { "-" } else { &path }
        ),
    };
    if parts.method == Method::CONNECT {
        return Err(refuse(Violation::ConnectNotSupported, false));
    }
    if path.len() > limits.max_request_line {
        return Err(refuse(Violation::UriTooLong, false));
    }
    if let Err(v) = strict::check_path(path.as_bytes(), parts.method == Method::OPTIONS) {
        return Err(refuse(v, true));
    }
    if parts.headers.len() > limits.max_headers {
        return Err(refuse(Violation::TooManyHeaders, false));
    }
    // `max_field_size`: a field as its HTTP/1.1 line would be (name, colon, value).
    if parts
        .headers
        .iter()
        .any(|(n, v)| n.as_str().len() + 1 + v.len() > limits.max_field_size)
    {
        return Err(refuse(Violation::HeaderTooLarge, false));
    }
    if parts
        .headers
        .values()
        .any(|v| !strict::trimmed_value(v.as_bytes()))
    {
        return Err(refuse(Violation::BadFieldValue, true));
    }
    // :authority and Host name one authority (RFC 9113 §8.3.1), without userinfo.
    let authority = parts.uri.authority().map(|a| a.as_str().to_owned());
    let mut hosts = parts.headers.get_all(header::HOST).iter();
    let host = hosts.next().cloned();
    if hosts.next().is_some() {
        return Err(refuse(Violation::DuplicateHost, true));
    }
    match (&authority, &host) {
        (None, None) => return Err(refuse(Violation::MissingHost, true)),
        (Some(a), _) if !strict::valid_authority(a.as_bytes()) => {
            return Err(refuse(Violation::BadHost, true));
        }
        (_, Some(h)) if !strict::valid_authority(h.as_bytes()) => {
            return Err(refuse(Violation::BadHost, true));
        }
        (Some(a), Some(h)) if !a.as_bytes().eq_ignore_ascii_case(h.as_bytes()) => {
            return Err(refuse(Violation::BadHost, true));
        }
        _ => {}
    }
    if let Some(length) = parts.headers.get(header::CONTENT_LENGTH) {
        // h2 has checked it is one number; Shellac's limit is checked here.
        let declared = length.to_str().ok().and_then(|s| s.parse::<u64>().ok());
        if declared.is_none_or(|n| n > limits.max_body_size) {
            return Err(refuse(Violation::BodyTooLarge, false));
        }
    }
    // The form the pipeline reads: origin-form target, the authority in Host.
    if host.is_none()
        && let Some(a) = &authority
        && let Ok(v) = HeaderValue::from_str(a)
    {
        parts.headers.insert(header::HOST, v);
    }
    if authority.is_some() {
        match path.parse() {
            Ok(uri) => parts.uri = uri,
            Err(_) => return Err(refuse(Violation::BadTarget, true)),
        }
    }
    join_cookies(&mut parts.headers);
    Ok(Request::from_parts(parts, body))
}

/// HTTP/2 clients may split `Cookie` into several fields; an HTTP/1.1 backend must get one,
/// joined with `"; "` (RFC 9113 §8.2.3).
fn join_cookies(headers: &mut http::HeaderMap) {
    let mut values = headers.get_all(header::COOKIE).iter();
    let Some(first) = values.next() else {
        return;
    };
    if values.next().is_none() {
        return;
    }
    let mut joined = first.as_bytes().to_vec();
    for v in headers.get_all(header::COOKIE).iter().skip(1) {
        joined.extend_from_slice(b"; ");
        joined.extend_from_slice(v.as_bytes());
    }
    if let Ok(v) = HeaderValue::from_bytes(&joined) {
        headers.insert(header::COOKIE, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::default()
    }

    fn req(uri: &str, fields: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder()
            .method("GET")
            .uri(uri)
            .version(http::Version::HTTP_2);
        for (n, v) in fields {
            b = b.header(*n, *v);
        }
        b.body(()).expect("test request")
    }

    fn refused(r: Request<()>) -> Violation {
        request(r, &limits()).expect_err("refused").violation
    }

    /// `server.max_field_size` holds over HTTP/2 too: a field is measured as its HTTP/1.1 line
    /// (name, colon, value).
    #[test]
    fn max_field_size_bounds_each_field() {
        let small = Limits {
            max_field_size: 10,
            ..Limits::default()
        };
        let at = req("https://a.test/", &[("x", "12345678")]);
        assert!(request(at, &small).is_ok());
        let over = req("https://a.test/", &[("x", "123456789")]);
        assert_eq!(
            request(over, &small).expect_err("refused").violation,
            Violation::HeaderTooLarge
        );
    }

    #[test]
    fn authority_becomes_host_and_the_target_origin_form() {
        let r = request(req("http://a.test/x?y", &[]), &limits()).expect("valid");
        assert_eq!(r.uri().to_string(), "/x?y");
        assert_eq!(r.headers()[header::HOST], "a.test");
        assert_eq!(r.version(), http::Version::HTTP_2);
    }

    #[test]
    fn host_must_agree_with_authority() {
        let ok = request(req("https://a.test/", &[("host", "A.test")]), &limits());
        assert!(ok.is_ok());
        assert_eq!(
            refused(req("https://a.test/", &[("host", "b.test")])),
            Violation::BadHost
        );
        assert_eq!(
            refused(req("/", &[("host", "a.test"), ("host", "a.test")])),
            Violation::DuplicateHost
        );
        assert_eq!(refused(req("/", &[])), Violation::MissingHost);
        assert_eq!(
            refused(req("http://u@a.test/", &[])),
            Violation::BadHost,
            "userinfo is not allowed in :authority"
        );
        // Host alone (no :authority) is enough.
        let r = request(req("/p", &[("host", "a.test")]), &limits()).expect("valid");
        assert_eq!(r.headers()[header::HOST], "a.test");
    }

    #[test]
    fn values_with_surrounding_whitespace_are_malformed() {
        let r = request(req("http://a.test/", &[("x-a", " v")]), &limits());
        let e = r.expect_err("refused");
        assert_eq!(e.violation, Violation::BadFieldValue);
        assert!(e.malformed);
        assert_eq!(e.line, "GET / HTTP/2.0");
    }

    #[test]
    fn paths_follow_the_http1_target_rules() {
        assert_eq!(
            refused(req("http://a.test/a%zz", &[])),
            Violation::BadTarget
        );
        assert_eq!(
            refused(req("http://a.test/a\"b", &[])),
            Violation::BadTarget
        );
        let long = format!("http://a.test/{}", "a".repeat(9000));
        assert_eq!(refused(req(&long, &[])), Violation::UriTooLong);
    }

    #[test]
    fn limits_apply_as_over_http1() {
        let many: Vec<(String, String)> =
            (0..101).map(|i| (format!("x-{i}"), "v".into())).collect();
        let fields: Vec<(&str, &str)> =
            many.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(
            refused(req("http://a.test/", &fields)),
            Violation::TooManyHeaders
        );
        let big = (1u64 << 30) + 1;
        assert_eq!(
            refused(req(
                "http://a.test/",
                &[("content-length", &big.to_string())]
            )),
            Violation::BodyTooLarge
        );
        let mut connect = req("http://a.test/", &[]);
        *connect.method_mut() = Method::CONNECT;
        assert_eq!(refused(connect), Violation::ConnectNotSupported);
    }

    #[test]
    fn split_cookies_are_joined() {
        let r = request(
            req("http://a.test/", &[("cookie", "a=1"), ("cookie", "b=2")]),
            &limits(),
        )
        .expect("valid");
        let all: Vec<_> = r.headers().get_all(header::COOKIE).iter().collect();
        assert_eq!(all, ["a=1; b=2"]);
    }
}
