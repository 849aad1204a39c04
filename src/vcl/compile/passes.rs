//! The checker's passes over the declarations: names first, then each declaration, the
//! subroutines' bodies joined (the built-in VCL's split ones after the operator's), and the
//! bodies checked and compiled into the program's built-in and custom subroutines.

use super::super::ast::{self, Decl, Pos};
use super::super::ir::{self, Program};
use super::super::origins::Origins;
use super::super::types::{Dialect, Method};
use super::{Checker, SubSym};

impl<'a> Checker<'a> {
    /// Pass 2: declarations, in file order (a backend may be used before it is declared).
    pub(super) fn declarations(&mut self, decls: &'a [Decl]) {
        // Names first: a director may name a backend declared after it.
        for d in decls {
            match d {
                Decl::Backend { name, fields, pos } => {
                    self.add_target(name, *pos, fields.is_none());
                }
                Decl::Director { name, pos, .. } => {
                    self.add_target(name, *pos, false);
                }
                _ => {}
            }
        }
        for d in decls {
            match d {
                Decl::Import {
                    name,
                    alias,
                    from,
                    pos,
                } => self.import(name, alias.as_deref(), from.as_deref(), *pos),
                Decl::Backend { name, fields, pos } => self.backend(name, fields.as_deref(), *pos),
                Decl::Probe { name, fields, pos } => self.probe_decl(name, fields, *pos),
                Decl::Acl {
                    name,
                    flags,
                    entries,
                    pos,
                } => self.acl(name, flags, entries, *pos),
                Decl::Director {
                    name,
                    kind,
                    fields,
                    members,
                    pos,
                } => self.director(name, kind, fields, members, *pos),
                Decl::Sub { name, body, pos } => self.sub_decl(name, body, *pos),
                Decl::Unused { name, .. } => {
                    self.may_be_unused.insert(name.clone());
                }
                Decl::CCode { pos } => self.unsupported(
                    *pos,
                    "inline C (C{ ... }C) cannot run in Shellac; write it as VCL or ask for the \
                     feature it implements",
                ),
                Decl::Include { pos, .. } => self.error(
                    *pos,
                    "include was not read (VCL text given without its file)",
                ),
            }
        }
        self.split_subs();
        if self.targets.is_empty() && !self.builtin {
            self.error(
                Pos {
                    line: 1,
                    col: 1,
                    file: 0,
                },
                "No backends or directors found in VCL program: declare at least one \
                 backend (or 'backend default none;')",
            );
        }
        // A backend or director named `default` is where requests go by default (two are an
        // error); else the first one declared.
        let defaults: Vec<Pos> = self
            .targets
            .iter()
            .filter(|t| t.name == "default")
            .map(|t| t.pos)
            .collect();
        if let Some(second) = defaults.get(1) {
            self.error(*second, "Only one default director possible.");
        }
        match self.targets.iter().position(|t| t.name == "default") {
            Some(i) => self.targets[i].used = true,
            None => {
                if let Some(first) = self.targets.first_mut() {
                    first.used = true;
                }
            }
        }
        // 4.x: a probe named `default` is every backend's that names none.
        if !self.dialect.is_legacy()
            && let Some(p) = self.probes.get_mut("default")
        {
            p.used = true;
            for b in &mut self.origins.backends {
                if b.probe.is_none() {
                    b.probe = Some(crate::config::ProbeRef::Named("default".to_string()));
                }
            }
        }
        self.init_objects();
    }

    fn sub_decl(&mut self, name: &str, body: &'a [ast::Stmt], pos: Pos) {
        // A split subroutine of the built-in VCL (`vcl_req_cookie`): its bodies join as a
        // built-in subroutine's do, the built-in one last (`split_subs`).
        let split = super::super::builtin::split_sub(name, self.dialect).is_some();
        let builtin = name.starts_with("vcl_");
        if builtin && !split && Method::from_sub(name, self.dialect).is_none() {
            let known: Vec<&str> = Method::ALL
                .into_iter()
                .filter(|m| m.exists_in(self.dialect))
                .map(Method::sub_name)
                .collect();
            let other = Method::ALL.into_iter().any(|m| m.sub_name() == name);
            let four = Method::from_sub(name, Dialect::V41).is_some();
            let msg = if four && self.dialect.is_legacy() {
                format!(
                    "'{name}' is a VCL 4.x subroutine: {} (VCL {}'s are {})",
                    self.no_version_line(),
                    self.dialect.as_str(),
                    known.join(", ")
                )
            } else {
                format!(
                    "'{name}' is not a built-in subroutine Shellac runs in VCL {} (names \
                     starting with 'vcl_' are reserved; the built-in ones are {})",
                    self.dialect.as_str(),
                    known.join(", ")
                )
            };
            if other || self.dialect.is_legacy() {
                // A subroutine of another dialect, or of a Varnish newer than Shellac knows.
                self.error(pos, msg);
            } else {
                self.unsupported(pos, msg);
            }
            return;
        }
        if !builtin && self.redefined(name, pos) {
            return;
        }
        if !builtin && let Some(first) = self.subs.get(name).map(|s| s.pos) {
            let at = self.at(first);
            self.error(
                pos,
                format!("Subroutine '{name}' redefined (first at {at})"),
            );
            return;
        }
        self.add_body(name, body, pos, builtin);
    }

    /// One more body of subroutine `name` (a new one is declared at `pos`).
    fn add_body(&mut self, name: &str, body: &'a [ast::Stmt], pos: Pos, builtin: bool) {
        let next = self.subs.len();
        let sym = self.subs.entry(name.to_string()).or_insert(SubSym {
            pos,
            bodies: Vec::new(),
            index: next,
            reached: 0,
            used: builtin,
            calls: Vec::new(),
        });
        sym.bodies.push(body);
    }

    /// 4.x: the built-in VCL's split subroutines (`vcl_req_cookie`, ...), after the bodies a
    /// VCL gave them.
    fn split_subs(&mut self) {
        if self.dialect.is_legacy() {
            return;
        }
        let builtin: &'static ast::Vcl = super::super::builtin::source(self.dialect);
        for d in &builtin.decls {
            if let Decl::Sub { name, body, pos } = d
                && super::super::builtin::split_sub(name, self.dialect).is_some()
            {
                self.add_body(name, body, *pos, true);
            }
        }
    }

    /// Pass 4 and 5: reachability, then every body checked and compiled.
    pub(super) fn bodies(&mut self, decls: &'a [Decl]) -> Program {
        self.reach();
        // Custom subroutines, in declaration order (their index is fixed by `sub_decl`).
        let mut custom: Vec<(usize, String)> = self
            .subs
            .iter()
            .filter(|(n, _)| !super::super::builtin::is_method_name(n, self.dialect))
            .map(|(n, s)| (s.index, n.clone()))
            .collect();
        custom.sort();
        let mut subs: Vec<ir::Sub> = Vec::new();
        let mut slots: Vec<Option<ir::Sub>> = (0..self.subs.len()).map(|_| None).collect();
        for (index, name) in &custom {
            let (reached, bodies) = match self.subs.get(name) {
                Some(s) => (s.reached, s.bodies.clone()),
                None => continue,
            };
            self.here = reached;
            self.here_name = name.clone();
            self.possible = super::super::types::ctx::ALL;
            let mut out = Vec::new();
            for b in bodies {
                out.extend(self.block(b));
            }
            if reached == 0 && self.possible == 0 {
                let pos = self.subs.get(name).map(|s| s.pos).unwrap_or_default();
                self.error(
                    pos,
                    format!(
                        "Impossible Subroutine: sub {name} uses variables no one subroutine \
                         has (such as req.* and beresp.*)"
                    ),
                );
            }
            slots[*index] = Some(ir::Sub {
                name: name.clone(),
                body: out.into_boxed_slice(),
            });
        }
        // `Stmt::Call` holds the index given at declaration: keep every slot (built-in
        // subroutines' slots stay empty subs that nothing calls).
        for (i, s) in slots.into_iter().enumerate() {
            subs.push(s.unwrap_or_else(|| ir::Sub {
                name: format!("#{i}"),
                body: Box::new([]),
            }));
        }
        let builtin = super::super::builtin::source(self.dialect);
        let mut methods = Vec::new();
        let mut defined = Vec::new();
        for m in Method::ALL {
            if !m.exists_in(self.dialect) {
                continue;
            }
            let name = m.sub_name();
            self.here = m.bit();
            self.here_name = name.to_string();
            let mut out = Vec::new();
            if let Some(bodies) = self.subs.get(name).map(|s| s.bodies.clone()) {
                defined.push(m);
                for b in bodies {
                    out.extend(self.block(b));
                }
            }
            if m != Method::Init {
                out.extend(self.builtin_body(builtin, m));
            }
            methods.push((m, out.into_boxed_slice()));
        }
        let _ = decls;
        let default_target = self
            .targets
            .iter()
            .position(|t| t.name == "default")
            .or((!self.targets.is_empty()).then_some(0))
            .map(|i| i as u16);
        self.origins.default = default_target
            .and_then(|i| self.targets.get(i as usize))
            .filter(|t| !t.none)
            .map(|t| t.name.clone());
        Program {
            dialect: self.dialect,
            files: self.files.to_vec(),
            methods,
            defined,
            subs,
            acls: std::mem::take(&mut self.acl_list),
            targets: self.targets.iter().map(|t| t.name.clone()).collect(),
            default_target,
            origins: Origins::default(),
            req_body_keep: self.req_body_keep,
            reads_digest: self.reads_digest,
            reads_local: self.reads_local,
            timeouts: self.options.timeouts,
            spelled: std::mem::take(&mut self.spelled),
        }
    }

    /// The built-in VCL's body of `m`, compiled in this program (its names resolve here).
    fn builtin_body(&mut self, builtin: &'static ast::Vcl, m: Method) -> Vec<ir::Stmt> {
        let mut out = Vec::new();
        let was = std::mem::replace(&mut self.builtin, true);
        let errors_before = self.errors.len();
        for d in &builtin.decls {
            if let Decl::Sub { name, body, .. } = d
                && name == m.sub_name()
            {
                out.extend(self.block(body));
            }
        }
        // The built-in VCL is Shellac's own and checked by its tests; an error in it would
        // name a file the operator cannot fix.
        debug_assert_eq!(
            self.errors.len(),
            errors_before,
            "built-in VCL: {:?}",
            &self.errors[errors_before..]
        );
        self.errors.truncate(errors_before);
        self.builtin = was;
        out
    }
}
