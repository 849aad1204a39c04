//! Operators: `&& || ~ !~ == != < > <= >= + - * / %`, typed as vcc types them (`STRING + INT`
//! concatenates, `DURATION + INT` is an error, an IP compares with an address in quotes).

use super::super::ast::{self, Pos};
use super::super::ir::{Arith, Cmp, Expr};
use super::super::types::Type;
use super::Checker;
use super::consts::const_str;

fn bad() -> (Expr, Type) {
    (Expr::Bool(false), Type::Error)
}

impl Checker<'_> {
    pub(super) fn binary(
        &mut self,
        op: &str,
        left: &ast::Expr,
        right: &ast::Expr,
        pos: Pos,
        hint: Option<Type>,
    ) -> (Expr, Type) {
        match op {
            "&&" | "||" => {
                let l = Box::new(self.cond(left));
                let r = Box::new(self.cond(right));
                let e = if op == "&&" {
                    Expr::And(l, r)
                } else {
                    Expr::Or(l, r)
                };
                (e, Type::Bool)
            }
            "~" | "!~" => self.matches(op == "!~", left, right, pos),
            "==" | "!=" | "<" | ">" | "<=" | ">=" => self.compare(op, left, right, pos),
            _ => self.arith(op, left, right, pos, hint),
        }
    }

    fn matches(
        &mut self,
        negate: bool,
        left: &ast::Expr,
        right: &ast::Expr,
        pos: Pos,
    ) -> (Expr, Type) {
        let (l, lt) = self.expr(left, None);
        if lt == Type::Error {
            // The left side was reported; an ACL on the right is still used.
            if let ast::Expr::Name(n, _) = right
                && let Some(a) = self.acls.get_mut(n)
            {
                a.used = true;
            } else if !matches!(right, ast::Expr::Str(..)) {
                self.expr(right, None);
            }
            return (Expr::Bool(false), Type::Bool);
        }
        match lt {
            Type::Ip => match right {
                ast::Expr::Name(n, npos) => match self.acls.get_mut(n) {
                    Some(a) => {
                        a.used = true;
                        let acl = a.index;
                        (
                            Expr::InAcl {
                                ip: Box::new(l),
                                acl,
                                negate,
                            },
                            Type::Bool,
                        )
                    }
                    None => {
                        self.error(*npos, format!("Symbol not found: '{n}' (expected an ACL)"));
                        bad()
                    }
                },
                other => {
                    let (_, t) = self.expr(other, None);
                    if t != Type::Error {
                        self.error(
                            other.pos(),
                            format!("Expected an ACL after '~' on an IP, found {t}"),
                        );
                    }
                    bad()
                }
            },
            Type::String | Type::Header => match const_str(right) {
                Some(s) => match super::patterns::compile_regex(self, &s, right.pos()) {
                    Some(regex) => (
                        Expr::Match {
                            subject: Box::new(l),
                            regex,
                            negate,
                        },
                        Type::Bool,
                    ),
                    None => bad(),
                },
                None => {
                    let (_, t) = self.expr(right, None);
                    if t == Type::Error {
                        return bad();
                    }
                    self.error(
                        right.pos(),
                        "Expected CSTR: a regular expression after '~' must be a constant \
                         string (VCL compiles it when the file is loaded)",
                    );
                    bad()
                }
            },
            t => {
                self.error(pos, format!("Operator ~ not possible on type {t}."));
                bad()
            }
        }
    }

    fn compare(&mut self, op: &str, left: &ast::Expr, right: &ast::Expr, pos: Pos) -> (Expr, Type) {
        if self.dialect.is_legacy()
            && matches!(
                left,
                ast::Expr::Number(..) | ast::Expr::Str(..) | ast::Expr::Quantity(..)
            )
        {
            // 2.x compared a variable with a value, never two values.
            self.error(
                left.pos(),
                "Expected a variable on the left of the comparison",
            );
            return bad();
        }
        let (l, lt) = self.expr(left, None);
        let hint = match lt {
            Type::Header => Type::String,
            t => t,
        };
        if lt == Type::Ip
            && let ast::Expr::Str(text, rpos) = right
        {
            // An address in quotes compares with an IP as that address.
            let Ok(ip) = text.parse::<std::net::IpAddr>() else {
                self.error(*rpos, format!("'{text}' is not an IP address"));
                return bad();
            };
            if ordered_op(op) {
                self.error(pos, format!("Operator {op} not possible on IP"));
                return bad();
            }
            let cmp = if op == "==" { Cmp::Eq } else { Cmp::Ne };
            return (
                Expr::Cmp(cmp, Type::Ip, Box::new(l), Box::new(Expr::Ip(ip))),
                Type::Bool,
            );
        }
        let (r, rt) = if lt.is_stringy() && self.dialect.is_legacy() {
            // 2.x compared a string with anything written as a string.
            (self.stringify(right), Type::String)
        } else {
            self.expr(right, Some(hint))
        };
        let cmp = match op {
            "==" => Cmp::Eq,
            "!=" => Cmp::Ne,
            "<" => Cmp::Lt,
            ">" => Cmp::Gt,
            "<=" => Cmp::Le,
            _ => Cmp::Ge,
        };
        let ordered = !matches!(cmp, Cmp::Eq | Cmp::Ne);
        let norm = |t: Type| if t == Type::Header { Type::String } else { t };
        let (lt, rt) = (norm(lt), norm(rt));
        if lt == Type::Error || rt == Type::Error {
            return (Expr::Bool(false), Type::Bool);
        }
        let kind = match (lt, rt) {
            (a, b) if a == b => a,
            (Type::Int, Type::Real) | (Type::Real, Type::Int) => Type::Real,
            _ => {
                self.error(
                    pos,
                    format!("Comparison of different types: {lt} '{op}' {rt}"),
                );
                return bad();
            }
        };
        let ok = match kind {
            Type::String | Type::Int | Type::Real | Type::Duration | Type::Time | Type::Bytes => {
                true
            }
            Type::Bool | Type::Ip | Type::Backend => !ordered,
            _ => false,
        };
        if !ok {
            self.error(pos, format!("Operator {op} not possible on {kind}"));
            return bad();
        }
        (Expr::Cmp(cmp, kind, Box::new(l), Box::new(r)), Type::Bool)
    }

    fn arith(
        &mut self,
        op: &str,
        left: &ast::Expr,
        right: &ast::Expr,
        pos: Pos,
        hint: Option<Type>,
    ) -> (Expr, Type) {
        let (l, lt) = self.expr(left, hint);
        let lt = if lt == Type::Header { Type::String } else { lt };
        if op == "+" && lt == Type::String {
            let r = self.stringify(right);
            return (concat(l, r), Type::String);
        }
        let rhint = match (op, lt) {
            ("*" | "/", Type::Duration | Type::Bytes) => Some(Type::Real),
            ("+" | "-", Type::Time) => Some(Type::Duration),
            _ => Some(lt),
        };
        let (r, rt) = self.expr(right, rhint);
        let rt = if rt == Type::Header { Type::String } else { rt };
        if lt == Type::Error || rt == Type::Error {
            return (Expr::Bool(false), Type::Error);
        }
        if op == "+" && rt == Type::String && hint == Some(Type::String) && lt.stringifies() {
            // In a string context `obj.hits + "x"` writes the number first.
            return (concat(Expr::Concat(Box::new([l])), r), Type::String);
        }
        use Type::*;
        let result = match (op, lt, rt) {
            ("+" | "-" | "*" | "/" | "%", Int, Int) => Some(Int),
            ("+" | "-" | "*" | "/", Int | Real, Int | Real) => Some(Real),
            ("+" | "-", Duration, Duration) => Some(Duration),
            ("+" | "-", Bytes, Bytes) => Some(Bytes),
            ("+" | "-", Time, Duration) => Some(Time),
            ("-", Time, Time) => Some(Duration),
            ("*" | "/", Duration, Int | Real) => Some(Duration),
            ("*", Int | Real, Duration) => Some(Duration),
            ("/", Duration, Duration) => Some(Real),
            // As Varnish (vcc_expr.c): a size scaled by a number, and the ratio of two sizes.
            ("*" | "/", Bytes, Int | Real) => Some(Bytes),
            ("*", Int | Real, Bytes) => Some(Bytes),
            ("/", Bytes, Bytes) => Some(Real),
            _ => None,
        };
        let Some(result) = result else {
            if op == "+" && hint == Some(String) && lt.stringifies() && rt.stringifies() {
                // In a string context what cannot be added is written side by side.
                return (
                    concat(Expr::Concat(Box::new([l])), Expr::Concat(Box::new([r]))),
                    String,
                );
            }
            if lt == String || rt == String && op != "+" {
                self.error(pos, format!("Operator {op} not possible on type STRING."));
            } else {
                self.error(pos, format!("{lt} {op} {rt} not possible."));
            }
            return bad();
        };
        let a = match op {
            "+" => Arith::Add,
            "-" => Arith::Sub,
            "*" => Arith::Mul,
            "/" => Arith::Div,
            _ => Arith::Rem,
        };
        (Expr::Arith(a, result, Box::new(l), Box::new(r)), result)
    }
}

fn ordered_op(op: &str) -> bool {
    !matches!(op, "==" | "!=")
}

/// `a + b` for strings, flattening concatenations.
fn concat(a: Expr, b: Expr) -> Expr {
    let mut parts: Vec<Expr> = match a {
        Expr::Concat(p) if p.len() > 1 => p.into_vec(),
        other => vec![other],
    };
    match b {
        Expr::Concat(p) if p.len() > 1 => parts.extend(p.into_vec()),
        other => parts.push(other),
    }
    Expr::Concat(parts.into_boxed_slice())
}
