//! The compiled policy program: typed expressions, statements and actions per subroutine,
//! what the checker makes of a VCL file and what the interpreter (`run.rs`) evaluates at each
//! step of a request. Names are resolved: variables to slots, backends and ACLs to indexes,
//! regular expressions compiled, constants folded into ready header values.

use std::net::IpAddr;
use std::sync::Arc;

use super::pcre::Pattern;
use http::{HeaderName, HeaderValue};

use super::ast::Pos;
use super::types::{Dialect, Method, Type};
use super::vars::Slot;

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

/// A whole compiled VCL program.
#[derive(Debug, Clone)]
pub struct Program {
    pub dialect: Dialect,
    /// The files it was read from (positions index this).
    pub files: Vec<String>,
    /// The body run for each built-in subroutine: the operator's definitions in order, then
    /// the dialect's built-in VCL (reached when the operator's code does not return).
    pub methods: Vec<(Method, Box<[Stmt]>)>,
    /// Which methods the operator defined (the rest is the built-in VCL alone).
    pub defined: Vec<Method>,
    pub subs: Vec<Sub>,
    pub acls: Vec<Acl>,
    /// Backends and directors by name; `Expr::Backend` indexes this.
    pub targets: Vec<String>,
    /// Where requests go when VCL does not say (the first backend, as in Varnish).
    pub default_target: Option<u16>,
    /// The origins the program declares, as Shellac backends, probes and directors.
    pub origins: super::origins::Origins,
    /// The largest size a `std.cache_req_body()` call names: a request body is read (up to
    /// this many bytes) before vcl_recv runs, so the call can answer at once. `None`: the
    /// program never calls it and bodies stream as they come.
    pub req_body_keep: Option<u64>,
    /// Some subroutine reads `req.hash` / `bereq.hash`: vcl_hash makes the digest.
    pub reads_digest: bool,
    /// Some subroutine (the built-in ones included) reads `server.ip`, `server.port` or
    /// `local.ip`: client sessions then find their local address for each request.
    pub reads_local: bool,
    /// What a backend that does not set its timeouts waits, and what `bereq.*_timeout` read
    /// until VCL sets them.
    pub timeouts: Timeouts,
}

/// Backend timeouts by default: Varnish's `connect_timeout`, `first_byte_timeout`,
/// `between_bytes_timeout` and `backend_idle_timeout` parameters (`[vcl]` settings of the
/// same names).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timeouts {
    pub connect: std::time::Duration,
    pub first_byte: std::time::Duration,
    pub between_bytes: std::time::Duration,
    /// How long an idle pooled connection is kept.
    pub backend_idle: std::time::Duration,
}

impl Default for Timeouts {
    /// Varnish's defaults: 3.5 s, 60 s, 60 s, 60 s.
    fn default() -> Timeouts {
        Timeouts {
            connect: std::time::Duration::from_millis(3500),
            first_byte: std::time::Duration::from_secs(60),
            between_bytes: std::time::Duration::from_secs(60),
            backend_idle: std::time::Duration::from_secs(60),
        }
    }
}

impl Program {
    /// The body of a built-in subroutine.
    pub fn method(&self, m: Method) -> &[Stmt] {
        self.methods
            .iter()
            .find(|(x, _)| *x == m)
            .map(|(_, b)| &**b)
            .unwrap_or(&[])
    }

    /// Whether the operator wrote this subroutine (otherwise only the built-in VCL runs).
    pub fn defines(&self, m: Method) -> bool {
        self.defined.contains(&m)
    }

    /// Whether built-in subroutine `m` (with the custom subs it calls) reads no variable but
    /// those `slot` allows and calls no function but pure ones: its outcome then depends on
    /// nothing else. `obj.hits` compared with 0 (`if (obj.hits > 0)`) reads nothing `slot`
    /// is asked about when the caller passes `on_hit`: on a hit the count is at least 1, so
    /// such a comparison has one outcome.
    pub fn reads_only(&self, m: Method, on_hit: bool, slot: &dyn Fn(Slot) -> bool) -> bool {
        fn hits_vs_zero(a: &Expr, b: &Expr) -> bool {
            let hits = |e: &Expr| matches!(e, Expr::Var(v) if v.slot == Slot::ObjHits);
            let zero = |e: &Expr| matches!(e, Expr::Int(0));
            (hits(a) && zero(b)) || (zero(a) && hits(b))
        }
        fn expr(e: &Expr, on_hit: bool, slot: &dyn Fn(Slot) -> bool) -> bool {
            match e {
                Expr::Cmp(_, _, a, b) if on_hit && hits_vs_zero(a, b) => true,
                Expr::Var(v) => slot(v.slot),
                Expr::Concat(parts) => parts.iter().all(|x| expr(x, on_hit, slot)),
                Expr::Arith(_, _, a, b)
                | Expr::Cmp(_, _, a, b)
                | Expr::And(a, b)
                | Expr::Or(a, b) => expr(a, on_hit, slot) && expr(b, on_hit, slot),
                Expr::Neg(a) | Expr::Not(a) | Expr::Defined(a) => expr(a, on_hit, slot),
                Expr::Match { subject, .. } => expr(subject, on_hit, slot),
                Expr::InAcl { ip, .. } => expr(ip, on_hit, slot),
                Expr::Call(f, args) => pure(f) && args.iter().all(|x| expr(x, on_hit, slot)),
                _ => true,
            }
        }
        fn pure(f: &Func) -> bool {
            matches!(
                f,
                Func::Regsub(_)
                    | Func::Regsuball(_)
                    | Func::Replacement
                    | Func::StdToLower
                    | Func::StdToUpper
                    | Func::StdInteger
                    | Func::StdReal
                    | Func::StdDuration
                    | Func::StdStrstr
                    | Func::FileRead(_)
            )
        }
        fn body(
            p: &Program,
            b: &[Stmt],
            on_hit: bool,
            slot: &dyn Fn(Slot) -> bool,
            depth: u32,
        ) -> bool {
            // Calls nest as deep as the subroutines do (no recursion: the checker refuses it).
            depth < 64
                && b.iter().all(|s| match s {
                    Stmt::Set { var, value, .. } => slot(var.slot) && expr(value, on_hit, slot),
                    Stmt::Unset { var, .. } => slot(var.slot),
                    Stmt::If {
                        branches,
                        otherwise,
                    } => {
                        branches.iter().all(|(c, b)| {
                            expr(c, on_hit, slot) && body(p, b, on_hit, slot, depth + 1)
                        }) && body(p, otherwise, on_hit, slot, depth + 1)
                    }
                    Stmt::Call(i) => p
                        .subs
                        .get(*i)
                        .is_some_and(|s| body(p, &s.body, on_hit, slot, depth + 1)),
                    Stmt::Return(Action::Synth(a, b), _) => {
                        a.as_deref().is_none_or(|e| expr(e, on_hit, slot))
                            && b.as_deref().is_none_or(|e| expr(e, on_hit, slot))
                    }
                    Stmt::Return(..) | Stmt::Leave => true,
                    Stmt::Effect(..) => false,
                })
        }
        body(self, self.method(m), on_hit, slot, 0)
    }

    /// Whether any statement calls `f` for its effect (such as `rollback`).
    pub fn has_effect(&self, f: &dyn Fn(&Func) -> bool) -> bool {
        fn walk(body: &[Stmt], f: &dyn Fn(&Func) -> bool) -> bool {
            body.iter().any(|s| match s {
                Stmt::Effect(func, _, _) => f(func),
                Stmt::If {
                    branches,
                    otherwise,
                } => branches.iter().any(|(_, b)| walk(b, f)) || walk(otherwise, f),
                _ => false,
            })
        }
        self.methods.iter().any(|(_, b)| walk(b, f)) || self.subs.iter().any(|s| walk(&s.body, f))
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
