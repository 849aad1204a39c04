//! What a variable is at run time: the slot the request path reads and writes for it.

/// What a variable is at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slot {
    ClientIp,
    ClientIdentity,
    ServerIp,
    ServerPort,
    ServerHostname,
    ServerIdentity,
    LocalIp,
    RemoteIp,
    LocalEndpoint,
    LocalSocket,
    Now,
    SessXid,
    /// `sess.timeout_idle`: the client connection's idle timeout.
    SessTimeoutIdle,
    /// `sess.timeout_linger`: how long an idle session keeps its state (`server.idle_release`).
    SessTimeoutLinger,
    /// `sess.send_timeout`: the longest a response may take to send
    /// (`server.send_total_timeout`).
    SessSendTimeout,
    /// `sess.idle_send_timeout`: the longest a write may make no progress
    /// (`server.send_timeout`).
    SessIdleSendTimeout,
    /// `param.timeout_idle`: `server.idle_timeout`.
    ParamTimeoutIdle,
    /// `param.uncacheable_ttl`: `cache.hit_for_miss_ttl`.
    ParamUncacheableTtl,
    ReqMethod,
    ReqUrl,
    ReqProto,
    ReqHttp,
    /// 2.x `set req.hash += value;`: one more input of the hash.
    ReqHash,
    /// 4.x `req.hash` / `bereq.hash`: the SHA-256 of the hash inputs, a BLOB.
    ReqDigest,
    ReqBackend,
    ReqBackendHealthy,
    ReqRestarts,
    ReqGrace,
    ReqTtl,
    ReqXid,
    ReqHashAlwaysMiss,
    ReqHashIgnoreBusy,
    ReqHashIgnoreVary,
    ReqCanGzip,
    ReqEsiLevel,
    ReqTime,
    /// `req_top.*`: the client's request an ESI include serves (the request itself at
    /// level 0).
    ReqTopUrl,
    ReqTopMethod,
    ReqTopProto,
    ReqTopTime,
    ReqTopHttp,
    ReqIsHitmiss,
    ReqIsHitpass,
    ReqTransport,
    BereqMethod,
    BereqUrl,
    BereqProto,
    BereqHttp,
    BereqBackend,
    BereqRetries,
    BereqXid,
    BereqUncacheable,
    BereqIsBgfetch,
    BereqIsHitmiss,
    BereqIsHitpass,
    BereqConnectTimeout,
    BereqFirstByteTimeout,
    BereqBetweenBytesTimeout,
    BereqBody,
    /// `bereq.retry_connect`: whether a request that failed on a reused connection is tried
    /// once more on a new one.
    BereqRetryConnect,
    BereqTime,
    BerespStatus,
    BerespReason,
    BerespProto,
    BerespHttp,
    BerespTtl,
    BerespGrace,
    BerespKeep,
    BerespUncacheable,
    /// 2.x `beresp.cacheable`: the opposite of `beresp.uncacheable`.
    BerespCacheable,
    BerespAge,
    BerespBackend,
    BerespBackendName,
    BerespWas304,
    BerespTime,
    BerespBody,
    /// `beresp.do_stream`: false buffers the whole body before the response goes out.
    BerespDoStream,
    /// `beresp.transit_buffer`: how far a pass's fetch may read ahead of its client. Shellac
    /// always streams a pass at the client's pace (hyper's buffers, tens of KiB), which any
    /// bound Varnish allows meets; the value set reads back.
    BerespTransitBuffer,
    /// `beresp.do_gzip`: gzip an identity body as it is fetched (stored compressed).
    BerespDoGzip,
    /// `beresp.do_gunzip`: decode a gzip body as it is fetched (stored identity).
    BerespDoGunzip,
    /// `beresp.do_esi`: parse the body for ESI as it is fetched (2.x `esi;`).
    BerespDoEsi,
    /// `req.esi` (2.x-4.0): false turns the assembly of the client's page off (ignored in
    /// an include, as Varnish does).
    ReqEsi,
    /// `resp.do_esi` (4.1): the response is an ESI page assembled on delivery; false turns
    /// that off.
    RespDoEsi,
    /// `obj.can_esi`: the object holds ESI (it would be assembled).
    ObjCanEsi,
    /// `beresp.filters` (6+): the fetch processors, as a list of names.
    BerespFilters,
    /// `resp.filters` (6+): the delivery processors, as a list of names.
    RespFilters,
    /// 2.x `beresp.saintmode`: hold the backend off for this object for so long.
    BerespSaintmode,
    /// 2.0 `obj.prefetch` in vcl_fetch: the object's refresh-ahead (`Object::prefetch`).
    BerespPrefetch,
    ObjStatus,
    ObjReason,
    ObjProto,
    ObjHttp,
    ObjTtl,
    ObjGrace,
    ObjKeep,
    ObjAge,
    ObjHits,
    /// 4.x `obj.storage`: the storage the object is kept in (`storage.Transient` for one in
    /// memory only, `storage.s0` for the memory tier itself).
    ObjStorage,
    /// `beresp.storage`, `beresp.storage_hint`: the storage named; `Transient` keeps the
    /// object in the memory tier only.
    BerespStorage,
    /// `storage.NAME`: a storage (STEVEDORE) by name.
    Storage,
    /// `storage.NAME.free_space`, `.used_space` (BYTES), `.happy` (BOOL): a storage's
    /// figures; the header holds `NAME.FIGURE`.
    StorageFigure,
    ObjUncacheable,
    /// 2.x `obj.cacheable`.
    ObjCacheable,
    ObjLastuse,
    ObjTime,
    RespStatus,
    RespReason,
    RespProto,
    RespHttp,
    RespBody,
    RespIsStreaming,
    RespTime,
    /// A switch of a feature whose state in Shellac is fixed: reads as this value; setting it
    /// to the same value is accepted, to the other refused (`beresp.do_esi = true`).
    Fixed(bool, &'static str),
    /// A variable Shellac has no equivalent for: any use is refused, with this reason.
    Unsupported(&'static str),
}
