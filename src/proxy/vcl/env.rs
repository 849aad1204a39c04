//! What a VCL subroutine reads and changes at a step of a request: the variables' slots
//! (`vcl/vars/`) mapped onto the request, the backend request and response, the stored
//! object and the response to the client, whichever the step has.

mod actions;
mod read;
mod sess;
mod write;

use std::borrow::Cow;
use std::net::SocketAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, StatusCode, Uri, Version};

use super::{Bereq, Beresp, Resp, VclRuntime, header_value, protected};
use crate::cache::{Cache, CacheKey, Object};
use crate::vcl::ir::ThrottleOp;
use crate::vcl::ir::Var;
use crate::vcl::run::value::epoch;
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

    /// The header fields a `*.http.*` slot names, when the step has them.
    fn fields_mut(&mut self, slot: Slot) -> Option<&mut HeaderMap> {
        match slot {
            Slot::ReqHttp => self.req.as_deref_mut().map(|r| &mut r.headers),
            Slot::BereqHttp => self.bereq.as_deref_mut().map(|b| &mut b.headers),
            Slot::BerespHttp => self.beresp.as_deref_mut().map(|b| &mut b.headers),
            Slot::RespHttp => self.resp.as_deref_mut().map(|r| &mut r.headers),
            _ => None,
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
        match var.slot {
            Slot::ClientIp
            | Slot::RemoteIp
            | Slot::ClientIdentity
            | Slot::ServerIp
            | Slot::LocalIp
            | Slot::ServerPort
            | Slot::ServerHostname
            | Slot::ServerIdentity
            | Slot::LocalEndpoint
            | Slot::LocalSocket
            | Slot::Now
            | Slot::SessXid
            | Slot::ReqXid
            | Slot::ParamTimeoutIdle
            | Slot::ReqDigest
            | Slot::SessTimeoutIdle
            | Slot::SessTimeoutLinger
            | Slot::SessSendTimeout
            | Slot::SessIdleSendTimeout
            | Slot::BereqXid => self.get_session(var),
            Slot::ReqMethod
            | Slot::ReqUrl
            | Slot::ReqProto
            | Slot::ReqHttp
            | Slot::ReqHash
            | Slot::ReqBackend
            | Slot::ReqBackendHealthy
            | Slot::ReqRestarts
            | Slot::ReqGrace
            | Slot::ReqTtl
            | Slot::ReqHashAlwaysMiss
            | Slot::ReqHashIgnoreBusy
            | Slot::ReqHashIgnoreVary
            | Slot::ReqCanGzip
            | Slot::ReqEsiLevel
            | Slot::ReqTime
            | Slot::ReqTopUrl
            | Slot::ReqTopMethod
            | Slot::ReqTopProto
            | Slot::ReqTopTime
            | Slot::ReqTopHttp
            | Slot::ReqIsHitmiss
            | Slot::BereqIsHitmiss
            | Slot::ReqIsHitpass
            | Slot::BereqIsHitpass
            | Slot::ReqTransport => self.get_req(var),
            Slot::BereqMethod
            | Slot::BereqUrl
            | Slot::BereqProto
            | Slot::BereqHttp
            | Slot::BereqBackend
            | Slot::BereqRetries
            | Slot::BereqUncacheable
            | Slot::BereqIsBgfetch
            | Slot::BereqRetryConnect
            | Slot::BereqConnectTimeout
            | Slot::BereqFirstByteTimeout
            | Slot::BereqBetweenBytesTimeout
            | Slot::BereqBody => self.get_bereq(var),
            Slot::BereqTime | Slot::BerespTime | Slot::RespTime => Value::Time(self.now),
            Slot::BerespStatus
            | Slot::BerespReason
            | Slot::BerespProto
            | Slot::BerespHttp
            | Slot::BerespTtl
            | Slot::BerespGrace
            | Slot::BerespKeep
            | Slot::BerespUncacheable
            | Slot::BerespCacheable
            | Slot::BerespAge
            | Slot::BerespBackend
            | Slot::BerespBackendName
            | Slot::BerespWas304
            | Slot::BerespDoStream
            | Slot::BerespDoGzip
            | Slot::BerespDoGunzip
            | Slot::BerespDoEsi
            | Slot::BerespSaintmode
            | Slot::BerespPrefetch
            | Slot::BerespTransitBuffer => self.get_beresp(var),
            Slot::BerespBody | Slot::RespBody => Value::None,
            Slot::ObjStatus
            | Slot::ObjReason
            | Slot::ObjProto
            | Slot::ObjHttp
            | Slot::ObjTtl
            | Slot::ObjGrace
            | Slot::ObjKeep
            | Slot::ObjAge
            | Slot::ObjLastuse
            | Slot::ObjHits
            | Slot::ObjUncacheable
            | Slot::ObjStorage
            | Slot::BerespStorage
            | Slot::Storage
            | Slot::ObjCacheable
            | Slot::ObjTime => self.get_obj(var),
            Slot::RespStatus
            | Slot::RespReason
            | Slot::RespProto
            | Slot::RespHttp
            | Slot::RespIsStreaming
            | Slot::ReqEsi
            | Slot::RespDoEsi
            | Slot::ObjCanEsi
            | Slot::BerespFilters
            | Slot::RespFilters => self.get_resp(var),
            Slot::Fixed(b, _) => Value::Bool(b),
            Slot::Unsupported(_) => Value::None,
        }
    }

    fn set(&mut self, var: &Var, value: Value<'static>) -> Result<(), String> {
        let rt = self.rt;
        match var.slot {
            Slot::ReqHttp | Slot::BereqHttp | Slot::BerespHttp | Slot::RespHttp => {
                let v = match value {
                    Value::Str(Cow::Owned(s)) => header_value(s)?,
                    other => header_value(text(&other, rt))?,
                };
                return self.set_header(var, v);
            }
            Slot::ClientIdentity => self.state.identity = Some(text(&value, rt)),
            Slot::ReqMethod
            | Slot::ReqUrl
            | Slot::ReqProto
            | Slot::ReqBackend
            | Slot::ReqGrace
            | Slot::ReqTtl
            | Slot::SessTimeoutIdle
            | Slot::SessTimeoutLinger
            | Slot::SessSendTimeout
            | Slot::SessIdleSendTimeout
            | Slot::ReqHashAlwaysMiss
            | Slot::ReqHashIgnoreBusy
            | Slot::ReqHashIgnoreVary => self.set_req(var, value)?,
            Slot::BereqMethod
            | Slot::BereqUrl
            | Slot::BereqBackend
            | Slot::BereqConnectTimeout
            | Slot::BereqRetryConnect
            | Slot::BereqFirstByteTimeout
            | Slot::BereqBetweenBytesTimeout => self.set_bereq(var, value)?,
            Slot::BerespStatus
            | Slot::BerespReason
            | Slot::BerespTtl
            | Slot::BerespGrace
            | Slot::BerespKeep
            | Slot::BerespUncacheable
            | Slot::BerespCacheable
            | Slot::BerespDoStream
            | Slot::BerespDoGzip
            | Slot::BerespDoGunzip
            | Slot::BerespFilters
            | Slot::RespFilters
            | Slot::BerespStorage
            | Slot::BerespPrefetch
            | Slot::BerespTransitBuffer
            | Slot::BerespDoEsi => self.set_beresp(var, value)?,
            Slot::ReqEsi
            | Slot::RespDoEsi
            | Slot::BerespSaintmode
            | Slot::BerespBody
            | Slot::RespBody
            | Slot::ObjTtl
            | Slot::ObjGrace
            | Slot::ObjKeep
            | Slot::ObjCacheable
            | Slot::RespStatus
            | Slot::RespReason => self.set_delivery(var, value)?,
            // The checker lets nothing else be set (a fixed switch set to its value is
            // compiled away).
            _ => {}
        }
        Ok(())
    }

    fn set_header(&mut self, var: &Var, v: HeaderValue) -> Result<(), String> {
        let Some(name) = var.header.as_ref() else {
            return Ok(());
        };
        let headers = self.fields_mut(var.slot);
        match headers {
            Some(h) => set_header(h, name, v),
            None => Ok(()),
        }
    }

    fn unset(&mut self, var: &Var) -> Result<(), String> {
        if let Some(name) = var.header.as_ref() {
            let headers = self.fields_mut(var.slot);
            if let Some(h) = headers {
                h.remove(name);
            }
            return Ok(());
        }
        match var.slot {
            Slot::ReqTtl => self.state.req_ttl = None,
            Slot::SessTimeoutIdle
            | Slot::SessTimeoutLinger
            | Slot::SessSendTimeout
            | Slot::SessIdleSendTimeout => self.set_sess(var.slot, None),
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
        let headers = self.fields_mut(var.slot);
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
        self.invalidate_ban(expr)
    }

    fn purge(&self, soft: Option<SoftPurge>) -> usize {
        self.invalidate_key(soft)
    }

    fn throttle(
        &self,
        op: ThrottleOp,
        key: &str,
        limit: i64,
        period: f64,
        block: f64,
    ) -> Value<'static> {
        self.take_throttle(op, key, limit, period, block)
    }

    fn purge_keys(&self, keys: &str, soft: bool) -> usize {
        self.invalidate_tags(keys, soft)
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
