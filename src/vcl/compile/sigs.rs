//! The signatures of the functions VCL can call: the built-in ones and those of the VMODs
//! Shellac implements (std, cookie, purge, blob), as one table (`calls.rs` binds arguments against it).

use super::super::types::ctx::*;
use super::super::types::{Methods, Type};

/// What a parameter takes when the call leaves it out.
#[derive(Debug, Clone, Copy)]
pub(super) enum Dflt {
    Required,
    Str(&'static str),
    Int(i64),
    Real(f64),
    Bool(bool),
    Dur(f64),
    Bytes(u64),
    /// No address: `std.ip()` without a fallback fails the request when the text is not one.
    NoIp,
    /// Optional with no value of its own; giving it is refused (`unsupported`).
    Unsupported,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct P {
    pub(super) name: &'static str,
    pub(super) ty: Type,
    pub(super) default: Dflt,
    /// Must be a constant string, compiled as a regular expression.
    pub(super) regex: bool,
    /// An ENUM's values (the argument is one of these names, written bare).
    pub(super) values: &'static [&'static str],
}

const fn p(name: &'static str, ty: Type) -> P {
    P {
        name,
        ty,
        default: Dflt::Required,
        regex: false,
        values: &[],
    }
}

const fn opt(name: &'static str, ty: Type, default: Dflt) -> P {
    P {
        name,
        ty,
        default,
        regex: false,
        values: &[],
    }
}

const fn re(name: &'static str) -> P {
    P {
        name,
        ty: Type::String,
        default: Dflt::Required,
        regex: true,
        values: &[],
    }
}

/// An ENUM parameter taking one of `values`, `default` when left out.
const fn en(name: &'static str, values: &'static [&'static str], default: &'static str) -> P {
    P {
        name,
        ty: Type::Enum,
        default: Dflt::Str(default),
        regex: false,
        values,
    }
}

/// vmod_blob's encodings.
const SCHEMES: &[&str] = &[
    "IDENTITY",
    "BASE64",
    "BASE64URL",
    "BASE64URLNOPAD",
    "BASE64CF",
    "HEX",
    "URL",
];
const CASES: &[&str] = &["LOWER", "UPPER", "DEFAULT"];

/// Which function a signature compiles to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum F {
    Regsub,
    Regsuball,
    HashData,
    Ban,
    BanUrl,
    Synthetic,
    Rollback,
    Log,
    Syslog,
    ToLower,
    ToUpper,
    Ip,
    Healthy,
    QuerySort,
    Duration,
    Integer,
    Real,
    Time,
    FileRead,
    Getenv,
    Round,
    Real2Integer,
    Real2Time,
    Time2Integer,
    Time2Real,
    Collect,
    Port,
    Strstr,
    Random,
    Timestamp,
    StdBan,
    StdBanError,
    Now,
    CParse,
    CGet,
    CIsSet,
    CSet,
    CDelete,
    CFilter,
    CKeep,
    CFilterRe,
    CKeepRe,
    CGetString,
    CClean,
    PurgeHard,
    PurgeSoft,
    XkeyPurge,
    XkeySoftPurge,
    ThrottleIsDenied,
    ThrottleRemaining,
    ThrottleBlocked,
    ThrottleReturnToken,
    CacheReqBody,
    BlobDecode,
    BlobEncode,
    BlobTranscode,
    BlobEqual,
    BlobLength,
    BlobSub,
}

pub(super) struct Sig {
    pub(super) name: &'static str,
    pub(super) ret: Type,
    pub(super) params: &'static [P],
    /// Subroutines it may be called in (0: any).
    pub(super) within: Methods,
    pub(super) f: F,
}

use Type::{Bool, Duration as Dur, Int, Ip, Real, String as Str, Time, Void};

#[rustfmt::skip]
pub(super) const SIGS: &[Sig] = &[
    Sig { name: "regsub", ret: Str, params: &[p("str", Str), re("regex"), p("sub", Str)], within: 0, f: F::Regsub, },
    Sig { name: "regsuball", ret: Str, params: &[p("str", Str), re("regex"), p("sub", Str)], within: 0, f: F::Regsuball, },
    Sig { name: "hash_data", ret: Void, params: &[p("input", Str)], within: HASH, f: F::HashData, },
    Sig { name: "ban", ret: Void, params: &[p("expression", Str)], within: ALL & !(INIT | FINI), f: F::Ban, },
    Sig { name: "ban_url", ret: Void, params: &[p("regex", Str)], within: ALL & !(INIT | FINI), f: F::BanUrl, },
    Sig { name: "purge_url", ret: Void, params: &[p("regex", Str)], within: ALL & !(INIT | FINI), f: F::BanUrl, },
    Sig { name: "synthetic", ret: Void, params: &[p("body", Str)], within: SYNTH | BE_ERROR | ERROR, f: F::Synthetic, },
    Sig { name: "rollback", ret: Void, params: &[], within: CLIENT | LEGACY, f: F::Rollback, },
    Sig { name: "std.log", ret: Void, params: &[p("s", Str)], within: 0, f: F::Log, },
    Sig { name: "std.syslog", ret: Void, params: &[p("priority", Int), p("s", Str)], within: 0, f: F::Syslog, },
    Sig { name: "std.tolower", ret: Str, params: &[p("s", Str)], within: 0, f: F::ToLower, },
    Sig { name: "std.toupper", ret: Str, params: &[p("s", Str)], within: 0, f: F::ToUpper, },
    Sig { name: "std.ip", ret: Ip, params: &[p("s", Str), opt("fallback", Ip, Dflt::NoIp), opt("resolve", Bool, Dflt::Bool(true)), opt("p", Str, Dflt::Str("80"))], within: 0, f: F::Ip, },
    Sig { name: "std.healthy", ret: Bool, params: &[p("be", Type::Backend)], within: 0, f: F::Healthy, },
    Sig { name: "std.querysort", ret: Str, params: &[p("url", Str)], within: 0, f: F::QuerySort, },
    Sig { name: "std.duration", ret: Dur, params: &[opt("s", Str, Dflt::Str("")), opt("fallback", Dur, Dflt::Dur(0.0)), opt("real", Real, Dflt::Unsupported), opt("integer", Int, Dflt::Unsupported)], within: 0, f: F::Duration, },
    Sig { name: "std.integer", ret: Int, params: &[opt("s", Str, Dflt::Str("")), opt("fallback", Int, Dflt::Int(0)), opt("bool", Bool, Dflt::Unsupported), opt("bytes", Type::Bytes, Dflt::Unsupported), opt("duration", Dur, Dflt::Unsupported), opt("real", Real, Dflt::Unsupported), opt("time", Time, Dflt::Unsupported)], within: 0, f: F::Integer, },
    Sig { name: "std.real", ret: Real, params: &[opt("s", Str, Dflt::Str("")), opt("fallback", Real, Dflt::Real(0.0)), opt("integer", Int, Dflt::Unsupported), opt("bool", Bool, Dflt::Unsupported), opt("bytes", Type::Bytes, Dflt::Unsupported), opt("duration", Dur, Dflt::Unsupported), opt("time", Time, Dflt::Unsupported)], within: 0, f: F::Real, },
    Sig { name: "std.time", ret: Time, params: &[opt("s", Str, Dflt::Str("")), opt("fallback", Time, Dflt::Real(0.0)), opt("real", Real, Dflt::Unsupported), opt("integer", Int, Dflt::Unsupported)], within: 0, f: F::Time, },
    Sig { name: "std.fileread", ret: Str, params: &[p("path", Str)], within: 0, f: F::FileRead, },
    Sig { name: "std.getenv", ret: Str, params: &[p("name", Str)], within: 0, f: F::Getenv, },
    Sig { name: "std.round", ret: Real, params: &[p("r", Real)], within: 0, f: F::Round, },
    Sig { name: "std.real2integer", ret: Int, params: &[p("r", Real), p("fallback", Int)], within: 0, f: F::Real2Integer, },
    Sig { name: "std.real2time", ret: Time, params: &[p("r", Real), p("fallback", Time)], within: 0, f: F::Real2Time, },
    Sig { name: "std.time2integer", ret: Int, params: &[p("t", Time), p("fallback", Int)], within: 0, f: F::Time2Integer, },
    Sig { name: "std.time2real", ret: Real, params: &[p("t", Time), p("fallback", Real)], within: 0, f: F::Time2Real, },
    Sig { name: "std.collect", ret: Void, params: &[p("hdr", Type::Header), opt("sep", Str, Dflt::Str(", "))], within: 0, f: F::Collect, },
    Sig { name: "std.port", ret: Int, params: &[p("ip", Ip)], within: 0, f: F::Port, },
    Sig { name: "std.strstr", ret: Str, params: &[p("s1", Str), p("s2", Str)], within: 0, f: F::Strstr, },
    Sig { name: "std.random", ret: Real, params: &[p("lo", Real), p("hi", Real)], within: 0, f: F::Random, },
    Sig { name: "std.timestamp", ret: Void, params: &[p("s", Str)], within: 0, f: F::Timestamp, },
    Sig { name: "std.ban", ret: Bool, params: &[p("expression", Str)], within: ALL & !(INIT | FINI), f: F::StdBan, },
    Sig { name: "std.ban_error", ret: Str, params: &[], within: ALL & !(INIT | FINI), f: F::StdBanError, },
    Sig { name: "std.now", ret: Time, params: &[], within: 0, f: F::Now, },
    Sig { name: "blob.decode", ret: Type::Blob, params: &[en("decoding", SCHEMES, "IDENTITY"), opt("length", Int, Dflt::Int(0)), p("encoded", Str)], within: 0, f: F::BlobDecode, },
    Sig { name: "blob.encode", ret: Str, params: &[en("encoding", SCHEMES, "IDENTITY"), en("case", CASES, "DEFAULT"), p("blob", Type::Blob)], within: 0, f: F::BlobEncode, },
    Sig { name: "blob.transcode", ret: Str, params: &[en("decoding", SCHEMES, "IDENTITY"), en("encoding", SCHEMES, "IDENTITY"), en("case", CASES, "DEFAULT"), opt("length", Int, Dflt::Int(0)), p("encoded", Str)], within: 0, f: F::BlobTranscode, },
    Sig { name: "blob.equal", ret: Bool, params: &[p("a", Type::Blob), p("b", Type::Blob)], within: 0, f: F::BlobEqual, },
    Sig { name: "blob.length", ret: Int, params: &[p("blob", Type::Blob)], within: 0, f: F::BlobLength, },
    Sig { name: "blob.sub", ret: Type::Blob, params: &[p("blob", Type::Blob), p("length", Type::Bytes), opt("offset", Type::Bytes, Dflt::Bytes(0))], within: 0, f: F::BlobSub, },
    Sig { name: "std.cache_req_body", ret: Bool, params: &[p("size", Type::Bytes)], within: RECV, f: F::CacheReqBody, },
    Sig { name: "std.rollback", ret: Void, params: &[p("h", Type::Http)], within: CLIENT | BACKEND, f: F::Rollback, },
    Sig { name: "cookie.parse", ret: Void, params: &[p("cookieheader", Str)], within: CLIENT | BACKEND, f: F::CParse, },
    Sig { name: "cookie.get", ret: Str, params: &[p("cookiename", Str)], within: CLIENT | BACKEND, f: F::CGet, },
    Sig { name: "cookie.isset", ret: Bool, params: &[p("cookiename", Str)], within: CLIENT | BACKEND, f: F::CIsSet, },
    Sig { name: "cookie.set", ret: Void, params: &[p("cookiename", Str), p("value", Str)], within: CLIENT | BACKEND, f: F::CSet, },
    Sig { name: "cookie.delete", ret: Void, params: &[p("cookiename", Str)], within: CLIENT | BACKEND, f: F::CDelete, },
    Sig { name: "cookie.filter", ret: Void, params: &[p("filterstring", Str)], within: CLIENT | BACKEND, f: F::CFilter, },
    Sig { name: "cookie.filter_except", ret: Void, params: &[p("filterstring", Str)], within: CLIENT | BACKEND, f: F::CKeep, },
    Sig { name: "cookie.keep", ret: Void, params: &[p("filterstring", Str)], within: CLIENT | BACKEND, f: F::CKeep, },
    Sig { name: "cookie.filter_re", ret: Void, params: &[re("expression")], within: CLIENT | BACKEND, f: F::CFilterRe, },
    Sig { name: "cookie.keep_re", ret: Void, params: &[re("expression")], within: CLIENT | BACKEND, f: F::CKeepRe, },
    Sig { name: "cookie.get_string", ret: Str, params: &[], within: CLIENT | BACKEND, f: F::CGetString, },
    Sig { name: "cookie.clean", ret: Void, params: &[], within: CLIENT | BACKEND, f: F::CClean, },
    Sig { name: "purge.hard", ret: Int, params: &[], within: HIT | MISS, f: F::PurgeHard, },
    Sig { name: "purge.soft", ret: Int, params: &[opt("ttl", Dur, Dflt::Dur(0.0)), opt("grace", Dur, Dflt::Dur(-1.0)), opt("keep", Dur, Dflt::Dur(-1.0))], within: HIT | MISS, f: F::PurgeSoft, },
    Sig { name: "xkey.purge", ret: Int, params: &[p("keys", Str)], within: CLIENT, f: F::XkeyPurge, },
    Sig { name: "vsthrottle.is_denied", ret: Bool, params: &[p("key", Str), p("limit", Int), p("period", Dur), opt("block", Dur, Dflt::Dur(0.0))], within: ALL & !(INIT | FINI), f: F::ThrottleIsDenied, },
    Sig { name: "vsthrottle.remaining", ret: Int, params: &[p("key", Str), p("limit", Int), p("period", Dur), opt("block", Dur, Dflt::Dur(0.0))], within: ALL & !(INIT | FINI), f: F::ThrottleRemaining, },
    Sig { name: "vsthrottle.blocked", ret: Dur, params: &[p("key", Str), p("limit", Int), p("period", Dur), p("block", Dur)], within: ALL & !(INIT | FINI), f: F::ThrottleBlocked, },
    Sig { name: "vsthrottle.return_token", ret: Void, params: &[p("key", Str), p("limit", Int), p("period", Dur), opt("block", Dur, Dflt::Dur(0.0))], within: ALL & !(INIT | FINI), f: F::ThrottleReturnToken, },
    Sig { name: "xkey.softpurge", ret: Int, params: &[p("keys", Str)], within: CLIENT, f: F::XkeySoftPurge, },
];
