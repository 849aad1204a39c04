//! What a VCL subroutine reads and changes at a step of a request: the variables' slots
//! (`vcl/vars/`) mapped onto the request, the backend request and response, the stored
//! object and the response to the client, whichever the step has.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, StatusCode, Uri, Version};

use super::{Bereq, Beresp, Resp, VclRuntime, header_value, protected};
use crate::cache::shared::feed::{self, Invalidation};
use crate::cache::{Cache, CacheKey, Object};
use crate::proxy::throttle::{Limit, Taken};
use crate::vcl::ir::ThrottleOp;
use crate::vcl::ir::Var;
use crate::vcl::run::value::{epoch, to_duration};
use crate::vcl::run::{BackendSel, Env, SoftPurge, State, Value};
use crate::vcl::vars::Slot;

/// Changes 2.x's vcl_hit makes to the stored object (`set obj.ttl = 0s;`).
#[derive(Debug, Default, Clone, Copy)]
pub(in crate::proxy) struct ObjEdit {
    pub ttl: Option<f64>,
    pub grace: Option<f64>,
    pub keep: Option<f64>,
    pub cacheable: Option<bool>,
}

/// A step's view of the request for a subroutine.
pub(in crate::proxy) struct Scope<'a> {
    pub rt: &'a VclRuntime,
    pub cache: &'a Cache,
    pub client: SocketAddr,
    /// The local address of the client's connection (`server.ip`, `local.ip`), when the
    /// program reads it (`crate::proxy::LocalAddr`).
    pub local: Option<SocketAddr>,
    pub state: &'a mut State,
    pub req: Option<&'a mut Parts>,
    pub original: Option<&'a (Method, Uri, HeaderMap)>,
    /// The stored object and whether it was found in the cache (`obj.hits`).
    pub obj: Option<(&'a Object, bool)>,
    pub obj_edit: Option<&'a mut ObjEdit>,
    pub bereq: Option<&'a mut Bereq>,
    pub beresp: Option<&'a mut Beresp>,
    pub resp: Option<&'a mut Resp>,
    pub is_hitmiss: bool,
    pub is_hitpass: bool,
    /// What a miss fetched and stores, when there is no stored `obj` (vcl_deliver on a miss).
    pub fetched: Option<super::Fetched>,
    /// The request's cache key once vcl_hash made it (vmod_purge's target).
    pub key: Option<&'a CacheKey>,
    /// When the request arrived (`req.time`), seconds since the epoch.
    pub started: f64,
    pub now: f64,
}

impl<'a> Scope<'a> {
    /// A scope with the client request and nothing else.
    pub fn client(
        rt: &'a VclRuntime,
        cache: &'a Cache,
        client: SocketAddr,
        state: &'a mut State,
        req: &'a mut Parts,
    ) -> Scope<'a> {
        let now = epoch(std::time::SystemTime::now());
        let started = *state.req_time.get_or_insert(now);
        // Looked up only for a program that reads it (one map lookup per subroutine run).
        let local = if rt.program.reads_local {
            req.extensions.get::<crate::proxy::LocalAddr>().map(|l| l.0)
        } else {
            None
        };
        Scope {
            rt,
            cache,
            client,
            local,
            state,
            req: Some(req),
            original: None,
            obj: None,
            obj_edit: None,
            bereq: None,
            beresp: None,
            resp: None,
            is_hitmiss: false,
            is_hitpass: false,
            key: None,
            fetched: None,
            started,
            now,
        }
    }

    /// The client's request an ESI include serves (`req_top.*`), when this is an include.
    fn top(&self) -> Option<&crate::esi::TopRequest> {
        self.req
            .as_ref()
            .and_then(|r| r.extensions.get::<crate::esi::Top>())
            .map(|t| &*t.0)
    }

    fn default_backend(&self) -> BackendSel {
        match self.rt.program.default_target {
            Some(t) => BackendSel {
                target: t,
                hash: None,
            },
            None => BackendSel::none(),
        }
    }

    fn target_by_name(&self, name: &str) -> BackendSel {
        match self.rt.program.targets.iter().position(|t| t == name) {
            Some(i) => BackendSel {
                target: i as u16,
                hash: None,
            },
            None => BackendSel::none(),
        }
    }
}

/// The first line of a header, as text (bytes that are not UTF-8 are replaced).
fn header<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Value<'h> {
    match headers.get(name) {
        None => Value::None,
        Some(v) => match v.to_str() {
            Ok(s) => Value::str(s),
            Err(_) => Value::Str(String::from_utf8_lossy(v.as_bytes())),
        },
    }
}

fn proto(v: Version) -> &'static str {
    match v {
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_09 => "HTTP/0.9",
        _ => "HTTP/1.1",
    }
}

fn text(v: &Value<'_>, rt: &VclRuntime) -> String {
    v.text(&|t| {
        rt.program
            .targets
            .get(t as usize)
            .map_or("", String::as_str)
    })
    .into_owned()
}

fn uri(s: &str) -> Result<Uri, String> {
    s.parse::<Uri>()
        .map_err(|_| format!("\"{s}\" is not a URL Shellac can send"))
}

fn status(n: i64) -> Result<StatusCode, String> {
    u16::try_from(n.rem_euclid(1000))
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .ok_or_else(|| format!("{n} is not an HTTP status"))
}

fn set_header(headers: &mut HeaderMap, name: &HeaderName, v: HeaderValue) -> Result<(), String> {
    if protected(name) {
        return Err(format!("{name} cannot be set from VCL"));
    }
    headers.insert(name.clone(), v);
    Ok(())
}

impl Env for Scope<'_> {
    fn get(&self, var: &Var) -> Value<'_> {
        let h = var.header.as_ref();
        match var.slot {
            Slot::ClientIp | Slot::RemoteIp => Value::Ip(self.client),
            Slot::ClientIdentity => match &self.state.identity {
                Some(i) => Value::str(i),
                None => Value::Ip(self.client),
            },
            // Without PROXY protocol (which Shellac does not take) `server.ip` is `local.ip`,
            // as in Varnish.
            Slot::ServerIp | Slot::LocalIp => Value::Ip(
                self.local
                    .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
            ),
            Slot::ServerPort => Value::Int(self.local.map_or(0, |a| i64::from(a.port()))),
            Slot::ServerHostname | Slot::ServerIdentity => Value::str(&self.rt.hostname),
            Slot::LocalEndpoint | Slot::LocalSocket => Value::str("a0"),
            Slot::Now => Value::Time(self.now),
            Slot::SessXid | Slot::ReqXid => Value::Int(self.state.xid as i64),
            Slot::ParamTimeoutIdle => Value::Duration(self.rt.idle_timeout),
            Slot::ReqDigest => match &self.state.digest {
                Some(d) => Value::Blob(Cow::Borrowed(&d[..])),
                None => Value::None,
            },
            // As this request set it, else as an earlier response set it for the session,
            // else the configured one.
            Slot::SessTimeoutIdle => Value::Duration(match self.state.sess_idle {
                Some(Some(secs)) => secs,
                Some(None) => self.rt.idle_timeout,
                None => self
                    .req
                    .as_ref()
                    .and_then(|r| r.extensions.get::<crate::proxy::SessionIdle>())
                    .and_then(|s| s.0)
                    .map_or(self.rt.idle_timeout, |d| d.as_secs_f64()),
            }),
            Slot::BereqXid => {
                Value::Int(self.bereq.as_ref().map_or(self.state.xid, |b| b.xid) as i64)
            }
            Slot::ReqMethod => self
                .req
                .as_ref()
                .map_or(Value::None, |r| Value::str(r.method.as_str())),
            Slot::ReqUrl => self.req.as_ref().map_or(Value::None, |r| {
                Value::str(r.uri.path_and_query().map_or("/", |p| p.as_str()))
            }),
            Slot::ReqProto => self
                .req
                .as_ref()
                .map_or(Value::None, |r| Value::str(proto(r.version))),
            Slot::ReqHttp => match (&self.req, h) {
                (Some(r), Some(h)) => header(&r.headers, h),
                _ => Value::None,
            },
            Slot::ReqHash => Value::None,
            Slot::ReqBackend => {
                Value::Backend(self.state.backend.unwrap_or_else(|| self.default_backend()))
            }
            Slot::ReqBackendHealthy => Value::Bool(
                self.healthy(self.state.backend.unwrap_or_else(|| self.default_backend())),
            ),
            Slot::ReqRestarts => Value::Int(i64::from(self.state.restarts)),
            Slot::ReqGrace => Value::Duration(self.state.req_grace.unwrap_or(
                if self.rt.program.dialect.is_legacy() {
                    self.rt.default_grace
                } else {
                    -1.0
                },
            )),
            Slot::ReqTtl => Value::Duration(self.state.req_ttl.unwrap_or(-1.0)),
            Slot::ReqHashAlwaysMiss => Value::Bool(self.state.hash_always_miss),
            Slot::ReqHashIgnoreBusy => Value::Bool(self.state.hash_ignore_busy),
            Slot::ReqHashIgnoreVary => Value::Bool(self.state.hash_ignore_vary),
            Slot::ReqCanGzip => Value::Bool(self.req.as_ref().is_some_and(|r| {
                crate::http::accept_encoding::Accepts::parse(
                    r.headers
                        .get_all(header::ACCEPT_ENCODING)
                        .iter()
                        .map(http::HeaderValue::as_bytes),
                )
                .accepts(crate::http::accept_encoding::Coding::Gzip)
            })),
            Slot::ReqEsiLevel => Value::Int(i64::from(
                self.req
                    .as_ref()
                    .and_then(|r| r.extensions.get::<crate::esi::Level>())
                    .map_or(0, |l| l.0),
            )),
            Slot::ReqTime => Value::Time(self.started),
            Slot::ReqTopUrl => match self.top() {
                Some(t) => Value::str(&t.url),
                None => self.get(&Var {
                    slot: Slot::ReqUrl,
                    header: None,
                }),
            },
            Slot::ReqTopMethod => match self.top() {
                Some(t) => Value::str(t.method.as_str()),
                None => self.get(&Var {
                    slot: Slot::ReqMethod,
                    header: None,
                }),
            },
            Slot::ReqTopProto => match self.top() {
                Some(t) => Value::str(proto(t.version)),
                None => self.get(&Var {
                    slot: Slot::ReqProto,
                    header: None,
                }),
            },
            Slot::ReqTopTime => {
                Value::Time(self.top().and_then(|t| t.time).unwrap_or(self.started))
            }
            Slot::ReqTopHttp => match (self.top(), h) {
                (Some(t), Some(h)) => header(&t.headers, h),
                (None, _) => self.get(&Var {
                    slot: Slot::ReqHttp,
                    header: var.header.clone(),
                }),
                _ => Value::None,
            },
            Slot::ReqIsHitmiss | Slot::BereqIsHitmiss => Value::Bool(self.is_hitmiss),
            Slot::ReqIsHitpass | Slot::BereqIsHitpass => Value::Bool(self.is_hitpass),
            Slot::ReqTransport => Value::str("HTTP/1"),
            Slot::BereqMethod => self
                .bereq
                .as_ref()
                .map_or(Value::None, |b| Value::str(b.method.as_str())),
            Slot::BereqUrl => self.bereq.as_ref().map_or(Value::None, |b| {
                Value::str(b.uri.path_and_query().map_or("/", |p| p.as_str()))
            }),
            Slot::BereqProto => Value::str("HTTP/1.1"),
            Slot::BereqHttp => match (&self.bereq, h) {
                (Some(b), Some(h)) => header(&b.headers, h),
                _ => Value::None,
            },
            Slot::BereqBackend => Value::Backend(
                self.bereq
                    .as_ref()
                    .and_then(|b| b.backend)
                    .or(self.state.backend)
                    .unwrap_or_else(|| self.default_backend()),
            ),
            Slot::BereqRetries => Value::Int(i64::from(self.state.retries)),
            Slot::BereqUncacheable => {
                Value::Bool(self.bereq.as_ref().is_some_and(|b| b.uncacheable))
            }
            Slot::BereqIsBgfetch => Value::Bool(self.bereq.as_ref().is_some_and(|b| b.bgfetch)),
            Slot::BereqRetryConnect => {
                Value::Bool(self.bereq.as_ref().is_none_or(|b| b.retry_connect))
            }
            Slot::BereqConnectTimeout => Value::Duration(
                self.bereq
                    .as_ref()
                    .and_then(|b| b.connect_timeout)
                    .unwrap_or(self.rt.program.timeouts.connect)
                    .as_secs_f64(),
            ),
            Slot::BereqFirstByteTimeout => Value::Duration(
                self.bereq
                    .as_ref()
                    .and_then(|b| b.first_byte_timeout)
                    .unwrap_or(self.rt.program.timeouts.first_byte)
                    .as_secs_f64(),
            ),
            Slot::BereqBetweenBytesTimeout => Value::Duration(
                self.bereq
                    .as_ref()
                    .and_then(|b| b.between_bytes_timeout)
                    .unwrap_or(self.rt.program.timeouts.between_bytes)
                    .as_secs_f64(),
            ),
            Slot::BereqBody => Value::None,
            Slot::BereqTime | Slot::BerespTime | Slot::RespTime => Value::Time(self.now),
            Slot::BerespStatus => self
                .beresp
                .as_ref()
                .map_or(Value::None, |b| Value::Int(i64::from(b.status.as_u16()))),
            Slot::BerespReason => self
                .beresp
                .as_ref()
                .map_or(Value::None, |b| match &b.reason {
                    Some(r) => Value::str(r),
                    None => Value::str(b.status.canonical_reason().unwrap_or("")),
                }),
            Slot::BerespProto => Value::str("HTTP/1.1"),
            Slot::BerespHttp => match (&self.beresp, h) {
                (Some(b), Some(h)) => header(&b.headers, h),
                _ => Value::None,
            },
            Slot::BerespTtl => Value::Duration(self.beresp.as_ref().map_or(0.0, |b| b.ttl)),
            Slot::BerespGrace => Value::Duration(self.beresp.as_ref().map_or(0.0, |b| b.grace)),
            Slot::BerespKeep => Value::Duration(self.beresp.as_ref().map_or(0.0, |b| b.keep)),
            Slot::BerespUncacheable => {
                Value::Bool(self.beresp.as_ref().is_some_and(|b| b.uncacheable))
            }
            Slot::BerespCacheable => {
                Value::Bool(self.beresp.as_ref().is_some_and(|b| !b.uncacheable))
            }
            Slot::BerespAge => Value::Duration(self.beresp.as_ref().map_or(0.0, |b| b.age)),
            Slot::BerespBackend => match self.beresp.as_ref().and_then(|b| b.backend.as_deref()) {
                Some(name) => Value::Backend(self.target_by_name(name)),
                None => Value::Backend(BackendSel::none()),
            },
            Slot::BerespBackendName => {
                match self.beresp.as_ref().and_then(|b| b.backend.as_deref()) {
                    Some(name) => Value::str(name),
                    None => Value::None,
                }
            }
            Slot::BerespWas304 => Value::Bool(self.beresp.as_ref().is_some_and(|b| b.was_304)),
            Slot::BerespDoStream => Value::Bool(self.beresp.as_ref().is_none_or(|b| b.do_stream)),
            Slot::BerespDoGzip => {
                Value::Bool(self.beresp.as_ref().is_some_and(|b| b.fetch.do_gzip))
            }
            Slot::BerespDoGunzip => {
                Value::Bool(self.beresp.as_ref().is_some_and(|b| b.fetch.do_gunzip))
            }
            Slot::BerespDoEsi => Value::Bool(self.beresp.as_ref().is_some_and(|b| b.fetch.do_esi)),
            // Write-only in Varnish 2.1 (the checker refuses a read).
            Slot::BerespSaintmode => Value::Duration(
                self.beresp
                    .as_ref()
                    .and_then(|b| b.saintmode)
                    .unwrap_or(0.0),
            ),
            Slot::BerespPrefetch => {
                Value::Duration(self.beresp.as_ref().and_then(|b| b.prefetch).unwrap_or(0.0))
            }
            Slot::BerespBody | Slot::RespBody => Value::None,
            Slot::ObjStatus => self.obj.map_or(Value::None, |(o, _)| {
                Value::Int(i64::from(o.status.as_u16()))
            }),
            Slot::ObjReason => self.obj.map_or(Value::None, |(o, _)| {
                Value::str(o.status.canonical_reason().unwrap_or(""))
            }),
            Slot::ObjProto => Value::str("HTTP/1.1"),
            Slot::ObjHttp => match (self.obj, h) {
                (Some((o, _)), Some(h)) => header(o.headers.map(), h),
                _ => Value::None,
            },
            Slot::ObjTtl if self.obj.is_none() => Value::Duration(
                self.fetched
                    .map_or(0.0, |f| f.ttl - f.at.elapsed().as_secs_f64()),
            ),
            Slot::ObjGrace if self.obj.is_none() => {
                Value::Duration(self.fetched.map_or(0.0, |f| f.grace))
            }
            Slot::ObjKeep if self.obj.is_none() => {
                Value::Duration(self.fetched.map_or(0.0, |f| f.keep))
            }
            Slot::ObjAge if self.obj.is_none() => {
                Value::Duration(self.fetched.map_or(0.0, |f| f.at.elapsed().as_secs_f64()))
            }
            Slot::ObjTtl => self.obj.map_or(Value::Duration(0.0), |(o, _)| {
                let age = o.age(Instant::now()).as_secs_f64();
                Value::Duration(
                    self.obj_edit
                        .as_ref()
                        .and_then(|e| e.ttl)
                        .unwrap_or(o.ttl.get().as_secs_f64() - age),
                )
            }),
            Slot::ObjGrace => self.obj.map_or(Value::Duration(0.0), |(o, _)| {
                Value::Duration(
                    self.obj_edit
                        .as_ref()
                        .and_then(|e| e.grace)
                        .unwrap_or(o.grace.get().as_secs_f64()),
                )
            }),
            Slot::ObjKeep => self.obj.map_or(Value::Duration(0.0), |(o, _)| {
                Value::Duration(
                    self.obj_edit
                        .as_ref()
                        .and_then(|e| e.keep)
                        .unwrap_or(o.keep.get().as_secs_f64()),
                )
            }),
            Slot::ObjAge => self.obj.map_or(Value::Duration(0.0), |(o, _)| {
                Value::Duration(o.age(Instant::now()).as_secs_f64())
            }),
            Slot::ObjLastuse => Value::Duration(0.0),
            // Counted at the lookup (`after_hit`), as Varnish counts it: at least 1 on a hit,
            // 0 for an object just fetched (a miss or a pass).
            Slot::ObjHits => Value::Int(match self.obj {
                Some((o, true)) => i64::from(o.hits.load(Relaxed).max(1)),
                _ => 0,
            }),
            Slot::ObjUncacheable => Value::Bool(!self.obj.is_some_and(|(_, hit)| hit)),
            Slot::ObjStorage => Value::str(match self.obj {
                Some((o, _)) if o.state.transient() => "Transient",
                _ => "s0",
            }),
            Slot::BerespStorage => match self.beresp.as_ref().and_then(|b| b.storage.as_deref()) {
                Some(name) => Value::Str(name.to_string().into()),
                None => Value::None,
            },
            // `storage.Transient` reads as Varnish names it; other names as written (the
            // checker keeps them lower-cased, as field names).
            Slot::Storage => match var.header.as_ref().map(|h| h.as_str()) {
                Some("transient") => Value::str("Transient"),
                Some(name) => Value::Str(name.to_string().into()),
                None => Value::None,
            },
            Slot::ObjCacheable => Value::Bool(
                self.obj_edit
                    .as_ref()
                    .and_then(|e| e.cacheable)
                    .unwrap_or(true),
            ),
            Slot::ObjTime => self.obj.map_or(Value::Time(self.now), |(o, _)| {
                Value::Time(self.now - o.age(Instant::now()).as_secs_f64())
            }),
            Slot::RespStatus => self
                .resp
                .as_ref()
                .map_or(Value::None, |r| Value::Int(i64::from(r.status.as_u16()))),
            Slot::RespReason => self.resp.as_ref().map_or(Value::None, |r| match &r.reason {
                Some(reason) => Value::str(reason),
                None => Value::str(r.status.canonical_reason().unwrap_or("")),
            }),
            Slot::RespProto => Value::str("HTTP/1.1"),
            Slot::RespHttp => match (&self.resp, h) {
                (Some(r), Some(h)) => header(&r.headers, h),
                _ => Value::None,
            },
            Slot::RespIsStreaming => Value::Bool(false),
            Slot::ReqEsi => Value::Bool(!self.state.esi_off),
            Slot::RespDoEsi => Value::Bool(self.state.esi_page && !self.state.esi_off),
            Slot::ObjCanEsi => Value::Bool(
                self.state.esi_page
                    || self
                        .obj
                        .is_some_and(|(o, _)| crate::esi::marked(o.headers.block())),
            ),
            Slot::BerespFilters => {
                self.beresp
                    .as_ref()
                    .map_or(Value::None, |b| match &b.fetch.filters {
                        Some(list) => Value::str(list),
                        None => Value::Str(Cow::Owned(super::filters::fetch_default(
                            b.status, &b.headers, &b.fetch,
                        ))),
                    })
            }
            Slot::RespFilters => self.resp.as_ref().map_or(Value::None, |r| {
                let esi = self.state.esi_page && !self.state.esi_off;
                Value::Str(Cow::Owned(super::filters::deliver_list(&r.deliver, esi)))
            }),
            Slot::Fixed(b, _) => Value::Bool(b),
            Slot::Unsupported(_) => Value::None,
        }
    }

    fn set(&mut self, var: &Var, value: Value<'static>) -> Result<(), String> {
        let rt = self.rt;
        let h = var.header.as_ref();
        match var.slot {
            Slot::ReqHttp | Slot::BereqHttp | Slot::BerespHttp | Slot::RespHttp => {
                let v = match value {
                    Value::Str(Cow::Owned(s)) => header_value(s)?,
                    other => header_value(text(&other, rt))?,
                };
                return self.set_header(var, v);
            }
            Slot::ClientIdentity => self.state.identity = Some(text(&value, rt)),
            Slot::ReqMethod => {
                if let Some(r) = self.req.as_deref_mut() {
                    r.method = Method::from_bytes(text(&value, rt).as_bytes())
                        .map_err(|_| "req.method: not a method".to_string())?;
                }
            }
            Slot::ReqUrl => {
                if let Some(r) = self.req.as_deref_mut() {
                    r.uri = uri(&text(&value, rt))?;
                }
            }
            Slot::ReqProto => {
                if let Some(r) = self.req.as_deref_mut() {
                    r.version = match text(&value, rt).as_str() {
                        "HTTP/1.0" => Version::HTTP_10,
                        "HTTP/1.1" => Version::HTTP_11,
                        // A later HTTP/1 minor version is HTTP/1.1 (RFC 9110 §2.5), as the
                        // request parser reads one.
                        later
                            if later.len() == 8
                                && later.starts_with("HTTP/1.")
                                && later.as_bytes()[7].is_ascii_digit() =>
                        {
                            Version::HTTP_11
                        }
                        other => {
                            return Err(format!(
                                "req.proto: {other} is not HTTP/1.0 or HTTP/1.1 (or a later HTTP/1 minor version)"
                            ));
                        }
                    };
                }
            }
            Slot::ReqBackend => {
                if let Value::Backend(b) = value {
                    self.state.backend = Some(b);
                }
            }
            Slot::ReqGrace => self.state.req_grace = Some(value.number()),
            Slot::ReqTtl => self.state.req_ttl = Some(value.number()),
            // At least a millisecond: the session's clocks count in milliseconds.
            Slot::SessTimeoutIdle => self.state.sess_idle = Some(Some(value.number().max(0.001))),
            Slot::ReqHashAlwaysMiss => self.state.hash_always_miss = value.truth(),
            Slot::ReqHashIgnoreBusy => self.state.hash_ignore_busy = value.truth(),
            Slot::ReqHashIgnoreVary => self.state.hash_ignore_vary = value.truth(),
            Slot::BereqMethod => {
                if let Some(b) = self.bereq.as_deref_mut() {
                    b.method = Method::from_bytes(text(&value, rt).as_bytes())
                        .map_err(|_| "bereq.method: not a method".to_string())?;
                }
            }
            Slot::BereqUrl => {
                if let Some(b) = self.bereq.as_deref_mut() {
                    b.uri = uri(&text(&value, rt))?;
                }
            }
            Slot::BereqBackend => {
                if let (Some(b), Value::Backend(sel)) = (self.bereq.as_deref_mut(), value) {
                    b.backend = Some(sel);
                }
            }
            Slot::BereqConnectTimeout => {
                if let Some(b) = self.bereq.as_deref_mut() {
                    b.connect_timeout = Some(to_duration(value.number()));
                }
            }
            Slot::BereqRetryConnect => {
                if let Some(b) = self.bereq.as_deref_mut() {
                    b.retry_connect = value.truth();
                }
            }
            Slot::BereqFirstByteTimeout => {
                if let Some(b) = self.bereq.as_deref_mut() {
                    b.first_byte_timeout = Some(to_duration(value.number()));
                }
            }
            Slot::BereqBetweenBytesTimeout => {
                if let Some(b) = self.bereq.as_deref_mut() {
                    b.between_bytes_timeout = Some(to_duration(value.number()));
                }
            }
            Slot::BerespStatus => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.status = status(value.int())?;
                }
            }
            Slot::BerespReason => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.reason = Some(text(&value, rt));
                }
            }
            Slot::BerespTtl => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.ttl = value.number();
                }
            }
            Slot::BerespGrace => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.grace = value.number();
                }
            }
            Slot::BerespKeep => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.keep = value.number();
                }
            }
            Slot::BerespUncacheable => {
                // As Varnish: once uncacheable, always (clearing it is ignored).
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.uncacheable |= value.truth();
                }
            }
            Slot::BerespCacheable => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.uncacheable = !value.truth();
                }
            }
            Slot::BerespDoStream => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.do_stream = value.truth();
                }
            }
            Slot::BerespDoGzip => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    super::filters::check_fetch_switch(&b.fetch, "do_gzip")?;
                    b.fetch.do_gzip = value.truth();
                }
            }
            Slot::BerespDoGunzip => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    super::filters::check_fetch_switch(&b.fetch, "do_gunzip")?;
                    b.fetch.do_gunzip = value.truth();
                }
            }
            Slot::BerespFilters => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    super::filters::set_fetch(&b.headers, &mut b.fetch, text(&value, rt))?;
                }
            }
            Slot::RespFilters => {
                if let Some(r) = self.resp.as_deref_mut() {
                    let esi =
                        super::filters::set_deliver(&mut r.deliver, &r.headers, text(&value, rt))?;
                    self.state.esi_off = !esi;
                }
            }
            Slot::BerespStorage => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.storage = match value {
                        Value::None => None,
                        v => Some(text(&v, rt)),
                    };
                }
            }
            Slot::BerespPrefetch => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.prefetch = Some(value.number());
                }
            }
            Slot::BerespDoEsi => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    super::filters::check_fetch_switch(&b.fetch, "do_esi")?;
                    b.fetch.do_esi = value.truth();
                }
            }
            // Varnish: only the client's own request turns its page's assembly off; an
            // include's setting is ignored (trunk e00016).
            Slot::ReqEsi => {
                let level = self
                    .req
                    .as_ref()
                    .and_then(|r| r.extensions.get::<crate::esi::Level>())
                    .map_or(0, |l| l.0);
                if level == 0 {
                    self.state.esi_off = !value.truth();
                }
            }
            Slot::RespDoEsi => {
                // Varnish: a VCL error once `resp.filters` was set (the list decides).
                if self
                    .resp
                    .as_ref()
                    .is_some_and(|r| r.deliver.filters.is_some())
                {
                    return Err(
                        "resp.do_esi cannot be changed after resp.filters was set".to_string()
                    );
                }
                self.state.esi_off = !value.truth();
            }
            Slot::BerespSaintmode => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.saintmode = Some(value.number());
                }
            }
            Slot::BerespBody | Slot::RespBody => self.state.body = Some(text(&value, rt)),
            Slot::ObjTtl | Slot::ObjGrace | Slot::ObjKeep | Slot::ObjCacheable => {
                if let Some(e) = self.obj_edit.as_deref_mut() {
                    match var.slot {
                        Slot::ObjTtl => e.ttl = Some(value.number()),
                        Slot::ObjGrace => e.grace = Some(value.number()),
                        Slot::ObjKeep => e.keep = Some(value.number()),
                        _ => e.cacheable = Some(value.truth()),
                    }
                }
            }
            Slot::RespStatus => {
                if let Some(r) = self.resp.as_deref_mut() {
                    r.status = status(value.int())?;
                }
            }
            Slot::RespReason => {
                if let Some(r) = self.resp.as_deref_mut() {
                    r.reason = Some(text(&value, rt));
                }
            }
            // The checker lets nothing else be set (a fixed switch set to its value is
            // compiled away).
            _ => {
                let _ = h;
            }
        }
        Ok(())
    }

    fn set_header(&mut self, var: &Var, v: HeaderValue) -> Result<(), String> {
        let Some(name) = var.header.as_ref() else {
            return Ok(());
        };
        let headers = match var.slot {
            Slot::ReqHttp => self.req.as_deref_mut().map(|r| &mut r.headers),
            Slot::BereqHttp => self.bereq.as_deref_mut().map(|b| &mut b.headers),
            Slot::BerespHttp => self.beresp.as_deref_mut().map(|b| &mut b.headers),
            Slot::RespHttp => self.resp.as_deref_mut().map(|r| &mut r.headers),
            _ => None,
        };
        match headers {
            Some(h) => set_header(h, name, v),
            None => Ok(()),
        }
    }

    fn unset(&mut self, var: &Var) -> Result<(), String> {
        if let Some(name) = var.header.as_ref() {
            let headers = match var.slot {
                Slot::ReqHttp => self.req.as_deref_mut().map(|r| &mut r.headers),
                Slot::BereqHttp => self.bereq.as_deref_mut().map(|b| &mut b.headers),
                Slot::BerespHttp => self.beresp.as_deref_mut().map(|b| &mut b.headers),
                Slot::RespHttp => self.resp.as_deref_mut().map(|r| &mut r.headers),
                _ => None,
            };
            if let Some(h) = headers {
                h.remove(name);
            }
            return Ok(());
        }
        match var.slot {
            Slot::ReqTtl => self.state.req_ttl = None,
            Slot::SessTimeoutIdle => self.state.sess_idle = Some(None),
            Slot::ReqGrace => self.state.req_grace = None,
            Slot::BereqBody => {
                // As in Varnish, the body's framing fields go with it.
                if let Some(b) = self.bereq.as_deref_mut() {
                    b.no_body = true;
                    b.headers.remove(header::CONTENT_LENGTH);
                    b.headers.remove(header::TRANSFER_ENCODING);
                }
            }
            Slot::BereqConnectTimeout
            | Slot::BereqFirstByteTimeout
            | Slot::BereqBetweenBytesTimeout => {
                if let Some(b) = self.bereq.as_deref_mut() {
                    match var.slot {
                        Slot::BereqConnectTimeout => b.connect_timeout = None,
                        Slot::BereqFirstByteTimeout => b.first_byte_timeout = None,
                        _ => b.between_bytes_timeout = None,
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn collect(&mut self, var: &Var, sep: &str) {
        let Some(name) = var.header.as_ref() else {
            return;
        };
        let headers = match var.slot {
            Slot::ReqHttp => self.req.as_deref_mut().map(|r| &mut r.headers),
            Slot::BereqHttp => self.bereq.as_deref_mut().map(|b| &mut b.headers),
            Slot::BerespHttp => self.beresp.as_deref_mut().map(|b| &mut b.headers),
            Slot::RespHttp => self.resp.as_deref_mut().map(|r| &mut r.headers),
            _ => None,
        };
        let Some(h) = headers else {
            return;
        };
        if h.get_all(name).iter().count() < 2 {
            return;
        }
        let joined: Vec<&[u8]> = h.get_all(name).iter().map(|v| v.as_bytes()).collect();
        let joined = joined.join(sep.as_bytes());
        if let Ok(v) = HeaderValue::from_bytes(&joined) {
            h.insert(name.clone(), v);
        }
    }

    fn target_name(&self, target: u16) -> &str {
        self.rt
            .program
            .targets
            .get(target as usize)
            .map_or("", String::as_str)
    }

    fn healthy(&self, sel: BackendSel) -> bool {
        self.rt.member(sel).is_some_and(|m| m.healthy())
    }

    fn ban(&self, expr: &str) -> Result<(), String> {
        let ban = self.cache.add_ban(expr).map_err(|e| e.to_string())?;
        if let Some(shared) = &self.cache.shared {
            feed::broadcast_later(shared, Invalidation::Ban(ban.expr.clone()));
        }
        Ok(())
    }

    fn purge(&self, soft: Option<SoftPurge>) -> usize {
        let Some(key) = self.key else {
            return 0;
        };
        let (n, inv) = match soft {
            None => (self.cache.purge(key), Invalidation::Purge(key.clone())),
            Some(s) => {
                let opt = |secs: f64| (secs >= 0.0).then(|| to_duration(secs));
                let n =
                    self.cache
                        .rearm(key, to_duration(s.ttl.max(0.0)), opt(s.grace), opt(s.keep));
                // The fleet's soft purge carries no lifetimes: the other nodes and the shared
                // copy are made stale now, with their own grace and keep.
                (n, Invalidation::Soft(key.clone()))
            }
        };
        // With a fleet: the shared copy and every other node's go too (else this node's next
        // miss would read the purged object back from the shared tier).
        if let Some(shared) = &self.cache.shared {
            feed::broadcast_later(shared, inv);
        }
        n
    }

    fn throttle(
        &self,
        op: ThrottleOp,
        key: &str,
        limit: i64,
        period: f64,
        block: f64,
    ) -> Value<'static> {
        let limit = Limit {
            requests: u64::try_from(limit).unwrap_or(0),
            per: to_duration(period.max(0.0)),
            block: to_duration(block.max(0.0)),
        };
        let throttle = &self.rt.throttle;
        match op {
            ThrottleOp::IsDenied => {
                let denied = matches!(throttle.take(key, &limit), Taken::Denied(_));
                if denied {
                    self.rt.counters.vsthrottle_denied.inc();
                }
                Value::Bool(denied)
            }
            ThrottleOp::Remaining => {
                Value::Int(i64::try_from(throttle.remaining(key, &limit)).unwrap_or(i64::MAX))
            }
            ThrottleOp::Blocked => Value::Duration(throttle.blocked(key, &limit).as_secs_f64()),
            ThrottleOp::ReturnToken => {
                throttle.give_back(key, &limit);
                Value::None
            }
        }
    }

    fn purge_keys(&self, keys: &str, soft: bool) -> usize {
        let tags: Vec<String> = crate::cache::tags::split_keys(keys, true)
            .map(str::to_string)
            .collect();
        if tags.is_empty() {
            return 0;
        }
        let n = if soft {
            self.cache.soft_purge_tags(&tags)
        } else {
            self.cache.purge_tags(&tags)
        };
        // The fleet has no soft purge by tag: the other nodes and the shared tier remove the
        // tagged objects (never fresh where this node made them stale), as a PURGE with
        // `Surrogate-Key` sent to the node would.
        if let Some(shared) = &self.cache.shared {
            feed::broadcast_later(shared, Invalidation::Tags(tags));
        }
        n
    }

    fn log(&mut self, msg: &str) {
        // Bounded: a loop of std.log cannot grow a request without end.
        if self.state.log.len() < 64 {
            self.state.log.push(msg.chars().take(1024).collect());
        }
        tracing::info!(target: "vcl", xid = self.state.xid, "{msg}");
    }

    fn match_limit_hit(&self) {
        self.rt.counters.vcl_match_limit.inc();
    }

    fn rollback(&mut self) {
        if let (Some(req), Some((method, uri, headers))) = (self.req.as_deref_mut(), self.original)
        {
            req.method = method.clone();
            req.uri = uri.clone();
            req.headers = headers.clone();
        }
    }

    fn state(&self) -> &State {
        self.state
    }

    fn state_mut(&mut self) -> &mut State {
        self.state
    }
}
