//! The checker and compiler: a loaded VCL source (`load::Source`) to a `ir::Program`, or every
//! error it has, each with file:line:column. Driven by the variable table (`vars/`) and the
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
mod dialect;
mod directors;
mod expr;
mod init;
mod legacy;
mod names;
mod ops;
mod passes;
mod patterns;
mod probe;
mod sigs;
mod stmt;
mod vmods;
mod xref;

use std::collections::{HashMap, HashSet};

pub(crate) use consts::duration_unit;
pub(crate) use patterns::replacement;

use super::ast::{self, Pos};
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
    /// Header names the program spells with capitals (`Program::spelled`).
    spelled: HashMap<http::HeaderName, Box<str>>,
    options: Options,
}

/// How strict the compiler is.
#[derive(Debug, Clone)]
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
    /// The storages `storage.NAME` may name besides `s0` and `Transient` (the
    /// configuration's `[[storage.named]]`); `None`: any name (a file checked without a
    /// configuration).
    pub storages: Option<Vec<String>>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            err_unref: true,
            match_limit: super::pcre::DEFAULT_MATCH_LIMIT,
            timeouts: super::ir::Timeouts::default(),
            storages: None,
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
    let dialect = match dialect::dialect_of(&src.vcl) {
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
        spelled: HashMap::new(),
        here_name: String::new(),
        builtin: false,
        possible: 0,
        options: options.clone(),
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
}
