//! What the rules know of a request's connection ([`Conn`]), and the rate-limit buckets a
//! rule's `rate_limit` takes from ([`Limiter`], handed down by the proxy).

use http::HeaderMap;

use crate::config::rules::RateKey;

/// The rate-limit buckets a rule's `rate_limit` takes from (the proxy's `throttle::Throttle`,
/// handed down: the table lives above the rules and outlives them).
pub trait Limiter {
    /// Takes a token from the bucket of `key` under `limit`: `None` when allowed, else how
    /// long until the key may try again.
    fn deny(&self, key: &str, limit: Limit) -> Option<std::time::Duration>;
}

/// A rate limit: `requests` per `per`; an empty bucket blocks its key for `block`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub requests: u64,
    pub per: std::time::Duration,
    pub block: std::time::Duration,
}

/// What the rules know of the request's connection: TLS or not, the verified client
/// certificate's subject (empty without one), and for `rate_limit` the client, the site and
/// the buckets (without `limiter` no rate limit is applied: `change_a_hit` only asks).
#[derive(Clone, Copy, Default)]
pub struct Conn<'a> {
    pub https: bool,
    pub client_cert: &'a str,
    /// The client's address (after trusted proxies).
    pub client: Option<std::net::IpAddr>,
    /// The request's `[[site]]` name, if sites are configured.
    pub site: Option<&'a str>,
    /// The request's site's `server_name`s (`valid_referers = ["server_names"]` takes a
    /// `Referer` naming any of them, as nginx does).
    pub site_names: Option<&'a crate::http::server_name::Names<()>>,
    pub limiter: Option<&'a dyn Limiter>,
}

/// The value a rate limit counts by for this request; `None`: not counted.
pub(super) fn rate_key(
    key: &RateKey,
    host: &str,
    headers: &HeaderMap,
    conn: Conn<'_>,
) -> Option<String> {
    match key {
        RateKey::ClientIp => conn.client.map(|ip| ip.to_string()),
        RateKey::Host => Some(host.to_string()),
        RateKey::Site => Some(conn.site.unwrap_or(host).to_string()),
        RateKey::Header(name) => {
            let v = headers.get(name)?.as_bytes();
            (!v.is_empty()).then(|| String::from_utf8_lossy(v).into_owned())
        }
    }
}
