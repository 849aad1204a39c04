//! One include of a page: a sub-request through the whole proxy (policy, lookup, coalescing,
//! grace: `Proxy::subrequest_now`, started and fetched in `fetch.rs`) with Varnish's hygiene — `GET`, no body, no conditional or
//! `Range` fields, no `Accept-Encoding` (fragments are spliced as identity bytes), the
//! parent's other fields, `req.esi_level` one deeper — its `alt` when `src` fails, and the
//! limits: depth, the page tree's include budget, and the hosts an absolute `src` may name
//! (no SSRF: any other host is refused, never fetched).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicI64;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::request::Parts;
use http::{Method, Request, Version};

use crate::cache::policy::age_field;
use crate::esi::{Include, Level, Top, TopRequest};
use crate::http::cache_control::CacheControl;
use crate::proxy::{LocalAddr, Proxy};

/// The includes a client's page and all its fragments may still fetch (`esi.max_includes`),
/// carried by every sub-request of the tree as a request extension.
#[derive(Clone, Debug)]
pub struct Budget(pub Arc<AtomicI64>);

/// What the fragments fetched so far say about the assembled page's freshness.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    /// The shortest freshness left among them (seconds); `None`: none said.
    pub max_age: Option<u64>,
    /// One of them may not be stored by shared caches.
    pub private: bool,
    /// One of them may not be stored at all.
    pub no_store: bool,
    /// Includes whose freshness is not known yet: not stored when the page started, not
    /// fetched yet.
    pub unknown: u32,
}

impl Freshness {
    /// A fragment response's fields folded in.
    pub(super) fn add(&mut self, fields: &HeaderMap) {
        let (cc, left) = seconds_left(fields);
        self.private |= cc.private;
        self.no_store |= cc.no_store;
        if let Some(left) = left {
            self.max_age = Some(self.max_age.map_or(left, |m| m.min(left)));
        }
    }
}

/// A response's `Cache-Control` and the seconds of freshness it has left by it (its
/// `s-maxage` or `max-age` less its `Age`; 0 for `no-store` / `no-cache`; none without a
/// lifetime). The page and each fragment are read alike.
pub(super) fn seconds_left(fields: &HeaderMap) -> (CacheControl, Option<u64>) {
    let cc = CacheControl::from_lines(
        fields
            .get_all(header::CACHE_CONTROL)
            .iter()
            .map(|v| v.as_bytes()),
    );
    let age = age_field(fields).map_or(0, |d| d.as_secs());
    let left = if cc.no_store || cc.no_cache {
        Some(0)
    } else {
        cc.s_maxage
            .or(cc.max_age)
            .map(|d| d.as_secs().saturating_sub(age))
    };
    (cc, left)
}

/// What the includes of one page share: the request they are made from, the limits, and
/// what they learn about freshness.
pub struct Page {
    pub proxy: Arc<Proxy>,
    pub client: SocketAddr,
    /// The page's own level (its includes are one deeper).
    pub level: u8,
    /// The page's host (a relative `src`'s, and the one an absolute `src` may always name).
    pub host: String,
    /// The page's target (its includes' `%{esi_parent}x`).
    pub url: Arc<str>,
    /// The fields a sub-request starts from (the parent's, cleaned).
    pub fields: HeaderMap,
    pub local: Option<LocalAddr>,
    pub budget: Budget,
    /// The client's request the tree serves (`req_top.*` of its sub-requests).
    pub top: crate::esi::Top,
    /// The fragments fetched so far, for the page's `Cache-Control` (`prime`).
    pub freshness: Mutex<Freshness>,
    /// The policy turned the assembly off after it was set up (`prime`): the page's body
    /// goes out as it is.
    pub off: std::sync::atomic::AtomicBool,
    /// The page's length, when known before its head goes out: a page parsed as it is
    /// delivered that holds no ESI (not XML, or read whole without any) is its body
    /// (`prime` sends it as `Content-Length`, as Varnish does).
    pub length: Mutex<Option<u64>>,
    /// The page request's Varnish-style records (`log.vsl_records`), when kept.
    pub vsl: Option<crate::txlog::vsl::Current>,
    /// Whether the page holds ESI, as far as its parse knows (`Verdict`): what VCL's
    /// `obj.can_esi` reads of a page parsed as it is delivered (`prime::settle`).
    pub verdict: std::sync::atomic::AtomicU8,
    /// Set while the policy waits for the verdict before its deliver step: the assembly
    /// reads and parses ahead but starts no include and emits nothing (`prime::settle`).
    pub hold: std::sync::atomic::AtomicBool,
}

/// [`Page::verdict`]: not known yet.
pub const VERDICT_UNKNOWN: u8 = 0;
/// [`Page::verdict`]: the page holds ESI (an element was found, or its first
/// `READ_AHEAD` bytes were read without an answer: it is parsed as an ESI page).
pub const VERDICT_ESI: u8 = 1;
/// [`Page::verdict`]: no ESI (not XML, or read whole without any).
pub const VERDICT_NONE: u8 = 2;

/// Request fields a sub-request never carries.
const NOT_INHERITED: [header::HeaderName; 9] = [
    header::RANGE,
    header::IF_RANGE,
    header::IF_MATCH,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_UNMODIFIED_SINCE,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::EXPECT,
];

impl Page {
    /// The page context for a response to `req` (the client's request, or a fragment's
    /// sub-request one level down); `vcl_time`: the request's `req.time` under VCL.
    pub fn new(
        proxy: Arc<Proxy>,
        req: &Parts,
        client: SocketAddr,
        vcl_time: Option<f64>,
    ) -> Arc<Page> {
        let host = req
            .uri
            .authority()
            .map(|a| a.as_str().to_string())
            .or_else(|| {
                req.headers
                    .get(header::HOST)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            })
            .unwrap_or_default();
        let mut fields = req.headers.clone();
        for name in NOT_INHERITED {
            fields.remove(name);
        }
        fields.remove(header::ACCEPT_ENCODING);
        fields.remove(header::CONTENT_TYPE);
        let budget = req.extensions.get::<Budget>().cloned().unwrap_or_else(|| {
            Budget(Arc::new(AtomicI64::new(i64::from(
                proxy.config.esi.max_includes,
            ))))
        });
        let top = req.extensions.get::<Top>().cloned().unwrap_or_else(|| {
            Top(Arc::new(TopRequest {
                method: req.method.clone(),
                url: req
                    .uri
                    .path_and_query()
                    .map_or("/", |p| p.as_str())
                    .to_string(),
                version: req.version,
                headers: req.headers.clone(),
                time: vcl_time,
            }))
        });
        let url = Arc::from(req.uri.path_and_query().map_or("/", |p| p.as_str()));
        Arc::new(Page {
            url,
            top,
            level: req.extensions.get::<Level>().map_or(0, |l| l.0),
            local: req.extensions.get::<LocalAddr>().copied(),
            proxy,
            client,
            host,
            fields,
            budget,
            freshness: Mutex::new(Freshness::default()),
            off: std::sync::atomic::AtomicBool::new(false),
            length: Mutex::new(None),
            vsl: req.extensions.get::<crate::txlog::vsl::Current>().cloned(),
            verdict: std::sync::atomic::AtomicU8::new(VERDICT_UNKNOWN),
            hold: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Whether the page is at the depth limit: its includes are not fetched.
    pub fn at_depth_limit(&self) -> bool {
        self.level >= self.proxy.config.esi.max_depth
    }

    /// Whether an absolute `src` may name `host`: the page's own host, a backend's, or one of
    /// `esi.hosts` (compared without case and port; `*`: any).
    pub(super) fn host_allowed(&self, host: &str) -> bool {
        let bare = |h: &str| {
            let name = match h.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or(v6),
                None => h.split(':').next().unwrap_or(h),
            };
            name.trim_end_matches('.').to_ascii_lowercase()
        };
        let want = bare(host);
        let config = &self.proxy.config;
        bare(&self.host) == want
            || config.backends.iter().any(|b| {
                bare(&b.host) == want || b.host_header.as_deref().is_some_and(|h| bare(h) == want)
            })
            || config.esi.hosts.iter().any(|h| h == "*" || bare(h) == want)
    }
}

impl Page {
    /// Folds the freshness left of `include`'s stored copy (in memory, a fragment without
    /// `Vary` variants) into the page's before it is fetched: a page's head goes out with its
    /// first bytes, usually before its fragments arrive, and a stored fragment says now how
    /// long it stays fresh. `false`: no stored copy, its freshness is unknown until fetched.
    pub fn peek(&self, include: &Include) -> bool {
        let host = include.src.host.as_deref().unwrap_or(&self.host);
        let key = crate::cache::CacheKey::new(host, &include.src.path);
        let Ok(Some(object)) = self.proxy.cache.lookup_now(&key) else {
            if let Ok(mut f) = self.freshness.lock() {
                f.unknown += 1;
            }
            return false;
        };
        let left = object.remaining_ttl(std::time::Instant::now()).as_secs();
        if let Ok(mut f) = self.freshness.lock() {
            f.max_age = Some(f.max_age.map_or(left, |m| m.min(left)));
        }
        true
    }

    /// An include whose freshness was unknown settled (fetched or failed), or a page parsed
    /// as it is delivered has no more includes to find.
    /// Notes what the parse found out (`VERDICT_*`), once.
    pub(super) fn decide(&self, verdict: u8) {
        let _ = self.verdict.compare_exchange(
            VERDICT_UNKNOWN,
            verdict,
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    pub(super) fn settled(&self) {
        if let Ok(mut f) = self.freshness.lock() {
            f.unknown = f.unknown.saturating_sub(1);
        }
    }
}

/// Why an include produced nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Failed (and its `alt` too); `continue_on_error` as the include said.
    Failed { continue_on_error: bool },
}

/// What an include's task hands the assembly, in order: its body's chunks as they arrive,
/// then its end or its failure.
#[derive(Debug)]
pub enum Item {
    Chunk(Bytes),
    End,
    Failed(Failure),
}

/// Chunks an include may have fetched ahead of the assembly: a page holds at most
/// `esi.concurrency` times this many chunks of its fragments (memory bounded per page, not
/// by the fragments' sizes).
pub const AHEAD: usize = 8;

/// An include's target with the bytes a request target may not carry unencoded
/// (`http/strict.rs` refuses them from clients: `"`, `<`, `>`, `\`, `` ` ``, space, controls,
/// non-ASCII) percent-encoded, as a browser would: `src="/&lt;"` asks for `/%3C` (Varnish
/// sends the raw byte, which no HTTP client library here can write).
fn encode_target(path: &str) -> std::borrow::Cow<'_, str> {
    let bad = |b: u8| !(0x21..0x7f).contains(&b) || matches!(b, b'"' | b'<' | b'>' | b'\\' | b'`');
    if !path.bytes().any(bad) {
        return std::borrow::Cow::Borrowed(path);
    }
    let mut out = String::with_capacity(path.len() + 8);
    for b in path.bytes() {
        if bad(b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The sub-request's head: `GET path` on `host`, the page's fields, one level deeper.
pub(super) fn request(page: &Page, host: &str, path: &str) -> Option<Parts> {
    let path = encode_target(path);
    let path = crate::http::target::normalise(&path).unwrap_or_else(|| path.to_string());
    let Ok(uri) = path.parse::<http::Uri>() else {
        tracing::info!(path = %path, "ESI include failed: not a request target");
        return None;
    };
    let mut head = Request::new(());
    *head.method_mut() = Method::GET;
    *head.uri_mut() = uri;
    *head.version_mut() = Version::HTTP_11;
    let mut fields = page.fields.clone();
    if host.is_empty() {
        // An HTTP/1.0 page asked for without `Host`: its includes are asked for alike.
        *head.version_mut() = Version::HTTP_10;
    } else {
        fields.insert(header::HOST, HeaderValue::from_str(host).ok()?);
    }
    *head.headers_mut() = fields;
    let ext = head.extensions_mut();
    ext.insert(Level(page.level.saturating_add(1)));
    ext.insert(page.budget.clone());
    ext.insert(page.top.clone());
    ext.insert(crate::esi::Parent(page.url.clone()));
    if let Some(v) = &page.vsl {
        ext.insert(v.clone());
    }
    if let Some(local) = page.local {
        ext.insert(local);
    }
    Some(head.into_parts().0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_encoded_where_a_request_target_may_not_carry_the_byte() {
        assert_eq!(encode_target("/a?b=c&d"), "/a?b=c&d");
        assert_eq!(encode_target("/<"), "/%3C");
        assert_eq!(encode_target("/a b\"\u{e9}>"), "/a%20b%22%C3%A9%3E");
    }

    #[test]
    fn freshness_is_the_shortest_of_the_parts() {
        let mut f = Freshness::default();
        let mut h = HeaderMap::new();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=60"),
        );
        h.insert(header::AGE, HeaderValue::from_static("10"));
        f.add(&h);
        assert_eq!(f.max_age, Some(50));
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, max-age=300"),
        );
        h.remove(header::AGE);
        f.add(&h);
        assert_eq!(f.max_age, Some(50));
        assert!(f.private);
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        f.add(&h);
        assert_eq!(f.max_age, Some(0));
        assert!(f.no_store);
    }
}
