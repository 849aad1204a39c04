//! Fast hits: a fresh hit from memory answered from the request head's bytes, without hyper.
//!
//! Most of a small hit's cost was not the cache but the HTTP machinery around it: hyper
//! parsing the head into a request (a `HeaderMap` built and dropped), the request state
//! machine's bookkeeping, a clone of the delivery map, and hyper encoding eleven fields again
//! for every response (bench/RESULTS.md, "fast hits"). The gate (server/h1/) offers every
//! complete, bodiless request head it validated, while hyper has nothing in flight, to
//! [`Proxy::fast_hit`]; when this returns an answer the gate writes it itself — the object's
//! pre-serialised head ([`Prepared::wire`]), a `Date` line and the body — and hyper never sees
//! the request. Anything this path does not handle exactly as the state machine would is
//! declined (`None`) and takes the full path, so both give the same answer: a plain `GET` or
//! `HEAD` over HTTP/1.1 in origin form, one valid `Host`, none of the fields that change a
//! lookup or a delivery (conditionals, `Range`, `Authorization`, `Cache-Control` or `Pragma`
//! when `cache.request_cache_control` makes them count and `no-store` always, `Upgrade`,
//! `Connection`, `Expect`, body framing, the rewrite and untrusted forwarding fields and the
//! `_` names the full path removes), no operator rule that would answer or edit it
//! (`Rules::change_a_hit`), a fresh object in memory (of the request's variant when the URL has
//! `Vary` variants). Under a VCL program, only when it provably changes nothing about the hit
//! (`proxy/vcl/quick.rs`).
//!
//! [`Prepared::wire`]: crate::cache::Prepared::wire

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::body::ResponseBody;
use super::observe::{self, FastHit};
use super::{Proxy, deliver};
use crate::cache::ban::BanCheck;
use crate::cache::vary::variant_hash;
use crate::cache::{Body, CacheKey};
use crate::http::cache_control::CacheControl;

/// Header fields a fast hit reads at most; a request with more takes the full path.
const MAX_FIELDS: usize = 32;

/// A fast hit's answer, for the gate to write.
pub struct FastAnswer {
    /// Status line and fields (`Prepared::wire`).
    pub head: Bytes,
    /// The head has no `Date` and no blank line yet: the writer adds both.
    pub add_date: bool,
    /// The object's body (empty for `HEAD`), counting bytes and completing the transaction
    /// record like any response body.
    pub body: ResponseBody,
}

impl Proxy {
    /// The answer to a request from its validated, bodiless `head` when it is a plain fresh
    /// hit from memory (see the module docs); `None` leaves the request to the full path,
    /// which then does every step itself. Counts what the full path counts for a hit, plus
    /// `cache_hit_fast`.
    /// `tls`: the client's TLS connection, for the transaction record.
    pub fn fast_hit(
        &self,
        head: &[u8],
        client: SocketAddr,
        tls: Option<&crate::tls::server::ConnTls>,
    ) -> Option<FastAnswer> {
        if !self.config.server.fast_hits {
            return None;
        }
        let started = Instant::now();
        let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
        let mut req = httparse::Request::new(&mut fields);
        if !matches!(req.parse(head), Ok(httparse::Status::Complete(_))) || req.version != Some(1) {
            return None;
        }
        let (method, head_only) = match req.method? {
            "GET" => (Method::GET, false),
            "HEAD" => (Method::HEAD, true),
            _ => return None,
        };
        let target = req.path?;
        if !target.starts_with('/')
            || target.contains('#')
            || crate::http::target::normalise(target).is_some()
        {
            return None;
        }
        let mut host: Option<&[u8]> = None;
        let mut user_agent = None;
        let mut trusted = None;
        for field in req.headers.iter() {
            let name = field.name.as_bytes();
            if name.eq_ignore_ascii_case(b"host") {
                if host.is_some() {
                    return None;
                }
                host = Some(field.value);
            } else if name.eq_ignore_ascii_case(b"user-agent") {
                user_agent = Some(field.value);
            } else if name.eq_ignore_ascii_case(b"cache-control")
                || name.eq_ignore_ascii_case(b"pragma")
            {
                // The request's directives count only with `cache.request_cache_control`
                // (then the full path decides); without it only `no-store` does (a pass).
                if self.config.cache.request_cache_control
                    || (name.len() == 13 && CacheControl::from_lines([field.value]).no_store)
                {
                    return None;
                }
            } else if changes_the_answer(name) {
                return None;
            } else if !self.config.server.underscores_in_headers && name.contains(&b'_') {
                // Dropped and counted by the full path (`Proxy::handle`).
                return None;
            } else if matches!(
                name.first().map(|b| b | 0x20),
                Some(b'x' | b'f' | b'v' | b't')
            ) && name.len() <= 32
            {
                // Every listed name is shorter: lower-cased on the stack, not allocated.
                let mut lower = [0u8; 32];
                let lower = &mut lower[..name.len()];
                lower.copy_from_slice(name);
                lower.make_ascii_lowercase();
                let trusted =
                    *trusted.get_or_insert_with(|| self.config.server.trusts(client.ip()));
                if std::str::from_utf8(lower)
                    .is_ok_and(|n| crate::http::headers::removed_from_request(n, trusted))
                {
                    return None;
                }
            }
        }
        let host = std::str::from_utf8(host?).ok()?;
        // As the full path's authority check: anything else is answered there (400).
        if host.is_empty() || host.bytes().any(|b| matches!(b, b'/' | b' ' | b'@')) {
            return None;
        }
        // A VCL program: only when vcl_recv, run on this head, looks it up unchanged and the
        // program's vcl_hash, vcl_hit and vcl_deliver are the built-in ones.
        if let Some(rt) = &self.vcl
            && !super::vcl::recv_looks_up(
                rt,
                method.as_str(),
                target,
                req.headers,
                client,
                self.config.cache.normalize_accept_encoding,
            )
        {
            return None;
        }
        let primary = CacheKey::new(host, target);
        let cache = &self.cache;
        let varies = cache.vary_names(&primary);
        // Whether a rule stripping the request's cookies would change this hit: only if the
        // URL varies on them or the access log prints them.
        let cookies_matter = varies
            .as_ref()
            .is_some_and(|index| index.names.contains(&http::header::COOKIE))
            || self
                .log_format
                .as_ref()
                .is_some_and(|f| f.request_headers.contains(&http::header::COOKIE));
        if self.rules.act_on_requests(cookies_matter) {
            // Only a request no rule acts on is a plain hit. The rules' header and cookie
            // matchers read a map: built here only when such rules are configured.
            let mut map = HeaderMap::with_capacity(req.headers.len());
            for field in req.headers.iter() {
                map.append(
                    HeaderName::from_bytes(field.name.as_bytes()).ok()?,
                    HeaderValue::from_bytes(field.value).ok()?,
                );
            }
            if self.rules.change_a_hit(
                host,
                target,
                &method,
                &map,
                cookies_matter,
                crate::rules::Conn {
                    https: tls.is_some(),
                    client_cert: tls.and_then(|t| t.client.as_deref()).unwrap_or(""),
                },
            ) {
                return None;
            }
        }
        // A URL with variants: its variant from the request fields its `Vary` names, as the
        // full path computes it (`Cache::variant_key`, Accept-Encoding normalised first).
        let selection = match varies {
            None => None,
            Some(index) => {
                let mut selected = HeaderMap::with_capacity(index.names.len());
                for field in req.headers.iter() {
                    if let Some(name) = index
                        .names
                        .iter()
                        .find(|n| field.name.eq_ignore_ascii_case(n.as_str()))
                    {
                        selected.append(name.clone(), HeaderValue::from_bytes(field.value).ok()?);
                    }
                }
                if self.config.cache.normalize_accept_encoding {
                    super::judge::normalize_for(self.vcl.is_some(), &mut selected);
                }
                let variant = variant_hash(&index.names, &selected);
                Some((primary.with_variant(variant), selected))
            }
        };
        let key = selection.as_ref().map_or(&primary, |(k, _)| k);
        let object = cache.lookup_now(key).ok()??;
        let matches = match &selection {
            Some((_, selected)) => object.vary_matches(selected),
            None => object.vary().is_empty(),
        };
        if !matches || !matches!(object.body, Body::Memory(_)) {
            return None;
        }
        match cache.check_bans(key, &object, None) {
            BanCheck::Clear => {}
            BanCheck::Banned => {
                // Removed: the full path finds no copy and fetches.
                self.counters.ban_objects.inc();
                return None;
            }
            // A ban on a request field may apply: the full path checks it with the request.
            BanCheck::NeedsRequest => return None,
        }
        let now = Instant::now();
        // Only a fresh object: a stale one needs grace handling or revalidation — and a stored
        // `no-cache` response is stale from the start (TTL 0), so it is never a fast hit.
        if !object.is_fresh(now) {
            return None;
        }
        // Within `cache.refresh_ahead` (or the object's own `obj.prefetch`) of expiry: the
        // full path delivers it and starts the background refresh.
        let configured = self.config.cache.refresh_ahead;
        if let Some(window) = object
            .prefetch
            .window(|| configured.window(object.ttl.get()))
            && object.remaining_ttl(now) <= window
        {
            return None;
        }
        let status = deliver::hit_status(&object, now);
        let prepared = deliver::prepared(&object, now, &status).ok()?;
        // Stored gzip for a client that does not take it: the full path decodes it (a
        // delivery filter, `coding.rs`). One flag for every other hit.
        if prepared.gzip
            && self.config.compression.enabled
            && !super::coding::takes_gzip(
                req.headers
                    .iter()
                    .filter(|f| f.name.eq_ignore_ascii_case("accept-encoding"))
                    .map(|f| f.value),
            )
        {
            return None;
        }
        // Under VCL: the head with the fields vcl_deliver adds (declined if it would do
        // more). The log captures response fields from the object's map, which has none of
        // those: with response fields in the log format such a hit takes the full path.
        let vcl_head = match &self.vcl {
            Some(rt) => {
                if rt.program.defines(crate::vcl::types::Method::Deliver)
                    && self
                        .log_format
                        .as_ref()
                        .is_some_and(|f| !f.response_headers.is_empty())
                {
                    return None;
                }
                // `obj.hits` counts this hit (vcl_deliver's dry run may read it); a hit the
                // fast path declines is counted again by the full path, so it takes it back.
                object.count_hit();
                let head = super::vcl::fast_head(
                    rt,
                    (method.as_str(), target, req.headers, client),
                    &object,
                    &prepared,
                );
                if head.is_none() {
                    object.uncount_hit();
                }
                Some(head?)
            }
            None => None,
        };
        let counters = &self.counters;
        counters.client_req.inc();
        counters.cache_hit.inc();
        counters.cache_hit_fast.inc();
        if object.state.from_disk() {
            counters.cache_hit_disk.inc();
        } else {
            counters.cache_hit_memory.inc();
        }
        let status = object.status;
        let head = match (vcl_head, &self.vcl) {
            (Some(head), Some(rt)) => super::vcl::with_xid(rt, &head),
            _ => prepared.wire(status).clone(),
        };
        // The object moves into the body: no second reference count per hit.
        let body = if head_only {
            ResponseBody::empty()
        } else {
            ResponseBody::object(object)
        }
        .counted(counters.clone());
        let ttfb = started.elapsed();
        counters.ttfb.observe(ttfb);
        let record = observe::fast_hit_record(
            self,
            FastHit {
                client: client.ip(),
                method,
                target,
                host: host.as_bytes(),
                user_agent,
                fields: req.headers,
                status: status.as_u16(),
                response: &prepared.map,
                started,
                ttfb,
                tls,
            },
        );
        let record = record.map(|mut r| {
            if self.vcl.is_some() {
                r.set_vcl(Some(super::vcl::FAST_HIT_TRACE));
            }
            r
        });
        let body = match record {
            Some(r) => body.recorded(r),
            None => body,
        };
        let add_date = !head.ends_with(b"\r\n\r\n");
        Some(FastAnswer {
            head,
            add_date,
            body,
        })
    }
}

/// Request fields after which a hit is not simply the object as it is: preconditions and
/// ranges (`If-*`, `Range`), the builtin pass (`Authorization`), connection management
/// (`Connection`, `Upgrade`, `Expect`, `TE`, `Keep-Alive`) and body framing. Names compared
/// without case. (`Cache-Control` and `Pragma` are judged by `fast_hit` itself.)
fn changes_the_answer(name: &[u8]) -> bool {
    const NAMES: [&[u8]; 9] = [
        b"range",
        b"authorization",
        b"connection",
        b"upgrade",
        b"expect",
        b"te",
        b"keep-alive",
        b"content-length",
        b"transfer-encoding",
    ];
    (name.len() > 3 && name[..3].eq_ignore_ascii_case(b"if-"))
        || NAMES.iter().any(|n| name.eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_that_change_the_answer() {
        for name in [
            "If-None-Match",
            "if-modified-since",
            "Range",
            "AUTHORIZATION",
            "Connection",
            "Upgrade",
            "Expect",
            "TE",
            "Keep-Alive",
            "Content-Length",
            "Transfer-Encoding",
        ] {
            assert!(changes_the_answer(name.as_bytes()), "{name}");
        }
        for name in [
            "Accept",
            "Accept-Encoding",
            "User-Agent",
            "If",
            "Ranges",
            "Cookie",
        ] {
            assert!(!changes_the_answer(name.as_bytes()), "{name}");
        }
    }
}
