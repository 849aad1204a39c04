//! Parsing a subroutine's statements: set, unset, call, return, if, new, actions and calls.

use super::ast::{Expr, Stmt};
use super::error::VclError;
use super::lexer::Tok;
use super::parser::Parser;

/// The assignment operators `set` accepts.
const ASSIGN: &[&str] = &["=", "+=", "-=", "*=", "/="];

impl Parser<'_> {
    /// `{ statements }`.
    pub(super) fn block(&mut self) -> Result<Vec<Stmt>, VclError> {
        self.expect("{", "to open the block")?;
        self.enter()?;
        let mut body = Vec::new();
        loop {
            if self.eat("}") {
                self.leave();
                return Ok(body);
            }
            if self.eat(";") {
                continue;
            }
            if *self.peek() == Tok::Eof {
                return Err(self.expected("'}' to close the block"));
            }
            body.push(self.stmt()?);
        }
    }

    /// Statements up to the end of the file (an included file spliced into a sub).
    pub(super) fn statements_to_end(&mut self) -> Result<Vec<Stmt>, VclError> {
        let mut body = Vec::new();
        while *self.peek() != Tok::Eof {
            if self.eat(";") {
                continue;
            }
            body.push(self.stmt()?);
        }
        Ok(body)
    }

    fn stmt(&mut self) -> Result<Stmt, VclError> {
        let pos = self.pos();
        let word = match self.peek() {
            Tok::Op("{") => {
                return Ok(Stmt::Block {
                    body: self.block()?,
                    pos,
                });
            }
            Tok::CCode(_) => {
                self.at += 1;
                return Ok(Stmt::CCode { pos });
            }
            Tok::Ident(w) => w.clone(),
            _ => return Err(self.expected("a statement (set, unset, call, return, if, ...)")),
        };
        self.at += 1;
        let stmt = match word.as_str() {
            "if" => return self.if_(pos),
            "set" => self.set_(pos)?,
            "unset" | "remove" => Stmt::Unset {
                target: self.name(&format!("the variable to {word}"))?,
                pos,
            },
            "call" => {
                if !matches!(self.peek(), Tok::Ident(_)) {
                    return Err(self.expected("the name of the subroutine to call"));
                }
                Stmt::Call {
                    target: self.expr_no_juxtaposition()?,
                    pos,
                }
            }
            "return" => self.return_(pos)?,
            // Varnish splices an included file's text wherever `include` stands, in a sub too.
            "include" => {
                let (path, glob) = self.include()?;
                return Ok(Stmt::Include { path, glob, pos });
            }
            "new" => {
                let name = self.decl_name("the name of the new object")?;
                self.expect("=", &format!("after 'new {name}'"))?;
                Stmt::New {
                    name,
                    value: self.expr()?,
                    pos,
                }
            }
            "error" => self.error_(word, pos)?,
            _ => self.expr_or_action(word, pos)?,
        };
        self.expect(";", "to end the statement")?;
        Ok(stmt)
    }

    /// `set target op value` (after `set`).
    fn set_(&mut self, pos: super::ast::Pos) -> Result<Stmt, VclError> {
        let target = self.name("the variable to set, such as req.http.X-Foo")?;
        let op = match self.peek() {
            Tok::Op(o) if ASSIGN.contains(o) => *o,
            _ => return Err(self.expected(&format!("'=' after 'set {target}'"))),
        };
        self.at += 1;
        Ok(Stmt::Set {
            target,
            op,
            value: self.expr()?,
            pos,
        })
    }

    /// `return` or `return (action)` (after `return`).
    fn return_(&mut self, pos: super::ast::Pos) -> Result<Stmt, VclError> {
        let action = if self.is_op(";") {
            None
        } else {
            self.expect("(", "after 'return' (as in 'return (pass);')")?;
            let action = self.expr()?;
            self.expect(")", "to close 'return ('")?;
            Some(action)
        };
        Ok(Stmt::Return { action, pos })
    }

    /// 2.x `error 503 "msg";` (after `error`): the status alone, so "msg" is not added to it.
    fn error_(&mut self, word: String, pos: super::ast::Pos) -> Result<Stmt, VclError> {
        let mut args = Vec::new();
        if !self.is_op(";") {
            args.push(self.expr_no_juxtaposition()?);
        }
        if !self.is_op(";") {
            args.push(self.expr()?);
        }
        Ok(Stmt::Action {
            name: word,
            args,
            pos,
        })
    }

    /// Any other word: a function or method call (`std.log("x")`), or an action and its
    /// arguments.
    fn expr_or_action(&mut self, word: String, pos: super::ast::Pos) -> Result<Stmt, VclError> {
        if self.is_op("(") || matches!(self.peek(), Tok::Str(_)) && word.ends_with('.') {
            self.at -= 1;
            let expr = self.expr()?;
            if !matches!(expr, Expr::Call { .. } | Expr::Method { .. }) {
                return Err(self.error_at(
                    pos,
                    "expected a statement; a value on its own does nothing".to_string(),
                ));
            }
            return Ok(Stmt::Expr { expr, pos });
        }
        if self.is_op("=") || ASSIGN.iter().any(|o| self.is_op(o)) {
            return Err(self.error_at(
                pos,
                format!("expected a statement; to assign, write 'set {word} = ...;'"),
            ));
        }
        let mut args = Vec::new();
        while !self.is_op(";") && *self.peek() != Tok::Eof {
            args.push(self.expr()?);
        }
        Ok(Stmt::Action {
            name: word,
            args,
            pos,
        })
    }

    /// `if (c) {..}` then any `elsif`/`elseif`/`elif`/`else if` branches and an `else`.
    fn if_(&mut self, pos: super::ast::Pos) -> Result<Stmt, VclError> {
        let mut branches = vec![self.branch()?];
        let mut otherwise = None;
        loop {
            if self.is_word("elsif") || self.is_word("elseif") || self.is_word("elif") {
                self.at += 1;
                branches.push(self.branch()?);
            } else if self.is_word("else") {
                self.at += 1;
                if self.is_word("if") {
                    self.at += 1;
                    branches.push(self.branch()?);
                } else {
                    otherwise = Some(self.block()?);
                    break;
                }
            } else {
                break;
            }
        }
        Ok(Stmt::If {
            branches,
            otherwise,
            pos,
        })
    }

    /// `(condition) { body }`.
    fn branch(&mut self) -> Result<(Expr, Vec<Stmt>), VclError> {
        self.expect("(", "before the condition")?;
        let cond = self.expr()?;
        self.expect(")", "after the condition")?;
        Ok((cond, self.block()?))
    }
}
