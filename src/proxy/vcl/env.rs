//! What a VCL subroutine reads and changes at a step of a request: the variables' slots
//! (`vcl/vars/`) mapped onto the request, the backend request and response, the stored
//! object and the response to the client, whichever the step has.

mod actions;
mod dispatch;
mod read;
mod sess;
mod storage;
mod write;

use std::net::SocketAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, StatusCode, Uri, Version};

use super::{Bereq, Beresp, Resp, VclRuntime, protected};
use crate::cache::{Cache, CacheKey, Object};
use crate::vcl::run::value::epoch;
use crate::vcl::run::{BackendSel, State, Value};
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
    /// The local address of the client's connection (`server.ip`, `local.ip`) and what a
    /// PROXY protocol header said of it (`remote.ip`, `server.ip`), when the program reads
    /// them (`crate::proxy::LocalAddr`).
    pub local: Option<crate::proxy::LocalAddr>,
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
            req.extensions.get::<crate::proxy::LocalAddr>().copied()
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
/// Shellac's own stored fields ([`super::internal`]) read as absent.
fn header<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Value<'h> {
    if super::internal(name) {
        return Value::None;
    }
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
    v.text(&|t| rt.program.target_name(t)).into_owned()
}

fn uri(s: &str) -> Result<Uri, String> {
    s.parse::<Uri>()
        .map_err(|_| format!("\"{s}\" is not a URL Shellac can send"))
}

/// A status VCL sets on `what` (`beresp`, `resp`): Varnish keeps up to 65535 in VCL (the
/// digits above the last three are VCL's own signalling) and sends it modulo 1000, which
/// must be a status (100-999); its checks and words (cache_vrt_var.c).
fn status(what: &str, n: i64) -> Result<(u16, StatusCode), String> {
    if n < 0 {
        return Err(format!("{what}.status ({n}) is negative"));
    }
    let Ok(wide) = u16::try_from(n) else {
        return Err(format!("{what}.status ({n}) > 65535"));
    };
    StatusCode::from_u16(wide % 1000)
        .map(|s| (wide, s))
        .map_err(|_| format!("illegal {what}.status ({n}) (..0##)"))
}

fn set_header(headers: &mut HeaderMap, name: &HeaderName, v: HeaderValue) -> Result<(), String> {
    if protected(name) {
        return Err(format!("{name} cannot be set from VCL"));
    }
    if super::internal(name) {
        return Err(format!("{name} is Shellac's own field: VCL cannot set it"));
    }
    headers.insert(name.clone(), v);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Varnish keeps up to 65535 in VCL and sends the last three digits; its refusals in
    /// its words (cache_vrt_var.c, trunk v00050's `VCL_Error` records).
    #[test]
    fn wide_statuses_and_their_refusals() {
        assert_eq!(status("beresp", 1200), Ok((1200, StatusCode::OK)));
        assert_eq!(status("resp", 40404), Ok((40404, StatusCode::NOT_FOUND)));
        assert_eq!(
            status("resp", 301),
            Ok((301, StatusCode::MOVED_PERMANENTLY))
        );
        assert_eq!(
            status("resp", 99),
            Err("illegal resp.status (99) (..0##)".to_string())
        );
        assert_eq!(
            status("resp", 1050),
            Err("illegal resp.status (1050) (..0##)".to_string())
        );
        assert_eq!(
            status("resp", 65536),
            Err("resp.status (65536) > 65535".to_string())
        );
        assert_eq!(
            status("beresp", -200),
            Err("beresp.status (-200) is negative".to_string())
        );
    }
}
