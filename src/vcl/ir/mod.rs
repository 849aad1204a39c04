//! The compiled policy program: typed expressions, statements and actions per subroutine,
//! what the checker makes of a VCL file and what the interpreter (`run/`) evaluates at each
//! step of a request. Names are resolved: variables to slots, backends and ACLs to indexes,
//! regular expressions compiled, constants folded into ready header values.

use std::net::IpAddr;
use std::sync::Arc;

use super::pcre::Pattern;
use http::{HeaderName, HeaderValue};

use super::ast::Pos;
use super::types::Type;
use super::vars::Slot;
pub use program::{Program, Timeouts};

mod program;

/// A variable as compiled: its slot, and for header families the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Var {
    pub slot: Slot,
    pub header: Option<HeaderName>,
}

/// A string constant, with its header value made once (setting a header to a constant does
/// not allocate).
#[derive(Debug, Clone)]
pub struct Text {
    pub text: Arc<str>,
    pub header: Option<HeaderValue>,
}

impl Text {
    pub fn new(text: &str) -> Text {
        Text {
            header: HeaderValue::from_str(text).ok(),
            text: Arc::from(text),
        }
    }
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

/// An expression with a known type.
#[derive(Debug, Clone)]
pub enum Expr {
    Str(Text),
    Int(i64),
    Real(f64),
    Bool(bool),
    /// Seconds.
    Duration(f64),
    Bytes(u64),
    /// A BLOB literal (`:base64:`), its bytes.
    Blob(Box<[u8]>),
    Ip(IpAddr),
    /// A backend or director, by index into [`Program::targets`].
    Backend(u16),
    /// No backend (`backend x none;`).
    NoBackend,
    /// No address (`std.ip()` without a fallback).
    NoIp,
    Var(Var),
    /// Strings joined (`+` on strings, 2.x's juxtaposition); parts of other types are
    /// written as Varnish writes them.
    Concat(Box<[Expr]>),
    /// Arithmetic in the given result type.
    Arith(Arith, Type, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    /// Comparison of two values of type `Type` (STRING covers HEADER).
    Cmp(Cmp, Type, Box<Expr>, Box<Expr>),
    Match {
        subject: Box<Expr>,
        regex: Pattern,
        negate: bool,
    },
    InAcl {
        ip: Box<Expr>,
        acl: u16,
        negate: bool,
    },
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    /// A STRING, HEADER or BACKEND used as a condition: whether it is set.
    Defined(Box<Expr>),
    /// A built-in or VMOD function.
    Call(Func, Box<[Expr]>),
}

/// Built-in and VMOD functions Shellac implements.
#[derive(Debug, Clone)]
pub enum Func {
    /// `regsub(subject, replacement)` with the regex compiled: the first match replaced (the
    /// replacement in the regex crate's syntax).
    Regsub(Pattern),
    /// `regsuball(...)`: every match replaced.
    Regsuball(Pattern),
    /// `hash_data(value)` or 2.x `set req.hash += value`.
    HashData,
    /// `ban(expression)` and 2.x `purge(...)`: a ban of the cache.
    Ban,
    /// 2.x `purge_url(regex)` / 3.0 `ban_url(regex)`: `req.url ~ regex`.
    BanUrl,
    /// 4.x `synthetic(body)` and 2.x `synthetic "body"`.
    Synthetic,
    StdLog,
    StdSyslog,
    StdToLower,
    StdToUpper,
    /// `std.ip(text, fallback)`.
    StdIp,
    StdHealthy,
    StdQuerySort,
    StdDuration,
    StdInteger,
    StdReal,
    StdTime,
    /// `std.fileread(path)`: the file as read when the program was compiled.
    FileRead(Text),
    /// `std.getenv(name)`: the variable in Shellac's environment when it is called; unset
    /// when there is none.
    StdGetenv,
    /// `std.round(r)`: half away from zero.
    StdRound,
    /// vmod_std's conversions deprecated since Varnish 6.2 (`std.real2integer(r, fallback)`,
    /// ...): the fallback for a value that is not finite, or an integer past ±(2^53 - 1).
    StdReal2Integer,
    StdReal2Time,
    StdTime2Integer,
    StdTime2Real,
    /// `std.collect(header, separator)`: every line of a header joined into one.
    StdCollect(Var, Text),
    StdPort,
    StdStrstr,
    StdRandom,
    /// `std.timestamp(label)`: accepted, a no-op (Shellac times every request itself).
    StdTimestamp,
    /// `std.ban(expression)`: like `ban()`, true when the ban was added.
    StdBan,
    StdNow,
    /// `std.ban_error()`: the last ban's refusal.
    StdBanError,
    /// A replacement string computed at run time, turned from Varnish's `\1` into the
    /// regex crate's `${1}`.
    Replacement,
    CookieParse,
    CookieGet,
    CookieIsSet,
    CookieSet,
    CookieDelete,
    CookieFilter,
    CookieKeep,
    CookieFilterRe(Pattern),
    CookieKeepRe(Pattern),
    CookieGetString,
    CookieClean,
    /// `director.backend()`: the director (index into [`Program::targets`]).
    DirectorBackend(u16),
    /// `hash_director.backend(key)`: the director, hashing `key`.
    DirectorHash(u16),
    /// `std.rollback(req)` / `rollback`: the request as it arrived.
    Rollback,
    /// `purge.hard()`: every variant of the request's cache key removed; their number.
    PurgeHard,
    /// `purge.soft(ttl, grace, keep)`: every variant made stale (at most `ttl` of freshness
    /// left), `grace` and `keep` cut to those given when not negative; their number.
    PurgeSoft,
    /// vmod_xkey's `purge(keys)`: every object tagged (`xkey`, `Surrogate-Key`) with one of
    /// the keys removed; their number.
    XkeyPurge,
    /// vmod_xkey's `softpurge(keys)`: those still fresh made stale now; their number.
    XkeySoftPurge,
    /// vmod_vsthrottle's functions, arguments `(key, limit, period, block)`.
    Throttle(ThrottleOp),
    /// `std.cache_req_body(size)`: keep the request body (read before vcl_recv) for every
    /// backend request of this request, if it is at most `size` bytes; whether it is kept.
    StdCacheReqBody(u64),
    /// vmod_blob (`vcl/blob.rs`): `decode(decoding, length, encoded)`,
    /// `encode(encoding, case, blob)`, `transcode(decoding, encoding, case, length,
    /// encoded)`, `equal(a, b)`, `length(blob)`, `sub(blob, length, offset)`.
    BlobDecode,
    BlobEncode,
    BlobTranscode,
    BlobEqual,
    BlobLength,
    BlobSub,
}

/// What a subroutine returns.
#[derive(Debug, Clone)]
pub enum Action {
    /// 4.x `return (hash)` from vcl_recv, 2.x `lookup`.
    Hash,
    /// 4.x `return (lookup)` from vcl_hash, 2.x `hash`.
    Lookup,
    Pass,
    Pipe,
    Deliver,
    Fetch,
    Restart,
    Retry,
    Miss,
    Purge,
    Abandon,
    Fail,
    Ok,
    /// 3.0 `hit_for_pass`.
    HitForPass,
    /// `pass(DURATION)` of vcl_backend_response (Varnish 5.1+): the URL is hit-for-pass that
    /// long.
    PassFor(Box<Expr>),
    /// `synth(status[, reason])`, 2.x `error status [reason]`, 4.x backend `error(...)`.
    Synth(Option<Box<Expr>>, Option<Box<Expr>>),
}

impl Action {
    pub fn as_str(&self) -> &'static str {
        match self {
            Action::Hash => "hash",
            Action::Lookup => "lookup",
            Action::Pass => "pass",
            Action::Pipe => "pipe",
            Action::Deliver => "deliver",
            Action::Fetch => "fetch",
            Action::Restart => "restart",
            Action::Retry => "retry",
            Action::Miss => "miss",
            Action::Purge => "purge",
            Action::Abandon => "abandon",
            Action::Fail => "fail",
            Action::Ok => "ok",
            Action::HitForPass => "hit_for_pass",
            Action::PassFor(_) => "pass",
            Action::Synth(..) => "synth",
        }
    }
}

/// Assignment operators of `set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOp {
    Assign,
    Add,
    Sub,
    Mul,
    Div,
}

/// A statement.
#[derive(Debug, Clone)]
pub enum Stmt {
    Set {
        var: Var,
        op: SetOp,
        value: Expr,
        pos: Pos,
    },
    Unset {
        var: Var,
        pos: Pos,
    },
    If {
        branches: Box<[(Expr, Box<[Stmt]>)]>,
        otherwise: Box<[Stmt]>,
    },
    /// A custom subroutine, by index into [`Program::subs`].
    Call(usize),
    Return(Action, Pos),
    /// A bare `return;`: back to the calling subroutine.
    Leave,
    /// A function called for its effect.
    Effect(Func, Box<[Expr]>, Pos),
}

/// A custom subroutine.
#[derive(Debug, Clone)]
pub struct Sub {
    pub name: String,
    pub body: Box<[Stmt]>,
}

/// A compiled ACL: address ranges, each included or excluded; the longest matching prefix
/// decides, as in Varnish.
#[derive(Debug, Clone)]
pub struct Acl {
    pub name: String,
    pub entries: Vec<AclEntry>,
}

#[derive(Debug, Clone)]
pub struct AclEntry {
    pub net: IpAddr,
    pub bits: u8,
    pub negated: bool,
}

impl Acl {
    /// Whether `ip` matches: the most specific entry that contains it decides.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        let mut best: Option<&AclEntry> = None;
        for e in &self.entries {
            if net_contains(e.net, e.bits, ip) && best.is_none_or(|b| e.bits > b.bits) {
                best = Some(e);
            }
        }
        best.is_some_and(|e| !e.negated)
    }
}

fn net_contains(net: IpAddr, bits: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(bits.min(32)))
            };
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(bits.min(128)))
            };
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_longest_prefix_decides() {
        let acl = Acl {
            name: "a".into(),
            entries: vec![
                AclEntry {
                    net: "10.0.0.0".parse().unwrap(),
                    bits: 8,
                    negated: false,
                },
                AclEntry {
                    net: "10.1.0.0".parse().unwrap(),
                    bits: 16,
                    negated: true,
                },
                AclEntry {
                    net: "::1".parse().unwrap(),
                    bits: 128,
                    negated: false,
                },
            ],
        };
        assert!(acl.contains("10.2.3.4".parse().unwrap()));
        assert!(!acl.contains("10.1.3.4".parse().unwrap()));
        assert!(!acl.contains("11.0.0.1".parse().unwrap()));
        assert!(acl.contains("::1".parse().unwrap()));
        // An IPv4-mapped address is the IPv4 address.
        assert!(acl.contains("::ffff:10.2.3.4".parse().unwrap()));
    }
}

/// vmod_vsthrottle's functions on the bucket of `(key, limit, period, block)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThrottleOp {
    /// BOOL: takes a token, or is denied (and blocks the key for `block`).
    IsDenied,
    /// INT: tokens left.
    Remaining,
    /// DURATION: how long the key stays blocked.
    Blocked,
    /// VOID: gives a token back.
    ReturnToken,
}
