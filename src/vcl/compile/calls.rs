//! Functions: the built-in ones (`regsub`, `hash_data`, `ban`, `synthetic`, ...) and the
//! VMODs Shellac implements (`std`, `cookie`, `directors`), as one table of signatures the
//! checker binds arguments against (positional, then named, then defaults).

use crate::vcl::pcre::Pattern;

use super::super::ast::{Arg, Expr as AstExpr, Pos};
use super::super::ir::{Expr, Func, Text, ThrottleOp};
use super::super::types::Type;
use super::super::types::ctx::*;
use super::Checker;
use super::patterns::{compile_regex, replacement};
use super::sigs::{Dflt, F, SIGS, Sig};
use super::vmods::Vmod;

impl Checker<'_> {
    /// A call `name(args)` as an expression; `None` for the type means the call was wrong
    /// (reported).
    pub(super) fn call(&mut self, name: &str, args: &[Arg], pos: Pos) -> (Expr, Type) {
        let bad = (Expr::Bool(false), Type::Error);
        if let Some((prefix, method)) = name.rsplit_once('.') {
            if let Some(obj) = self.objects.get(prefix).cloned() {
                return self.object_call(prefix, &obj, method, args, pos);
            }
            let Some(import) = self.imports.get(prefix).cloned() else {
                // A string's methods (trunk): `resp.proto.lower()`.
                if (method == "upper" || method == "lower") && args.is_empty() {
                    let (on, ty) = self.expr(&AstExpr::Name(prefix.to_string(), pos), None);
                    if ty == Type::Error {
                        return bad;
                    }
                    let on = self.coerce(on, ty, Type::String, pos);
                    let f = if method == "upper" {
                        Func::StdToUpper
                    } else {
                        Func::StdToLower
                    };
                    return (Expr::Call(f, Box::new([on])), Type::String);
                }
                if ["std", "directors", "cookie", "purge", "blob", "vsthrottle"].contains(&prefix) {
                    self.error(
                        pos,
                        format!("Symbol not found: '{name}' (add 'import {prefix};' first)"),
                    );
                } else {
                    self.error(pos, format!("Symbol not found: '{name}'"));
                }
                return bad;
            };
            if let Vmod::Other(_) = import.vmod {
                // Refused at its import already; what it is given still counts as used.
                self.mark_used(args);
                return bad;
            }
            let full = format!("{}.{method}", import.vmod.prefix());
            return match SIGS.iter().find(|s| s.name == full) {
                Some(sig) => self.bind(sig, args, pos),
                None if import.vmod == Vmod::Directors => {
                    self.error(
                        pos,
                        format!(
                            "'{name}' cannot be called here: directors are made with 'new NAME = \
                             directors.round_robin();' in vcl_init"
                        ),
                    );
                    bad
                }
                None => {
                    self.unsupported(
                        pos,
                        format!(
                            "{full}() is not implemented by Shellac (docs/vcl.md lists what the \
                             {} VMOD offers)",
                            import.vmod.prefix()
                        ),
                    );
                    bad
                }
            };
        }
        match SIGS.iter().find(|s| s.name == name) {
            Some(sig) if self.dialect.is_legacy() || !["purge_url", "ban_url"].contains(&name) => {
                self.bind(sig, args, pos)
            }
            None if self.dialect.is_legacy() && ["purge", "purge_hash"].contains(&name) => {
                self.error(pos, format!("{name}(...) is a statement, not a value"));
                bad
            }
            _ => {
                self.error(pos, format!("Symbol not found: '{name}'"));
                bad
            }
        }
    }

    /// Marks the declarations named in `args` as used (arguments of a refused VMOD's call).
    pub(super) fn mark_used(&mut self, args: &[Arg]) {
        fn walk(c: &mut Checker<'_>, e: &AstExpr) {
            match e {
                AstExpr::Name(n, _) => {
                    if let Some(t) = c.targets.iter_mut().find(|t| t.name == *n) {
                        t.used = true;
                    }
                    if let Some(a) = c.acls.get_mut(n) {
                        a.used = true;
                    }
                    if let Some(p) = c.probes.get_mut(n) {
                        p.used = true;
                    }
                    if let Some(s) = c.subs.get_mut(n) {
                        s.used = true;
                    }
                }
                AstExpr::Call { args, .. } => args.iter().for_each(|a| walk(c, &a.value)),
                AstExpr::Binary { left, right, .. } => {
                    walk(c, left);
                    walk(c, right);
                }
                AstExpr::Unary { expr, .. } => walk(c, expr),
                AstExpr::Concat { parts, .. } => parts.iter().for_each(|p| walk(c, p)),
                _ => {}
            }
        }
        for a in args {
            walk(self, &a.value);
        }
    }

    /// Binds `args` to `sig`'s parameters and compiles the call.
    fn bind(&mut self, sig: &Sig, args: &[Arg], pos: Pos) -> (Expr, Type) {
        let bad = (Expr::Bool(false), Type::Error);
        if sig.within != 0 && self.here != 0 && self.here & !sig.within != 0 {
            let outside: Vec<&str> = Self::method_names(self.here & !sig.within);
            self.error(
                pos,
                format!(
                    "{}() is Not available in subroutine '{}'.",
                    sig.name,
                    outside.first().copied().unwrap_or("?")
                ),
            );
            return bad;
        }
        let mut given: Vec<Option<&AstExpr>> = vec![None; sig.params.len()];
        let mut ok = true;
        for (i, a) in args.iter().enumerate() {
            let slot = match &a.name {
                Some(n) => sig.params.iter().position(|p| p.name == n),
                None => (i < sig.params.len()).then_some(i),
            };
            match slot {
                Some(s) if given[s].is_none() => given[s] = Some(&a.value),
                Some(_) => {
                    self.error(
                        a.value.pos(),
                        format!("{}(): argument given twice", sig.name),
                    );
                    ok = false;
                }
                None => {
                    match &a.name {
                        Some(n) => self.error(
                            a.value.pos(),
                            format!("{}(): Unknown argument '{n}'", sig.name),
                        ),
                        None => self.error(
                            a.value.pos(),
                            format!(
                                "{}() takes {} argument{}, not {}",
                                sig.name,
                                sig.params.len(),
                                if sig.params.len() == 1 { "" } else { "s" },
                                args.len()
                            ),
                        ),
                    }
                    ok = false;
                }
            }
        }
        let mut compiled: Vec<Expr> = Vec::with_capacity(sig.params.len());
        let mut regexes: Vec<Pattern> = Vec::new();
        for (param, value) in sig.params.iter().zip(&given) {
            match (value, param.default) {
                (None, Dflt::Required) => {
                    self.error(
                        pos,
                        format!("{}(): Argument '{}' missing", sig.name, param.name),
                    );
                    ok = false;
                }
                (None, d) => compiled.push(match d {
                    Dflt::Str(s) => Expr::Str(Text::new(s)),
                    Dflt::Int(n) => Expr::Int(n),
                    Dflt::Real(r) => Expr::Real(r),
                    Dflt::Bool(b) => Expr::Bool(b),
                    Dflt::Dur(d) => Expr::Duration(d),
                    Dflt::Bytes(n) => Expr::Bytes(n),
                    Dflt::NoIp => Expr::NoIp,
                    Dflt::Required | Dflt::Unsupported => Expr::Bool(false),
                }),
                (Some(v), Dflt::Unsupported) => {
                    self.unsupported(
                        v.pos(),
                        format!(
                            "{}(): the argument '{}' is not supported by Shellac",
                            sig.name, param.name
                        ),
                    );
                    ok = false;
                }
                (Some(v), _) if param.regex => match v {
                    AstExpr::Str(s, p) => match compile_regex(self, s, *p) {
                        Some(r) => {
                            regexes.push(r);
                            compiled.push(Expr::Bool(false));
                        }
                        None => ok = false,
                    },
                    other => {
                        if let Some(text) = super::consts::const_str(other) {
                            match compile_regex(self, &text, other.pos()) {
                                Some(r) => {
                                    regexes.push(r);
                                    compiled.push(Expr::Bool(false));
                                }
                                None => ok = false,
                            }
                        } else {
                            let (_, t) = self.expr(other, None);
                            if t != Type::Error {
                                self.error(
                                    other.pos(),
                                    format!(
                                        "{}(): Expected CSTR: the regular expression must be a \
                                         constant string",
                                        sig.name
                                    ),
                                );
                            }
                            ok = false;
                        }
                    }
                },
                (Some(v), _) if param.ty == Type::Header => match v {
                    AstExpr::Name(n, p) => match self.variable(n, *p, super::names::Access::Read) {
                        Some((var, Type::Header)) => compiled.push(Expr::Var(var)),
                        Some(_) => {
                            self.error(*p, format!("{}(): '{n}' is not a header", sig.name));
                            ok = false;
                        }
                        None => ok = false,
                    },
                    other => {
                        self.error(
                            other.pos(),
                            format!("{}(): expected a header such as req.http.X", sig.name),
                        );
                        ok = false;
                    }
                },
                (Some(v), _) if param.ty == Type::Enum => match v {
                    AstExpr::Name(n, _) if param.values.contains(&n.as_str()) => {
                        compiled.push(Expr::Str(Text::new(n)));
                    }
                    other => {
                        self.error(
                            other.pos(),
                            format!(
                                "{}(): Wrong enum value for '{}'. Expected one of: {}",
                                sig.name,
                                param.name,
                                param.values.join(", ")
                            ),
                        );
                        ok = false;
                    }
                },
                (Some(v), _) if param.ty == Type::Http => match v {
                    AstExpr::Name(n, _) if n == "req" || n == "bereq" => {
                        compiled.push(Expr::Bool(n == "req"));
                    }
                    other => {
                        self.error(
                            other.pos(),
                            format!("{}(): expected req or bereq", sig.name),
                        );
                        ok = false;
                    }
                },
                (Some(v), _) => {
                    let e = self.expr_as(v, param.ty);
                    compiled.push(e);
                }
            }
        }
        if !ok {
            return bad;
        }
        let func = match sig.f {
            F::Regsub | F::Regsuball => {
                let regex = regexes.remove(0);
                // The replacement in the regex crate's syntax: converted now if constant.
                let sub = compiled.remove(2);
                let sub = match sub {
                    Expr::Str(t) => Expr::Str(Text::new(&replacement(&t.text))),
                    dynamic => Expr::Call(Func::Replacement, Box::new([dynamic])),
                };
                compiled.truncate(1);
                compiled.push(sub);
                if sig.f == F::Regsub {
                    Func::Regsub(regex)
                } else {
                    Func::Regsuball(regex)
                }
            }
            F::HashData => Func::HashData,
            F::Ban => Func::Ban,
            F::StdBan => Func::StdBan,
            F::BanUrl => Func::BanUrl,
            F::Synthetic => Func::Synthetic,
            F::Rollback => {
                if compiled
                    .first()
                    .is_some_and(|e| matches!(e, Expr::Bool(false)))
                {
                    self.unsupported(pos, "std.rollback(bereq) is not supported by Shellac");
                    return bad;
                }
                compiled.clear();
                Func::Rollback
            }
            F::Log => Func::StdLog,
            F::Syslog => Func::StdSyslog,
            F::ToLower => Func::StdToLower,
            F::ToUpper => Func::StdToUpper,
            F::Ip => Func::StdIp,
            F::Healthy => Func::StdHealthy,
            F::QuerySort => Func::StdQuerySort,
            F::Duration => Func::StdDuration,
            F::Integer => Func::StdInteger,
            F::Real => Func::StdReal,
            F::Time => Func::StdTime,
            F::Getenv => Func::StdGetenv,
            F::Round => Func::StdRound,
            F::Real2Integer => Func::StdReal2Integer,
            F::Real2Time => Func::StdReal2Time,
            F::Time2Integer => Func::StdTime2Integer,
            F::Time2Real => Func::StdTime2Real,
            F::FileRead => match compiled.first() {
                Some(Expr::Str(path)) => match std::fs::read_to_string(&*path.text) {
                    Ok(text) => {
                        compiled.clear();
                        Func::FileRead(Text::new(&text))
                    }
                    Err(e) => {
                        self.error(pos, format!("std.fileread(\"{}\"): {e}", path.text));
                        return bad;
                    }
                },
                _ => {
                    self.unsupported(
                        pos,
                        "std.fileread() of a path computed at run time: Shellac reads the file \
                         when it loads the VCL, so the path must be a constant string",
                    );
                    return bad;
                }
            },
            F::Collect => {
                let Some(Expr::Var(var)) = compiled.first().cloned() else {
                    return bad;
                };
                let sep = match compiled.get(1) {
                    Some(Expr::Str(t)) => t.clone(),
                    _ => {
                        self.unsupported(pos, "std.collect(): the separator must be a constant");
                        return bad;
                    }
                };
                compiled.clear();
                Func::StdCollect(var, sep)
            }
            F::Port => Func::StdPort,
            F::Strstr => Func::StdStrstr,
            F::Random => Func::StdRandom,
            F::Timestamp => Func::StdTimestamp,
            F::Now => Func::StdNow,
            F::PurgeHard => Func::PurgeHard,
            F::PurgeSoft => Func::PurgeSoft,
            F::XkeyPurge => Func::XkeyPurge,
            F::ThrottleIsDenied => Func::Throttle(ThrottleOp::IsDenied),
            F::ThrottleRemaining => Func::Throttle(ThrottleOp::Remaining),
            F::ThrottleBlocked => Func::Throttle(ThrottleOp::Blocked),
            F::ThrottleReturnToken => Func::Throttle(ThrottleOp::ReturnToken),
            F::XkeySoftPurge => Func::XkeySoftPurge,
            F::BlobDecode => Func::BlobDecode,
            F::BlobEncode => Func::BlobEncode,
            F::BlobTranscode => Func::BlobTranscode,
            F::BlobEqual => Func::BlobEqual,
            F::BlobLength => Func::BlobLength,
            F::BlobSub => Func::BlobSub,
            F::CacheReqBody => match compiled.first() {
                Some(Expr::Bytes(size)) => {
                    let size = *size;
                    self.req_body_keep = Some(self.req_body_keep.map_or(size, |k| k.max(size)));
                    compiled.clear();
                    Func::StdCacheReqBody(size)
                }
                _ => {
                    self.unsupported(
                        pos,
                        "std.cache_req_body() with a size computed at run time: Shellac reads \
                         the body before vcl_recv, up to the largest size the VCL names, so \
                         the size must be a constant (`std.cache_req_body(64KB)`)",
                    );
                    return bad;
                }
            },
            F::CParse => Func::CookieParse,
            F::CGet => Func::CookieGet,
            F::CIsSet => Func::CookieIsSet,
            F::CSet => Func::CookieSet,
            F::CDelete => Func::CookieDelete,
            F::CFilter => Func::CookieFilter,
            F::CKeep => Func::CookieKeep,
            F::CFilterRe => {
                compiled.clear();
                Func::CookieFilterRe(regexes.remove(0))
            }
            F::CKeepRe => {
                compiled.clear();
                Func::CookieKeepRe(regexes.remove(0))
            }
            F::CGetString => Func::CookieGetString,
            F::CClean => Func::CookieClean,
        };
        (Expr::Call(func, compiled.into_boxed_slice()), sig.ret)
    }

    /// A method of an object made in vcl_init: `dir.backend()`, `hash.backend(key)`.
    fn object_call(
        &mut self,
        name: &str,
        obj: &super::Object,
        method: &str,
        args: &[Arg],
        pos: Pos,
    ) -> (Expr, Type) {
        use super::ObjectKind;
        let bad = (Expr::Bool(false), Type::Error);
        if obj.kind == ObjectKind::Refused {
            // Its VMOD was refused at the import.
            self.mark_used(args);
            return bad;
        }
        if let Some(t) = self.targets.get_mut(obj.target as usize) {
            t.used = true;
        }
        match method {
            "backend" => {
                if self.here & (INIT | FINI) != 0 {
                    self.error(
                        pos,
                        format!("{name}.backend() is Not available in subroutine 'vcl_init'"),
                    );
                    return bad;
                }
                match obj.kind {
                    ObjectKind::Hash => {
                        if args.len() != 1 || args[0].name.is_some() {
                            self.error(pos, format!("{name}.backend() takes the string to hash"));
                            return bad;
                        }
                        let key = self.expr_as(&args[0].value, Type::String);
                        (
                            Expr::Call(Func::DirectorHash(obj.target), Box::new([key])),
                            Type::Backend,
                        )
                    }
                    ObjectKind::Shard => {
                        let mut by_url = false;
                        for a in args {
                            match a.name.as_deref() {
                                Some("by") => match &a.value {
                                    AstExpr::Name(n, _) if n == "HASH" => {}
                                    AstExpr::Name(n, _) if n == "URL" => by_url = true,
                                    other => {
                                        self.unsupported(
                                            other.pos(),
                                            "shard.backend(by=...): Shellac's shard director \
                                             hashes the cache key (by=HASH or by=URL)",
                                        );
                                        return bad;
                                    }
                                },
                                // Resolved when the fetch picks a backend either way.
                                Some("resolve") => match &a.value {
                                    AstExpr::Name(n, _) if n == "NOW" || n == "LAZY" => {}
                                    other => {
                                        self.error(
                                            other.pos(),
                                            "shard.backend(resolve=...) takes NOW or LAZY",
                                        );
                                        return bad;
                                    }
                                },
                                // Sick backends are skipped (CHOSEN; ALL is the same without
                                // `alt`); IGNORE would pick them.
                                Some("healthy") => match &a.value {
                                    AstExpr::Name(n, _) if n == "CHOSEN" || n == "ALL" => {}
                                    other => {
                                        self.unsupported(
                                            other.pos(),
                                            "shard.backend(healthy=IGNORE) is not supported by \
                                             Shellac: its shard director skips sick backends",
                                        );
                                        return bad;
                                    }
                                },
                                _ => {
                                    self.unsupported(
                                        a.value.pos(),
                                        "this shard.backend() argument is not supported by \
                                         Shellac (it hashes the cache key, skipping sick \
                                         backends)",
                                    );
                                    return bad;
                                }
                            }
                        }
                        if by_url {
                            // by=URL: the URL alone is hashed (req.url, or bereq.url on the
                            // backend side), as vmod_directors does.
                            let url = if self.here & BACKEND != 0 && self.here & CLIENT == 0 {
                                "bereq.url"
                            } else {
                                "req.url"
                            };
                            let key =
                                self.expr_as(&AstExpr::Name(url.to_string(), pos), Type::String);
                            return (
                                Expr::Call(Func::DirectorHash(obj.target), Box::new([key])),
                                Type::Backend,
                            );
                        }
                        (
                            Expr::Call(Func::DirectorBackend(obj.target), Box::new([])),
                            Type::Backend,
                        )
                    }
                    _ => {
                        if !args.is_empty() {
                            self.error(pos, format!("{name}.backend() takes no arguments"));
                            return bad;
                        }
                        (
                            Expr::Call(Func::DirectorBackend(obj.target), Box::new([])),
                            Type::Backend,
                        )
                    }
                }
            }
            "add_backend" | "remove_backend" | "reconfigure" | "set_rampup" | "set_warmup" => {
                if self.here & !(INIT) != 0 || self.here == 0 {
                    self.unsupported(
                        pos,
                        format!(
                            "{name}.{method}() outside vcl_init: Shellac's directors are fixed \
                             when the VCL is loaded"
                        ),
                    );
                }
                bad
            }
            other => {
                self.error(
                    pos,
                    format!("Unknown property '{other}' for the object {name}"),
                );
                bad
            }
        }
    }
}
