//! What a subroutine reads, one namespace per function: the session, `req.*`, `bereq.*`,
//! `beresp.*`, `obj.*`, `resp.*` (the step's [`Scope`] dispatches, `dispatch.rs`).

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use super::{Scope, header, proto};
use crate::cache::status_line::StatusLine;
use crate::proxy::vcl::filters;
use crate::vcl::ir::Var;
use crate::vcl::run::{BackendSel, Env, Value};
use crate::vcl::vars::Slot;

impl Scope<'_> {
    /// What a subroutine reads of `req.*` (and what a request shares with its backend request).
    #[inline]
    pub(super) fn get_req(&self, var: &Var) -> Value<'_> {
        let h = var.header.as_ref();
        match var.slot {
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
            _ => Value::None,
        }
    }

    /// What a subroutine reads of `bereq.*`.
    #[inline]
    pub(super) fn get_bereq(&self, var: &Var) -> Value<'_> {
        let h = var.header.as_ref();
        match var.slot {
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
            _ => Value::None,
        }
    }

    /// What a subroutine reads of `beresp.*`.
    #[inline]
    pub(super) fn get_beresp(&self, var: &Var) -> Value<'_> {
        let h = var.header.as_ref();
        match var.slot {
            Slot::BerespStatus => self
                .beresp
                .as_ref()
                .map_or(Value::None, |b| Value::Int(i64::from(b.wide_status))),
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
            Slot::BerespTransitBuffer => {
                Value::Bytes(self.beresp.as_ref().map_or(0, |b| b.transit_buffer))
            }
            _ => Value::None,
        }
    }

    /// What a subroutine reads of `obj.*` and the storage.
    #[inline]
    pub(super) fn get_obj(&self, var: &Var) -> Value<'_> {
        let h = var.header.as_ref();
        match var.slot {
            // The status line it was stored with (`cache::status_line`), else its status's.
            Slot::ObjStatus => self.obj.map_or(Value::None, |(o, _)| {
                let wide = StatusLine::of(o).map_or(o.status.as_u16(), |l| l.wide);
                Value::Int(i64::from(wide))
            }),
            Slot::ObjReason => self
                .obj
                .map_or(Value::None, |(o, _)| match StatusLine::of(o) {
                    Some(l) => Value::Str(Cow::Owned(l.reason)),
                    None => Value::str(o.status.canonical_reason().unwrap_or("")),
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
            Slot::ObjCacheable => Value::Bool(
                self.obj_edit
                    .as_ref()
                    .and_then(|e| e.cacheable)
                    .unwrap_or(true),
            ),
            Slot::ObjTime => self.obj.map_or(Value::Time(self.now), |(o, _)| {
                Value::Time(self.now - o.age(Instant::now()).as_secs_f64())
            }),
            _ => Value::None,
        }
    }

    /// `server.ip`: a PROXY header's destination, else the connection's local address.
    fn server_addr(&self) -> SocketAddr {
        match self.local {
            Some(crate::proxy::LocalAddr(_, Some(p))) => p.server,
            Some(l) => l.0,
            None => SocketAddr::from(([0, 0, 0, 0], 0)),
        }
    }

    /// What a subroutine reads of the client, the server and the session (`client.*`,
    /// `server.*`, `local.*`, `sess.*`, `now`, the transaction ids).
    #[inline]
    pub(super) fn get_session(&self, var: &Var) -> Value<'_> {
        match var.slot {
            Slot::ClientIp => Value::Ip(self.client),
            // Behind a PROXY header the balancer's end of the connection; else the client.
            Slot::RemoteIp => Value::Ip(
                self.local
                    .and_then(|l| l.1)
                    .map_or(self.client, |p| p.remote),
            ),
            Slot::ClientIdentity => match &self.state.identity {
                Some(i) => Value::str(i),
                None => Value::Ip(self.client),
            },
            // `server.ip` is the address a PROXY header names as the destination; without
            // one it is `local.ip`, as in Varnish.
            Slot::ServerIp => Value::Ip(self.server_addr()),
            Slot::LocalIp => Value::Ip(
                self.local
                    .map_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)), |l| l.0),
            ),
            Slot::ServerPort => Value::Int(i64::from(self.server_addr().port())),
            Slot::ServerHostname | Slot::ServerIdentity => Value::str(&self.rt.hostname),
            Slot::LocalEndpoint | Slot::LocalSocket => Value::str("a0"),
            Slot::Now => Value::Time(self.now),
            Slot::SessXid | Slot::ReqXid => Value::Int(self.state.xid as i64),
            Slot::ParamTimeoutIdle => Value::Duration(self.rt.sess_defaults[0]),
            Slot::ParamUncacheableTtl => Value::Duration(self.rt.uncacheable_ttl),
            Slot::ReqDigest => match &self.state.digest {
                Some(d) => Value::Blob(Cow::Borrowed(&d[..])),
                None => Value::None,
            },
            Slot::SessTimeoutIdle
            | Slot::SessTimeoutLinger
            | Slot::SessSendTimeout
            | Slot::SessIdleSendTimeout => Value::Duration(self.sess_timeout(var.slot)),
            Slot::BereqXid => {
                Value::Int(self.bereq.as_ref().map_or(self.state.xid, |b| b.xid) as i64)
            }
            _ => Value::None,
        }
    }

    /// What a subroutine reads of the response to the client (`resp.*`), of ESI
    /// (`req.esi`, `resp.do_esi`, `obj.can_esi`) and of the filter lists.
    #[inline]
    pub(super) fn get_resp(&self, var: &Var) -> Value<'_> {
        let h = var.header.as_ref();
        match var.slot {
            Slot::RespStatus => self
                .resp
                .as_ref()
                .map_or(Value::None, |r| Value::Int(i64::from(r.wide_status))),
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
                        None => Value::Str(Cow::Owned(filters::fetch_default(
                            b.status, &b.headers, &b.fetch,
                        ))),
                    })
            }
            Slot::RespFilters => self.resp.as_ref().map_or(Value::None, |r| {
                let esi = self.state.esi_page && !self.state.esi_off;
                Value::Str(Cow::Owned(filters::deliver_list(&r.deliver, esi)))
            }),
            _ => Value::None,
        }
    }
}
