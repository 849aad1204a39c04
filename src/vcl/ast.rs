//! The syntax tree of a VCL file, as written: every dialect (2.x, 3.0, 4.x) in one shape.

/// A position in a VCL file (1-based line and column). `file` is the file's index in the
/// loaded source (`load::Source::files`): 0 for the main file, then each included file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
    pub file: u16,
}

/// A whole VCL file.
#[derive(Debug, Clone, PartialEq)]
pub struct Vcl {
    /// The `vcl 4.0;` line's version; `None` for 2.x and 3.0 files, which have none.
    pub version: Option<(String, Pos)>,
    pub decls: Vec<Decl>,
}

/// A top-level declaration.
#[derive(Debug, Clone, PartialEq)]
pub enum Decl {
    /// `import std;`, `import std as s;` or `import std from "path";`.
    Import {
        name: String,
        alias: Option<String>,
        from: Option<String>,
        pos: Pos,
    },
    /// `include "file.vcl";` (`glob`: `include +glob "..."`).
    Include { path: String, glob: bool, pos: Pos },
    /// `backend NAME { .field = value; ... }`; `fields` is `None` for `backend NAME none;`.
    Backend {
        name: String,
        fields: Option<Vec<Field>>,
        pos: Pos,
    },
    /// `probe NAME { .field = value; ... }`.
    Probe {
        name: String,
        fields: Vec<Field>,
        pos: Pos,
    },
    /// `acl NAME [+flag|-flag ...] { entries }`.
    Acl {
        name: String,
        flags: Vec<String>,
        entries: Vec<AclEntry>,
        pos: Pos,
    },
    /// 2.x `director NAME KIND { .field = v; { .backend = b; .weight = 1; } ... }`.
    Director {
        name: String,
        kind: String,
        fields: Vec<Field>,
        members: Vec<Vec<Field>>,
        pos: Pos,
    },
    /// `sub NAME { statements }`.
    Sub {
        name: String,
        body: Vec<Stmt>,
        pos: Pos,
    },
    /// `unused NAME;`: the declaration NAME may go unused without an error (trunk).
    Unused { name: String, pos: Pos },
    /// A top-level inline C block, kept to be refused by name.
    CCode { pos: Pos },
}

/// One `.name = value;` of a backend, probe or director.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub value: FieldValue,
    pub pos: Pos,
}

/// A field's value: an expression, or a nested table (`.probe = { ... }`).
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    Expr(Expr),
    Table(Vec<Field>),
    /// 2.x DNS directors' `.list = { "10.0.0.0"/24; ... }`: fields and address entries.
    List {
        fields: Vec<Field>,
        entries: Vec<AclEntry>,
    },
}

/// One entry of an ACL: `[!] "address" [/ mask];`, the address optionally in parentheses.
#[derive(Debug, Clone, PartialEq)]
pub struct AclEntry {
    pub negated: bool,
    pub address: String,
    pub mask: Option<u8>,
    /// `( "name" )`: a name that may not resolve, ignored then rather than an error.
    pub optional: bool,
    pub pos: Pos,
}

/// A statement in a subroutine.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// `set TARGET OP value;` with OP one of `= += -= *= /=`. A quoted field name keeps its
    /// quotes (`resp.http."x.y"`): only VCL 4.1 allows them, and only they may hold '.'.
    Set {
        target: String,
        op: &'static str,
        value: Expr,
        pos: Pos,
    },
    /// `unset TARGET;` (`remove` in 2.x).
    Unset { target: String, pos: Pos },
    /// `call NAME;`, or trunk's `call obj.method(args);` (a SUB value).
    Call { target: Expr, pos: Pos },
    /// `return (ACTION);`, `return (synth(503, "x"));`, or a bare `return;`.
    Return { action: Option<Expr>, pos: Pos },
    /// A bare action with optional arguments: 2.x `lookup;`, `pass;`, `error 503 "msg";`,
    /// `esi;`, `synthetic {"..."};`, `purge;`, `rollback;`, `panic "x";`.
    Action {
        name: String,
        args: Vec<Expr>,
        pos: Pos,
    },
    /// A call for its effect: `hash_data(req.url);`, `ban(...)`, `std.log("x")`,
    /// `vdir.add_backend(b);`.
    Expr { expr: Expr, pos: Pos },
    /// `new NAME = constructor(...);` in `vcl_init`.
    New { name: String, value: Expr, pos: Pos },
    /// `if (c) {..} elsif (c) {..} else {..}`: the branches in order, then the else.
    If {
        branches: Vec<(Expr, Vec<Stmt>)>,
        otherwise: Option<Vec<Stmt>>,
        pos: Pos,
    },
    /// `include "file.vcl";` inside a subroutine: the file's statements go here.
    Include { path: String, glob: bool, pos: Pos },
    /// A nested `{ ... }`.
    Block { body: Vec<Stmt>, pos: Pos },
    /// An inline C block, kept to be refused by name.
    CCode { pos: Pos },
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Str(String, Pos),
    Number(String, Pos),
    /// A number with a unit: a DURATION (`120s`) or BYTES (`10KB`) by the context, as vcc
    /// decides (`1m` is a minute or a mebibyte); value and unit as written.
    Quantity(String, String, Pos),
    /// A BLOB literal `:base64:` (trunk), the text between the colons.
    Blob(String, Pos),
    /// A variable, a name (backend, ACL, sub) or an action word (`pass`, `true`).
    Name(String, Pos),
    /// `f(args)`, `std.tolower(x)`, `vdir.backend()`, `synth(503, "x")`.
    Call {
        func: String,
        args: Vec<Arg>,
        pos: Pos,
    },
    /// `value.method(args)` on an expression that is not a plain name.
    Method {
        on: Box<Expr>,
        method: String,
        args: Vec<Arg>,
        pos: Pos,
    },
    /// A prefix operator: `!` or `-`.
    Unary {
        op: &'static str,
        expr: Box<Expr>,
        pos: Pos,
    },
    /// Values written side by side: 2.x's `"a" req.url "b"`, and the lines of a probe's
    /// `.request = "GET / HTTP/1.1" "Host: x";`, which Varnish joins with CRLF.
    Concat {
        parts: Vec<Expr>,
        pos: Pos,
    },
    /// An infix operator.
    Binary {
        op: &'static str,
        left: Box<Expr>,
        right: Box<Expr>,
        pos: Pos,
    },
}

/// A call's argument, positional or named (`std.log(s = "x")`).
#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub name: Option<String>,
    pub value: Expr,
}

impl Expr {
    /// Where the expression starts.
    pub fn pos(&self) -> Pos {
        match self {
            Expr::Str(_, p) | Expr::Number(_, p) | Expr::Name(_, p) | Expr::Blob(_, p) => *p,
            Expr::Quantity(_, _, p) => *p,
            Expr::Call { pos, .. } | Expr::Method { pos, .. } => *pos,
            Expr::Unary { pos, .. } | Expr::Binary { pos, .. } | Expr::Concat { pos, .. } => *pos,
        }
    }
}
