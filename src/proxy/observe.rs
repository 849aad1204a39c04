//! The end of every transaction, as observability sees it: the cache decision (read back from
//! `Cache-Status`, counted per reason) and, when the access log is on or somebody follows
//! `shellac log` / `shellac top`, a transaction record that the response body completes and queues.
//!
//! Costs on the request path: a hit with nobody listening is one prefix check and one relaxed
//! load; a recorded transaction reuses a record the writer handed back (allocating only when
//! there is none) and is one lock-free queue push. Strings are copied, so a record never pins the connection's read buffer.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{self, HeaderName};
use http::{HeaderMap, Method, Response, Version};

use super::Proxy;
use super::body::ResponseBody;
use super::deliver::CACHE_STATUS;
use super::site::{Site, SiteLog};
use super::txn::Txn;
use crate::txlog::{Decision, DecisionKind, Format, Record, RecordHead};

/// Counts a response in its site's counters.
fn count_site(
    stats: &super::site::SiteCounters,
    is_hit: bool,
    cache_status: Option<&http::HeaderValue>,
) {
    stats.req.inc();
    if is_hit {
        stats.hit.inc();
    } else if cache_status.is_some_and(|v| {
        let v = v.as_bytes();
        v.starts_with(b"shellac; fwd=miss") && !v.windows(7).any(|w| w == b"detail=")
    }) {
        stats.miss.inc();
    } else {
        stats.pass.inc();
    }
}

/// Attaches byte counting and, if wanted, the transaction record to the response.
pub(super) fn deliver(
    txn: &Txn,
    resp: Response<ResponseBody>,
    started: Instant,
) -> Response<ResponseBody> {
    let proxy = &txn.proxy;
    let ttfb = started.elapsed();
    // An ESI include's response (`filter/esi/include.rs`) is not sent to a client by itself:
    // its bytes are counted as part of the page's, its time is not a client's.
    let include = txn
        .req
        .extensions
        .get::<crate::esi::Level>()
        .is_some_and(|l| l.0 > 0);
    if include && proxy.log_format.is_none() && !proxy.shared.recorder.wants_records() {
        return resp;
    }
    if !include {
        proxy.counters.ttfb.observe(ttfb);
    }
    let counters = proxy.counters.clone();
    let count = |b: ResponseBody| {
        if include {
            b
        } else {
            b.counted(counters.clone())
        }
    };
    let cache_status = resp.headers().get(CACHE_STATUS);
    // A byte prefix check: validating the whole value as text first cost ~70 instructions
    // on every hit.
    let is_hit = cache_status.is_some_and(|v| v.as_bytes().starts_with(b"shellac; hit"));
    if let Some(site) = &txn.site {
        count_site(&site.stats, is_hit, cache_status);
        if !include {
            site.stats.ttfb.observe(ttfb);
        }
    }
    let format = log_format(proxy, txn.site.as_deref());
    let wanted = format.is_some() || proxy.shared.recorder.wants_records();
    if is_hit && !wanted {
        return resp.map(count);
    }
    let cache_status = if is_hit {
        ""
    } else {
        cache_status.and_then(|v| v.to_str().ok()).unwrap_or("")
    };
    let decision = if is_hit {
        Decision {
            kind: DecisionKind::Hit,
            reason: None,
        }
    } else {
        Decision::from_cache_status(cache_status)
    };
    if let (DecisionKind::Miss | DecisionKind::Pass, Some(reason)) =
        (decision.kind, &decision.reason)
    {
        counters.pass_reason.inc(reason);
    }
    if !wanted {
        return resp.map(count);
    }
    let head = RecordHead {
        client: txn.client.ip(),
        method: txn.req.method.clone(),
        version: txn.req.version,
        status: resp.status().as_u16(),
        decision,
        started,
        ttfb,
    };
    let backend = txn.backend.as_ref().map(|b| b.name());
    let tls = txn
        .req
        .extensions
        .get::<crate::tls::server::Session>()
        .map(|s| &*s.0);
    let mut record = record(
        proxy,
        format,
        head,
        Request::Parsed(&txn.req),
        (backend, txn.site.as_ref().map(|s| &*s.name)),
        resp.headers(),
        tls,
    );
    if let Some(trace) = txn.policy.trace(txn) {
        record.set_vcl(Some(&trace));
    }
    // An ESI include's line says so: its depth and the page that included it.
    if let (Some(level), Some(parent)) = (
        txn.req.extensions.get::<crate::esi::Level>(),
        txn.req.extensions.get::<crate::esi::Parent>(),
    ) && level.0 > 0
    {
        record.set_esi(level.0, &parent.0);
    }
    resp.map(|b| count(b).recorded(record))
}

/// A request as its transaction record reads it: parsed (the full path), or as a fast hit's
/// head said it (`proxy/fast_hit/`: no parsed request exists).
enum Request<'a> {
    Parsed(&'a http::request::Parts),
    Raw(&'a FastHit<'a>),
}

impl Request<'_> {
    fn host(&self) -> &[u8] {
        match self {
            Request::Parsed(req) => match req.uri.authority() {
                Some(a) => a.as_str().as_bytes(),
                None => req.headers.get(header::HOST).map_or(&[], |h| h.as_bytes()),
            },
            Request::Raw(hit) => hit.host,
        }
    }

    fn user_agent(&self) -> Option<&[u8]> {
        match self {
            Request::Parsed(req) => req.headers.get(header::USER_AGENT).map(|v| v.as_bytes()),
            Request::Raw(hit) => hit.user_agent,
        }
    }

    fn set_target(&self, record: &mut Record) {
        match self {
            Request::Parsed(req) => record.set_uri(&req.uri),
            Request::Raw(hit) => record.set_request_target(hit.target),
        }
    }

    /// Pushes the value of each of `names` (or `None`), in order.
    fn capture(&self, names: &[HeaderName], push: impl FnMut(Option<&[u8]>)) {
        match self {
            Request::Parsed(req) => capture(names, &req.headers, push),
            Request::Raw(hit) => names
                .iter()
                .map(|name| {
                    hit.fields
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name.as_str()))
                        .map(|h| h.value)
                })
                .for_each(push),
        }
    }
}

/// A transaction's record, filled and queued: what [`deliver`] and [`fast_hit_record`] both
/// record. Live readers and rankings see every field; the log alone captures what its format
/// prints. Call only when a record is wanted (the access log is on or somebody follows).
fn record(
    proxy: &Proxy,
    format: Option<&Arc<Format>>,
    head: RecordHead,
    req: Request<'_>,
    (backend, site): (Option<&str>, Option<&str>),
    response: &HeaderMap,
    tls: Option<&crate::tls::server::ConnTls>,
) -> Box<Record> {
    let recorder = &proxy.shared.recorder;
    let everything = recorder.wants_records();
    // A recycled record keeps its buffer; a new one starts with room for a typical request.
    let mut record = recorder.record(head, 256);
    req.set_target(&mut record);
    // A reset record has no host, user agent or backend: set only what there is.
    if everything || format.is_some_and(|f| f.needs_host()) {
        let host = req.host();
        if !host.is_empty() {
            record.set_host(host);
        }
    }
    // Only the rankings use the user agent on its own (a log format names it as a header).
    if recorder.top_wanted() {
        let ua = req.user_agent();
        if ua.is_some() {
            record.set_user_agent(ua);
        }
    }
    if backend.is_some() {
        record.set_backend(backend);
    }
    if site.is_some() {
        record.set_site(site);
    }
    if let Some(t) = tls
        && (everything || format.is_some_and(|f| f.needs_tls()))
    {
        record.set_tls([
            t.version,
            t.cipher,
            t.sni.as_deref().unwrap_or(""),
            t.alpn.as_deref().unwrap_or(""),
            t.client.as_deref().unwrap_or(""),
        ]);
    }
    if let Some(f) = format {
        req.capture(&f.request_headers, |v| record.push_request_header(v));
        capture(&f.response_headers, response, |v| {
            record.push_response_header(v)
        });
    }
    record.set_format(format);
    record.queue_to(recorder);
    record
}

/// What a fast hit's record is made of (`proxy/fast_hit/`): the request as its head's bytes
/// said it, and the response fields sent.
pub(super) struct FastHit<'a> {
    pub client: IpAddr,
    pub method: Method,
    /// Origin-form, as sent (a fast hit's target needs no normalising).
    pub target: &'a str,
    pub host: &'a [u8],
    pub user_agent: Option<&'a [u8]>,
    pub fields: &'a [httparse::Header<'a>],
    pub status: u16,
    pub response: &'a HeaderMap,
    /// The `[[site]]` that answered, if any (its name is recorded, its access log used).
    pub site: Option<&'a Site>,
    pub started: Instant,
    pub ttfb: Duration,
    /// The client's TLS connection, if any.
    pub tls: Option<&'a crate::tls::server::ConnTls>,
}

/// The access-log format a request of `site` is logged with (None: not logged): the site's
/// own, else the global one.
fn log_format<'a>(proxy: &'a Proxy, site: Option<&'a Site>) -> Option<&'a Arc<Format>> {
    match site.map(|s| &s.log) {
        None | Some(SiteLog::Global) => proxy.log_format.as_ref(),
        Some(SiteLog::Off) => None,
        Some(SiteLog::Own(format)) => Some(format),
    }
}

/// The transaction record of a fast hit, when the access log is on or somebody follows
/// `shellac log` / `shellac top`: the same fields [`deliver`] records for a hit, taken from
/// the request head's bytes instead of a parsed request.
pub(super) fn fast_hit_record(proxy: &Proxy, hit: FastHit<'_>) -> Option<Box<Record>> {
    let format = log_format(proxy, hit.site);
    if format.is_none() && !proxy.shared.recorder.wants_records() {
        return None;
    }
    let head = RecordHead {
        client: hit.client,
        method: hit.method.clone(),
        version: Version::HTTP_11,
        status: hit.status,
        decision: Decision {
            kind: DecisionKind::Hit,
            reason: None,
        },
        started: hit.started,
        ttfb: hit.ttfb,
    };
    Some(record(
        proxy,
        format,
        head,
        Request::Raw(&hit),
        (None, hit.site.map(|s| &*s.name)),
        hit.response,
        hit.tls,
    ))
}

/// The decision logged for a refusal: synth, with the `refused:<word>` reason.
pub(super) fn refused(reason: &'static str) -> Decision {
    Decision {
        kind: DecisionKind::Synth,
        reason: Some(Cow::Borrowed(reason)),
    }
}

/// Counts a request refused before the request pipeline (`client_refused`) and, when the
/// access log is on or somebody follows `shellac log`, returns its transaction record, queued
/// when finished: `status`, `reason` (`refused:<word>`), the client, and the request line when
/// it was valid (`line`; else the log shows `-`).
pub(super) fn refusal(
    proxy: &Proxy,
    client: IpAddr,
    status: u16,
    reason: &'static str,
    line: Option<&[u8]>,
) -> Option<Box<Record>> {
    proxy.counters.client_refused.inc();
    let format = proxy.log_format.as_ref();
    if format.is_none() && !proxy.shared.recorder.wants_records() {
        return None;
    }
    let started = Instant::now();
    let parts = line.and_then(split_request_line);
    let (method, version) = match &parts {
        Some((m, _, v)) => (m.clone(), *v),
        None => (Method::GET, Version::HTTP_11),
    };
    let mut record = proxy.shared.recorder.record(
        RecordHead {
            client,
            method,
            version,
            status,
            decision: refused(reason),
            started,
            ttfb: Duration::ZERO,
        },
        line.map_or(0, <[u8]>::len),
    );
    if let Some((_, target, _)) = parts {
        record.set_request_target(target);
    }
    record.set_format(format);
    record.queue_to(&proxy.shared.recorder);
    Some(record)
}

/// Method, target and version of a request line the strict parser accepted.
fn split_request_line(line: &[u8]) -> Option<(Method, &str, Version)> {
    let line = std::str::from_utf8(line).ok()?;
    let mut it = line.splitn(3, ' ');
    let method = Method::from_bytes(it.next()?.as_bytes()).ok()?;
    let target = it.next()?;
    let version = match it.next()? {
        "HTTP/1.0" => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    Some((method, target, version))
}

/// Hands `push` the first value of each of `names` in `headers` (None when absent), in order.
/// A few names are found in one pass over the fields (comparing names, no hashing): cheaper
/// than one map lookup per name for the usual handful of request fields.
fn capture(names: &[HeaderName], headers: &HeaderMap, mut push: impl FnMut(Option<&[u8]>)) {
    const ONE_PASS: usize = 4;
    if names.is_empty() {
        return;
    }
    if names.len() > ONE_PASS || headers.len() > 32 {
        for n in names {
            push(headers.get(n).map(|v| v.as_bytes()));
        }
        return;
    }
    let mut found: [Option<&[u8]>; ONE_PASS] = [None; ONE_PASS];
    let mut missing = names.len();
    for (name, value) in headers {
        if let Some(i) = names.iter().position(|n| n == name)
            && found[i].is_none()
        {
            found[i] = Some(value.as_bytes());
            missing -= 1;
            if missing == 0 {
                break;
            }
        }
    }
    for value in &found[..names.len()] {
        push(*value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_first_values_in_format_order() {
        let mut h = HeaderMap::new();
        h.append("user-agent", "ua/1".parse().unwrap());
        h.append("x-forwarded-for", "203.0.113.1".parse().unwrap());
        h.append("x-forwarded-for", "198.51.100.2".parse().unwrap());
        let names: Vec<HeaderName> = ["referer", "x-forwarded-for", "user-agent"]
            .into_iter()
            .map(HeaderName::from_static)
            .collect();
        let mut got = Vec::new();
        capture(&names, &h, |v| got.push(v.map(<[u8]>::to_vec)));
        assert_eq!(
            got,
            vec![None, Some(b"203.0.113.1".to_vec()), Some(b"ua/1".to_vec())]
        );
        // Many names: map lookups, same answer.
        let many: Vec<HeaderName> = ["a", "b", "c", "d", "user-agent"]
            .into_iter()
            .map(HeaderName::from_static)
            .collect();
        let mut got = Vec::new();
        capture(&many, &h, |v| got.push(v.map(<[u8]>::to_vec)));
        assert_eq!(got, vec![None, None, None, None, Some(b"ua/1".to_vec())]);
    }
}
