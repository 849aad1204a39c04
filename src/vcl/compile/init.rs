//! `vcl_init`, run once when the program is compiled: its `new d = directors.round_robin();`
//! and `d.add_backend(b);` become Shellac directors (`return (ok);` and logging are accepted
//! there; anything else would need to run at load time and is refused).

use super::super::ast::{self, Pos};
use super::consts::{Const, const_of};
use super::vmods::Vmod;
use super::{Checker, Object, ObjectKind};
use crate::config::{DirectorConfig, DirectorKind};

/// The arguments of a `return (action(args))`.
fn args_of(s: &ast::Stmt) -> &[ast::Arg] {
    match s {
        ast::Stmt::Return {
            action: Some(ast::Expr::Call { args, .. }),
            ..
        } => args,
        _ => &[],
    }
}

impl<'a> Checker<'a> {
    /// Pass 3: the director objects of every `vcl_init` definition.
    pub(super) fn init_objects(&mut self) {
        let bodies: Vec<&'a [ast::Stmt]> = self
            .subs
            .get("vcl_init")
            .map(|s| s.bodies.clone())
            .unwrap_or_default();
        for body in bodies {
            self.init_block(body);
        }
    }

    fn init_block(&mut self, body: &[ast::Stmt]) {
        for s in body {
            match s {
                ast::Stmt::New { name, value, pos } => self.new_object(name, value, *pos),
                ast::Stmt::Expr {
                    expr: ast::Expr::Call { func, args, pos },
                    ..
                } => self.init_call(func, args, *pos),
                ast::Stmt::Return {
                    action: Some(ast::Expr::Call { func, .. } | ast::Expr::Name(func, _)),
                    pos,
                    ..
                } if func == "fail" => {
                    // vcl_init runs at load: failing there refuses the VCL.
                    let reason = match args_of(s).first() {
                        Some(ast::Arg {
                            value: ast::Expr::Str(r, _),
                            ..
                        }) => format!(": {r}"),
                        _ => String::new(),
                    };
                    self.error(
                        *pos,
                        format!("VCL failed initialization (vcl_init returned fail{reason})"),
                    );
                }
                ast::Stmt::Return { .. } => {}
                ast::Stmt::Block { body, .. } => self.init_block(body),
                ast::Stmt::If { pos, .. }
                | ast::Stmt::Set { pos, .. }
                | ast::Stmt::Unset { pos, .. } => self.unsupported(
                    *pos,
                    "vcl_init runs once, when Shellac loads the VCL: only 'new' directors \
                         and their add_backend() are evaluated there",
                ),
                _ => {}
            }
        }
    }

    fn new_object(&mut self, name: &str, value: &ast::Expr, pos: Pos) {
        let ast::Expr::Call { func, args, .. } = value else {
            self.error(
                pos,
                format!("new {name}: expected a constructor such as directors.round_robin()"),
            );
            return;
        };
        let Some((module, ctor)) = func.rsplit_once('.') else {
            self.error(pos, format!("Symbol not found: '{func}'"));
            return;
        };
        match self.imports.get(module).map(|i| i.vmod.clone()) {
            Some(Vmod::Directors) => {}
            Some(Vmod::Other(_)) => {
                self.mark_used(args);
                if !self.redefined(name, pos) {
                    self.objects.insert(
                        name.to_string(),
                        Object {
                            pos,
                            kind: ObjectKind::Refused,
                            target: 0,
                        },
                    );
                }
                return;
            }
            Some(_) => {
                self.unsupported(
                    pos,
                    format!("{func}: Shellac makes only directors objects in vcl_init"),
                );
                return;
            }
            None => {
                self.error(
                    pos,
                    format!("Symbol not found: '{func}' (import {module}; first?)"),
                );
                return;
            }
        }
        let (kind, dkind) = match ctor {
            "round_robin" => (ObjectKind::RoundRobin, DirectorKind::RoundRobin),
            "random" => (ObjectKind::Random, DirectorKind::Random),
            "fallback" => (ObjectKind::Fallback, DirectorKind::Fallback),
            "hash" => (ObjectKind::Hash, DirectorKind::Hash),
            "shard" => (ObjectKind::Shard, DirectorKind::Hash),
            "lookup" => {
                self.unsupported(pos, "directors.lookup() is not supported by Shellac");
                return;
            }
            other => {
                self.error(pos, format!("Symbol not found: 'directors.{other}'"));
                return;
            }
        };
        for a in args {
            let sticky_false = a.name.as_deref() == Some("sticky")
                && matches!(&a.value, ast::Expr::Name(n, _) if n == "false");
            if !sticky_false {
                self.unsupported(
                    a.value.pos(),
                    format!("directors.{ctor}(): its arguments are not supported by Shellac"),
                );
            }
        }
        let Some(target) = self.add_target(name, pos, false) else {
            return;
        };
        self.objects
            .insert(name.to_string(), Object { pos, kind, target });
        self.origins.directors.push(DirectorConfig {
            name: name.to_string(),
            kind: dkind,
            backends: Vec::new(),
            hash_on: None,
            restart_on: Vec::new(),
            restart_unless: Vec::new(),
            max_restarts: 4,
            member_weights: Vec::new(),
        });
    }

    fn init_call(&mut self, func: &str, args: &[ast::Arg], pos: Pos) {
        let Some((obj, method)) = func.rsplit_once('.') else {
            return;
        };
        let Some(object) = self.objects.get(obj).cloned() else {
            // std.log() and the like: checked with the body.
            return;
        };
        if object.kind == ObjectKind::Refused {
            return;
        }
        match method {
            "add_backend" => self.add_backend(func, obj, object.kind, args, pos),
            // The members are placed when the VCL is loaded, so an explicit reconfigure()
            // has nothing left to do; Shellac's shard director has no ring of replicas
            // (rendezvous hashing), so a replicas count is refused rather than ignored.
            "reconfigure" => {
                if let Some(a) = args.first() {
                    self.unsupported(
                        a.value.pos(),
                        format!(
                            "{func}(replicas): Shellac's shard director has no ring of replicas \
                             (it places keys by rendezvous hashing); call {func}() without it"
                        ),
                    );
                }
            }
            other => self.unsupported(
                pos,
                format!("{obj}.{other}() is not supported by Shellac's directors"),
            ),
        }
    }

    /// `obj.add_backend(member, ...)` (`func`) on a director of `kind`: the member and its
    /// weight added to the director.
    fn add_backend(
        &mut self,
        func: &str,
        obj: &str,
        kind: ObjectKind,
        args: &[ast::Arg],
        pos: Pos,
    ) {
        let Some(first) = args.first() else {
            self.error(pos, format!("{func}() needs a backend"));
            return;
        };
        let Some(member) = self.member(func, &first.value, pos) else {
            return;
        };
        let Some(weight_arg) = self.member_args(func, kind, args) else {
            return;
        };
        let weight = match weight_arg {
            None => None,
            Some(ast::Expr::Number(n, p)) => match n.parse::<f64>() {
                Ok(w) => Some((w, *p)),
                Err(_) => None,
            },
            Some(other) => {
                self.error(
                    other.pos(),
                    format!("{func}(): the weight must be a number"),
                );
                return;
            }
        };
        // A hash director's weights are its own (`add_backend(b, w)`, 1.0 when left out, as
        // in vmod_directors), kept per member once one is given.
        let mut hash_weight = None;
        if let Some((w, p)) = weight {
            if kind == ObjectKind::Random {
                if w <= 0.0 {
                    self.unsupported(p, "a random director member of weight 0 is not supported by Shellac (leave it out)");
                } else {
                    self.member_weight(&member, w, p);
                }
            } else if kind == ObjectKind::Hash || kind == ObjectKind::Shard {
                let Some(scaled) = self.hash_weight(kind, w, p) else {
                    return;
                };
                hash_weight = Some(scaled);
            }
        }
        if let Some(d) = self.origins.directors.iter_mut().find(|d| d.name == obj) {
            if d.backends.contains(&member) {
                self.error(pos, format!("{member} is added to {obj} twice"));
            } else {
                // From the first weight on (the first member's too), every member's.
                if hash_weight.is_some() || !d.member_weights.is_empty() {
                    d.member_weights.resize(d.backends.len(), 100);
                    d.member_weights.push(hash_weight.unwrap_or(100));
                }
                d.backends.push(member);
            }
        }
    }

    /// The member `add_backend`'s first argument names: a backend, another director
    /// (`d.backend()`) or `directors.lookup("name")`; `None` when it is wrong (reported).
    fn member(&mut self, func: &str, value: &ast::Expr, pos: Pos) -> Option<String> {
        match value {
            ast::Expr::Name(n, p) => match self.targets.iter_mut().find(|t| t.name == *n) {
                Some(t) => {
                    t.used = true;
                    Some(n.clone())
                }
                None => {
                    self.error(
                        *p,
                        format!("Symbol not found: '{n}' (no backend has this name)"),
                    );
                    None
                }
            },
            ast::Expr::Call {
                func: inner, args, ..
            } if args.is_empty() && inner.ends_with(".backend") => {
                let other = inner.trim_end_matches(".backend");
                if !self.objects.contains_key(other) {
                    self.error(pos, format!("Symbol not found: '{other}'"));
                    return None;
                }
                Some(other.to_string())
            }
            ast::Expr::Call {
                func: inner, args, ..
            } if inner.rsplit_once('.').is_some_and(|(prefix, m)| {
                m == "lookup"
                    && self
                        .imports
                        .get(prefix)
                        .is_some_and(|i| i.vmod == Vmod::Directors)
            }) =>
            {
                self.lookup_member(inner, args, pos)
            }
            ast::Expr::Call { func: inner, .. } => {
                // Other calls made at load time.
                self.unsupported(
                    pos,
                    format!("{func}({inner}(...)): Shellac's directors take backends by name"),
                );
                None
            }
            other => {
                self.error(other.pos(), format!("{func}(): expected a backend name"));
                None
            }
        }
    }

    /// `directors.lookup("name")` (`inner`) in vcl_init: the backend of that name, found when
    /// the VCL is loaded.
    fn lookup_member(&mut self, inner: &str, args: &[ast::Arg], pos: Pos) -> Option<String> {
        let name = match args {
            [a] if a.name.is_none() => match const_of(&a.value) {
                Some(Const::Str(n)) => n,
                _ => {
                    self.unsupported(
                        pos,
                        format!(
                            "{inner}() of a name computed at run time: Shellac resolves it when \
                             it loads the VCL, so it must be a constant string"
                        ),
                    );
                    return None;
                }
            },
            _ => {
                self.error(pos, format!("{inner}() takes one backend name"));
                return None;
            }
        };
        match self.targets.iter_mut().find(|t| t.name == name) {
            Some(t) => {
                t.used = true;
                Some(name)
            }
            None => {
                self.error(
                    pos,
                    format!("{inner}(\"{name}\"): no backend has this name"),
                );
                None
            }
        }
    }

    /// The arguments of `add_backend` after the member, by position or by name, as
    /// vmod_directors declares them for each director; none is taken without doing what it
    /// says. The weight's expression, if given; `None` when one is refused (reported).
    fn member_args<'e>(
        &mut self,
        func: &str,
        kind: ObjectKind,
        args: &'e [ast::Arg],
    ) -> Option<Option<&'e ast::Expr>> {
        let params: &[&str] = match kind {
            ObjectKind::Random | ObjectKind::Hash => &["weight"],
            ObjectKind::Shard => &["ident", "rampup", "weight"],
            _ => &[],
        };
        let mut weight_arg = None;
        for (i, a) in args.iter().enumerate().skip(1) {
            let at = a.value.pos();
            let param = match a.name.as_deref() {
                Some(n) => n,
                None => match params.get(i - 1) {
                    Some(p) => p,
                    None => {
                        let takes = match params {
                            [] => "only a backend".to_string(),
                            _ => format!("a backend and {}", params.join(", ")),
                        };
                        self.error(at, format!("{func}() takes {takes}"));
                        return None;
                    }
                },
            };
            if !params.contains(&param) {
                self.error(at, format!("{func}() has no argument '{param}'"));
                return None;
            }
            match param {
                "weight" => weight_arg = Some(&a.value),
                "ident" => {
                    self.unsupported(
                        at,
                        format!(
                            "{func}(ident=...) is not supported by Shellac: its shard director \
                             places each member by its backend, which it takes once"
                        ),
                    );
                    return None;
                }
                _ => {
                    self.unsupported(
                        at,
                        format!(
                            "{func}(rampup=...) is not supported by Shellac: its shard director \
                             gives a backend its whole share of the keys as soon as it is healthy"
                        ),
                    );
                    return None;
                }
            }
        }
        Some(weight_arg)
    }

    /// A hash or shard director member's weight `w` in hundredths; `None` when it is refused
    /// (reported). A shard member's weight scales its replicas on Varnish's ring and is at
    /// least 1 there; here it scales its share of the keys alike.
    fn hash_weight(&mut self, kind: ObjectKind, w: f64, p: Pos) -> Option<u32> {
        let w = if kind == ObjectKind::Shard {
            w.max(1.0)
        } else {
            w
        };
        let scaled = (w * 100.0).round();
        if w <= 0.0 {
            self.unsupported(
                p,
                "a hash director member of weight 0 is not supported by Shellac (leave it out)",
            );
            return None;
        } else if !(1.0..=f64::from(u32::MAX)).contains(&scaled) {
            self.error(p, format!("weight {w} is out of range"));
            return None;
        }
        Some(scaled as u32)
    }
}
