//! What a subroutine sets, one namespace per function: `req.*`, `bereq.*`, `beresp.*`, the
//! delivery (the step's [`Scope`] dispatches and sets header fields itself, `dispatch.rs`).

use http::{Method, Version};

use super::{Scope, status, text, uri};
use crate::vcl::ir::Var;
use crate::vcl::run::Value;
use crate::vcl::run::value::to_duration;
use crate::vcl::vars::Slot;

impl Scope<'_> {
    /// What a subroutine sets of `req.*` (and what a request shares with its backend request).
    #[inline]
    pub(super) fn set_req(&mut self, var: &Var, value: Value<'static>) -> Result<(), String> {
        let rt = self.rt;
        match var.slot {
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
            Slot::SessTimeoutIdle
            | Slot::SessTimeoutLinger
            | Slot::SessSendTimeout
            | Slot::SessIdleSendTimeout => self.set_sess(var.slot, Some(value.number())),
            Slot::ReqHashAlwaysMiss => self.state.hash_always_miss = value.truth(),
            Slot::ReqHashIgnoreBusy => self.state.hash_ignore_busy = value.truth(),
            Slot::ReqHashIgnoreVary => self.state.hash_ignore_vary = value.truth(),
            _ => {}
        }
        Ok(())
    }

    /// What a subroutine sets of `bereq.*`.
    #[inline]
    pub(super) fn set_bereq(&mut self, var: &Var, value: Value<'static>) -> Result<(), String> {
        let rt = self.rt;
        match var.slot {
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
            _ => {}
        }
        Ok(())
    }

    /// What a subroutine sets of `beresp.*`.
    #[inline]
    pub(super) fn set_beresp(&mut self, var: &Var, value: Value<'static>) -> Result<(), String> {
        let rt = self.rt;
        match var.slot {
            Slot::BerespStatus => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    (b.wide_status, b.status) = status("beresp", value.int())?;
                    // The reason goes back to the status's own, as Varnish's
                    // http_SetStatus() sets it.
                    b.reason = None;
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
                    super::super::filters::check_fetch_switch(&b.fetch, "do_gzip")?;
                    b.fetch.do_gzip = value.truth();
                }
            }
            Slot::BerespDoGunzip => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    super::super::filters::check_fetch_switch(&b.fetch, "do_gunzip")?;
                    b.fetch.do_gunzip = value.truth();
                }
            }
            Slot::BerespFilters => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    super::super::filters::set_fetch(&b.headers, &mut b.fetch, text(&value, rt))?;
                }
            }
            Slot::RespFilters => {
                if let Some(r) = self.resp.as_deref_mut() {
                    let esi = super::super::filters::set_deliver(
                        &mut r.deliver,
                        &r.headers,
                        text(&value, rt),
                    )?;
                    self.state.esi_off = !esi;
                }
            }
            Slot::BerespStorage => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.storage = match value {
                        Value::None => None,
                        v => {
                            let name = text(&v, rt);
                            Some(
                                name.strip_prefix("storage.")
                                    .map(str::to_string)
                                    .unwrap_or(name),
                            )
                        }
                    };
                }
            }
            Slot::BerespTransitBuffer => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.transit_buffer = value.number().max(0.0) as u64;
                }
            }
            Slot::BerespPrefetch => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    b.prefetch = Some(value.number());
                }
            }
            Slot::BerespDoEsi => {
                if let Some(b) = self.beresp.as_deref_mut() {
                    super::super::filters::check_fetch_switch(&b.fetch, "do_esi")?;
                    b.fetch.do_esi = value.truth();
                }
            }
            // Varnish: only the client's own request turns its page's assembly off; an
            // include's setting is ignored (trunk e00016).
            _ => {}
        }
        Ok(())
    }

    /// What a subroutine sets of the delivery: `resp.*`, ESI (`req.esi`, `resp.do_esi`),
    /// the body of a synthetic response, 2.x's `obj.*` in vcl_hit, `beresp.saintmode`.
    #[inline]
    pub(super) fn set_delivery(&mut self, var: &Var, value: Value<'static>) -> Result<(), String> {
        let rt = self.rt;
        match var.slot {
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
                    (r.wide_status, r.status) = status("resp", value.int())?;
                    r.reason = None;
                }
            }
            Slot::RespReason => {
                if let Some(r) = self.resp.as_deref_mut() {
                    r.reason = Some(text(&value, rt));
                }
            }
            _ => {}
        }
        Ok(())
    }
}
