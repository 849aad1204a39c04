//! The step's [`Scope`] as the interpreter's [`Env`]: which reader or writer (`read.rs`,
//! `write.rs`, `actions.rs`) a variable's slot goes to, header fields set, unset and collected,
//! and the few calls the program makes of the proxy (logs, rollback, health).

use std::borrow::Cow;

use http::header::{self, HeaderValue};

use super::{Scope, set_header, text};
use crate::proxy::vcl::header_value;
use crate::vcl::ir::{ThrottleOp, Var};
use crate::vcl::run::{BackendSel, Env, SoftPurge, State, Value};
use crate::vcl::vars::Slot;

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
            | Slot::ParamUncacheableTtl
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
            | Slot::ObjCacheable
            | Slot::ObjTime => self.get_obj(var),
            Slot::ObjStorage | Slot::BerespStorage | Slot::Storage | Slot::StorageFigure => {
                self.get_storage(var)
            }
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
            // Shellac's own fields are not VCL's to see, so not to remove either.
            let headers = self
                .fields_mut(var.slot)
                .filter(|_| !super::super::internal(name));
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
        let Some(name) = var.header.as_ref().filter(|n| !super::super::internal(n)) else {
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
        self.rt.program.target_name(target)
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
