//! What a running subroutine sees and decides: the [`Env`] the request path gives it, the
//! request's VCL [`State`] that lives across its steps, and the [`Verdict`] it returns.

use http::HeaderValue;

use super::cookie::CookieJar;
use super::value::{BackendSel, Value};
use crate::vcl::ir::{ThrottleOp, Var};
use crate::vcl::types::Method;

/// What a subroutine decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Hash,
    Lookup,
    Pass,
    Pipe,
    Deliver,
    Fetch,
    Restart,
    Retry,
    Miss,
    Purge,
    Abandon,
    /// `return (fail)`, or a failure while running (the reason is logged).
    Fail(String),
    Ok,
    HitForPass,
    /// `pass(DURATION)` of vcl_backend_response: hit-for-pass for that many seconds.
    PassFor(f64),
    /// `synth(status, reason)` / 2.x `error status reason`.
    Synth(u16, Option<String>),
}

impl Verdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Hash => "hash",
            Verdict::Lookup => "lookup",
            Verdict::Pass => "pass",
            Verdict::Pipe => "pipe",
            Verdict::Deliver => "deliver",
            Verdict::Fetch => "fetch",
            Verdict::Restart => "restart",
            Verdict::Retry => "retry",
            Verdict::Miss => "miss",
            Verdict::Purge => "purge",
            Verdict::Abandon => "abandon",
            Verdict::Fail(_) => "fail",
            Verdict::Ok => "ok",
            Verdict::HitForPass => "hit_for_pass",
            Verdict::PassFor(_) => "pass",
            Verdict::Synth(..) => "synth",
        }
    }
}

/// What the request path lets a subroutine read and change.
pub trait Env {
    /// A variable's value (strings borrowed from the request where they can be).
    fn get(&self, var: &Var) -> Value<'_>;
    /// Sets a variable. An error fails the request (Varnish's "VCL failure": a 503).
    fn set(&mut self, var: &Var, value: Value<'static>) -> Result<(), String>;
    /// Sets a header to a ready value (a constant: no allocation).
    fn set_header(&mut self, var: &Var, value: HeaderValue) -> Result<(), String>;
    /// Removes a variable (every line of a header).
    fn unset(&mut self, var: &Var) -> Result<(), String>;
    /// Every line of a header joined with `sep` into one (`std.collect`).
    fn collect(&mut self, var: &Var, sep: &str);
    /// A target's name (backend or director).
    fn target_name(&self, target: u16) -> &str;
    /// Whether a backend or director has a healthy backend.
    fn healthy(&self, sel: BackendSel) -> bool;
    /// Adds a ban (`ban()`); the error is the ban parser's.
    fn ban(&self, expr: &str) -> Result<(), String>;
    /// `ban()` / `std.ban()` as Varnish runs them: `None` is an unset argument ("Null
    /// argument"); a refusal is noted for `std.ban_error()` and logged as `VCL_Error`
    /// (`ban(): WORDS`). Whether the ban was added.
    fn vcl_ban(&self, expr: Option<&str>) -> bool {
        let result = match expr {
            None => Err("Null argument".to_string()),
            Some(e) => self.ban(e),
        };
        let state = self.state();
        let words = result.as_ref().err().cloned().unwrap_or_default();
        if let Err(e) = &result {
            tracing::info!(target: "vcl", xid = state.xid, "ban(): {e}");
            if let Ok(mut errors) = state.errors.lock()
                && errors.len() < 64
            {
                errors.push(format!("ban(): {e}"));
            }
        }
        if let Ok(mut last) = state.ban_error.lock() {
            *last = words;
        }
        result.is_ok()
    }
    /// vmod_purge on every variant of the request's cache key: removed (`None`) or made
    /// stale; how many objects it touched.
    fn purge(&self, soft: Option<SoftPurge>) -> usize;
    /// vmod_xkey on the objects tagged with one of `keys` (separated by spaces or commas):
    /// removed, or (`soft`) those still fresh made stale; how many objects it touched.
    fn purge_keys(&self, keys: &str, soft: bool) -> usize;
    /// vmod_vsthrottle: `op` on the bucket of `key` under `limit` requests per `period`
    /// seconds (`block`: seconds an empty bucket blocks the key).
    fn throttle(
        &self,
        op: ThrottleOp,
        key: &str,
        limit: i64,
        period: f64,
        block: f64,
    ) -> Value<'static>;
    /// A line for the log (`std.log`).
    fn log(&mut self, msg: &str);
    /// Puts the request back as it arrived (`rollback`).
    fn rollback(&mut self);
    fn state(&self) -> &State;
    fn state_mut(&mut self) -> &mut State;
    /// `std.cache_req_body(size)`: whether the request body, read whole before vcl_recv, is
    /// at most `size` bytes; if so it is kept for every backend request of this request.
    fn cache_req_body(&self, size: u64) -> bool {
        let state = self.state();
        match state.req_body_held {
            Some(len) if len <= size => {
                state
                    .req_body_cached
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }
    /// A regular expression ran past `[vcl] match_limit` and its match failed: counted.
    fn match_limit_hit(&self);
    /// A dry run (the fast hit path's): any `set`, `unset` or call for an effect stops it
    /// (`Verdict::Fail`), since it would have to change the request.
    fn read_only(&self) -> bool {
        false
    }
}

/// `purge.soft(ttl, grace, keep)` in seconds: at most `ttl` of freshness left; at most
/// `grace` and `keep` when not negative (a soft purge never lengthens them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftPurge {
    pub ttl: f64,
    pub grace: f64,
    pub keep: f64,
}

/// A request's VCL state that lives across its steps.
/// The per-session timeouts VCL sets, as indexes of [`State::sess`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessTimeout {
    /// `sess.timeout_idle`.
    Idle = 0,
    /// `sess.timeout_linger`.
    Linger = 1,
    /// `sess.send_timeout`.
    Send = 2,
    /// `sess.idle_send_timeout`.
    IdleSend = 3,
}

#[derive(Debug, Default)]
pub struct State {
    /// `req.restarts`.
    pub restarts: u32,
    /// `bereq.retries`.
    pub retries: u32,
    /// `req.xid`.
    pub xid: u64,
    /// `hash_data()` inputs of this lookup, each ended by a 0 byte.
    pub hash: String,
    /// The request's backend (`req.backend_hint`), when VCL chose one.
    pub backend: Option<BackendSel>,
    /// `req.ttl`, `req.grace` (seconds; `None`: unset).
    pub req_ttl: Option<f64>,
    pub req_grace: Option<f64>,
    pub hash_always_miss: bool,
    pub hash_ignore_busy: bool,
    pub hash_ignore_vary: bool,
    /// `client.identity` when set.
    pub identity: Option<String>,
    /// The body of a generated response (`synthetic`, `resp.body`, `beresp.body`).
    pub body: Option<String>,
    /// The cookie VMOD's jar.
    pub cookies: CookieJar,
    /// Which subroutine returned what, for the log (`recv:hash hash:lookup miss:fetch`):
    /// kept inline, written out only when a transaction record is made.
    pub trace: smallvec::SmallVec<[(Method, &'static str, u16); 12]>,
    /// Lines from `std.log`.
    pub log: Vec<String>,
    /// The request body's length when it was read whole before vcl_recv (a program that
    /// calls `std.cache_req_body()`); `None`: not read, or longer than the program keeps.
    pub req_body_held: Option<u64>,
    /// `req.hash` / `bereq.hash`: the SHA-256 of this lookup's hash inputs (each ended by a 0
    /// byte, as Varnish's), made at vcl_hash when the program reads it.
    pub digest: Option<[u8; 32]>,
    /// The session timeouts as this request set them, in [`SessTimeout`]'s order (idle,
    /// linger, send, idle send): `Some(None)` unset (back to the configured one),
    /// `Some(Some(seconds))` set; `None` untouched.
    pub sess: [Option<Option<f64>>; 4],
    /// `std.cache_req_body()` kept the body: every backend request of this request (retries,
    /// restarts) sends a copy. Atomic only to be set through `&self` (the call may be in an
    /// expression); one request's task reads and writes it.
    pub req_body_cached: std::sync::atomic::AtomicBool,
    /// The last `ban()` / `std.ban()`'s refusal, in Varnish's words (`std.ban_error()`;
    /// empty after one that was added). Behind a lock only to be set through `&self`.
    pub ban_error: std::sync::Mutex<String>,
    /// `VCL_Error` lines of the subroutine running (a refused ban: `ban(): WORDS`), written
    /// to the request's records after it returns; at most 64.
    pub errors: std::sync::Mutex<Vec<String>>,
    /// `req.time`: when VCL first ran for the request (seconds since the epoch).
    pub req_time: Option<f64>,
    /// `req.esi = false` (at ESI level 0) / `resp.do_esi = false`: the response is not
    /// assembled.
    pub esi_off: bool,
    /// The response being delivered is an ESI page (`obj.can_esi`, `resp.do_esi`).
    pub esi_page: bool,
}

impl State {
    /// Notes that `method` returned `verdict` (for `shellac log`). Bounded: a request that
    /// restarts four times runs at most ~40 subroutines; the first 64 are kept.
    pub fn note(&mut self, method: Method, verdict: &Verdict) {
        if self.trace.len() >= 64 {
            return;
        }
        let status = match verdict {
            Verdict::Synth(status, _) => *status,
            _ => 0,
        };
        self.trace.push((method, verdict.as_str(), status));
    }

    /// The trace as text: `recv:hash hash:lookup miss:fetch ... synth(503)`.
    pub fn trace_text(&self) -> String {
        let mut out = String::new();
        for (m, v, status) in &self.trace {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(m.sub_name().trim_start_matches("vcl_"));
            out.push(':');
            out.push_str(v);
            if *status != 0 {
                out.push('(');
                out.push_str(itoa::Buffer::new().format(*status));
                out.push(')');
            }
        }
        out
    }

    /// The `hash_data()` inputs, in order.
    pub fn hash_parts(&self) -> impl Iterator<Item = &str> {
        self.hash.split_terminator('\0')
    }
}
