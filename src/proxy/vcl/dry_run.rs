//! Fast hits under a VCL program: a hit may skip the full path only when the program provably
//! does to it nothing the fast path cannot do. That holds when the operator wrote no
//! `vcl_hash` or `vcl_hit` (the built-in ones key by URL and host and deliver), `vcl_recv`,
//! run on the raw request head without being able to change it, returns `hash` (or
//! `lookup`), and `vcl_deliver`, if the operator wrote one, only adds fields the object does
//! not have (`set resp.http.X-Cache = "HIT";`): those become extra lines of the fast
//! answer's head. A `set` to the value already there and an `unset` of what is not there
//! change nothing and are allowed; any other `set` or `unset`, a call for its effect, or
//! reading what a dry run does not have stops it, and the request takes the full path, where
//! the program runs for real.

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use smallvec::SmallVec;

use super::VclRuntime;
use crate::vcl::ir::Var;
use crate::vcl::run::value::epoch;
use crate::vcl::run::{BackendSel, Env, State, Value, Verdict, evaluate};
use crate::vcl::types::Method;
use crate::vcl::vars::Slot;

/// Whether the program leaves hits alone but for what `vcl_recv` decides and the fields
/// `vcl_deliver` adds.
pub(super) fn hits_untouched(rt: &VclRuntime) -> bool {
    let p = &rt.program;
    !p.defines(Method::Hash) && !p.defines(Method::Hit)
}

/// Fields vcl_deliver adds to a fast hit's head.
pub(in crate::proxy) type Added = SmallVec<[(HeaderName, HeaderValue); 4]>;

/// The response a dry run of vcl_deliver sees: the stored object as it would be delivered.
struct Delivered<'a> {
    object: &'a crate::cache::Object,
    status: StatusCode,
    fields: &'a HeaderMap,
    added: Added,
}

/// A request head as `vcl_recv` reads it in a dry run.
struct RawRequest<'a> {
    rt: &'a VclRuntime,
    method: &'a str,
    target: &'a str,
    fields: &'a [httparse::Header<'a>],
    client: SocketAddr,
    state: State,
    /// The run read something the full path would see differently (`Accept-Encoding` before
    /// its normalisation) or that a dry run does not have: its verdict does not count.
    doubt: Cell<bool>,
    normalised_ae: bool,
    /// `now`, read from the clock when a subroutine first asks.
    now: Cell<Option<f64>>,
    /// For a dry run of vcl_deliver.
    delivered: Option<Delivered<'a>>,
}

impl Env for RawRequest<'_> {
    /// The full path runs it again and counts it.
    fn match_limit_hit(&self) {
        self.doubt.set(true);
    }

    fn get(&self, var: &Var) -> Value<'_> {
        match var.slot {
            Slot::ReqMethod => Value::str(self.method),
            Slot::ReqUrl => Value::str(self.target),
            Slot::ReqProto => Value::str("HTTP/1.1"),
            Slot::ReqHttp => {
                let Some(name) = var.header.as_ref() else {
                    return Value::None;
                };
                if self.normalised_ae && name == http::header::ACCEPT_ENCODING {
                    self.doubt.set(true);
                }
                match self
                    .fields
                    .iter()
                    .find(|f| f.name.eq_ignore_ascii_case(name.as_str()))
                {
                    Some(f) => match std::str::from_utf8(f.value) {
                        Ok(s) => Value::str(s),
                        Err(_) => {
                            self.doubt.set(true);
                            Value::None
                        }
                    },
                    None => Value::None,
                }
            }
            // Not `remote.ip`: behind a PROXY protocol header it is the balancer, which a
            // dry run is not told (the full path reads it).
            Slot::ClientIp => Value::Ip(self.client),
            Slot::Now => Value::Time(match self.now.get() {
                Some(t) => t,
                None => {
                    let t = epoch(std::time::SystemTime::now());
                    self.now.set(Some(t));
                    t
                }
            }),
            Slot::ReqRestarts | Slot::ReqEsiLevel => Value::Int(0),
            Slot::ServerHostname | Slot::ServerIdentity => Value::str(&self.rt.hostname),
            Slot::ReqBackend => Value::Backend(match self.rt.program.default_target {
                Some(t) => BackendSel {
                    target: t,
                    hash: None,
                },
                None => BackendSel::none(),
            }),
            Slot::Fixed(b, _) => Value::Bool(b),
            Slot::RespHttp | Slot::RespStatus | Slot::ObjHits | Slot::ObjTtl | Slot::ObjAge
                if self.delivered.is_some() =>
            {
                let Some(d) = &self.delivered else {
                    return Value::None;
                };
                match var.slot {
                    Slot::RespStatus => Value::Int(i64::from(d.status.as_u16())),
                    // The fast path counted this hit before the dry run.
                    Slot::ObjHits => Value::Int(i64::from(d.object.hits.load(Relaxed).max(1))),
                    Slot::ObjAge => Value::Duration(d.object.age(Instant::now()).as_secs_f64()),
                    Slot::ObjTtl => {
                        let age = d.object.age(Instant::now()).as_secs_f64();
                        Value::Duration(d.object.ttl.get().as_secs_f64() - age)
                    }
                    _ => {
                        let Some(name) = var.header.as_ref() else {
                            return Value::None;
                        };
                        // Per request (`with_xid`): not what a head made once can hold.
                        // Shellac's own fields: the full path reads them as absent.
                        if name == super::X_VARNISH || super::internal(name) {
                            self.doubt.set(true);
                            return Value::None;
                        }
                        if let Some((_, v)) = d.added.iter().find(|(n, _)| n == name) {
                            return match v.to_str() {
                                Ok(s) => Value::str(s),
                                Err(_) => {
                                    self.doubt.set(true);
                                    Value::None
                                }
                            };
                        }
                        match d.fields.get(name).map(|v| v.to_str()) {
                            None => Value::None,
                            Some(Ok(s)) => Value::str(s),
                            Some(Err(_)) => {
                                self.doubt.set(true);
                                Value::None
                            }
                        }
                    }
                }
            }
            _ => {
                self.doubt.set(true);
                Value::None
            }
        }
    }

    fn set(&mut self, var: &Var, value: Value<'static>) -> Result<(), String> {
        let text = value.text(&|_| "").into_owned();
        let v = super::header_value(text)?;
        self.set_header(var, v)
    }

    fn set_header(&mut self, var: &Var, value: HeaderValue) -> Result<(), String> {
        // Only a field the stored object does not have may be added (once).
        match (&mut self.delivered, var.slot, var.header.as_ref()) {
            (Some(d), Slot::RespHttp, Some(name))
                if !d.fields.contains_key(name)
                    && !super::protected(name)
                    && !super::internal(name)
                    && name != super::X_VARNISH =>
            {
                match d.added.iter_mut().find(|(n, _)| n == name) {
                    Some(slot) => slot.1 = value,
                    None => d.added.push((name.clone(), value)),
                }
                Ok(())
            }
            _ => Err("read-only".to_string()),
        }
    }

    fn unset(&mut self, _: &Var) -> Result<(), String> {
        Err("read-only".to_string())
    }

    fn collect(&mut self, _: &Var, _: &str) {
        self.doubt.set(true);
    }

    fn target_name(&self, target: u16) -> &str {
        self.rt.program.target_name(target)
    }

    fn healthy(&self, sel: BackendSel) -> bool {
        self.rt.member(sel).is_some_and(|m| m.healthy())
    }

    fn ban(&self, _: &str) -> Result<(), String> {
        self.doubt.set(true);
        Err("read-only".to_string())
    }

    fn purge(&self, _: Option<crate::vcl::run::SoftPurge>) -> usize {
        self.doubt.set(true);
        0
    }

    fn purge_keys(&self, _: &str, _: bool) -> usize {
        self.doubt.set(true);
        0
    }

    /// Counts a request against a limit: the full path does it, once.
    fn throttle(
        &self,
        _: crate::vcl::ir::ThrottleOp,
        _: &str,
        _: i64,
        _: f64,
        _: f64,
    ) -> Value<'static> {
        self.doubt.set(true);
        Value::None
    }

    fn log(&mut self, _: &str) {
        self.doubt.set(true);
    }

    fn cache_req_body(&self, _: u64) -> bool {
        self.doubt.set(true);
        false
    }

    fn rollback(&mut self) {
        self.doubt.set(true);
    }

    fn state(&self) -> &State {
        &self.state
    }

    fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }

    fn read_only(&self) -> bool {
        true
    }
}

/// Whether `vcl_recv`, run on this request head, would look it up without changing it (so a
/// fresh object in memory answers it exactly as the full path would).
pub(in crate::proxy) fn recv_looks_up(
    rt: &VclRuntime,
    method: &str,
    target: &str,
    fields: &[httparse::Header<'_>],
    client: SocketAddr,
    normalised_ae: bool,
) -> bool {
    if !hits_untouched(rt) {
        return false;
    }
    let mut env = RawRequest {
        rt,
        method,
        target,
        fields,
        client,
        state: State::default(),
        doubt: Cell::new(false),
        normalised_ae,
        now: Cell::new(None),
        delivered: None,
    };
    let verdict = evaluate(&rt.program, Method::Recv, &mut env);
    matches!(verdict, Verdict::Hash | Verdict::Lookup) && !env.doubt.get()
}

/// The head of a fast hit under `rt`: the prepared head with what vcl_deliver adds, or
/// `None` when vcl_deliver would do more than add fields the object does not have.
pub(in crate::proxy) fn fast_head(
    rt: &std::sync::Arc<VclRuntime>,
    request: (&str, &str, &[httparse::Header<'_>], SocketAddr),
    object: &crate::cache::Object,
    prepared: &crate::cache::Prepared,
) -> Option<bytes::Bytes> {
    let wire = prepared.wire(object.status);
    if !rt.program.defines(Method::Deliver) {
        return Some(wire.clone());
    }
    let make = || {
        deliver_adds(rt, request, object, &prepared.map).map(|added| {
            if added.is_empty() {
                wire.clone()
            } else {
                with_fields(wire, &added)
            }
        })
    };
    if !rt.deliver_object_only {
        return make();
    }
    let id = std::sync::Arc::as_ptr(rt) as usize;
    match prepared.vcl_wire.get_or_init(|| Box::new((id, make()))) {
        (cached, head) if *cached == id => head.clone(),
        // Made under a program a reload has replaced.
        _ => make(),
    }
}

/// A fast hit's head with its `X-Varnish` (`1004 1002`: a new id for this request, and the
/// one of the transaction that fetched the object, which the stored fields carry). The
/// one allocation per fast hit that a VCL program costs; without VCL it never runs.
pub(in crate::proxy) fn with_xid(rt: &VclRuntime, head: &bytes::Bytes) -> bytes::Bytes {
    const LINE: &[u8] = b"\r\nx-varnish: ";
    let xid = rt.next_xid();
    let found = head.windows(LINE.len()).position(|w| w == LINE);
    let (before, fetched, after) = match found {
        Some(at) => {
            let value_at = at + LINE.len();
            let end = head[value_at..]
                .windows(2)
                .position(|w| w == b"\r\n")
                .map_or(head.len(), |e| value_at + e);
            let value = HeaderValue::from_bytes(&head[value_at..end]).ok();
            (&head[..at], super::fetched_by(value.as_ref()), &head[end..])
        }
        // Stored without a program (no id): the line goes where added fields go.
        None => {
            let end = if head.ends_with(b"\r\n\r\n") {
                head.len() - 4
            } else {
                head.len().saturating_sub(2)
            };
            (&head[..end], None, &head[end..])
        }
    };
    let value = super::x_varnish(xid, fetched);
    let mut out = Vec::with_capacity(head.len() + 16);
    out.extend_from_slice(before);
    out.extend_from_slice(LINE);
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(after);
    bytes::Bytes::from(out)
}

/// A prepared head with `added` fields after its own (before the blank line, when the head
/// has one: the stored fields carried their own `Date`).
fn with_fields(head: &bytes::Bytes, added: &[(HeaderName, HeaderValue)]) -> bytes::Bytes {
    let ends = head.ends_with(b"\r\n\r\n");
    let body = if ends {
        &head[..head.len() - 2]
    } else {
        &head[..]
    };
    let extra: usize = added
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    let mut out = Vec::with_capacity(head.len() + extra);
    out.extend_from_slice(body);
    for (name, value) in added {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if ends {
        out.extend_from_slice(b"\r\n");
    }
    bytes::Bytes::from(out)
}

/// What vcl_deliver adds to this fast hit (nothing when the operator wrote none), or `None`
/// when it would do more than add fields the object does not have.
fn deliver_adds(
    rt: &VclRuntime,
    (method, target, fields, client): (&str, &str, &[httparse::Header<'_>], SocketAddr),
    object: &crate::cache::Object,
    response: &HeaderMap,
) -> Option<Added> {
    if !rt.program.defines(Method::Deliver) {
        return Some(Added::new());
    }
    let mut env = RawRequest {
        rt,
        method,
        target,
        fields,
        client,
        state: State::default(),
        doubt: Cell::new(false),
        normalised_ae: false,
        now: Cell::new(None),
        delivered: Some(Delivered {
            object,
            status: object.status,
            fields: response,
            added: Added::new(),
        }),
    };
    let verdict = evaluate(&rt.program, Method::Deliver, &mut env);
    if verdict != Verdict::Deliver || env.doubt.get() {
        return None;
    }
    env.delivered.map(|d| d.added)
}
