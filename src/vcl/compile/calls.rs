//! Calls: a name resolved to a built-in function (`regsub`, `hash_data`, `ban`, `synthetic`,
//! ...), a function of a VMOD Shellac implements (`std`, `cookie`, `directors`) or a method
//! of an object made in vcl_init; `bind.rs` binds the arguments to the signature.

use super::super::ast::{Arg, Expr as AstExpr, Pos};
use super::super::ir::{Expr, Func};
use super::super::types::Type;
use super::super::types::ctx::*;
use super::Checker;
use super::sigs::SIGS;
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
            "backend" => self.director_backend(name, obj, args, pos),
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

    /// `name.backend(args)` of a director object: which backend it picks, by the director's
    /// kind.
    fn director_backend(
        &mut self,
        name: &str,
        obj: &super::Object,
        args: &[Arg],
        pos: Pos,
    ) -> (Expr, Type) {
        use super::ObjectKind;
        let bad = (Expr::Bool(false), Type::Error);
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
                let Some(by_url) = self.shard_args(args) else {
                    return bad;
                };
                if by_url {
                    // by=URL: the URL alone is hashed (req.url, or bereq.url on the backend
                    // side), as vmod_directors does.
                    let url = if self.here & BACKEND != 0 && self.here & CLIENT == 0 {
                        "bereq.url"
                    } else {
                        "req.url"
                    };
                    let key = self.expr_as(&AstExpr::Name(url.to_string(), pos), Type::String);
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

    /// The arguments of a shard director's `.backend(...)`: whether it hashes the URL
    /// (`by=URL`) rather than the cache key; `None` when one is refused (reported).
    fn shard_args(&mut self, args: &[Arg]) -> Option<bool> {
        let mut by_url = false;
        for a in args {
            match a.name.as_deref() {
                Some("by") => match &a.value {
                    AstExpr::Name(n, _) if n == "HASH" => {}
                    AstExpr::Name(n, _) if n == "URL" => by_url = true,
                    other => {
                        self.unsupported(
                            other.pos(),
                            "shard.backend(by=...): Shellac's shard director hashes the cache \
                             key (by=HASH or by=URL)",
                        );
                        return None;
                    }
                },
                // Resolved when the fetch picks a backend either way.
                Some("resolve") => match &a.value {
                    AstExpr::Name(n, _) if n == "NOW" || n == "LAZY" => {}
                    other => {
                        self.error(other.pos(), "shard.backend(resolve=...) takes NOW or LAZY");
                        return None;
                    }
                },
                // Sick backends are skipped (CHOSEN; ALL is the same without `alt`); IGNORE
                // would pick them.
                Some("healthy") => match &a.value {
                    AstExpr::Name(n, _) if n == "CHOSEN" || n == "ALL" => {}
                    other => {
                        self.unsupported(
                            other.pos(),
                            "shard.backend(healthy=IGNORE) is not supported by Shellac: its \
                             shard director skips sick backends",
                        );
                        return None;
                    }
                },
                _ => {
                    self.unsupported(
                        a.value.pos(),
                        "this shard.backend() argument is not supported by Shellac (it hashes \
                         the cache key, skipping sick backends)",
                    );
                    return None;
                }
            }
        }
        Some(by_url)
    }
}
