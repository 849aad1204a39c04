//! The checker and compiler: a loaded VCL source (`load::Source`) to a `ir::Program`, or every
//! error it has, each with file:line:column. Driven by the variable table (`vars.rs`) and the
//! function table (`calls.rs`); one mistake gives one error (a wrong expression has type
//! `Error`, accepted everywhere after), and checking goes on past each.
//!
//! Passes: the dialect; the declarations (backends, probes, ACLs, 2.x directors, imports,
//! subroutines); `vcl_init`'s director objects; which built-in subroutines reach each custom
//! one (and recursion); each body, checked for the subroutines it runs in; the dialect's
//! built-in VCL appended to each built-in subroutine; what was declared but never used.

mod acl;
mod backend;
mod bind;
mod calls;
mod consts;
mod decls;
mod directors;
mod expr;
mod init;
mod names;
mod ops;
mod patterns;
mod probe;
mod sigs;
mod stmt;
mod vmods;
mod xref;

use std::collections::{HashMap, HashSet};

pub(crate) use consts::duration_unit;
pub(crate) use patterns::replacement;

use super::ast::{self, Decl, Pos};
use super::error::{ErrorKind, VclError};
use super::ir::{self, Program};
use super::load::Source;
use super::origins::Origins;
use super::types::{Dialect, Method, Methods};

/// A backend, director or `none` that requests can be routed to.
#[derive(Debug, Clone)]
struct Target {
    name: String,
    pos: Pos,
    used: bool,
    /// `backend x none;`
    none: bool,
}

#[derive(Debug, Clone)]
struct ProbeSym {
    pos: Pos,
    config: crate::config::ProbeConfig,
    used: bool,
}

#[derive(Debug, Clone)]
struct AclSym {
    pos: Pos,
    index: u16,
    used: bool,
}

#[derive(Debug)]
struct SubSym<'a> {
    pos: Pos,
    /// Every definition's body, in file order (Varnish joins them).
    bodies: Vec<&'a [ast::Stmt]>,
    /// Index into `Program::subs` (custom subroutines only).
    index: usize,
    /// The built-in subroutines it is reached from.
    reached: Methods,
    used: bool,
    /// The subroutines it calls.
    calls: Vec<String>,
}

/// A VMOD imported under a name.
#[derive(Debug, Clone)]
struct Import {
    vmod: vmods::Vmod,
    pos: Pos,
}

/// What `new` made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ObjectKind {
    RoundRobin,
    Random,
    Fallback,
    /// `directors.hash()`: `.backend(key)` hashes the key it is given.
    Hash,
    /// `directors.shard()`: consistent hashing of the cache key.
    Shard,
    /// Made by a VMOD Shellac does not have (refused at its import): its uses report nothing
    /// more.
    Refused,
}

/// An object made by `new` in `vcl_init`.
#[derive(Debug, Clone)]
struct Object {
    pos: Pos,
    kind: ObjectKind,
    /// The director it became, by index into the targets (`ObjectKind::Refused`: none).
    target: u16,
}

pub(super) struct Checker<'a> {
    dialect: Dialect,
    files: &'a [String],
    errors: Vec<VclError>,
    targets: Vec<Target>,
    probes: HashMap<String, ProbeSym>,
    acls: HashMap<String, AclSym>,
    acl_list: Vec<ir::Acl>,
    subs: HashMap<String, SubSym<'a>>,
    imports: HashMap<String, Import>,
    objects: HashMap<String, Object>,
    /// Names `unused NAME;` allows to go unused.
    may_be_unused: HashSet<String>,
    origins: Origins,
    /// The built-in subroutines the code being checked runs in (empty: unknown, an unused
    /// subroutine checked on its own).
    here: Methods,
    /// The name of the subroutine being checked, for messages.
    here_name: String,
    /// Checking the built-in VCL: its own names are used, and its errors would be Shellac's.
    builtin: bool,
    /// For an unreached subroutine: the built-in subroutines where everything it uses is
    /// available (none: no subroutine could ever call it).
    possible: Methods,
    /// The largest size a `std.cache_req_body()` call names.
    req_body_keep: Option<u64>,
    /// Some subroutine reads `req.hash` or `bereq.hash`.
    reads_digest: bool,
    /// Some subroutine reads `server.ip`, `server.port` or `local.ip`.
    reads_local: bool,
    options: Options,
}

/// How strict the compiler is.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Declarations nothing uses are errors (Varnish's `vcc_feature +err_unref`, the
    /// default). `unused NAME;` allows one.
    pub err_unref: bool,
    /// At most this many backtracking steps per match of a regular expression that needs the
    /// backtracking engine (Varnish's `pcre2_match_limit`); past it the match fails.
    pub match_limit: usize,
    /// Timeouts of backends that do not set them, and `bereq.*_timeout`'s defaults
    /// (Varnish's parameters; `[vcl] connect_timeout`, ...).
    pub timeouts: super::ir::Timeouts,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            err_unref: true,
            match_limit: super::pcre::DEFAULT_MATCH_LIMIT,
            timeouts: super::ir::Timeouts::default(),
        }
    }
}

/// Compiles a loaded source into a policy program, or returns every error (sorted by file
/// and position). Errors of kind `Unsupported` are valid VCL that Shellac does not run.
pub fn compile(src: &Source) -> Result<Program, Vec<VclError>> {
    compile_with(src, &Options::default())
}

/// [`compile`] with `options`.
pub fn compile_with(src: &Source, options: &Options) -> Result<Program, Vec<VclError>> {
    let dialect = match dialect_of(&src.vcl) {
        Ok(d) => d,
        Err((pos, message)) => {
            let file = src.files.first().cloned().unwrap_or_default();
            let mut errors = vec![VclError::new(&file, pos, message)];
            src.locate(&mut errors);
            return Err(errors);
        }
    };
    let mut c = Checker {
        dialect,
        files: &src.files,
        errors: Vec::new(),
        targets: Vec::new(),
        probes: HashMap::new(),
        acls: HashMap::new(),
        acl_list: Vec::new(),
        subs: HashMap::new(),
        imports: HashMap::new(),
        objects: HashMap::new(),
        may_be_unused: HashSet::new(),
        origins: Origins::default(),
        here: 0,
        req_body_keep: None,
        reads_digest: false,
        reads_local: false,
        here_name: String::new(),
        builtin: false,
        possible: 0,
        options: *options,
    };
    c.declarations(&src.vcl.decls);
    let mut program = c.bodies(&src.vcl.decls);
    if options.err_unref {
        c.unused();
    }
    let mut probes: Vec<(Pos, crate::config::ProbeConfig)> = c
        .probes
        .values()
        .filter(|p| p.used)
        .map(|p| (p.pos, p.config.clone()))
        .collect();
    probes.sort_by_key(|(p, _)| (p.file, p.line, p.col));
    c.origins.probes = probes.into_iter().map(|(_, p)| p).collect();
    let mut errors = c.errors;
    if errors.is_empty() {
        program.origins = c.origins;
        return Ok(program);
    }
    errors.sort_by(|a, b| {
        (a.pos.file, a.pos.line, a.pos.col).cmp(&(b.pos.file, b.pos.line, b.pos.col))
    });
    errors.dedup();
    src.locate(&mut errors);
    Err(errors)
}

impl Checker<'_> {
    /// Why a 4.x name is not known, for a file read as 2.x: it has no `vcl` line (varnishd
    /// reads such a file as 4.0 only from 4.0 on; Shellac as Varnish 2.1/3.0 did).
    pub(super) fn no_version_line(&self) -> String {
        format!(
            "this file has no `vcl 4.1;` line, so it is read as VCL {} — add `vcl 4.1;`",
            self.dialect.as_str()
        )
    }

    /// `Symbol not found` for a name of other dialects: which, and for a 4.x name in a 2.x
    /// file, what to write.
    pub(super) fn other_dialect_symbol(&self, name: &str, others: &[&str]) -> String {
        if self.dialect.is_legacy() && others.iter().any(|d| d.starts_with('4')) {
            format!(
                "Symbol not found: '{name}' (a VCL 4.x name; {})",
                self.no_version_line()
            )
        } else {
            format!(
                "Symbol not found: '{name}' (Only available in VCL {}, this file is VCL {})",
                others.join(", "),
                self.dialect.as_str()
            )
        }
    }
}

/// Whether every error is `Unsupported`: valid VCL asking for what Shellac does not have.
pub fn only_unsupported(errors: &[VclError]) -> bool {
    errors.iter().all(|e| e.kind == ErrorKind::Unsupported)
}

/// The dialect: the `vcl` line's version, or for files without one, 2.0 when `vcl_fetch`
/// uses `obj.*` and never `beresp.*`, else 2.1/3.0.
fn dialect_of(vcl: &ast::Vcl) -> Result<Dialect, (Pos, String)> {
    if let Some((v, pos)) = &vcl.version {
        return match v.as_str() {
            "4.0" => Ok(Dialect::V40),
            "4.1" => Ok(Dialect::V41),
            other => Err((
                *pos,
                format!(
                    "VCL version {other} not supported (Shellac reads 4.0 and 4.1 files, and \
                     2.x/3.0 files, which have no 'vcl' line)"
                ),
            )),
        };
    }
    let mut obj = false;
    let mut beresp = false;
    for d in &vcl.decls {
        if let Decl::Sub { name, body, .. } = d
            && name == "vcl_fetch"
        {
            walk_names(body, &mut |n| {
                obj |= n.starts_with("obj.");
                beresp |= n.starts_with("beresp.");
            });
        }
    }
    Ok(if obj && !beresp {
        Dialect::V20
    } else {
        Dialect::V21
    })
}

/// Calls `f` with every name a body sets, unsets or reads.
fn walk_names(body: &[ast::Stmt], f: &mut dyn FnMut(&str)) {
    fn expr(e: &ast::Expr, f: &mut dyn FnMut(&str)) {
        match e {
            ast::Expr::Name(n, _) => f(n),
            ast::Expr::Call { args, .. } => args.iter().for_each(|a| expr(&a.value, f)),
            ast::Expr::Method { on, args, .. } => {
                expr(on, f);
                args.iter().for_each(|a| expr(&a.value, f));
            }
            ast::Expr::Unary { expr: e, .. } => expr(e, f),
            ast::Expr::Binary { left, right, .. } => {
                expr(left, f);
                expr(right, f);
            }
            ast::Expr::Concat { parts, .. } => parts.iter().for_each(|p| expr(p, f)),
            _ => {}
        }
    }
    for s in body {
        match s {
            ast::Stmt::Set { target, value, .. } => {
                f(target);
                expr(value, f);
            }
            ast::Stmt::Unset { target, .. } => f(target),
            ast::Stmt::If {
                branches,
                otherwise,
                ..
            } => {
                for (c, b) in branches {
                    expr(c, f);
                    walk_names(b, f);
                }
                if let Some(o) = otherwise {
                    walk_names(o, f);
                }
            }
            ast::Stmt::Block { body, .. } => walk_names(body, f),
            ast::Stmt::Expr { expr: e, .. } => expr(e, f),
            ast::Stmt::Action { args, .. } => args.iter().for_each(|a| expr(a, f)),
            ast::Stmt::Return {
                action: Some(a), ..
            } => expr(a, f),
            _ => {}
        }
    }
}

impl<'a> Checker<'a> {
    fn file(&self, pos: Pos) -> String {
        self.files
            .get(pos.file as usize)
            .cloned()
            .unwrap_or_else(|| "<built-in VCL>".to_string())
    }

    /// Reports an error in the file (Varnish would refuse it too).
    fn error(&mut self, pos: Pos, message: impl Into<String>) {
        let file = self.file(pos);
        self.errors.push(VclError::new(&file, pos, message.into()));
    }

    /// Reports valid VCL that Shellac does not run.
    fn unsupported(&mut self, pos: Pos, message: impl Into<String>) {
        let file = self.file(pos);
        self.errors
            .push(VclError::unsupported(&file, pos, message.into()));
    }

    /// Where a declaration is, for "first defined at" messages.
    fn at(&self, pos: Pos) -> String {
        format!("{}:{}:{}", self.file(pos), pos.line, pos.col)
    }

    /// The names of the built-in subroutines in `methods`.
    fn method_names(methods: Methods) -> Vec<&'static str> {
        Method::ALL
            .into_iter()
            .filter(|m| methods & m.bit() != 0)
            .map(Method::sub_name)
            .collect()
    }

    /// Whether `name` is already declared (any kind); reports it if so.
    fn redefined(&mut self, name: &str, pos: Pos) -> bool {
        let first = self
            .targets
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.pos)
            .or_else(|| self.probes.get(name).map(|p| p.pos))
            .or_else(|| self.acls.get(name).map(|a| a.pos))
            .or_else(|| self.imports.get(name).map(|i| i.pos))
            .or_else(|| self.objects.get(name).map(|o| o.pos));
        match first {
            Some(first) => {
                let at = self.at(first);
                let kind = if self.targets.iter().any(|t| t.name == name) {
                    "Backend"
                } else if self.probes.contains_key(name) {
                    "Probe"
                } else if self.acls.contains_key(name) {
                    "ACL"
                } else {
                    "Symbol"
                };
                self.error(
                    pos,
                    format!("{kind} '{name}' redefined (first at {at}); names must be unique"),
                );
                true
            }
            None => false,
        }
    }

    /// Pass 2: declarations, in file order (a backend may be used before it is declared).
    fn declarations(&mut self, decls: &'a [Decl]) {
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
        let split = super::builtin::split_sub(name, self.dialect).is_some();
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
        let builtin: &'static ast::Vcl = super::builtin::source(self.dialect);
        for d in &builtin.decls {
            if let Decl::Sub { name, body, pos } = d
                && super::builtin::split_sub(name, self.dialect).is_some()
            {
                self.add_body(name, body, *pos, true);
            }
        }
    }

    /// Pass 4 and 5: reachability, then every body checked and compiled.
    fn bodies(&mut self, decls: &'a [Decl]) -> Program {
        self.reach();
        // Custom subroutines, in declaration order (their index is fixed by `sub_decl`).
        let mut custom: Vec<(usize, String)> = self
            .subs
            .iter()
            .filter(|(n, _)| !super::builtin::is_method_name(n, self.dialect))
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
            self.possible = super::types::ctx::ALL;
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
        let builtin = super::builtin::source(self.dialect);
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
