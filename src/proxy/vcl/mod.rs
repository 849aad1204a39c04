//! VCL on the request path: the compiled program with its backends resolved
//! ([`VclRuntime`], one per configuration), the state a request carries through its steps
//! ([`VclTxn`]), and the messages VCL sees at each step (`bereq`, `beresp`, `resp`); `env.rs`
//! is what a subroutine can read and change, `dry_run.rs` what lets a hit skip the full path.
//! The hooks that run the subroutines at the machine's steps are the policy seam's VCL
//! front-end (`proxy/policy/vcl/`).

mod dry_run;
pub(super) mod env;
pub(super) mod filters;
pub(super) mod vsl;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode, Uri};

use crate::backend::director::{Backends, Member};
use crate::cache::{CacheKey, Object};
use crate::txlog::vsl::Vsl;
use crate::vcl::ir::Program;
use crate::vcl::run::{BackendSel, State};
use crate::vcl::vars::Slot;

pub(super) use dry_run::{fast_head, recv_looks_up, with_xid};

/// What the log says of a fast hit under VCL: what the full path's subroutines would have
/// returned (`dry_run.rs` proved it).
pub(super) const FAST_HIT_TRACE: &str = "recv:hash hash:lookup hit:deliver deliver:deliver";

/// A configuration's VCL program, ready to run.
pub struct VclRuntime {
    pub program: Program,
    /// The program's targets (`Program::targets`) as backends and directors; `None` for a
    /// `none` backend.
    pub targets: Vec<Option<Member>>,
    /// `server.hostname` and `server.identity`.
    pub hostname: String,
    /// Whether any subroutine uses `rollback` (only then is the received request kept).
    pub rollback: bool,
    /// Whether vcl_deliver depends on the object and response alone (`dry_run.rs`).
    pub deliver_object_only: bool,
    /// `cache.grace` in seconds: what 2.x's `req.grace` reads until VCL sets it (Varnish
    /// 2.1 starts it at `default_grace`; 4.x reads -1, unset).
    pub default_grace: f64,
    /// The configured session timeouts in seconds, in [`SessTimeout`]'s order:
    /// `server.idle_timeout` (also `param.timeout_idle`), `idle_release`, `send_total_timeout`,
    /// `send_timeout` — what `sess.*` reads until VCL sets it.
    ///
    /// [`SessTimeout`]: crate::vcl::run::SessTimeout
    pub sess_defaults: [f64; 4],
    /// `cache.hit_for_miss_ttl` in seconds: `param.uncacheable_ttl`, the `beresp.ttl` the
    /// built-in VCL gives an uncacheable response (Varnish 7's `vcl_beresp_hitmiss`).
    pub uncacheable_ttl: f64,
    /// Transaction ids (`X-Varnish`, `req.xid`, `bereq.xid`): the process's counter, which
    /// outlives the program (a reload goes on counting).
    xids: Arc<Xids>,
    /// vmod_vsthrottle's buckets: the process's table, which outlives the program.
    pub throttle: Arc<super::throttle::Throttle>,
    /// The process's Varnish-style records when `log.vsl_records` keeps any (`vsl.rs`).
    pub vsl: Option<Arc<Vsl>>,
    /// The process's counters (a regular expression past its match limit, rate limits).
    pub counters: Arc<crate::stats::Counters>,
}

/// The transaction ids a VCL program hands out, as Varnish numbers them: one counter for
/// every session (4.x), client request, restart (4.x) and backend request (4.x); 2.x numbers
/// the client requests only. The first id is Varnish's under varnishtest — 1000 in 4.x (the
/// first connection's session, so its first request is 1001), 1001 in 2.x — so the
/// `X-Varnish` values operators' tests assert come out the same.
#[derive(Debug, Default)]
pub struct Xids {
    /// The last id given; 0 before the first.
    last: AtomicU64,
}

impl Xids {
    /// The next id; `legacy`: under a 2.x program (which starts at 1001).
    pub fn next(&self, legacy: bool) -> u64 {
        let first = if legacy { 1001 } else { 1000 };
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let id = if last == 0 { first } else { last + 1 };
            match self
                .last
                .compare_exchange_weak(last, id, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return id,
                Err(now) => last = now,
            }
        }
    }
}

impl VclRuntime {
    pub fn new(
        program: Program,
        backends: &Backends,
        (xids, throttle, vsl): (Arc<Xids>, Arc<super::throttle::Throttle>, Arc<Vsl>),
        counters: Arc<crate::stats::Counters>,
        default_grace: std::time::Duration,
        sess_defaults: [std::time::Duration; 4],
        uncacheable_ttl: std::time::Duration,
    ) -> VclRuntime {
        let targets = program.targets.iter().map(|n| backends.get(n)).collect();
        let rollback = program.has_effect(&|f| matches!(f, crate::vcl::ir::Func::Rollback));
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".to_string());
        let mut rt = VclRuntime {
            program,
            targets,
            hostname,
            rollback,
            deliver_object_only: false,
            default_grace: default_grace.as_secs_f64(),
            sess_defaults: sess_defaults.map(never_as_varnish),
            uncacheable_ttl: uncacheable_ttl.as_secs_f64(),
            xids,
            throttle,
            vsl: vsl.enabled().then_some(vsl),
            counters,
        };
        rt.deliver_object_only = deliver_reads_object_only(&rt.program);
        rt
    }

    /// The next transaction id.
    pub(in crate::proxy) fn next_xid(&self) -> u64 {
        self.xids.next(self.program.dialect.is_legacy())
    }

    /// A client connection was accepted: a 4.x program numbers its session (Varnish gives
    /// every session an id from the same counter as requests); 2.x does not.
    pub fn session_begins(&self) {
        if !self.program.dialect.is_legacy() {
            self.next_xid();
        }
    }

    /// The member a backend value routes to (`None`: no backend, or `none`).
    pub fn member(&self, sel: BackendSel) -> Option<Member> {
        self.targets.get(sel.target as usize).cloned().flatten()
    }
}

/// What VCL reads for a timeout that never fires: Varnish's number for it. A configured
/// duration of [`MAX_DURATION`] (ten years, the longest a setting holds: Shellac's `never`)
/// reads as this, and this set back becomes ten years again (`value::to_duration`).
///
/// [`MAX_DURATION`]: crate::config::units::MAX_DURATION
pub const NEVER: f64 = 999_999_999_999.999;

/// A configured timeout in seconds as VCL reads it ([`NEVER`] for ten years or more).
pub fn never_as_varnish(d: Duration) -> f64 {
    if d >= crate::config::units::MAX_DURATION {
        NEVER
    } else {
        d.as_secs_f64()
    }
}

/// Whether vcl_deliver's outcome depends on the object and the response alone (not on the
/// request, the client or the clock): then what it adds is made once per prepared head
/// (`Prepared::vcl_wire`), not per hit. `obj.hits` counts per hit, so only its comparison
/// with 0 (`if (obj.hits > 0)`: the same on every hit) keeps that.
fn deliver_reads_object_only(program: &Program) -> bool {
    program.reads_only(crate::vcl::types::Method::Deliver, true, &|slot| {
        matches!(
            slot,
            Slot::RespHttp
                | Slot::RespStatus
                | Slot::RespReason
                | Slot::RespProto
                | Slot::ServerHostname
                | Slot::ServerIdentity
                | Slot::Fixed(..)
        )
    })
}

/// The backend request as VCL edits it (`bereq.*`): made from the client request when the
/// fetch starts, then used by the backend request builder instead of the client's.
#[derive(Debug, Clone)]
pub(super) struct Bereq {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub backend: Option<BackendSel>,
    pub connect_timeout: Option<Duration>,
    pub first_byte_timeout: Option<Duration>,
    pub between_bytes_timeout: Option<Duration>,
    /// A pass (or hit-for-pass): nothing of it is stored.
    pub uncacheable: bool,
    pub bgfetch: bool,
    /// `unset bereq.body`: send no body.
    pub no_body: bool,
    /// `bereq.retry_connect` (true unless VCL says otherwise): a request that fails on a
    /// reused backend connection before any response byte may be tried once more on a new
    /// connection (Varnish's "extrachance").
    pub retry_connect: bool,
    /// `bereq.xid`: in 4.x the backend request's own id (a retry takes a new one), in 2.x
    /// the client request's.
    pub xid: u64,
    /// The backend request's Varnish-style records (`vsl.rs`; 4.x): its `End` is logged when
    /// the last holder — this, or the ESI parse of its body — lets go.
    pub vsl: Option<Arc<crate::txlog::vsl::Transaction>>,
}

/// The backend response as VCL sees it (`beresp.*`) in vcl_backend_response / vcl_fetch.
#[derive(Debug)]
pub(super) struct Beresp {
    /// What is sent and stored: `wide_status` modulo 1000.
    pub status: StatusCode,
    /// `beresp.status` as VCL sees it: up to 65535 (Varnish lets VCL use the digits above
    /// the last three for its own signalling).
    pub wide_status: u16,
    pub reason: Option<String>,
    pub headers: HeaderMap,
    /// Seconds of freshness left (negative: already stale).
    pub ttl: f64,
    pub grace: f64,
    pub keep: f64,
    pub uncacheable: bool,
    pub age: f64,
    pub backend: Option<String>,
    pub was_304: bool,
    /// `beresp.do_stream`: false reads the whole body before the response goes out (the
    /// default of 2.x/3.0 files, as in Varnish before 4.0).
    pub do_stream: bool,
    /// `beresp.do_gzip` / `beresp.do_gunzip`: the fetch chain's gzip filters
    /// (`proxy/coding.rs`), as in Varnish (gunzip wins when both are set); `beresp.do_esi`
    /// (2.x `esi;`): the body is parsed for ESI as it is fetched; `beresp.filters`.
    pub fetch: filters::Fetch,
    /// 2.x `beresp.saintmode`: seconds to hold the backend off for this object.
    pub saintmode: Option<f64>,
    /// 2.0 `obj.prefetch` (seconds: negative before expiry, positive from now), when set.
    pub prefetch: Option<f64>,
    /// `beresp.storage` / `beresp.storage_hint`: the storage named (`Transient`: memory only).
    pub storage: Option<String>,
    /// `beresp.transit_buffer` in bytes (0 until set, Varnish's default: no bound). A pass
    /// is streamed at the client's pace whatever it says (`Slot::BerespTransitBuffer`).
    pub transit_buffer: u64,
}

/// The response to the client as VCL sees it (`resp.*`) in vcl_deliver / vcl_synth.
#[derive(Debug)]
pub(super) struct Resp {
    /// What is sent: `wide_status` modulo 1000.
    pub status: StatusCode,
    /// `resp.status` as VCL sees it (up to 65535, as `Beresp::wide_status`).
    pub wide_status: u16,
    pub reason: Option<String>,
    pub headers: HeaderMap,
    /// `resp.filters` (`filters.rs`).
    pub deliver: filters::Deliver,
}

/// The lifetimes of an object a miss fetched (seconds), when its response arrived, and the
/// storage it is kept in (`obj.storage` in the miss's vcl_deliver).
#[derive(Debug, Clone, Copy)]
pub(super) struct Fetched {
    pub ttl: f64,
    pub grace: f64,
    pub keep: f64,
    pub at: std::time::Instant,
    pub store: u8,
}

/// What a request carries through its steps when a VCL program runs.
pub(super) struct VclTxn {
    pub runtime: Arc<VclRuntime>,
    pub state: State,
    /// vcl_recv ran: every response but a generated one goes through vcl_deliver.
    pub ran: bool,
    /// The response was made by vcl_synth / vcl_error (vcl_deliver does not run for it).
    pub synthesized: bool,
    /// The stored object being delivered (obj.* in vcl_deliver).
    pub obj: Option<Arc<Object>>,
    /// The lifetimes vcl_backend_response gave the object this request fetched and stores:
    /// obj.ttl, obj.grace, obj.keep and obj.age in vcl_deliver on a miss.
    pub fetched: Option<Fetched>,
    pub bereq: Option<Bereq>,
    /// The request as received, for `rollback`.
    pub original: Option<Box<(Method, Uri, HeaderMap)>>,
    pub is_hitmiss: bool,
    pub is_hitpass: bool,
    /// The fields the client's `Connection` named, as the request arrived: they do not go to
    /// the backend (a field vcl_recv sets under such a name does, as in Varnish).
    pub connection_named: Vec<http::HeaderName>,
    /// The response comes from a stored object whose `If-None-Match` / `If-Modified-Since`
    /// are answered after vcl_deliver, on the validators it delivers.
    pub conditional: bool,
    /// `return (pipe)`: the connection closes after this exchange.
    pub pipe: bool,
    /// The response comes from the cache (a hit, or another request's fetch this one
    /// waited for) — or, in 4.x, vcl_hit passed: `X-Varnish` then names the transaction
    /// that fetched what is delivered too.
    pub hit: bool,
    /// The request's Varnish-style records (`vsl.rs`), while `log.vsl_records` keeps any.
    pub vsl: Option<Arc<crate::txlog::vsl::Transaction>>,
}

impl VclTxn {
    /// A client request's state, with its transaction id.
    pub fn new(runtime: Arc<VclRuntime>) -> VclTxn {
        let xid = runtime.next_xid();
        VclTxn::numbered(runtime, xid)
    }

    /// A background fetch's state: `parent` is the id of the request that started it (2.x
    /// stores the object under it; 4.x numbers the backend request itself).
    pub fn background(runtime: Arc<VclRuntime>, parent: u64) -> VclTxn {
        VclTxn::numbered(runtime, parent)
    }

    fn numbered(runtime: Arc<VclRuntime>, xid: u64) -> VclTxn {
        VclTxn {
            runtime,
            state: State {
                xid,
                ..State::default()
            },
            ran: false,
            synthesized: false,
            obj: None,
            fetched: None,
            bereq: None,
            original: None,
            is_hitmiss: false,
            is_hitpass: false,
            connection_named: Vec::new(),
            conditional: false,
            pipe: false,
            hit: false,
            vsl: None,
        }
    }

    /// The id a new backend request of this transaction gets (`bereq.xid`).
    pub fn bereq_xid(&self) -> u64 {
        if self.runtime.program.dialect.is_legacy() {
            self.state.xid
        } else {
            self.runtime.next_xid()
        }
    }
}

/// `X-Varnish`, on responses and backend requests under a VCL program.
pub(super) const X_VARNISH: header::HeaderName = header::HeaderName::from_static("x-varnish");

/// The `X-Varnish` value of a response: the request's id, and for a response from the cache
/// the id of the transaction that fetched it (`1004 1002`).
pub(super) fn x_varnish(xid: u64, fetched_by: Option<u64>) -> HeaderValue {
    let text = match fetched_by {
        Some(f) => format!("{xid} {f}"),
        None => xid.to_string(),
    };
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("0"))
}

/// Marks a response about to be stored with the id of the transaction that fetched it (the
/// backend request's in 4.x, the client request's in 2.x), which a hit's `X-Varnish` names.
/// Replaces an `X-Varnish` the backend sent.
pub(super) fn mark_fetched(v: &VclTxn, headers: &mut HeaderMap) {
    let xid = v.bereq.as_ref().map_or(v.state.xid, |b| b.xid);
    headers.insert(X_VARNISH, x_varnish(xid, None));
}

/// The fetching transaction's id a stored object carries in its `X-Varnish` (stored by
/// `fetch/` under a VCL program): the last number of the value.
pub(super) fn fetched_by(value: Option<&HeaderValue>) -> Option<u64> {
    value?
        .to_str()
        .ok()?
        .split_ascii_whitespace()
        .next_back()?
        .parse()
        .ok()
}

/// The cache key of what vcl_hash gave `hash_data()`: the default key when it was the URL
/// and the host (the built-in vcl_hash), else the host (if hashed) and the URL (if hashed)
/// with every other input after `#` (which no request target holds). The URL is the input
/// equal to the request's, else the first that is a path (`/...`): the same inputs make the
/// same key whatever the request's own URL (trunk v00050's `/deliver` hashing `"/a"` finds
/// `/a`'s object, as in Varnish).
pub(super) fn key_from_hash(state: &State, host: &str, url: &str) -> CacheKey {
    let parts: Vec<&str> = state.hash_parts().collect();
    if let [u, h] = parts[..]
        && u == url
        && h == host
    {
        return CacheKey::new(host, url);
    }
    let host_part = parts.iter().position(|p| !host.is_empty() && *p == host);
    let url_part = parts
        .iter()
        .position(|p| *p == url)
        .or_else(|| (0..parts.len()).find(|&i| Some(i) != host_part && parts[i].starts_with('/')));
    let mut path = String::new();
    if let Some(i) = url_part {
        path.push_str(parts[i]);
    }
    for (i, p) in parts.iter().enumerate() {
        if Some(i) == host_part || Some(i) == url_part {
            continue;
        }
        path.push('#');
        path.push_str(p);
    }
    if path.is_empty() {
        path.push('#');
    }
    CacheKey::new(if host_part.is_some() { host } else { "" }, &path)
}

/// A header value from VCL text: CR, LF and NUL fail the request (they would split it).
pub(super) fn header_value(s: String) -> Result<HeaderValue, String> {
    HeaderValue::from_maybe_shared(bytes::Bytes::from(s))
        .map_err(|_| "a header value holds a control character (CR, LF or NUL)".to_string())
}

/// Whether `name` is one of Shellac's own stored fields (a stored ESI program, an encoded
/// object's identity, the generation it was made from, an object's own status line): VCL
/// never sees them (`*.http.*` reads none), cannot set them (the subroutine fails) and its
/// `unset` leaves them, so a VCL can neither read nor forge them.
pub(super) fn internal(name: &header::HeaderName) -> bool {
    [
        crate::esi::FIELD,
        crate::cache::identity::FIELD,
        crate::cache::representation::FIELD,
        crate::cache::status_line::FIELD,
    ]
    .contains(&name.as_str())
}

/// Whether `name` is a header VCL may not set or unset (framing is Shellac's).
pub(super) fn protected(name: &header::HeaderName) -> bool {
    name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(parts: &[&str]) -> State {
        let mut s = State::default();
        for p in parts {
            s.hash.push_str(p);
            s.hash.push('\0');
        }
        s
    }

    #[test]
    fn the_built_in_hash_is_the_default_key_and_extras_extend_it() {
        let k = key_from_hash(&state(&["/a?b", "example.com"]), "example.com", "/a?b");
        assert_eq!(k, CacheKey::new("example.com", "/a?b"));
        let k = key_from_hash(&state(&["/a", "example.com", "https"]), "example.com", "/a");
        assert_eq!(k.host(), "example.com");
        assert_eq!(k.path_and_query(), "/a#https");
        let k = key_from_hash(&state(&["/a"]), "example.com", "/a");
        assert_eq!((k.host(), k.path_and_query()), ("", "/a"));
    }

    /// The same `hash_data()` inputs make the same key whatever the request's URL: `/deliver`
    /// hashing `"/a"` finds `/a`'s object (trunk v00050).
    #[test]
    fn the_same_inputs_are_the_same_key_whatever_the_url() {
        let a = key_from_hash(&state(&["/a"]), "example.com", "/a");
        let deliver = key_from_hash(&state(&["/a"]), "example.com", "/deliver");
        assert_eq!(a, deliver);
        assert_eq!(deliver.path_and_query(), "/a");
        let a = key_from_hash(&state(&["/a", "x"]), "h", "/a");
        let other = key_from_hash(&state(&["/a", "x"]), "h", "/other");
        assert_eq!(a, other);
        // An input that is no path stays after `#`.
        let k = key_from_hash(&state(&["lang=de"]), "h", "/x");
        assert_eq!(k.path_and_query(), "#lang=de");
    }
}
