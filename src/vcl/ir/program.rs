//! A whole compiled program: the bodies of the built-in and custom subroutines, ACLs,
//! targets, origins and timeouts, and what the request path asks of it before running it
//! (whether a step only reads, whether any code has an effect).

use super::super::origins::Origins;
use super::super::types::{Dialect, Method};
use super::super::vars::Slot;
use super::{Acl, Action, Expr, Func, Stmt, Sub};

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
    pub origins: Origins,
    /// The largest size a `std.cache_req_body()` call names: a request body is read (up to
    /// this many bytes) before vcl_recv runs, so the call can answer at once. `None`: the
    /// program never calls it and bodies stream as they come.
    pub req_body_keep: Option<u64>,
    /// Some subroutine reads `req.hash` / `bereq.hash`: vcl_hash makes the digest.
    pub reads_digest: bool,
    /// Some subroutine (the built-in ones included) reads `server.ip`, `server.port`,
    /// `local.ip` or `remote.ip`: client sessions then find their local address (and what a
    /// PROXY protocol header said of the connection) for each request.
    pub reads_local: bool,
    /// What a backend that does not set its timeouts waits, and what `bereq.*_timeout` read
    /// until VCL sets them.
    pub timeouts: Timeouts,
    /// The header names the program spells with capitals, as first spelled
    /// (`beresp.http.X-Cache`): a field VCL sets is logged so (`BerespHeader`), as Varnish
    /// logs it; one spelled in lowercase only is logged in lowercase.
    pub spelled: std::collections::HashMap<http::HeaderName, Box<str>>,
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
    /// The name of target `t` (empty for a number the program has no target for).
    pub fn target_name(&self, t: u16) -> &str {
        self.targets.get(t as usize).map_or("", String::as_str)
    }

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
