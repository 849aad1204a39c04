//! Header hygiene at the proxy boundary: hop-by-hop removal, the forwarding fields Shellac owns
//! (X-Forwarded-*, Forwarded, Via), and request fields that could rewrite a request behind the
//! cache's back.

use std::net::IpAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// The value Shellac adds to `Via` (RFC 9110 §7.6.3).
pub const VIA: &str = "1.1 shellac";

/// Hop-by-hop fields (RFC 9110 §7.6.1) plus the legacy ones proxies remove in practice.
/// `HeaderName` constants, not `&str`: a `&str` name is parsed and hashed again on every map
/// operation, and this list is applied to every backend request and response.
/// Hop-by-hop fields (RFC 9110 §7.6.1), and the proxy authentication pair, which concern the
/// next hop only (RFC 9110 §11.7: "applies only to the next outbound client" / "inbound
/// proxy"; RFC 2616 §13.5.1 listed them as hop-by-hop): Shellac demands no proxy
/// credentials, so a client's are not the backend's, nor a backend's challenge the client's.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
    header::PROXY_AUTHENTICATE,
];

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// Fields that ask an origin framework to route or treat a request as something other than
/// what the cache keyed it on (IIS/Symfony/Zend URL rewrites, method overrides). Removed from
/// every request, whoever sends it: a cache that keys on the URL must not let the origin serve
/// another URL under it.
pub const REWRITE_FIELDS: [&str; 6] = [
    "x-original-url",
    "x-rewrite-url",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    "x-original-method",
];

/// Fields that say who the client is and how it connected. Shellac sets its own; inbound
/// values are kept only from `server.trusted_proxies`.
pub const FORWARDING_FIELDS: [&str; 15] = [
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-forwarded-port",
    "x-forwarded-prefix",
    "x-forwarded-server",
    "x-forwarded-scheme",
    "x-forwarded-ssl",
    "x-real-ip",
    "x-client-ip",
    "true-client-ip",
    "x-host",
    "x-original-host",
    "forwarded",
    "via",
];

/// Removes the rewrite fields, and the forwarding fields unless the client is a trusted proxy.
/// One pass over the names first: on most requests there is nothing to remove.
pub fn sanitize_request(headers: &mut HeaderMap, trusted: bool) {
    sanitize(headers, trusted, false);
}

/// [`sanitize_request`] under a VCL program: the client's `X-Forwarded-For` stays, whoever
/// sends it, because the program decides what becomes of it — as in Varnish, whose
/// built-in VCL appends the client's address to it (docs/vcl.md). The other forwarding
/// fields follow `server.trusted_proxies` as without VCL.
pub fn sanitize_request_for_vcl(headers: &mut HeaderMap, trusted: bool) {
    sanitize(headers, trusted, true);
}

fn sanitize(headers: &mut HeaderMap, trusted: bool, keep_xff: bool) {
    if !headers
        .keys()
        .any(|n| removed_from_request(n.as_str(), trusted))
    {
        return;
    }
    for name in REWRITE_FIELDS {
        headers.remove(name);
    }
    if !trusted {
        for name in FORWARDING_FIELDS {
            if !(keep_xff && name == "x-forwarded-for") {
                headers.remove(name);
            }
        }
    }
}

/// Removes every field whose name contains `_` (`server.underscores_in_headers` off, as
/// nginx): stacks that map `_` to `-` (CGI-style environments: Rack/Puma before 6.4.3,
/// CVE-2024-45614; Python's wsgiref) would read `X_Forwarded_Host` as `X-Forwarded-Host`, past
/// every strip list. Returns how many field lines were removed; one pass over the names when
/// there is none.
pub fn drop_underscored(headers: &mut HeaderMap) -> usize {
    if !headers.keys().any(|n| n.as_str().contains('_')) {
        return 0;
    }
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|n| n.as_str().contains('_'))
        .cloned()
        .collect();
    names
        .iter()
        .map(|n| match headers.entry(n) {
            http::header::Entry::Occupied(e) => e.remove_entry_mult().1.count(),
            http::header::Entry::Vacant(_) => 0,
        })
        .sum()
}

/// Whether [`sanitize_request`] removes a field named `name` (lower case) from a request of a
/// client that is (`trusted`) or is not a trusted proxy.
pub fn removed_from_request(name: &str, trusted: bool) -> bool {
    matches!(name.as_bytes().first(), Some(b'x' | b'f' | b'v' | b't'))
        && (REWRITE_FIELDS.contains(&name) || (!trusted && FORWARDING_FIELDS.contains(&name)))
}

/// Adds what Shellac says about the client to a backend request: `X-Forwarded-For` (appended
/// to a trusted proxy's list), `X-Forwarded-Host` and `X-Forwarded-Proto` (unless a trusted proxy
/// set them), `Forwarded` (RFC 7239, appended) and `Via`. Untrusted inbound values were removed
/// by [`sanitize_request`]. `https`: the request arrived over TLS.
pub fn add_forwarding(headers: &mut HeaderMap, client: IpAddr, https: bool) {
    add_forwarding_fields(headers, client, https, true);
}

/// [`add_forwarding`], with `X-Forwarded-For` only when `xff` (a VCL program adds that one
/// itself, as Varnish does: 4.x before vcl_recv, 2.x's default.vcl in it).
pub fn add_forwarding_fields(headers: &mut HeaderMap, client: IpAddr, https: bool, xff: bool) {
    let proto = if https { "https" } else { "http" };
    let text = ip_text(client);
    if xff {
        append_forwarded_for_text(headers, &text);
    }
    let host = headers.get(header::HOST).cloned();
    if !headers.contains_key(X_FORWARDED_HOST)
        && let Some(h) = &host
    {
        headers.insert(X_FORWARDED_HOST, h.clone());
    }
    if !headers.contains_key(X_FORWARDED_PROTO) {
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static(proto));
    }
    // RFC 7239: `for=` (IPv6 quoted and bracketed), `host=` quoted, `proto=`.
    let host = host
        .as_ref()
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty());
    let mut forwarded = String::with_capacity(text.len() + host.map_or(0, str::len) + 32);
    if client.to_canonical().is_ipv6() {
        forwarded.push_str("for=\"[");
        forwarded.push_str(&text);
        forwarded.push_str("]\"");
    } else {
        forwarded.push_str("for=");
        forwarded.push_str(&text);
    }
    if let Some(h) = host {
        forwarded.push_str(";host=\"");
        forwarded.push_str(h);
        forwarded.push('"');
    }
    forwarded.push_str(";proto=");
    forwarded.push_str(proto);
    if let Ok(v) = HeaderValue::from_str(&forwarded) {
        headers.append(header::FORWARDED, v);
    }
    append_via(headers);
}

/// The `Upgrade` value of a request that asks to switch to one of `allowed` (RFC 9110 §7.8):
/// an HTTP/1.1 GET whose `Connection` names `upgrade` and whose `Upgrade` is exactly one
/// protocol from the list (`websocket`, case-insensitive; a version suffix is allowed).
pub fn upgrade_request(
    method: &http::Method,
    version: http::Version,
    headers: &HeaderMap,
    allowed: &[String],
) -> Option<HeaderValue> {
    if allowed.is_empty() || method != http::Method::GET || version != http::Version::HTTP_11 {
        return None;
    }
    // Most requests have no Upgrade: a pass over their few names, no hashing.
    if !super::fields::has_field(headers, &header::UPGRADE) {
        return None;
    }
    let value = headers.get(header::UPGRADE)?;
    let asks = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    let protocol = value.to_str().ok()?.trim();
    let name = protocol.split('/').next().unwrap_or("");
    (asks
        && headers.get_all(header::UPGRADE).iter().count() == 1
        && allowed.iter().any(|a| a.eq_ignore_ascii_case(name)))
    .then(|| value.clone())
}

/// Removes hop-by-hop fields, including every field named in `Connection`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Usually there is none: one pass over the (few) names instead of eight removals.
    if !headers.keys().any(|k| HOP_BY_HOP.contains(k)) {
        return;
    }
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// The fields `Connection` names that `headers` holds: what a proxy removes before
/// forwarding. Under VCL these are taken when the request arrives, so a field vcl_recv sets
/// is forwarded even if the client's `Connection` named it (as in Varnish).
pub fn connection_named(headers: &HeaderMap) -> Vec<HeaderName> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .filter(|name| headers.contains_key(name) && !HOP_BY_HOP.contains(name))
        .collect()
}

/// Whether a `Connection` field of `headers` holds the `close` option (any case, any line).
pub fn connection_close(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("close"))
}

/// Removes the hop-by-hop fields of fixed names (not those `Connection` names).
pub fn strip_fixed_hop_by_hop(headers: &mut HeaderMap) {
    if headers.keys().any(|k| HOP_BY_HOP.contains(k)) {
        for name in &HOP_BY_HOP {
            headers.remove(name);
        }
    }
}

/// The client address as text (IPv4-mapped IPv6 shown as IPv4). IPv4 without `fmt`: every
/// backend request carries it twice (`X-Forwarded-For`, `Forwarded`).
pub fn ip_text(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let mut s = String::with_capacity(15);
            let mut digits = itoa::Buffer::new();
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    s.push('.');
                }
                s.push_str(digits.format(octet));
            }
            s
        }
        ip => ip.to_string(),
    }
}

/// Appends the client address to `X-Forwarded-For` (one combined field line).
pub fn append_forwarded_for(headers: &mut HeaderMap, client: IpAddr) {
    append_forwarded_for_text(headers, &ip_text(client));
}

fn append_forwarded_for_text(headers: &mut HeaderMap, client: &str) {
    let prior: Vec<&str> = headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let value = if prior.is_empty() {
        client.to_owned()
    } else {
        format!("{}, {client}", prior.join(", "))
    };
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert(X_FORWARDED_FOR, v);
    }
}

/// Adds Shellac to `Via`, keeping what earlier proxies put there.
pub fn append_via(headers: &mut HeaderMap) {
    headers.append(header::VIA, HeaderValue::from_static(VIA));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_named_and_standard_hop_by_hop() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("keep-alive, X-Secret"),
        );
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("te", HeaderValue::from_static("trailers"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-kept"));
    }

    #[test]
    fn untrusted_forwarding_fields_are_replaced() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_static("6.6.6.6"));
        h.insert("x-forwarded-host", HeaderValue::from_static("evil.example"));
        h.insert("forwarded", HeaderValue::from_static("for=6.6.6.6"));
        h.insert("via", HeaderValue::from_static("1.1 liar"));
        h.insert("x-original-url", HeaderValue::from_static("/admin"));
        h.insert("host", HeaderValue::from_static("www.example"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        let mut trusted = h.clone();
        sanitize_request(&mut h, false);
        add_forwarding(&mut h, "192.0.2.1".parse().unwrap(), false);
        assert_eq!(h["x-forwarded-for"], "192.0.2.1");
        assert_eq!(h["x-forwarded-host"], "www.example");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(
            h["forwarded"],
            "for=192.0.2.1;host=\"www.example\";proto=http"
        );
        assert_eq!(h["via"], VIA);
        assert!(!h.contains_key("x-original-url"));
        assert_eq!(h["x-kept"], "1");
        sanitize_request(&mut trusted, true);
        add_forwarding(&mut trusted, "::1".parse().unwrap(), false);
        assert_eq!(trusted["x-forwarded-for"], "6.6.6.6, ::1");
        assert_eq!(trusted["x-forwarded-host"], "evil.example");
        let fwd: Vec<_> = trusted.get_all("forwarded").iter().collect();
        assert_eq!(fwd.len(), 2);
        assert_eq!(fwd[1], "for=\"[::1]\";host=\"www.example\";proto=http");
        assert_eq!(trusted.get_all("via").iter().count(), 2);
        assert!(!trusted.contains_key("x-original-url"));
    }

    #[test]
    fn under_vcl_the_clients_forwarded_for_stays() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_static("1.2.3.4"));
        h.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        h.insert("x-original-url", HeaderValue::from_static("/admin"));
        sanitize_request_for_vcl(&mut h, false);
        assert_eq!(h.get("x-forwarded-for").unwrap(), "1.2.3.4");
        assert!(h.get("x-forwarded-proto").is_none());
        assert!(h.get("x-original-url").is_none());
    }

    /// Issue 32: `_` spellings of the fields Shellac owns or strips never get past it.
    #[test]
    fn underscored_field_names_are_dropped() {
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_static("a"));
        h.insert("x_forwarded_host", HeaderValue::from_static("evil"));
        h.append("x_original_url", HeaderValue::from_static("/admin"));
        h.append("x_original_url", HeaderValue::from_static("/admin2"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        assert_eq!(drop_underscored(&mut h), 3);
        assert_eq!(h.len(), 2);
        assert!(h.contains_key("x-kept"));
        assert_eq!(drop_underscored(&mut h), 0);
    }

    /// Issue 32: `X-Original-Host` is a forwarding field (kept only from trusted proxies).
    #[test]
    fn x_original_host_is_stripped() {
        let mut h = HeaderMap::new();
        h.insert("x-original-host", HeaderValue::from_static("evil.example"));
        sanitize_request(&mut h, false);
        assert!(h.is_empty());
        h.insert("x-original-host", HeaderValue::from_static("lb.example"));
        sanitize_request(&mut h, true);
        assert_eq!(h["x-original-host"], "lb.example");
    }

    #[test]
    fn forwarded_for_appends() {
        let mut h = HeaderMap::new();
        append_forwarded_for(&mut h, "10.0.0.1".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "10.0.0.1");
        h.append("x-forwarded-for", HeaderValue::from_static("10.0.0.9"));
        append_forwarded_for(&mut h, "::ffff:192.0.2.7".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 10.0.0.9, 192.0.2.7");
    }
}
