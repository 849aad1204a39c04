//! VCL's value types, its dialects and its subroutines ("methods"), as the checker and the
//! variable table name them.

use std::fmt;

/// The type of a VCL value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// A statement's "value": a call made for its effect.
    Void,
    String,
    Int,
    Real,
    Bool,
    /// Seconds, possibly fractional or negative (`120s`, `obj.ttl`).
    Duration,
    /// A point in time (`now`, `obj.time`).
    Time,
    Ip,
    Backend,
    /// A header field: read as a STRING that may be unset.
    Header,
    Acl,
    Probe,
    /// A size (`10KB`).
    Bytes,
    Blob,
    Sub,
    /// A whole message (`req`, `beresp`), only as a VMOD argument.
    Http,
    /// A body (`resp.body`, `beresp.body`), only as the target of `set` and `unset`.
    Body,
    /// A storage backend (`beresp.storage`).
    Stevedore,
    /// One of a VMOD argument's words (`std.syslog(..., LOG_INFO)`).
    Enum,
    /// A value already reported as wrong: accepted everywhere, so one mistake gives one error.
    Error,
}

impl Type {
    /// The name Varnish uses in its messages (`STRING`, `DURATION`).
    pub fn name(self) -> &'static str {
        match self {
            Type::Void => "VOID",
            Type::String => "STRING",
            Type::Int => "INT",
            Type::Real => "REAL",
            Type::Bool => "BOOL",
            Type::Duration => "DURATION",
            Type::Time => "TIME",
            Type::Ip => "IP",
            Type::Backend => "BACKEND",
            Type::Header => "HEADER",
            Type::Acl => "ACL",
            Type::Probe => "PROBE",
            Type::Bytes => "BYTES",
            Type::Blob => "BLOB",
            Type::Sub => "SUB",
            Type::Http => "HTTP",
            Type::Body => "BODY",
            Type::Stevedore => "STEVEDORE",
            Type::Enum => "ENUM",
            Type::Error => "(error)",
        }
    }

    /// Whether a value of this type can be written into a string (`"x" + obj.hits`).
    pub fn stringifies(self) -> bool {
        !matches!(
            self,
            Type::Void | Type::Acl | Type::Probe | Type::Sub | Type::Http | Type::Body
        )
    }

    /// Whether this type reads as a string (a header is a string that may be unset).
    pub fn is_stringy(self) -> bool {
        matches!(self, Type::String | Type::Header | Type::Error)
    }

    /// Whether this type is a number that arithmetic applies to.
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            Type::Int | Type::Real | Type::Duration | Type::Bytes | Type::Time
        )
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The VCL dialect of a file: what its variables, actions and subroutines are called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dialect {
    /// Varnish 2.0: no `vcl` line, `obj.*` in `vcl_fetch`.
    V20,
    /// Varnish 2.1 and 3.0: no `vcl` line, `beresp.*` in `vcl_fetch`, `req.request`,
    /// `vcl_error`, `error 503 "..."`. 3.0's additions (`hash_data`, `vcl_init`, `import`)
    /// are accepted in the same dialect.
    V21,
    /// `vcl 4.0;`
    V40,
    /// `vcl 4.1;`
    V41,
}

impl Dialect {
    pub fn is_legacy(self) -> bool {
        self <= Dialect::V21
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::V20 => "2.0",
            Dialect::V21 => "2.1/3.0",
            Dialect::V40 => "4.0",
            Dialect::V41 => "4.1",
        }
    }
}

/// A built-in subroutine: a step of the request where Varnish calls VCL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    Recv,
    Pipe,
    Pass,
    Hash,
    Purge,
    Hit,
    Miss,
    Deliver,
    Synth,
    BackendFetch,
    BackendResponse,
    BackendError,
    Init,
    Fini,
    /// 2.x/3.0 `vcl_fetch` (the backend response, on the client side).
    Fetch,
    /// 2.x/3.0 `vcl_error` (a generated response).
    Error,
}

/// A set of methods.
pub type Methods = u32;

impl Method {
    pub const ALL: [Method; 16] = [
        Method::Recv,
        Method::Pipe,
        Method::Pass,
        Method::Hash,
        Method::Purge,
        Method::Hit,
        Method::Miss,
        Method::Deliver,
        Method::Synth,
        Method::BackendFetch,
        Method::BackendResponse,
        Method::BackendError,
        Method::Init,
        Method::Fini,
        Method::Fetch,
        Method::Error,
    ];

    pub fn bit(self) -> Methods {
        1 << self as u32
    }

    /// The subroutine's name (`vcl_recv`).
    pub fn sub_name(self) -> &'static str {
        match self {
            Method::Recv => "vcl_recv",
            Method::Pipe => "vcl_pipe",
            Method::Pass => "vcl_pass",
            Method::Hash => "vcl_hash",
            Method::Purge => "vcl_purge",
            Method::Hit => "vcl_hit",
            Method::Miss => "vcl_miss",
            Method::Deliver => "vcl_deliver",
            Method::Synth => "vcl_synth",
            Method::BackendFetch => "vcl_backend_fetch",
            Method::BackendResponse => "vcl_backend_response",
            Method::BackendError => "vcl_backend_error",
            Method::Init => "vcl_init",
            Method::Fini => "vcl_fini",
            Method::Fetch => "vcl_fetch",
            Method::Error => "vcl_error",
        }
    }

    /// The method a subroutine name stands for in `dialect`, if it is a built-in one.
    pub fn from_sub(name: &str, dialect: Dialect) -> Option<Method> {
        let m = Method::ALL.into_iter().find(|m| m.sub_name() == name)?;
        m.exists_in(dialect).then_some(m)
    }

    /// Whether Varnish calls this subroutine in `dialect`.
    pub fn exists_in(self, dialect: Dialect) -> bool {
        match self {
            Method::Recv
            | Method::Pipe
            | Method::Pass
            | Method::Hash
            | Method::Hit
            | Method::Miss
            | Method::Deliver
            | Method::Init
            | Method::Fini => true,
            Method::Fetch | Method::Error => dialect.is_legacy(),
            Method::Purge
            | Method::Synth
            | Method::BackendFetch
            | Method::BackendResponse
            | Method::BackendError => !dialect.is_legacy(),
        }
    }

    /// The actions `return (...)` may name here, in `dialect`.
    pub fn actions(self, dialect: Dialect) -> &'static [&'static str] {
        if dialect.is_legacy() {
            return match self {
                Method::Recv => &["error", "pass", "pipe", "lookup", "hash"],
                Method::Pipe => &["error", "pipe"],
                Method::Pass => &["error", "restart", "pass"],
                Method::Hash => &["hash"],
                Method::Hit => &["error", "restart", "pass", "deliver"],
                Method::Miss => &["error", "restart", "pass", "fetch"],
                Method::Fetch => &["error", "restart", "pass", "deliver", "hit_for_pass", "esi"],
                Method::Deliver => &["restart", "deliver"],
                Method::Error => &["restart", "deliver"],
                Method::Init | Method::Fini => &["ok"],
                _ => &[],
            };
        }
        match self {
            Method::Recv => &[
                "fail", "synth", "restart", "pass", "pipe", "hash", "purge", "vcl",
            ],
            Method::Pipe => &["fail", "synth", "pipe"],
            Method::Pass => &["fail", "synth", "restart", "fetch"],
            Method::Hash => &["fail", "lookup"],
            Method::Purge => &["fail", "synth", "restart"],
            // `fetch` is 4.0's and 4.1's name for `miss` here (accepted until Varnish 5.0).
            Method::Hit => &[
                "fail", "synth", "restart", "pass", "miss", "deliver", "fetch",
            ],
            Method::Miss => &["fail", "synth", "restart", "pass", "fetch"],
            Method::Deliver => &["fail", "synth", "restart", "deliver"],
            Method::Synth => &["fail", "restart", "deliver"],
            Method::BackendFetch => &["fail", "abandon", "fetch", "error"],
            Method::BackendResponse => &["fail", "abandon", "retry", "deliver", "pass", "error"],
            Method::BackendError => &["fail", "abandon", "retry", "deliver"],
            Method::Init => &["fail", "ok"],
            Method::Fini => &["ok"],
            Method::Fetch | Method::Error => &[],
        }
    }
}

/// Sets of methods the variable table names.
pub mod ctx {
    use super::{Method, Methods};

    const fn b(m: Method) -> Methods {
        1 << m as u32
    }

    pub const RECV: Methods = b(Method::Recv);
    pub const PIPE: Methods = b(Method::Pipe);
    pub const PASS: Methods = b(Method::Pass);
    pub const HASH: Methods = b(Method::Hash);
    pub const PURGE: Methods = b(Method::Purge);
    pub const HIT: Methods = b(Method::Hit);
    pub const MISS: Methods = b(Method::Miss);
    pub const DELIVER: Methods = b(Method::Deliver);
    pub const SYNTH: Methods = b(Method::Synth);
    pub const BE_FETCH: Methods = b(Method::BackendFetch);
    pub const BE_RESPONSE: Methods = b(Method::BackendResponse);
    pub const BE_ERROR: Methods = b(Method::BackendError);
    pub const INIT: Methods = b(Method::Init);
    pub const FINI: Methods = b(Method::Fini);
    pub const FETCH: Methods = b(Method::Fetch);
    pub const ERROR: Methods = b(Method::Error);
    /// 4.x's client side.
    pub const CLIENT: Methods = RECV | PIPE | PASS | HASH | PURGE | HIT | MISS | DELIVER | SYNTH;
    /// 4.x's backend side.
    pub const BACKEND: Methods = BE_FETCH | BE_RESPONSE | BE_ERROR;
    /// Every subroutine.
    pub const ALL: Methods = CLIENT | BACKEND | INIT | FINI | FETCH | ERROR;
    /// 2.x/3.0's request subroutines (`vcl_fetch` and `vcl_error` are on the client side).
    pub const LEGACY: Methods = RECV | PIPE | PASS | HASH | MISS | HIT | FETCH | DELIVER | ERROR;
    /// 2.x/3.0's subroutines that have a backend request.
    pub const LEGACY_BEREQ: Methods = PIPE | PASS | MISS | FETCH;
}
