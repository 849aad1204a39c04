//! Statements: `set`, `unset`, `call`, `return`, `if`, calls for effect, and 2.x's bare
//! actions (`lookup;`, `error 503 "x";`, `set req.hash += ...;`), each checked against the
//! subroutines the code runs in.

use super::super::ast::{self, Pos};
use super::super::ir::{Action, Expr, Func, SetOp, Stmt};
use super::super::types::{Dialect, Method, Type};
use super::super::vars::Slot;
use super::Checker;
use super::names::Access;

impl Checker<'_> {
    /// A block of statements.
    pub(super) fn block(&mut self, body: &[ast::Stmt]) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(body.len());
        for s in body {
            self.stmt(s, &mut out);
        }
        out
    }

    fn stmt(&mut self, s: &ast::Stmt, out: &mut Vec<Stmt>) {
        match s {
            ast::Stmt::Set {
                target,
                op,
                value,
                pos,
            } => self.set(target, op, value, *pos, out),
            ast::Stmt::Unset { target, pos } => match self.variable(target, *pos, Access::Unset) {
                Some((_, Type::Error)) => {}
                Some((var, _)) => out.push(Stmt::Unset { var, pos: *pos }),
                None => self.unknown_target(target, *pos),
            },
            ast::Stmt::Call { target, .. } => match target {
                ast::Expr::Name(n, _) => {
                    if let Some(sym) = self.subs.get(n)
                        && !super::super::builtin::is_method_name(n, self.dialect)
                    {
                        out.push(Stmt::Call(sym.index));
                    }
                    // Undefined subroutines were reported by `reach`.
                }
                other => self.unsupported(
                    other.pos(),
                    "calling a SUB value (call obj.method()) is not supported by Shellac",
                ),
            },
            ast::Stmt::Return { action, pos } => match action {
                None if super::super::builtin::is_method_name(&self.here_name, self.dialect) => {
                    self.error(
                        *pos,
                        format!(
                            "Expected '(' got ';': a bare 'return;' leaves a custom subroutine; \
                         {} must return an action",
                            self.here_name
                        ),
                    )
                }
                None => out.push(Stmt::Leave),
                Some(a) => {
                    if let Some(action) = self.action(a, *pos) {
                        out.push(Stmt::Return(action, *pos));
                    }
                }
            },
            ast::Stmt::Action { name, args, pos } => self.bare_action(name, args, *pos, out),
            ast::Stmt::Expr { expr, pos } => match expr {
                ast::Expr::Call { func, args, .. }
                    if self.dialect.is_legacy() && (func == "purge" || func == "purge_hash") =>
                {
                    let values: Vec<ast::Expr> = args.iter().map(|a| a.value.clone()).collect();
                    self.bare_action(func, &values, *pos, out);
                }
                ast::Expr::Call { func, args, .. } => {
                    let (e, ty) = self.call(func, args, *pos);
                    match (e, ty) {
                        (_, Type::Error) => {}
                        (Expr::Call(f, args), _) => out.push(Stmt::Effect(f, args, *pos)),
                        _ => {}
                    }
                }
                other => {
                    self.expr(other, None);
                }
            },
            ast::Stmt::New { name, pos, .. } => {
                if self.here != Method::Init.bit() {
                    self.error(*pos, format!("'new {name}' is only allowed in vcl_init"));
                }
                // Objects were made by the vcl_init pass (`init.rs`).
            }
            ast::Stmt::If {
                branches,
                otherwise,
                ..
            } => {
                let mut bs = Vec::with_capacity(branches.len());
                for (cond, body) in branches {
                    let c = self.cond(cond);
                    let b = self.block(body);
                    bs.push((c, b.into_boxed_slice()));
                }
                let o = otherwise
                    .as_ref()
                    .map(|b| self.block(b))
                    .unwrap_or_default();
                out.push(Stmt::If {
                    branches: bs.into_boxed_slice(),
                    otherwise: o.into_boxed_slice(),
                });
            }
            ast::Stmt::Include { pos, .. } => self.error(
                *pos,
                "include was not read (VCL text given without its file)",
            ),
            ast::Stmt::Block { body, .. } => {
                let inner = self.block(body);
                out.extend(inner);
            }
            ast::Stmt::CCode { pos } => self.unsupported(
                *pos,
                "inline C (C{ ... }C) cannot run in Shellac; write it as VCL",
            ),
        }
    }

    fn unknown_target(&mut self, target: &str, pos: Pos) {
        let others = super::super::vars::other_dialects(target);
        if others.is_empty() {
            self.error(
                pos,
                format!("Symbol not found: '{target}' (not a variable)"),
            );
        } else {
            let msg = self.other_dialect_symbol(target, &others);
            self.error(pos, msg);
        }
    }

    pub(super) fn set(
        &mut self,
        target: &str,
        op: &str,
        value: &ast::Expr,
        pos: Pos,
        out: &mut Vec<Stmt>,
    ) {
        let Some((var, ty)) = self.variable(target, pos, Access::Write) else {
            self.unknown_target(target, pos);
            // Still check the value, for its own errors.
            self.expr(value, None);
            return;
        };
        if ty == Type::Error {
            self.expr(value, None);
            return;
        }
        let set_op = match op {
            "=" => SetOp::Assign,
            "+=" => SetOp::Add,
            "-=" => SetOp::Sub,
            "*=" => SetOp::Mul,
            _ => SetOp::Div,
        };
        match var.slot {
            Slot::ReqHash => {
                if set_op != SetOp::Add {
                    self.error(
                        pos,
                        format!("Expected '+=' got '{op}' (req.hash is added to)"),
                    );
                    return;
                }
                let v = self.stringify(value);
                out.push(Stmt::Effect(Func::HashData, Box::new([v]), pos));
                return;
            }
            Slot::Fixed(fixed, why) => {
                self.set_fixed(target, op, set_op, value, (fixed, why), pos);
                return;
            }
            _ => {}
        }
        let allowed = match ty {
            Type::String | Type::Header => {
                set_op == SetOp::Assign || (set_op == SetOp::Add && !self.dialect.is_legacy())
            }
            Type::Body => matches!(set_op, SetOp::Assign | SetOp::Add),
            Type::Int | Type::Real | Type::Duration | Type::Bytes => true,
            Type::Time => matches!(set_op, SetOp::Assign | SetOp::Add | SetOp::Sub),
            _ => set_op == SetOp::Assign,
        };
        if !allowed {
            self.error(pos, format!("Expected '=' got '{op}' ('{target}' is {ty})"));
            self.expr(value, None);
            return;
        }
        let want = match (set_op, ty) {
            (SetOp::Mul | SetOp::Div, Type::Duration) => Type::Real,
            (SetOp::Add | SetOp::Sub, Type::Time) => Type::Duration,
            (_, Type::Header) => Type::String,
            (_, t) => t,
        };
        let Some(value_expr) = self.set_value(value, ty, want) else {
            return;
        };
        out.push(Stmt::Set {
            var,
            op: set_op,
            value: value_expr,
            pos,
        });
    }

    /// `set` of a variable Shellac fixes to one value (`Slot::Fixed`): only that value is
    /// accepted, anything else is explained.
    fn set_fixed(
        &mut self,
        target: &str,
        op: &str,
        set_op: SetOp,
        value: &ast::Expr,
        (fixed, why): (bool, &str),
        pos: Pos,
    ) {
        let (e, t) = self.expr(value, Some(Type::Bool));
        match (set_op, e, t) {
            (SetOp::Assign, Expr::Bool(b), Type::Bool) if b == fixed => {}
            (SetOp::Assign, Expr::Bool(_), Type::Bool) => {
                self.unsupported(pos, format!("'set {target} = {}': {why}", !fixed))
            }
            (_, _, Type::Error) => {}
            (SetOp::Assign, _, Type::Bool) => self.unsupported(
                pos,
                format!("'{target}' can only be set to {fixed} in Shellac: {why}"),
            ),
            (SetOp::Assign, _, t) => self.error(
                value.pos(),
                format!("Expected \"true\" or \"false\", found {t}"),
            ),
            _ => self.error(pos, format!("Expected '=' got '{op}'")),
        }
    }

    /// The value of a `set` of a `ty` variable, checked as `want` (None: an error was
    /// reported).
    fn set_value(&mut self, value: &ast::Expr, ty: Type, want: Type) -> Option<Expr> {
        Some(if ty == Type::Bool {
            let (e, t) = self.expr(value, Some(Type::Bool));
            match t {
                Type::Bool | Type::Error => e,
                other => {
                    self.error(
                        value.pos(),
                        format!("Expected \"true\" or \"false\" (a BOOL), found {other}"),
                    );
                    return None;
                }
            }
        } else if want == Type::Real {
            let (e, t) = self.expr(value, Some(Type::Real));
            match t {
                Type::Real | Type::Int | Type::Error => e,
                other => {
                    self.error(
                        value.pos(),
                        format!("Expression has type {other}, expected REAL"),
                    );
                    return None;
                }
            }
        } else {
            self.expr_as(value, want)
        })
    }

    /// The action of `return (...)`, checked against where the code runs.
    fn action(&mut self, a: &ast::Expr, pos: Pos) -> Option<Action> {
        let (word, args): (&str, &[ast::Arg]) = match a {
            ast::Expr::Name(n, _) => (n.as_str(), &[]),
            ast::Expr::Call { func, args, .. } => (func.as_str(), args.as_slice()),
            other => {
                self.error(
                    other.pos(),
                    "Expected an action, such as pass or synth(503)",
                );
                return None;
            }
        };
        let action = self.action_word(word, args, pos)?;
        self.allowed(word, pos).then_some(action)
    }

    /// Whether `word` may be returned from every subroutine the code runs in.
    pub(super) fn allowed(&mut self, word: &str, pos: Pos) -> bool {
        if self.here == 0 {
            return true;
        }
        for m in Method::ALL {
            if self.here & m.bit() != 0 && !m.actions(self.dialect).contains(&word) {
                let called = if self.here_name.starts_with("vcl_") {
                    String::new()
                } else {
                    format!(" (sub {} is called from it)", self.here_name)
                };
                let allowed = m.actions(self.dialect).join(", ");
                // A 4.x action (`synth`, `hash`, `purge`, ...) in a file read as 2.x.
                let four = self.dialect.is_legacy()
                    && Method::ALL
                        .into_iter()
                        .any(|x| x.actions(Dialect::V41).contains(&word));
                let hint = if four {
                    format!(" ('{word}' is VCL 4.x: {})", self.no_version_line())
                } else {
                    String::new()
                };
                self.error(
                    pos,
                    format!(
                        "Invalid return \"{word}\" in {}{called}: it may return {allowed}{hint}",
                        m.sub_name()
                    ),
                );
                return false;
            }
        }
        true
    }

    pub(super) fn action_word(
        &mut self,
        word: &str,
        args: &[ast::Arg],
        pos: Pos,
    ) -> Option<Action> {
        let legacy = self.dialect.is_legacy();
        let action = match word {
            "hash" if legacy && self.here & Method::Hash.bit() != 0 => Action::Lookup,
            "hash" => Action::Hash,
            "lookup" if legacy => Action::Hash,
            "lookup" => Action::Lookup,
            // Varnish's VRT_hit_for_pass: only vcl_backend_response's.
            "pass" if !args.is_empty() => {
                if self.here & Method::BackendResponse.bit() == 0 {
                    self.error(
                        pos,
                        "return (pass(DURATION)) is only allowed in vcl_backend_response",
                    );
                    return None;
                }
                if args.len() > 1 || args.iter().any(|a| a.name.is_some()) {
                    self.error(pos, "pass() takes one duration, as in pass(120s)");
                    return None;
                }
                Action::PassFor(Box::new(self.expr_as(&args[0].value, Type::Duration)))
            }
            "pass" => Action::Pass,
            "pipe" => Action::Pipe,
            "deliver" => Action::Deliver,
            "fetch" => Action::Fetch,
            "restart" => Action::Restart,
            "retry" => Action::Retry,
            "miss" => Action::Miss,
            "purge" => Action::Purge,
            "abandon" => Action::Abandon,
            "fail" => Action::Fail,
            "ok" => Action::Ok,
            "hit_for_pass" => Action::HitForPass,
            "synth" | "error" => {
                if args.len() > 2 || args.iter().any(|a| a.name.is_some()) {
                    self.error(
                        pos,
                        format!("{word}() takes a status and an optional reason"),
                    );
                    return None;
                }
                if word == "synth" && args.is_empty() {
                    self.error(pos, "synth() needs a status, as in synth(503)");
                    return None;
                }
                let status = args
                    .first()
                    .map(|a| Box::new(self.expr_as(&a.value, Type::Int)));
                let reason = args.get(1).map(|a| Box::new(self.stringify(&a.value)));
                Action::Synth(status, reason)
            }
            "vcl" => {
                self.unsupported(pos, "return (vcl(label)): Shellac runs one VCL program");
                return None;
            }
            "esi" => {
                self.error(
                    pos,
                    "return (esi) is no action: write `esi;` or `set beresp.do_esi = true;`",
                );
                return None;
            }
            other => {
                self.error(pos, format!("Unknown action '{other}'"));
                return None;
            }
        };
        Some(action)
    }
}
