//! Parsing VCL expressions by precedence: `||`, `&&`, `!`, comparisons, `+ -`, `* /`, calls.

use super::ast::{Arg, Expr};
use super::error::VclError;
use super::lexer::Tok;
use super::parser::Parser;

/// Binding power of an infix operator (higher binds tighter), as Varnish's vcc_expr.c orders
/// them: `a || b && c` is `a || (b && c)`, `!a ~ b` is `!(a ~ b)`.
fn infix(op: &str) -> Option<u8> {
    Some(match op {
        "||" => 1,
        "&&" => 2,
        "==" | "!=" | "<" | ">" | "<=" | ">=" | "~" | "!~" => 4,
        "+" | "-" => 5,
        "*" | "/" | "%" => 6,
        _ => return None,
    })
}

/// Whether a juxtaposed name may extend `e` (2.x `req.url req.proto`); not a number (`1 q`).
fn stringy(e: &Expr) -> bool {
    !matches!(
        e,
        Expr::Number(..) | Expr::Quantity(..) | Expr::Blob(..) | Expr::Unary { .. }
    )
}

/// Words that start statements, never a value (`set x = "a" if "b";`). Declaration words
/// are not here: they are also enum values (`vtc.workspace_free(backend)`).
const KEYWORDS: &[&str] = &[
    "if", "else", "elsif", "elseif", "elif", "set", "unset", "remove", "call", "return",
];

/// `!` takes a comparison as its operand.
const NOT_OPERAND: u8 = 4;
/// Juxtaposed values (2.x `"a" req.url "b"`) concatenate, binding like `+`.
const JUXTAPOSE: u8 = 5;

impl Parser<'_> {
    /// A full expression.
    pub(super) fn expr(&mut self) -> Result<Expr, VclError> {
        self.expr_bp(0, true)
    }

    /// An expression where a following value starts the next argument rather than being
    /// concatenated (2.x `error 503 "msg"`).
    pub(super) fn expr_no_juxtaposition(&mut self) -> Result<Expr, VclError> {
        self.expr_bp(0, false)
    }

    fn expr_bp(&mut self, min: u8, juxtapose: bool) -> Result<Expr, VclError> {
        self.enter()?;
        let mut left = self.prefix(juxtapose)?;
        loop {
            let pos = self.pos();
            let (op, bp) = match self.peek() {
                Tok::Op(o) => match infix(o) {
                    Some(bp) => (Some(*o), bp),
                    None => break,
                },
                // A string next to a value, or a name next to a string or name (2.x
                // `"a" req.url req.proto`).
                Tok::Str(_) if juxtapose => (None, JUXTAPOSE),
                Tok::Ident(_) if juxtapose && stringy(&left) => (None, JUXTAPOSE),
                _ => break,
            };
            if bp < min {
                break;
            }
            let Some(op) = op else {
                let right = self.expr_bp(JUXTAPOSE + 1, juxtapose)?;
                left = match left {
                    Expr::Concat { mut parts, pos } => {
                        parts.push(right);
                        Expr::Concat { parts, pos }
                    }
                    first => Expr::Concat {
                        pos: first.pos(),
                        parts: vec![first, right],
                    },
                };
                continue;
            };
            self.at += 1;
            let right = self.expr_bp(bp + 1, juxtapose)?;
            left = Expr::Binary {
                op,
                left: Box::new(left),
                right: Box::new(right),
                pos,
            };
        }
        self.leave();
        Ok(left)
    }

    fn prefix(&mut self, juxtapose: bool) -> Result<Expr, VclError> {
        let pos = self.pos();
        if self.eat("!") {
            let expr = self.expr_bp(NOT_OPERAND, juxtapose)?;
            return Ok(Expr::Unary {
                op: "!",
                expr: Box::new(expr),
                pos,
            });
        }
        if self.eat("-") {
            let expr = self.postfix()?;
            return Ok(Expr::Unary {
                op: "-",
                expr: Box::new(expr),
                pos,
            });
        }
        self.postfix()
    }

    /// A value and any `.method(args)` after it.
    fn postfix(&mut self) -> Result<Expr, VclError> {
        let mut expr = self.primary()?;
        while self.is_op(".")
            && matches!(self.peek_at(1), Tok::Ident(_))
            && matches!(self.peek_at(2), Tok::Op("("))
        {
            let pos = self.pos();
            self.at += 1;
            let method = self.ident("a method name")?;
            let args = self.args()?;
            expr = Expr::Method {
                on: Box::new(expr),
                method,
                args,
                pos,
            };
        }
        Ok(expr)
    }

    fn primary(&mut self) -> Result<Expr, VclError> {
        let pos = self.pos();
        let expr = match self.peek().clone() {
            Tok::Str(s) => Expr::Str(s, pos),
            Tok::Number(n) => Expr::Number(n, pos),
            Tok::Quantity(n, u) => Expr::Quantity(n, u, pos),
            Tok::Blob(b) => Expr::Blob(b, pos),
            Tok::Op("(") => {
                self.at += 1;
                let inner = self.expr()?;
                self.expect(")", "to close '('")?;
                return Ok(inner);
            }
            Tok::Ident(w) if KEYWORDS.contains(&w.as_str()) => {
                return Err(self.error_at(pos, format!("'{w}' is a keyword, not a value")));
            }
            Tok::Ident(_) => {
                let name = self.name("a value")?;
                if self.is_op("(") {
                    let args = self.args()?;
                    return Ok(Expr::Call {
                        func: name,
                        args,
                        pos,
                    });
                }
                return Ok(Expr::Name(name, pos));
            }
            _ => return Err(self.expected("a value (a string, number, variable or call)")),
        };
        self.at += 1;
        Ok(expr)
    }

    /// `( [arg {, arg}] )` where an argument may be named: `name = value`.
    fn args(&mut self) -> Result<Vec<Arg>, VclError> {
        self.expect("(", "to open the arguments")?;
        let mut args = Vec::new();
        if self.eat(")") {
            return Ok(args);
        }
        loop {
            let name = match (self.peek(), self.peek_at(1)) {
                (Tok::Ident(n), Tok::Op("=")) => {
                    let n = n.clone();
                    self.at += 2;
                    Some(n)
                }
                _ => None,
            };
            args.push(Arg {
                name,
                value: self.expr()?,
            });
            if self.eat(")") {
                return Ok(args);
            }
            self.expect(",", "or ')' after the argument")?;
        }
    }
}
