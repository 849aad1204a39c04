//! Directors: 2.x `director NAME KIND { ... }` blocks, and `vcl_init`, run once when the
//! program is compiled, whose `new d = directors.round_robin();` and `d.add_backend(b);`
//! become Shellac directors (`return (ok);` and logging are accepted there; anything else
//! would need to run at load time and is refused).

use super::super::ast::{self, Expr, Field, FieldValue, Pos};
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
            "add_backend" => {
                let Some(first) = args.first() else {
                    self.error(pos, format!("{func}() needs a backend"));
                    return;
                };
                let member = match &first.value {
                    ast::Expr::Name(n, p) => match self.targets.iter_mut().find(|t| t.name == *n) {
                        Some(t) => {
                            t.used = true;
                            n.clone()
                        }
                        None => {
                            self.error(
                                *p,
                                format!("Symbol not found: '{n}' (no backend has this name)"),
                            );
                            return;
                        }
                    },
                    ast::Expr::Call {
                        func: inner, args, ..
                    } if args.is_empty() && inner.ends_with(".backend") => {
                        let other = inner.trim_end_matches(".backend");
                        if !self.objects.contains_key(other) {
                            self.error(pos, format!("Symbol not found: '{other}'"));
                            return;
                        }
                        other.to_string()
                    }
                    // `directors.lookup("name")` in vcl_init: the backend of that name, found
                    // when the VCL is loaded.
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
                        let name = match args.as_slice() {
                            [a] if a.name.is_none() => match const_of(&a.value) {
                                Some(Const::Str(n)) => n,
                                _ => {
                                    self.unsupported(
                                        pos,
                                        format!(
                                            "{inner}() of a name computed at run time: Shellac \
                                             resolves it when it loads the VCL, so it must be a \
                                             constant string"
                                        ),
                                    );
                                    return;
                                }
                            },
                            _ => {
                                self.error(pos, format!("{inner}() takes one backend name"));
                                return;
                            }
                        };
                        match self.targets.iter_mut().find(|t| t.name == name) {
                            Some(t) => {
                                t.used = true;
                                name
                            }
                            None => {
                                self.error(
                                    pos,
                                    format!("{inner}(\"{name}\"): no backend has this name"),
                                );
                                return;
                            }
                        }
                    }
                    ast::Expr::Call { func: inner, .. } => {
                        // Other calls made at load time.
                        self.unsupported(
                            pos,
                            format!(
                                "{func}({inner}(...)): Shellac's directors take backends by name"
                            ),
                        );
                        return;
                    }
                    other => {
                        self.error(other.pos(), format!("{func}(): expected a backend name"));
                        return;
                    }
                };
                // The other arguments, by position or by name, as vmod_directors declares
                // them for each director; none is taken without doing what it says.
                let params: &[&str] = match object.kind {
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
                                return;
                            }
                        },
                    };
                    if !params.contains(&param) {
                        self.error(at, format!("{func}() has no argument '{param}'"));
                        return;
                    }
                    match param {
                        "weight" => weight_arg = Some(&a.value),
                        "ident" => {
                            self.unsupported(
                                at,
                                format!(
                                    "{func}(ident=...) is not supported by Shellac: its shard \
                                     director places each member by its backend, which it takes \
                                     once"
                                ),
                            );
                            return;
                        }
                        _ => {
                            self.unsupported(
                                at,
                                format!(
                                    "{func}(rampup=...) is not supported by Shellac: its shard \
                                     director gives a backend its whole share of the keys as \
                                     soon as it is healthy"
                                ),
                            );
                            return;
                        }
                    }
                }
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
                // A hash director's weights are its own (`add_backend(b, w)`, 1.0 when left
                // out, as in vmod_directors), kept per member once one is given.
                let mut hash_weight = None;
                if let Some((w, p)) = weight {
                    if object.kind == ObjectKind::Random {
                        if w <= 0.0 {
                            self.unsupported(p, "a random director member of weight 0 is not supported by Shellac (leave it out)");
                        } else {
                            self.member_weight(&member, w, p);
                        }
                    } else if object.kind == ObjectKind::Hash || object.kind == ObjectKind::Shard {
                        // A shard member's weight scales its replicas on Varnish's ring and
                        // is at least 1 there; here it scales its share of the keys alike.
                        let w = if object.kind == ObjectKind::Shard {
                            w.max(1.0)
                        } else {
                            w
                        };
                        let scaled = (w * 100.0).round();
                        if w <= 0.0 {
                            self.unsupported(p, "a hash director member of weight 0 is not supported by Shellac (leave it out)");
                            return;
                        } else if !(1.0..=f64::from(u32::MAX)).contains(&scaled) {
                            self.error(p, format!("weight {w} is out of range"));
                            return;
                        }
                        hash_weight = Some(scaled as u32);
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

    /// 2.x `director NAME KIND { ... }`.
    pub(super) fn director(
        &mut self,
        name: &str,
        kind: &str,
        fields: &[Field],
        members: &[Vec<Field>],
        pos: Pos,
    ) {
        let (dkind, weighted) = match kind {
            "random" => (DirectorKind::Random, true),
            "client" | "hash" => (DirectorKind::Hash, true),
            "round-robin" => (DirectorKind::RoundRobin, false),
            "fallback" => (DirectorKind::Fallback, false),
            "dns" => {
                self.unsupported(
                    pos,
                    "the dns director is not supported by Shellac: declare the backends and use \
                     a random or round-robin director",
                );
                return;
            }
            other => {
                self.error(
                    pos,
                    format!(
                        "Unknown director policy '{other}' (random, client, hash, round-robin, \
                         fallback)"
                    ),
                );
                return;
            }
        };
        let known: &[&str] = if weighted { &["retries"] } else { &[] };
        for f in self.fields("a director", fields, known) {
            self.field_uint(f);
        }
        let mut names = Vec::new();
        for (i, member) in members.iter().enumerate() {
            let mpos = member.first().map_or(pos, |f| f.pos);
            let known: &[&str] = if weighted {
                &["backend", "weight"]
            } else {
                &["backend"]
            };
            let fs = self.fields("a director member", member, known);
            let mut backend = None;
            let mut weight = None;
            for f in fs {
                match (f.name.as_str(), &f.value) {
                    ("backend", FieldValue::Expr(Expr::Name(n, p))) => {
                        match self.targets.iter_mut().find(|t| t.name == *n) {
                            Some(t) => {
                                t.used = true;
                                backend = Some(n.clone());
                            }
                            None => self
                                .error(*p, format!("Undefined backend {n}, first reference here")),
                        }
                    }
                    ("backend", FieldValue::Table(t)) => {
                        let inline = format!("{name}_{}", i + 1);
                        if let Some(b) = self.backend_config(&inline, t, f.pos) {
                            self.origins.backends.push(b);
                            backend = Some(inline);
                        }
                    }
                    ("backend", _) => self.error(
                        f.pos,
                        "'.backend' must name a backend or be a { ... } backend",
                    ),
                    ("weight", _) => match self.field_uint(f) {
                        Some(0) => self.error(f.pos, "'.weight' must be at least 1"),
                        Some(w) => weight = Some(w),
                        None => {}
                    },
                    _ => {}
                }
            }
            match backend {
                Some(b) => {
                    if let Some(w) = weight {
                        self.member_weight(&b, w as f64, mpos);
                    }
                    names.push(b);
                }
                None if !member.iter().any(|f| f.name == "backend") => {
                    self.error(mpos, "a director member needs '.backend'")
                }
                None => {}
            }
            if weighted && weight.is_none() && member.iter().all(|f| f.name != "weight") {
                self.error(
                    mpos,
                    "a member of a random, client or hash director needs '.weight'",
                );
            }
        }
        let hash_on = (kind == "client").then(|| "client_ip".to_string());
        self.origins.directors.push(DirectorConfig {
            name: name.to_string(),
            kind: dkind,
            backends: names,
            hash_on,
            restart_on: Vec::new(),
            restart_unless: Vec::new(),
            max_restarts: 4,
            member_weights: Vec::new(),
        });
    }

    /// Sets a member's weight in a random director (Shellac keeps weights on backends; a
    /// REAL weight becomes hundredths).
    pub(super) fn member_weight(&mut self, backend: &str, weight: f64, pos: Pos) {
        let scaled = (weight * 100.0).round();
        if !(1.0..=f64::from(u32::MAX)).contains(&scaled) {
            self.error(pos, format!("weight {weight} is out of range"));
            return;
        }
        let scaled = scaled as u32;
        if let Some(b) = self.origins.backends.iter_mut().find(|b| b.name == backend) {
            if b.weight != 1 && b.weight != scaled {
                let old = f64::from(b.weight) / 100.0;
                self.unsupported(
                    pos,
                    format!(
                        "backend {backend} has weight {old} in another random director: Shellac \
                         keeps one weight per backend"
                    ),
                );
                return;
            }
            b.weight = scaled;
        }
    }
}
