//! The one table of VCL variables: name, type, where each dialect lets it be read, set and
//! unset, and what it is at run time. The checker is driven by it (as vcc is by
//! vcl_var.rst through generate.py); nothing else decides whether `beresp.ttl` may be set in
//! `vcl_recv`.
//!
//! A name ending in `.` is a family (`req.http.` + a field name). One name may have several
//! rows: per dialect (`req.xid` is a STRING in 2.x, an INT in 4.x), and in 2.x per subroutine
//! (`obj.http.` is the stored object in `vcl_hit` but the generated response in `vcl_error`).

use super::types::ctx::*;
use super::types::{Dialect, Methods, Type};

pub use slot::Slot;

mod slot;

/// Dialects a row applies to.
pub type Dialects = u8;
pub const D20: Dialects = 1;
pub const D21: Dialects = 2;
pub const D40: Dialects = 4;
pub const D41: Dialects = 8;
/// 2.0, 2.1 and 3.0.
pub const L: Dialects = D20 | D21;
/// 4.0 and 4.1.
pub const V4: Dialects = D40 | D41;

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct VarDef {
    pub name: &'static str,
    pub ty: Type,
    pub read: Methods,
    pub write: Methods,
    pub unset: Methods,
    pub dialects: Dialects,
    pub slot: Slot,
}

pub fn dialect_bit(d: Dialect) -> Dialects {
    match d {
        Dialect::V20 => D20,
        Dialect::V21 => D21,
        Dialect::V40 => D40,
        Dialect::V41 => D41,
    }
}

const fn v(
    name: &'static str,
    ty: Type,
    dialects: Dialects,
    read: Methods,
    write: Methods,
    unset: Methods,
    slot: Slot,
) -> VarDef {
    VarDef {
        name,
        ty,
        read,
        write,
        unset,
        dialects,
        slot,
    }
}

use Slot::*;
use Type::{Backend as B, Bool as BOOL, Duration as DUR, Header as HDR, Int as INT};
use Type::{Body as BODY, Ip as IP, String as STR, Time as TIME};

/// Where 4.x client-side variables outside `vcl_recv` can be read (not `vcl_init`).
const C: Methods = CLIENT;
/// 4.x pipe and backend subroutines (bereq).
const PB: Methods = PIPE | BACKEND;
/// 4.x backend response subroutines (beresp).
const BR: Methods = BE_RESPONSE | BE_ERROR;
/// 4.x response subroutines (resp).
const RS: Methods = DELIVER | SYNTH;
/// 2.x: everywhere but `vcl_init`/`vcl_fini`.
const LG: Methods = LEGACY;

const STORAGE: &str = "Shellac keeps a request body in memory (std.cache_req_body), not in a \
                       storage VCL chooses";
const FILTERS: &str =
    "Shellac has no request-body filters (beresp.filters and resp.filters are supported)";
const TRACE: &str = "Shellac has no VCL_trace log records; `shellac log` shows each \
                     subroutine's return";

/// Every variable. Rows are searched in order; the first whose name, dialect and subroutine
/// match wins, so dialect- and subroutine-specific rows come before general ones.
#[rustfmt::skip]
pub const VARS: &[VarDef] = &[
    // The connection.
    v("client.ip", IP, L | V4, ALL & !(INIT | FINI), 0, 0, ClientIp),
    v("client.identity", STR, L | V4, C | BACKEND | LG, C | LG, 0, ClientIdentity),
    v("server.ip", IP, L | V4, ALL & !(INIT | FINI), 0, 0, ServerIp),
    v("server.port", Type::Int, L, LG, 0, 0, ServerPort),
    v("server.hostname", STR, L | V4, ALL, 0, 0, ServerHostname),
    v("server.identity", STR, L | V4, ALL, 0, 0, ServerIdentity),
    v("local.ip", IP, V4, C | BACKEND, 0, 0, LocalIp),
    v("remote.ip", IP, V4, C | BACKEND, 0, 0, RemoteIp),
    v("local.endpoint", STR, D41, C | BACKEND, 0, 0, LocalEndpoint),
    v("local.socket", STR, D41, C | BACKEND, 0, 0, LocalSocket),
    v("now", TIME, L | V4, ALL, 0, 0, Now),
    v("sess.xid", INT, D41, C | BACKEND, 0, 0, SessXid),
    v("sess.timeout_idle", DUR, V4, C, C, C, SessTimeoutIdle),
    v("sess.timeout_linger", DUR, V4, C, C, C, SessTimeoutLinger),
    v("sess.send_timeout", DUR, V4, C, C, C, SessSendTimeout),
    v("sess.idle_send_timeout", DUR, V4, C, C, C, SessIdleSendTimeout),
    // The client request, 2.x.
    v("req.request", STR, L, LG, LG, 0, ReqMethod),
    v("req.url", STR, L, LG, LG, 0, ReqUrl),
    v("req.proto", STR, L, LG, LG, 0, ReqProto),
    v("req.http.", HDR, L, LG, LG, LG, ReqHttp),
    v("req.hash", STR, L, 0, HASH, 0, ReqHash),
    v("req.backend.healthy", BOOL, L, LG, 0, 0, ReqBackendHealthy),
    v("req.backend", B, L, LG, LG, 0, ReqBackend),
    v("req.restarts", INT, L, LG, 0, 0, ReqRestarts),
    v("req.grace", DUR, L, LG, LG, 0, ReqGrace),
    v("req.xid", STR, L, LG, 0, 0, ReqXid),
    v("req.esi", BOOL, L, LG, LG, 0, ReqEsi),
    v("req.esi_level", INT, L, LG, 0, 0, ReqEsiLevel),
    v("req.can_gzip", BOOL, L, LG, 0, 0, ReqCanGzip),
    v("req.hash_always_miss", BOOL, L, LG, LG, 0, ReqHashAlwaysMiss),
    v("req.hash_ignore_busy", BOOL, L, LG, LG, 0, ReqHashIgnoreBusy),
    // The client request, 4.x.
    v("req.method", STR, V4, C, C, 0, ReqMethod),
    v("req.url", STR, V4, C, C, 0, ReqUrl),
    v("req.proto", STR, D40, C, C, 0, ReqProto),
    v("req.proto", STR, D41, C, 0, 0, ReqProto),
    v("req.http.content-length", HDR, V4, C, 0, 0, ReqHttp),
    v("req.http.transfer-encoding", HDR, V4, C, 0, 0, ReqHttp),
    v("req.http.", HDR, V4, C, C, C, ReqHttp),
    v("req.backend_hint", B, V4, C, C, 0, ReqBackend),
    v("req.restarts", INT, V4, C, 0, 0, ReqRestarts),
    v("req.xid", INT, V4, C, 0, 0, ReqXid),
    v("req.ttl", DUR, V4, C, C, C, ReqTtl),
    // Varnish 8's name for req.ttl (the same knob, renamed: varnish-cache#4389).
    v("req.max_age", DUR, V4, C, C, C, ReqTtl),
    v("req.grace", DUR, V4, C, C, C, ReqGrace),
    v("req.hash_always_miss", BOOL, V4, C, C, 0, ReqHashAlwaysMiss),
    v("req.hash_ignore_busy", BOOL, V4, C, C, 0, ReqHashIgnoreBusy),
    v("req.hash_ignore_vary", BOOL, V4, C, C, 0, ReqHashIgnoreVary),
    v("req.can_gzip", BOOL, V4, C, 0, 0, ReqCanGzip),
    v("req.esi_level", INT, V4, C, 0, 0, ReqEsiLevel),
    v("req.esi", BOOL, D40, C, C, 0, ReqEsi),
    v("req.time", TIME, V4, C, 0, 0, ReqTime),
    v("req.is_hitmiss", BOOL, V4, MISS | DELIVER | PASS | SYNTH, 0, 0, ReqIsHitmiss),
    v("req.is_hitpass", BOOL, V4, PASS | DELIVER | SYNTH, 0, 0, ReqIsHitpass),
    v("req.transport", STR, V4, C, 0, 0, ReqTransport),
    v("req.storage", Type::Stevedore, V4, C, C, 0, Unsupported(STORAGE)),
    v("req.filters", STR, V4, RECV, RECV, 0, Unsupported(FILTERS)),
    v("req.trace", BOOL, V4, C, C, 0, Unsupported(TRACE)),
    v("req.hash", Type::Blob, V4, HIT | MISS | PASS | PURGE | DELIVER | SYNTH | PIPE, 0, 0, ReqDigest),
    // Without ESI the top request is the request itself.
    v("req_top.url", STR, V4, C, 0, 0, ReqTopUrl),
    v("req_top.method", STR, V4, C, 0, 0, ReqTopMethod),
    v("req_top.proto", STR, V4, C, 0, 0, ReqTopProto),
    v("req_top.time", TIME, V4, C, 0, 0, ReqTopTime),
    v("req_top.http.", HDR, V4, C, 0, 0, ReqTopHttp),
    // The backend request, 2.x.
    v("bereq.request", STR, L, LEGACY_BEREQ, LEGACY_BEREQ, 0, BereqMethod),
    v("bereq.url", STR, L, LEGACY_BEREQ, LEGACY_BEREQ, 0, BereqUrl),
    v("bereq.proto", STR, L, LEGACY_BEREQ, LEGACY_BEREQ, 0, BereqProto),
    v("bereq.http.", HDR, L, LEGACY_BEREQ, LEGACY_BEREQ, LEGACY_BEREQ, BereqHttp),
    v("bereq.connect_timeout", DUR, L, PIPE | PASS | MISS, PIPE | PASS | MISS, 0, BereqConnectTimeout),
    v("bereq.first_byte_timeout", DUR, L, PASS | MISS, PASS | MISS, 0, BereqFirstByteTimeout),
    v("bereq.between_bytes_timeout", DUR, L, PASS | MISS, PASS | MISS, 0, BereqBetweenBytesTimeout),
    // The backend request, 4.x.
    v("bereq.method", STR, V4, PB, PB, 0, BereqMethod),
    v("bereq.url", STR, V4, PB, PB, 0, BereqUrl),
    v("bereq.proto", STR, D40, PB, PB, 0, BereqProto),
    v("bereq.proto", STR, D41, PB, 0, 0, BereqProto),
    v("bereq.http.content-length", HDR, V4, BACKEND, 0, 0, BereqHttp),
    v("bereq.http.transfer-encoding", HDR, V4, BACKEND, 0, 0, BereqHttp),
    v("bereq.http.", HDR, V4, PB, PB, PB, BereqHttp),
    v("bereq.backend", B, V4, PB, PB, 0, BereqBackend),
    v("bereq.retries", INT, V4, BACKEND, 0, 0, BereqRetries),
    v("bereq.xid", INT, V4, PB, 0, 0, BereqXid),
    v("bereq.uncacheable", BOOL, V4, BACKEND, 0, 0, BereqUncacheable),
    v("bereq.is_bgfetch", BOOL, V4, BACKEND, 0, 0, BereqIsBgfetch),
    v("bereq.is_hitmiss", BOOL, V4, BACKEND, 0, 0, BereqIsHitmiss),
    v("bereq.is_hitpass", BOOL, V4, BACKEND, 0, 0, BereqIsHitpass),
    v("bereq.connect_timeout", DUR, V4, PB, PB, PB, BereqConnectTimeout),
    v("bereq.first_byte_timeout", DUR, V4, BACKEND, BACKEND, PB, BereqFirstByteTimeout),
    v("bereq.between_bytes_timeout", DUR, V4, BACKEND, BACKEND, PB, BereqBetweenBytesTimeout),
    v("bereq.body", BODY, V4, 0, 0, BE_FETCH, BereqBody),
    v("bereq.time", TIME, V4, PB, 0, 0, BereqTime),
    v("bereq.filters", STR, V4, BE_FETCH, BE_FETCH, 0, Unsupported(FILTERS)),
    v("bereq.trace", BOOL, V4, BACKEND, BACKEND, 0, Unsupported(TRACE)),
    v("bereq.task_deadline", DUR, V4, PIPE, PIPE, PIPE, Unsupported("Shellac's pipe has no separate deadline setting")),
    v("bereq.hash", Type::Blob, V4, PB, 0, 0, ReqDigest),
    // The backend response, 2.0: `obj` in vcl_fetch.
    v("obj.proto", STR, D20, FETCH, FETCH, 0, BerespProto),
    v("obj.status", INT, D20, FETCH, FETCH, 0, BerespStatus),
    v("obj.response", STR, D20, FETCH, FETCH, 0, BerespReason),
    v("obj.http.", HDR, D20, FETCH, FETCH, FETCH, BerespHttp),
    v("obj.cacheable", BOOL, D20, FETCH, FETCH, 0, BerespCacheable),
    v("obj.ttl", DUR, D20, FETCH, FETCH, 0, BerespTtl),
    v("obj.grace", DUR, D20, FETCH, FETCH, 0, BerespGrace),
    v("obj.prefetch", DUR, D20, FETCH, FETCH, 0, BerespPrefetch),
    // The backend response, 2.1/3.0: `beresp` in vcl_fetch.
    v("beresp.proto", STR, D21, FETCH, FETCH, 0, BerespProto),
    v("beresp.status", INT, D21, FETCH, FETCH, 0, BerespStatus),
    v("beresp.response", STR, D21, FETCH, FETCH, 0, BerespReason),
    v("beresp.http.", HDR, D21, FETCH, FETCH, FETCH, BerespHttp),
    v("beresp.cacheable", BOOL, D21, FETCH, FETCH, 0, BerespCacheable),
    v("beresp.ttl", DUR, D21, FETCH, FETCH, 0, BerespTtl),
    v("beresp.grace", DUR, D21, FETCH, FETCH, 0, BerespGrace),
    v("beresp.keep", DUR, D21, FETCH, FETCH, 0, BerespKeep),
    v("beresp.do_esi", BOOL, D21, FETCH, FETCH, 0, BerespDoEsi),
    v("beresp.do_gzip", BOOL, D21, FETCH, FETCH, 0, BerespDoGzip),
    v("beresp.do_gunzip", BOOL, D21, FETCH, FETCH, 0, BerespDoGunzip),
    v("beresp.do_stream", BOOL, D21, FETCH, FETCH, 0, BerespDoStream),
    v("beresp.backend.name", STR, D21, FETCH, 0, 0, BerespBackendName),
    v("beresp.storage", STR, D21, FETCH, FETCH, 0, BerespStorage),
    v("beresp.saintmode", DUR, D21, 0, FETCH, 0, BerespSaintmode),
    // The stored object, 2.x.
    v("obj.proto", STR, L, HIT, 0, 0, ObjProto),
    v("obj.status", INT, L, HIT, 0, 0, ObjStatus),
    v("obj.response", STR, L, HIT, 0, 0, ObjReason),
    v("obj.http.", HDR, L, HIT, 0, 0, ObjHttp),
    // 2.0 also in vcl_error.
    v("obj.cacheable", BOOL, D20, HIT | ERROR, HIT | ERROR, 0, ObjCacheable),
    v("obj.cacheable", BOOL, L, HIT, HIT, 0, ObjCacheable),
    v("obj.ttl", DUR, L, HIT | ERROR, HIT | ERROR, 0, ObjTtl),
    v("obj.grace", DUR, L, HIT | ERROR, HIT | ERROR, 0, ObjGrace),
    v("obj.keep", DUR, L, HIT | ERROR, HIT | ERROR, 0, ObjKeep),
    v("obj.hits", INT, L, HIT | DELIVER, 0, 0, ObjHits),
    v("obj.lastuse", DUR, L, HIT | DELIVER | ERROR, 0, 0, ObjLastuse),
    // The generated response, 2.x: `obj` in vcl_error.
    v("obj.proto", STR, L, ERROR, ERROR, 0, RespProto),
    v("obj.status", INT, L, ERROR, ERROR, 0, RespStatus),
    v("obj.response", STR, L, ERROR, ERROR, 0, RespReason),
    v("obj.http.", HDR, L, ERROR, ERROR, ERROR, RespHttp),
    // The response to the client, 2.x.
    v("resp.proto", STR, L, DELIVER, DELIVER, 0, RespProto),
    v("resp.status", INT, L, DELIVER, DELIVER, 0, RespStatus),
    v("resp.response", STR, L, DELIVER, DELIVER, 0, RespReason),
    v("resp.http.", HDR, L, DELIVER, DELIVER, DELIVER, RespHttp),
    // The backend response, 4.x.
    v("beresp.status", INT, V4, BR, BR, 0, BerespStatus),
    v("beresp.reason", STR, V4, BR, BR, 0, BerespReason),
    v("beresp.proto", STR, D40, BR, BR, 0, BerespProto),
    v("beresp.proto", STR, D41, BR, 0, 0, BerespProto),
    v("beresp.http.content-length", HDR, V4, BR, 0, 0, BerespHttp),
    v("beresp.http.transfer-encoding", HDR, V4, BR, 0, 0, BerespHttp),
    v("beresp.http.", HDR, V4, BR, BR, BR, BerespHttp),
    v("beresp.ttl", DUR, V4, BR, BR, 0, BerespTtl),
    v("beresp.grace", DUR, V4, BR, BR, 0, BerespGrace),
    v("beresp.keep", DUR, V4, BR, BR, 0, BerespKeep),
    v("beresp.uncacheable", BOOL, V4, BR, BR, 0, BerespUncacheable),
    v("beresp.age", DUR, V4, BR, 0, 0, BerespAge),
    v("beresp.backend", B, V4, BR, 0, 0, BerespBackend),
    v("beresp.backend.name", STR, V4, BR, 0, 0, BerespBackendName),
    v("beresp.was_304", BOOL, V4, BR, 0, 0, BerespWas304),
    v("beresp.time", TIME, V4, BR, 0, 0, BerespTime),
    v("beresp.body", BODY, V4, 0, BE_ERROR, 0, BerespBody),
    v("beresp.do_esi", BOOL, V4, BR, BR, 0, BerespDoEsi),
    v("beresp.do_gzip", BOOL, V4, BR, BR, 0, BerespDoGzip),
    v("beresp.do_gunzip", BOOL, V4, BR, BR, 0, BerespDoGunzip),
    v("beresp.do_stream", BOOL, V4, BR, BR, 0, BerespDoStream),
    v("beresp.filters", STR, V4, BE_RESPONSE, BE_RESPONSE, 0, BerespFilters),
    v("beresp.storage", Type::Stevedore, V4, BR, BR, 0, BerespStorage),
    v("beresp.storage_hint", STR, V4, BR, BR, 0, BerespStorage),
    v("beresp.transit_buffer", Type::Bytes, V4, BE_RESPONSE, BE_RESPONSE, 0, BerespTransitBuffer),
    v("beresp.backend.ip", IP, D40, BE_RESPONSE, 0, 0, Unsupported("use beresp.backend.name: Shellac resolves backends by name")),
    // The stored object, 4.x.
    v("obj.status", INT, V4, HIT, 0, 0, ObjStatus),
    v("obj.reason", STR, V4, HIT, 0, 0, ObjReason),
    v("obj.proto", STR, V4, HIT, 0, 0, ObjProto),
    v("obj.http.", HDR, V4, HIT, 0, 0, ObjHttp),
    v("obj.ttl", DUR, V4, HIT | DELIVER, 0, 0, ObjTtl),
    v("obj.grace", DUR, V4, HIT | DELIVER, 0, 0, ObjGrace),
    v("obj.keep", DUR, V4, HIT | DELIVER, 0, 0, ObjKeep),
    v("obj.age", DUR, V4, HIT | DELIVER, 0, 0, ObjAge),
    v("obj.hits", INT, V4, HIT | DELIVER, 0, 0, ObjHits),
    v("obj.time", TIME, V4, HIT | DELIVER, 0, 0, ObjTime),
    v("obj.uncacheable", BOOL, V4, DELIVER, 0, 0, ObjUncacheable),
    v("obj.can_esi", BOOL, V4, HIT | DELIVER, 0, 0, ObjCanEsi),
    v("obj.storage", Type::Stevedore, V4, HIT | DELIVER, 0, 0, ObjStorage),
    // The response to the client, 4.x.
    v("resp.status", INT, V4, RS, RS, 0, RespStatus),
    v("resp.reason", STR, V4, RS, RS, 0, RespReason),
    v("resp.proto", STR, D40, RS, RS, 0, RespProto),
    v("resp.proto", STR, D41, RS, 0, 0, RespProto),
    v("resp.http.content-length", HDR, V4, RS, 0, 0, RespHttp),
    v("resp.http.transfer-encoding", HDR, V4, RS, 0, 0, RespHttp),
    v("resp.http.", HDR, V4, RS, RS, RS, RespHttp),
    v("resp.body", BODY, V4, 0, SYNTH, 0, RespBody),
    v("resp.is_streaming", BOOL, V4, RS, 0, 0, RespIsStreaming),
    v("resp.time", TIME, V4, RS, 0, 0, RespTime),
    v("resp.do_esi", BOOL, D41, RS, RS, 0, RespDoEsi),
    v("resp.filters", STR, V4, RS, RS, 0, RespFilters),
    // Storage backends (`storage.s0.free_space`, `beresp.storage = storage.s0`).
    v("storage.", Type::Stevedore, V4, ALL, 0, 0, Storage),
    // Newer Varnish (7.x, 8.0) variables Shellac does not have.
    v("param.timeout_idle", DUR, V4, ALL, 0, 0, ParamTimeoutIdle),
    v("param.uncacheable_ttl", DUR, V4, ALL, 0, 0, ParamUncacheableTtl),
    v("param.", DUR, V4, ALL, 0, 0, Unsupported("Varnish's parameters are not VCL values in Shellac; its settings are in the TOML configuration"),
    ),
    v("bereq.retry_connect", BOOL, V4, BACKEND, BACKEND, 0, BereqRetryConnect),
];

/// The rows for `name` in `dialect`: an exact name, or a family whose prefix it extends
/// (`req.http.X-Foo` under `req.http.`). Exact rows come first.
pub fn rows(name: &str, dialect: Dialect) -> impl Iterator<Item = &'static VarDef> + '_ {
    let bit = dialect_bit(dialect);
    let lower = name.to_ascii_lowercase();
    let exact: Vec<&'static VarDef> = VARS
        .iter()
        .filter(|d| d.dialects & bit != 0 && !d.name.ends_with('.') && d.name == lower)
        .collect();
    let family: Vec<&'static VarDef> = VARS
        .iter()
        .filter(|d| {
            d.dialects & bit != 0
                && d.name.ends_with('.')
                && lower.len() > d.name.len()
                && lower.starts_with(d.name)
        })
        .collect();
    exact.into_iter().chain(family)
}

/// Whether some dialect knows `name` (to say "only in 4.1" rather than "unknown").
pub fn other_dialects(name: &str) -> Vec<&'static str> {
    let lower = name.to_ascii_lowercase();
    let mut out = Vec::new();
    for (bit, label) in [(D20, "2.0"), (D21, "2.1/3.0"), (D40, "4.0"), (D41, "4.1")] {
        let known = VARS.iter().any(|d| {
            d.dialects & bit != 0
                && if d.name.ends_with('.') {
                    lower.len() > d.name.len() && lower.starts_with(d.name)
                } else {
                    d.name == lower
                }
        });
        if known {
            out.push(label);
        }
    }
    out
}

/// The part of a family name after its prefix: the field name of `req.http.X-Foo`.
pub fn field_of<'a>(def: &VarDef, name: &'a str) -> Option<&'a str> {
    def.name
        .ends_with('.')
        .then(|| name.get(def.name.len()..))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcl::types::Method;

    fn find(name: &str, d: Dialect, m: Method) -> Option<&'static VarDef> {
        rows(name, d).find(|r| (r.read | r.write | r.unset) & m.bit() != 0)
    }

    #[test]
    fn dialects_name_things_differently() {
        let d = find("req.request", Dialect::V21, Method::Recv).expect("2.1 req.request");
        assert_eq!(d.slot, Slot::ReqMethod);
        assert!(find("req.request", Dialect::V41, Method::Recv).is_none());
        assert_eq!(
            find("req.method", Dialect::V40, Method::Recv).map(|d| d.slot),
            Some(Slot::ReqMethod)
        );
        // obj.* in vcl_fetch is the backend response in 2.0 only.
        assert_eq!(
            find("obj.ttl", Dialect::V20, Method::Fetch).map(|d| d.slot),
            Some(Slot::BerespTtl)
        );
        assert!(find("obj.ttl", Dialect::V21, Method::Fetch).is_none());
        assert_eq!(
            find("beresp.ttl", Dialect::V21, Method::Fetch).map(|d| d.slot),
            Some(Slot::BerespTtl)
        );
        // obj.http in vcl_error is the generated response.
        assert_eq!(
            find("obj.http.x", Dialect::V21, Method::Error).map(|d| d.slot),
            Some(Slot::RespHttp)
        );
        assert_eq!(
            find("obj.http.x", Dialect::V21, Method::Hit).map(|d| d.slot),
            Some(Slot::ObjHttp)
        );
    }

    #[test]
    fn protected_headers_are_read_only_and_families_match_any_case() {
        let d = rows("req.http.Content-Length", Dialect::V41)
            .next()
            .expect("row");
        assert_eq!(d.write, 0);
        let d = rows("req.http.X-Foo", Dialect::V41).next().expect("row");
        assert_eq!(d.name, "req.http.");
        assert_eq!(field_of(d, "req.http.X-Foo"), Some("X-Foo"));
        assert!(rows("req.http.", Dialect::V41).next().is_none());
    }

    #[test]
    fn every_row_is_usable_somewhere() {
        for d in VARS {
            assert!(
                d.read | d.write | d.unset != 0,
                "{} is usable nowhere",
                d.name
            );
            assert!(d.dialects != 0, "{} has no dialect", d.name);
        }
    }
}
