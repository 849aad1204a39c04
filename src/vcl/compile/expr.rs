//! Expressions: names resolved through the variable table, types checked and converted as
//! vcc does (`STRING + INT` concatenates, `DURATION + INT` is an error, a STRING or BACKEND
//! used as a condition tests whether it is set).

use super::super::ast::{self, Pos};
use super::super::ir::{Cmp, Expr, Func, Text};
use super::super::types::Type;
use super::super::vars::{self, Slot};
use super::Checker;
use super::consts::{duration_unit, size_unit};
use super::names::Access;

fn bad() -> (Expr, Type) {
    (Expr::Bool(false), Type::Error)
}

impl Checker<'_> {
    /// An expression of any type; `hint` says what the context wants (a number with unit `m`
    /// is minutes unless BYTES are wanted).
    pub(super) fn expr(&mut self, e: &ast::Expr, hint: Option<Type>) -> (Expr, Type) {
        match e {
            ast::Expr::Str(s, pos) if self.dialect.is_legacy() && s.contains('%') => {
                match percent_decode(s) {
                    Ok(decoded) => (Expr::Str(Text::new(&decoded)), Type::String),
                    Err(msg) => {
                        self.error(*pos, msg);
                        bad()
                    }
                }
            }
            ast::Expr::Str(s, _) => (Expr::Str(Text::new(s)), Type::String),
            ast::Expr::Number(n, pos) => self.number(n, *pos),
            ast::Expr::Quantity(n, u, pos) => {
                let value: f64 = n.parse().unwrap_or(0.0);
                let dur = duration_unit(u);
                let size = size_unit(u);
                match (hint, dur, size) {
                    (Some(Type::Bytes), _, Some(f)) | (_, None, Some(f)) => {
                        (Expr::Bytes((value * f) as u64), Type::Bytes)
                    }
                    (_, Some(f), _) => (Expr::Duration(value * f), Type::Duration),
                    _ => {
                        self.error(*pos, format!("Unknown unit '{u}'"));
                        bad()
                    }
                }
            }
            ast::Expr::Blob(text, pos) => match crate::http::base64::decode_base64(text) {
                Some(bytes) => (Expr::Blob(bytes.into_boxed_slice()), Type::Blob),
                None => {
                    self.error(*pos, "a BLOB literal is standard base64 between colons");
                    bad()
                }
            },
            ast::Expr::Name(n, pos) => self.name(n, *pos),
            ast::Expr::Call { func, args, pos } => self.call(func, args, *pos),
            ast::Expr::Method {
                on,
                method,
                args,
                pos,
            } => {
                let (e, ty) = self.expr(on, None);
                match (method.as_str(), ty) {
                    (_, Type::Error) => bad(),
                    ("upper" | "lower", t) if t.is_stringy() && args.is_empty() => {
                        let f = if method == "upper" {
                            Func::StdToUpper
                        } else {
                            Func::StdToLower
                        };
                        (Expr::Call(f, Box::new([e])), Type::String)
                    }
                    (_, t) => {
                        self.error(*pos, format!("Unknown property '{method}' for type {t}"));
                        bad()
                    }
                }
            }
            ast::Expr::Unary { op: "!", expr, .. } => {
                let inner = self.cond(expr);
                (Expr::Not(Box::new(inner)), Type::Bool)
            }
            ast::Expr::Unary { expr, pos, .. } => {
                let (inner, ty) = self.expr(expr, hint);
                match ty {
                    Type::Int | Type::Real | Type::Duration | Type::Error => {
                        (Expr::Neg(Box::new(inner)), ty)
                    }
                    other => {
                        self.error(*pos, format!("Operator - not possible on type {other}."));
                        bad()
                    }
                }
            }
            ast::Expr::Concat { parts, .. } => {
                let mut out = Vec::with_capacity(parts.len());
                for p in parts {
                    out.push(self.stringify(p));
                }
                (Expr::Concat(out.into_boxed_slice()), Type::String)
            }
            ast::Expr::Binary {
                op,
                left,
                right,
                pos,
            } => self.binary(op, left, right, *pos, hint),
        }
    }

    /// A number literal, with vcc's limits on digits.
    fn number(&mut self, n: &str, pos: Pos) -> (Expr, Type) {
        match n.split_once('.') {
            None => {
                if n.len() > 15 {
                    self.error(pos, format!("Too many digits for integer: {n}"));
                    return bad();
                }
                (Expr::Int(n.parse().unwrap_or(0)), Type::Int)
            }
            Some((whole, frac)) => {
                if whole.len() > 12 || frac.len() > 3 {
                    self.error(pos, format!("Too many digits for real: {n}"));
                    return bad();
                }
                (Expr::Real(n.parse().unwrap_or(0.0)), Type::Real)
            }
        }
    }

    /// A bare name as a value.
    fn name(&mut self, n: &str, pos: Pos) -> (Expr, Type) {
        match n {
            "true" => return (Expr::Bool(true), Type::Bool),
            "false" => return (Expr::Bool(false), Type::Bool),
            _ => {}
        }
        if let Some((var, ty)) = self.variable(n, pos, Access::Read) {
            if let Slot::Fixed(v, _) = var.slot {
                return (Expr::Bool(v), ty);
            }
            return (Expr::Var(var), ty);
        }
        if let Some(i) = self.targets.iter().position(|t| t.name == n) {
            self.targets[i].used = true;
            if self.targets[i].none {
                return (Expr::NoBackend, Type::Backend);
            }
            return (Expr::Backend(i as u16), Type::Backend);
        }
        if self.acls.contains_key(n) {
            self.error(
                pos,
                format!("Symbol '{n}' is an ACL: it can only be used as in 'client.ip ~ {n}'"),
            );
            return bad();
        }
        if self.probes.contains_key(n) {
            self.error(
                pos,
                format!("Symbol '{n}' is a probe: only a backend's .probe may name it"),
            );
            return bad();
        }
        if self.subs.contains_key(n) || n.starts_with("vcl_") {
            if n.starts_with("vcl_") && !self.subs.contains_key(n) {
                self.error(pos, format!("Symbols named 'vcl_*' are reserved: '{n}'"));
            } else {
                self.error(
                    pos,
                    format!("Symbol '{n}' can only be used as a SUB expression"),
                );
            }
            return bad();
        }
        if self.objects.contains_key(n) {
            self.error(
                pos,
                format!("Symbol '{n}' is a director object: use {n}.backend() for its backend"),
            );
            return bad();
        }
        let others = vars::other_dialects(n);
        if others.is_empty() {
            self.error(pos, format!("Symbol not found: '{n}'"));
        } else {
            let msg = self.other_dialect_symbol(n, &others);
            self.error(pos, msg);
        }
        bad()
    }

    /// An expression made to be of type `to` (converted where VCL converts).
    pub(super) fn expr_as(&mut self, e: &ast::Expr, to: Type) -> Expr {
        let hint = match to {
            Type::Header | Type::Body => Type::String,
            t => t,
        };
        if matches!(to, Type::String | Type::Header | Type::Body) {
            return self.stringify(e);
        }
        let (expr, ty) = self.expr(e, Some(hint));
        self.coerce(expr, ty, to, e.pos())
    }

    /// `expr` (of type `from`) as `to`, or an error.
    pub(super) fn coerce(&mut self, expr: Expr, from: Type, to: Type, pos: Pos) -> Expr {
        if from == Type::Error || from == to {
            return expr;
        }
        match (from, to) {
            (Type::Int, Type::Real) => match expr {
                Expr::Int(n) => Expr::Real(n as f64),
                e => e,
            },
            (Type::Header, Type::String) | (Type::String, Type::Header) => expr,
            (f, Type::String | Type::Header | Type::Body) if f.stringifies() => {
                Expr::Concat(Box::new([expr]))
            }
            (Type::Bool, Type::Bool) => expr,
            // A string constant where an IP is expected is an IP constant, resolved when
            // the VCL is compiled, as vcc does (`std.ip(req.http.X-Real-IP, "0.0.0.0")`).
            (Type::String, Type::Ip) if matches!(expr, Expr::Str(_)) => {
                let Expr::Str(text) = &expr else {
                    return expr;
                };
                self.ip_constant(&text.text, pos)
            }
            _ => {
                self.error(pos, format!("Expression has type {from}, expected {to}"));
                Expr::Bool(false)
            }
        }
    }

    /// A string constant read as an IP: an address, or a name that resolves to exactly one
    /// (vcc's "IP constant").
    fn ip_constant(&mut self, text: &str, pos: Pos) -> Expr {
        let literal = text.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<std::net::IpAddr>() {
            return Expr::Ip(ip);
        }
        if text.starts_with('/') {
            self.error(pos, format!("Cannot convert to an IP address: \"{text}\""));
            return Expr::Bool(false);
        }
        match super::acl::resolve(text).as_deref() {
            Some([ip]) => Expr::Ip(*ip),
            Some(many) => {
                self.error(
                    pos,
                    format!(
                        "IP constant \"{text}\" resolves to {} addresses; it must be one",
                        many.len()
                    ),
                );
                Expr::Bool(false)
            }
            None => {
                self.error(
                    pos,
                    format!("IP constant \"{text}\": not an address, and no name resolves"),
                );
                Expr::Bool(false)
            }
        }
    }

    /// An expression as a string: strings as they are, other values written as Varnish
    /// writes them. In 2.x a number literal is not a string (`set req.url = 1;`).
    pub(super) fn stringify(&mut self, e: &ast::Expr) -> Expr {
        if self.dialect.is_legacy()
            && let ast::Expr::Number(n, pos) | ast::Expr::Quantity(n, _, pos) = e
        {
            self.error(*pos, format!("Expected a string, found the number {n}"));
            return Expr::Bool(false);
        }
        if let ast::Expr::Name(n, _) = e
            && let Some(a) = self.acls.get_mut(n)
        {
            // An ACL is written as its name.
            a.used = true;
            return Expr::Str(Text::new(n));
        }
        let (expr, ty) = self.expr(e, Some(Type::String));
        match ty {
            Type::String | Type::Header | Type::Error => expr,
            t if t.stringifies() => Expr::Concat(Box::new([expr])),
            t => {
                self.error(e.pos(), format!("Expression has type {t}, expected STRING"));
                Expr::Bool(false)
            }
        }
    }

    /// An expression as a condition: BOOL, or a STRING / HEADER / BACKEND (set or not).
    pub(super) fn cond(&mut self, e: &ast::Expr) -> Expr {
        let (expr, ty) = self.expr(e, Some(Type::Bool));
        match ty {
            Type::Bool | Type::Error => expr,
            Type::String | Type::Header | Type::Backend => Expr::Defined(Box::new(expr)),
            // A number is true when it is not zero.
            Type::Int => Expr::Cmp(Cmp::Ne, Type::Int, Box::new(expr), Box::new(Expr::Int(0))),
            Type::Real => Expr::Cmp(
                Cmp::Ne,
                Type::Real,
                Box::new(expr),
                Box::new(Expr::Real(0.0)),
            ),
            Type::Duration => Expr::Cmp(
                Cmp::Ne,
                Type::Duration,
                Box::new(expr),
                Box::new(Expr::Duration(0.0)),
            ),
            t => {
                self.error(e.pos(), format!("Expression has type {t}, expected BOOL"));
                Expr::Bool(false)
            }
        }
    }
}

/// 2.x string literals: `%XX` is the byte XX (a printable one).
fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()));
            let Some(hex) = hex else {
                return Err(format!(
                    "Invalid hex escape in \"{s}\" (VCL 2.x reads %XX as a byte)"
                ));
            };
            let byte = u8::from_str_radix(hex, 16).unwrap_or(0);
            if !(0x20..0x7f).contains(&byte) {
                return Err(format!(
                    "the escape %{hex} in \"{s}\" is not a printable character"
                ));
            }
            out.push(byte);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("\"{s}\" is not text after its escapes"))
}
