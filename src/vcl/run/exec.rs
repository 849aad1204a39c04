//! Executing statements: `set` (skipped when the value is already there), `unset`, `if`,
//! `call`, `return`, and the functions called for their effect (`hash_data`, `ban`,
//! `synthetic`, `std.log`, the cookie jar).

use std::borrow::Cow;

use super::eval::{eval, text};
use super::state::{Env, Verdict};
use super::value::Value;
use crate::vcl::ir::{Action, Expr, Func, Program, SetOp, Stmt};

/// How a statement ended.
pub(super) enum Flow {
    Next,
    Return(Verdict),
    /// A bare `return;`: back to the caller.
    Leave,
}

pub(super) fn block(p: &Program, body: &[Stmt], env: &mut dyn Env) -> Result<Flow, String> {
    for s in body {
        match stmt(p, s, env)? {
            Flow::Next => {}
            other => return Ok(other),
        }
    }
    Ok(Flow::Next)
}

/// Why a dry run stops.
const READ_ONLY: &str = "read-only";

fn stmt(p: &Program, s: &Stmt, env: &mut dyn Env) -> Result<Flow, String> {
    // A dry run goes on past what changes nothing (a `set` to the value already there, an
    // `unset` of what is not there) and stops at anything else that would.
    if env.read_only() && matches!(s, Stmt::Effect(..)) {
        return Err(READ_ONLY.to_string());
    }
    match s {
        Stmt::Set { var, op, value, .. } => {
            set(p, env, var, *op, value)?;
            Ok(Flow::Next)
        }
        Stmt::Unset { var, .. } => {
            if env.read_only() {
                if !matches!(env.get(var), Value::None) {
                    return Err(READ_ONLY.to_string());
                }
                return Ok(Flow::Next);
            }
            env.unset(var)?;
            Ok(Flow::Next)
        }
        Stmt::If {
            branches,
            otherwise,
        } => {
            for (cond, body) in branches.iter() {
                if eval(p, &*env, cond)?.truth() {
                    return block(p, body, env);
                }
            }
            block(p, otherwise, env)
        }
        Stmt::Call(i) => match p.subs.get(*i) {
            Some(sub) => match block(p, &sub.body, env)? {
                Flow::Leave => Ok(Flow::Next),
                other => Ok(other),
            },
            None => Ok(Flow::Next),
        },
        Stmt::Return(action, _) => Ok(Flow::Return(verdict(p, env, action)?)),
        Stmt::Leave => Ok(Flow::Leave),
        Stmt::Effect(f, args, _) => {
            effect(p, env, f, args)?;
            Ok(Flow::Next)
        }
    }
}

fn verdict(p: &Program, env: &mut dyn Env, a: &Action) -> Result<Verdict, String> {
    Ok(match a {
        Action::Hash => Verdict::Hash,
        Action::Lookup => Verdict::Lookup,
        Action::Pass => Verdict::Pass,
        Action::Pipe => Verdict::Pipe,
        Action::Deliver => Verdict::Deliver,
        Action::Fetch => Verdict::Fetch,
        Action::Restart => Verdict::Restart,
        Action::Retry => Verdict::Retry,
        Action::Miss => Verdict::Miss,
        Action::Purge => Verdict::Purge,
        Action::Abandon => Verdict::Abandon,
        Action::Fail => Verdict::Fail("return (fail)".to_string()),
        Action::Ok => Verdict::Ok,
        Action::HitForPass => Verdict::HitForPass,
        Action::PassFor(d) => Verdict::PassFor(eval(p, &*env, d)?.number()),
        Action::Synth(status, reason) => {
            let status = match status {
                Some(e) => eval(p, &*env, e)?.int(),
                None => 503,
            };
            let reason = match reason {
                Some(e) => Some(text(p, &*env, e)?.into_owned()),
                None => None,
            };
            // Varnish keeps up to 65535 (VCL's own signalling above the last three digits:
            // vcl_synth sees `synth(22301)` as 22301) and sends it modulo 1000; a status
            // whose last three digits are no HTTP status fails.
            let status = u16::try_from(status)
                .unwrap_or_else(|_| u16::try_from(status.rem_euclid(1000)).unwrap_or(503));
            if !(100..=999).contains(&(status % 1000)) {
                return Err(format!("synth status {status} is not an HTTP status"));
            }
            Verdict::Synth(status, reason)
        }
    })
}

fn set(
    p: &Program,
    env: &mut dyn Env,
    var: &crate::vcl::ir::Var,
    op: SetOp,
    value: &Expr,
) -> Result<(), String> {
    if op == SetOp::Assign {
        // A header set to a constant: its ready value, unless already so.
        if let (Expr::Str(t), Some(_)) = (value, &var.header)
            && let Some(hv) = &t.header
        {
            if let Value::Str(now) = env.get(var)
                && *now == *t.text
            {
                return Ok(());
            }
            return env.set_header(var, hv.clone());
        }
        let mut new = eval(p, &*env, value)?;
        // 4.x: a header set from an unset one is set, empty (Varnish reads an unset string
        // as "" when it builds the value); 2.x unsets it, as Varnish 2.1 did.
        if var.header.is_some() && matches!(new, Value::None) && !p.dialect.is_legacy() {
            new = Value::Str(Cow::Borrowed(""));
        }
        if same(&env.get(var), &new) && !checked_when_set(var.slot) {
            return Ok(());
        }
        let owned = new.into_owned();
        return env.set(var, owned);
    }
    let current = env.get(var);
    let rhs = eval(p, &*env, value)?;
    let result: Value<'static> = match (current, op) {
        // `+=` on a string appends.
        (Value::Str(_) | Value::None, SetOp::Add)
            if !matches!(rhs, Value::Int(_) | Value::Real(_) | Value::Duration(_))
                || var.header.is_some() =>
        {
            let mut s = String::new();
            env.get(var).write_to(&mut s, &|t| env.target_name(t));
            rhs.write_to(&mut s, &|t| env.target_name(t));
            Value::Str(Cow::Owned(s))
        }
        (Value::Int(n), op) => {
            let r = rhs.int();
            Value::Int(
                match op {
                    SetOp::Add => n.checked_add(r),
                    SetOp::Sub => n.checked_sub(r),
                    SetOp::Mul => n.checked_mul(r),
                    _ => n.checked_div(r),
                }
                .ok_or("integer overflow or division by zero")?,
            )
        }
        (cur, op) => {
            let (x, r) = (cur.number(), rhs.number());
            let v = match op {
                SetOp::Add => x + r,
                SetOp::Sub => x - r,
                SetOp::Mul => x * r,
                _ => {
                    if r == 0.0 {
                        return Err("division by zero".to_string());
                    }
                    x / r
                }
            };
            match cur {
                Value::Duration(_) => Value::Duration(v),
                Value::Time(_) => Value::Time(v),
                Value::Bytes(_) => Value::Bytes(v.max(0.0) as u64),
                _ => Value::Real(v),
            }
        }
    };
    env.set(var, result)
}

/// Whether setting `new` over `current` changes nothing (no allocation is made for it).
/// The variables whose setting is a decision even when it leaves the value as it was
/// (Varnish runs their setters whatever the value): a filter list once set decides, and a
/// `do_esi` / `do_gzip` / `do_gunzip` after it is a VCL error.
fn checked_when_set(slot: crate::vcl::vars::Slot) -> bool {
    use crate::vcl::vars::Slot;
    matches!(
        slot,
        Slot::BerespFilters
            | Slot::RespFilters
            | Slot::RespDoEsi
            | Slot::BerespDoEsi
            | Slot::BerespDoGzip
            | Slot::BerespDoGunzip
    )
}

fn same(current: &Value<'_>, new: &Value<'_>) -> bool {
    match (current, new) {
        (Value::Str(a), Value::Str(b)) => a == b,
        (Value::None, Value::None) => true,
        _ => false,
    }
}

fn effect(p: &Program, env: &mut dyn Env, f: &Func, args: &[Expr]) -> Result<(), String> {
    let arg_text = |env: &dyn Env, i: usize| -> Result<String, String> {
        match args.get(i) {
            Some(e) => Ok(text(p, env, e)?.into_owned()),
            None => Ok(String::new()),
        }
    };
    match f {
        Func::HashData => {
            let part = match args.first() {
                Some(e) => text(p, &*env, e)?.into_owned(),
                None => String::new(),
            };
            let state = env.state_mut();
            state.hash.push_str(&part);
            state.hash.push('\0');
        }
        Func::Ban | Func::StdBan => {
            // An unset argument is Varnish's NULL ("Null argument"), not "".
            let expr = match args.first() {
                Some(e) => match eval(p, &*env, e)? {
                    Value::None => None,
                    v => Some(v.text(&|t| env.target_name(t)).into_owned()),
                },
                None => None,
            };
            env.vcl_ban(expr.as_deref());
        }
        Func::BanUrl => {
            let re = arg_text(&*env, 0)?;
            let expr = format!("req.url ~ {re}");
            if let Err(e) = env.ban(&expr) {
                env.log(&format!("ban(\"{expr}\") refused: {e}"));
            }
        }
        Func::Synthetic => {
            let body = arg_text(&*env, 0)?;
            env.state_mut().body = Some(body);
        }
        Func::StdLog => {
            let msg = arg_text(&*env, 0)?;
            env.log(&msg);
        }
        Func::StdSyslog => {
            let msg = arg_text(&*env, 1)?;
            env.log(&msg);
        }
        Func::StdCollect(var, sep) => env.collect(var, &sep.text),
        Func::StdTimestamp => {}
        Func::Rollback => env.rollback(),
        Func::CookieParse => {
            let h = arg_text(&*env, 0)?;
            env.state_mut().cookies.parse(&h);
        }
        Func::CookieSet => {
            let (n, v) = (arg_text(&*env, 0)?, arg_text(&*env, 1)?);
            env.state_mut().cookies.set(&n, &v);
        }
        Func::CookieDelete => {
            let n = arg_text(&*env, 0)?;
            env.state_mut().cookies.delete(&n);
        }
        Func::CookieFilter => {
            let n = arg_text(&*env, 0)?;
            env.state_mut().cookies.filter(&n);
        }
        Func::CookieKeep => {
            let n = arg_text(&*env, 0)?;
            env.state_mut().cookies.keep(&n);
        }
        Func::CookieFilterRe(re) => {
            let limited = env.state_mut().cookies.filter_re(re);
            (0..limited).for_each(|_| env.match_limit_hit());
        }
        Func::CookieKeepRe(re) => {
            let limited = env.state_mut().cookies.keep_re(re);
            (0..limited).for_each(|_| env.match_limit_hit());
        }
        Func::CookieClean => env.state_mut().cookies.clean(),
        // A function that returns a value, called for its effect (none).
        _ => {
            eval(
                p,
                &*env,
                &Expr::Call(f.clone(), args.to_vec().into_boxed_slice()),
            )?;
        }
    }
    Ok(())
}
