//! Evaluating expressions: variables through the environment, strings borrowed where they can
//! be, operators as compiled (the checker fixed every type); functions are `funcs.rs`'s.

use std::borrow::Cow;
use std::net::SocketAddr;

use super::funcs::{self, Args};
use super::state::Env;
use super::value::{BackendSel, Value};
use crate::vcl::ir::{Arith, Cmp, Expr, Program};
use crate::vcl::types::Type;

/// Evaluates `e`.
pub(super) fn eval<'a>(p: &'a Program, env: &'a dyn Env, e: &'a Expr) -> Result<Value<'a>, String> {
    Ok(match e {
        Expr::Str(t) => Value::Str(Cow::Borrowed(&t.text)),
        Expr::Int(n) => Value::Int(*n),
        Expr::Real(r) => Value::Real(*r),
        Expr::Bool(b) => Value::Bool(*b),
        Expr::Duration(d) => Value::Duration(*d),
        Expr::Bytes(n) => Value::Bytes(*n),
        Expr::Blob(b) => Value::Blob(Cow::Borrowed(b)),
        Expr::Ip(ip) => Value::Ip(SocketAddr::new(*ip, 0)),
        Expr::Backend(t) => Value::Backend(BackendSel {
            target: *t,
            hash: None,
        }),
        Expr::NoBackend => Value::Backend(BackendSel::none()),
        Expr::NoIp => Value::None,
        Expr::Var(v) => env.get(v),
        Expr::Concat(parts) => concat(p, env, parts)?,
        Expr::Arith(op, ty, a, b) => arith(*op, *ty, eval(p, env, a)?, eval(p, env, b)?)?,
        Expr::Neg(a) => match eval(p, env, a)? {
            Value::Int(n) => Value::Int(n.checked_neg().ok_or("integer overflow")?),
            Value::Real(r) => Value::Real(-r),
            Value::Duration(d) => Value::Duration(-d),
            other => other,
        },
        Expr::Cmp(op, ty, a, b) => {
            Value::Bool(compare(*op, *ty, &eval(p, env, a)?, &eval(p, env, b)?, env))
        }
        Expr::Match {
            subject,
            regex,
            negate,
        } => {
            let v = eval(p, env, subject)?;
            let text = v.text(&|t| env.target_name(t));
            // Past the match limit the match fails, as VRT_re_match: `!~` is then true.
            let matched = regex.is_match(&text).unwrap_or_else(|_| {
                env.match_limit_hit();
                false
            });
            Value::Bool(matched != *negate)
        }
        Expr::InAcl { ip, acl, negate } => {
            let inside = match eval(p, env, ip)? {
                Value::Ip(a) => p
                    .acls
                    .get(*acl as usize)
                    .is_some_and(|l| l.contains(a.ip())),
                _ => false,
            };
            Value::Bool(inside != *negate)
        }
        Expr::And(a, b) => Value::Bool(eval(p, env, a)?.truth() && eval(p, env, b)?.truth()),
        Expr::Or(a, b) => Value::Bool(eval(p, env, a)?.truth() || eval(p, env, b)?.truth()),
        Expr::Not(a) => Value::Bool(!eval(p, env, a)?.truth()),
        Expr::Defined(a) => Value::Bool(eval(p, env, a)?.is_set()),
        Expr::Call(f, args) => {
            // Arguments are evaluated when the function reads them (a fallback only when
            // it is needed), through this callback.
            let arg = |i: usize| match args.get(i) {
                Some(e) => eval(p, env, e),
                None => Ok(Value::None),
            };
            funcs::call(f, &Args::new(env, &arg))?
        }
    })
}

/// The text of `e` (unset is "").
pub(super) fn text<'a>(
    p: &'a Program,
    env: &'a dyn Env,
    e: &'a Expr,
) -> Result<Cow<'a, str>, String> {
    Ok(eval(p, env, e)?.text(&|t| env.target_name(t)))
}

fn concat<'a>(p: &'a Program, env: &'a dyn Env, parts: &'a [Expr]) -> Result<Value<'a>, String> {
    if let [one] = parts {
        // A conversion to string: a string stays as it is (borrowed).
        return Ok(match eval(p, env, one)? {
            v @ (Value::Str(_) | Value::None) => v,
            other => {
                in_string_range(&other)?;
                Value::Str(other.text(&|t| env.target_name(t)))
            }
        });
    }
    let mut out = String::new();
    for part in parts {
        let v = eval(p, env, part)?;
        in_string_range(&v)?;
        v.write_to(&mut out, &|t| env.target_name(t));
    }
    Ok(Value::Str(Cow::Owned(out)))
}

/// The largest INT (BYTES) and REAL (DURATION) VCL writes as a string: RFC 8941's
/// sf-integer (15 digits) and sf-decimal (12 integer digits, 3 decimals), Varnish's
/// `VRT_INTEGER_MAX` and `VRT_DECIMAL_MAX`.
const INTEGER_MAX: i64 = 999_999_999_999_999;
const DECIMAL_MAX: f64 = 999_999_999_999.999;

/// A number out of that range fails the subroutine when it becomes a string, as Varnish's
/// `VRT_INT_string` / `VRT_REAL_string` fail it (with their words), rather than writing
/// digits no VCL number holds.
fn in_string_range(v: &Value<'_>) -> Result<(), String> {
    match *v {
        Value::Int(n) if !(-INTEGER_MAX..=INTEGER_MAX).contains(&n) => {
            Err(format!("INT overflow converting to string ({n:X})"))
        }
        Value::Bytes(n) if n > INTEGER_MAX as u64 => {
            Err(format!("INT overflow converting to string ({n:X})"))
        }
        Value::Real(r) | Value::Duration(r) if !r.is_finite() || r.abs() > DECIMAL_MAX => {
            Err(format!("REAL overflow converting to string ({})", c_exp(r)))
        }
        _ => Ok(()),
    }
}

/// `r` as C's `%e` writes it (`1.200000e+12`).
fn c_exp(r: f64) -> String {
    if !r.is_finite() {
        return format!("{r}");
    }
    let text = format!("{r:.6e}");
    match text.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = e.strip_prefix('-').map_or(("+", e), |d| ("-", d));
            format!("{m}e{sign}{digits:0>2}")
        }
        None => text,
    }
}

fn arith<'a>(op: Arith, ty: Type, a: Value<'a>, b: Value<'a>) -> Result<Value<'a>, String> {
    if ty == Type::Int {
        let (x, y) = (a.int(), b.int());
        let r = match op {
            Arith::Add => x.checked_add(y),
            Arith::Sub => x.checked_sub(y),
            Arith::Mul => x.checked_mul(y),
            Arith::Div => x.checked_div(y),
            Arith::Rem => x.checked_rem(y),
        };
        return r
            .map(Value::Int)
            .ok_or_else(|| "integer overflow or division by zero".to_string());
    }
    if ty == Type::Bytes {
        let r = match op {
            Arith::Add => (a.number() as u64).checked_add(b.number() as u64),
            Arith::Sub => (a.number() as u64).checked_sub(b.number() as u64),
            // A size scaled by a number (BYTES * REAL, REAL * BYTES, BYTES / REAL): a size
            // again, refused when it is negative or past what a size holds (Varnish: "INT
            // overflow").
            _ => {
                let (x, y) = (a.number(), b.number());
                let r = if op == Arith::Mul { x * y } else { x / y };
                (r.is_finite() && (0.0..i64::MAX as f64).contains(&r)).then_some(r as u64)
            }
        };
        return r
            .map(Value::Bytes)
            .ok_or_else(|| "size out of range".to_string());
    }
    let (x, y) = (a.number(), b.number());
    let r = match op {
        Arith::Add => x + y,
        Arith::Sub => x - y,
        Arith::Mul => x * y,
        Arith::Div => {
            if y == 0.0 {
                return Err("division by zero".to_string());
            }
            x / y
        }
        Arith::Rem => x % y,
    };
    Ok(match ty {
        Type::Duration => Value::Duration(r),
        Type::Time => Value::Time(r),
        _ => Value::Real(r),
    })
}

fn compare(op: Cmp, ty: Type, a: &Value<'_>, b: &Value<'_>, env: &dyn Env) -> bool {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match ty {
        Type::String | Type::Header => {
            // As Varnish's VRT_strcmp: an unset string equals nothing.
            if matches!(a, Value::None) || matches!(b, Value::None) {
                return op == Cmp::Ne;
            }
            let names = |t| env.target_name(t);
            Some(a.text(&names).cmp(&b.text(&names)))
        }
        Type::Int => Some(a.int().cmp(&b.int())),
        Type::Bool => Some(a.truth().cmp(&b.truth())),
        Type::Ip => match (a, b) {
            (Value::Ip(x), Value::Ip(y)) => Some(x.ip().to_canonical().cmp(&y.ip().to_canonical())),
            _ => None,
        },
        Type::Backend => match (a, b) {
            (Value::Backend(x), Value::Backend(y)) => Some(x.target.cmp(&y.target)),
            _ => None,
        },
        _ => a.number().partial_cmp(&b.number()),
    };
    match (op, ord) {
        (Cmp::Eq, Some(o)) => o == Ordering::Equal,
        (Cmp::Ne, Some(o)) => o != Ordering::Equal,
        (Cmp::Ne, None) => true,
        (Cmp::Lt, Some(o)) => o == Ordering::Less,
        (Cmp::Gt, Some(o)) => o == Ordering::Greater,
        (Cmp::Le, Some(o)) => o != Ordering::Greater,
        (Cmp::Ge, Some(o)) => o != Ordering::Less,
        _ => false,
    }
}
