//! Evaluating expressions: variables through the environment, strings borrowed where they can
//! be, operators as compiled (the checker fixed every type), built-in and VMOD functions.

use std::borrow::Cow;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};

use super::value::{BackendSel, Value, epoch};
use super::{Env, SoftPurge};
use crate::vcl::ir::{Arith, Cmp, Expr, Func, Program};
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
        Expr::Call(f, args) => call(p, env, f, args)?,
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
            other => Value::Str(other.text(&|t| env.target_name(t))),
        });
    }
    let mut out = String::new();
    for part in parts {
        eval(p, env, part)?.write_to(&mut out, &|t| env.target_name(t));
    }
    Ok(Value::Str(Cow::Owned(out)))
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
        let (x, y) = (a.number() as u64, b.number() as u64);
        let r = match op {
            Arith::Add => x.checked_add(y),
            _ => x.checked_sub(y),
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

/// A value-returning function.
fn call<'a>(
    p: &'a Program,
    env: &'a dyn Env,
    f: &'a Func,
    args: &'a [Expr],
) -> Result<Value<'a>, String> {
    let arg = |i: usize| -> Result<Value<'a>, String> {
        match args.get(i) {
            Some(e) => eval(p, env, e),
            None => Ok(Value::None),
        }
    };
    let text_arg =
        |i: usize| -> Result<Cow<'a, str>, String> { Ok(arg(i)?.text(&|t| env.target_name(t))) };
    Ok(match f {
        Func::Regsub(re) | Func::Regsuball(re) => {
            let subject = text_arg(0)?;
            let with = text_arg(1)?;
            let all = matches!(f, Func::Regsuball(_));
            // Past the match limit the subject is left as it is, as VRT_regsub.
            let replaced: Cow<'a, str> = match subject {
                Cow::Borrowed(s) => re.replace(s, with.as_ref(), all).unwrap_or_else(|_| {
                    env.match_limit_hit();
                    Cow::Borrowed(s)
                }),
                Cow::Owned(s) => Cow::Owned(match re.replace(&s, with.as_ref(), all) {
                    Ok(r) => r.into_owned(),
                    Err(_) => {
                        env.match_limit_hit();
                        s
                    }
                }),
            };
            Value::Str(replaced)
        }
        Func::Replacement => Value::Str(Cow::Owned(crate::vcl::replacement(&text_arg(0)?))),
        Func::StdToLower => {
            let s = text_arg(0)?;
            if s.bytes().any(|b| b.is_ascii_uppercase()) || !s.is_ascii() {
                Value::Str(Cow::Owned(s.to_lowercase()))
            } else {
                Value::Str(s)
            }
        }
        Func::StdToUpper => {
            let s = text_arg(0)?;
            if s.bytes().any(|b| b.is_ascii_lowercase()) || !s.is_ascii() {
                Value::Str(Cow::Owned(s.to_uppercase()))
            } else {
                Value::Str(s)
            }
        }
        Func::StdIp => {
            let s = text_arg(0)?;
            // An address without a port takes `p` (default "80"), as vmod_std's does: what
            // `std.port()` reads back.
            let with_port = parse_ip(&s).and_then(|ip| {
                if s.trim().parse::<IpAddr>().is_err() {
                    return Some(ip);
                }
                let p = text_arg(3).ok()?;
                let port = match p.trim() {
                    "" => Some(80),
                    "http" => Some(80),
                    "https" => Some(443),
                    n => n.parse::<u16>().ok(),
                }?;
                Some(SocketAddr::new(ip.ip(), port))
            });
            match with_port {
                Some(ip) => Value::Ip(ip),
                None => match arg(1)? {
                    v @ Value::Ip(_) => v,
                    _ => {
                        return Err(format!(
                            "std.ip(\"{s}\"): not an IP address and no fallback"
                        ));
                    }
                },
            }
        }
        Func::StdHealthy => match arg(0)? {
            Value::Backend(b) => Value::Bool(env.healthy(b)),
            _ => Value::Bool(false),
        },
        Func::StdQuerySort => Value::Str(querysort(text_arg(0)?)),
        // As getenv(3) in varnishd: read at the call, unset when there is none (a value
        // that is not UTF-8 reads with U+FFFD for its stray bytes).
        Func::StdRound => Value::Real(arg(0)?.number().round()),
        Func::StdReal2Integer | Func::StdTime2Integer => {
            // vmod_std's VCL_INT_MAX: integers stay exact through the double they come from.
            const MAX: f64 = ((1u64 << 53) - 1) as f64;
            let r = arg(0)?.number().round();
            if r.is_finite() && (-MAX..=MAX).contains(&r) {
                Value::Int(r as i64)
            } else {
                Value::Int(arg(1)?.int())
            }
        }
        Func::StdReal2Time => match arg(0)?.number() {
            r if r.is_finite() => Value::Time(r),
            _ => Value::Time(arg(1)?.number()),
        },
        Func::StdTime2Real => match arg(0)?.number() {
            t if t.is_finite() => Value::Real(t),
            _ => Value::Real(arg(1)?.number()),
        },
        // A name no variable can have (empty, with `=` or NUL — it may come from a request)
        // is never looked up: it is unset.
        Func::StdGetenv => {
            let name = text_arg(0)?;
            match (!name.is_empty() && !name.contains(['=', '\0']))
                .then(|| std::env::var_os(&*name))
                .flatten()
            {
                Some(v) => Value::Str(Cow::Owned(v.to_string_lossy().into_owned())),
                None => Value::None,
            }
        }
        Func::StdDuration => match parse_duration(&text_arg(0)?) {
            Some(d) => Value::Duration(d),
            None => Value::Duration(arg(1)?.number()),
        },
        Func::StdInteger => match text_arg(0)?.trim().parse::<i64>() {
            Ok(n) => Value::Int(n),
            Err(_) => Value::Int(arg(1)?.int()),
        },
        Func::StdReal => match text_arg(0)?.trim().parse::<f64>() {
            Ok(r) if r.is_finite() => Value::Real(r),
            _ => Value::Real(arg(1)?.number()),
        },
        Func::StdTime => {
            let s = text_arg(0)?;
            match httpdate::parse_http_date(s.trim())
                .ok()
                .map(epoch)
                .or_else(|| s.trim().parse::<f64>().ok().filter(|t| t.is_finite()))
            {
                Some(t) => Value::Time(t),
                None => Value::Time(arg(1)?.number()),
            }
        }
        Func::FileRead(t) => Value::Str(Cow::Borrowed(&t.text)),
        Func::BlobDecode => {
            let scheme = blob_scheme(&text_arg(0)?)?;
            let length = arg(1)?.int();
            let bytes = crate::vcl::blob::decode(scheme, &text_arg(2)?, length)
                .map_err(|e| format!("blob.decode(): {e}"))?;
            Value::Blob(Cow::Owned(bytes))
        }
        Func::BlobEncode => {
            let scheme = blob_scheme(&text_arg(0)?)?;
            let bytes = blob_arg(arg(2)?)?;
            let text = crate::vcl::blob::encode(scheme, &text_arg(1)?, &bytes)
                .map_err(|e| format!("blob.encode(): {e}"))?;
            Value::Str(Cow::Owned(text))
        }
        Func::BlobTranscode => {
            let from = blob_scheme(&text_arg(0)?)?;
            let to = blob_scheme(&text_arg(1)?)?;
            let bytes = crate::vcl::blob::decode(from, &text_arg(4)?, arg(3)?.int())
                .map_err(|e| format!("blob.transcode(): {e}"))?;
            let text = crate::vcl::blob::encode(to, &text_arg(2)?, &bytes)
                .map_err(|e| format!("blob.transcode(): {e}"))?;
            Value::Str(Cow::Owned(text))
        }
        Func::BlobEqual => Value::Bool(blob_arg(arg(0)?)? == blob_arg(arg(1)?)?),
        Func::BlobLength => Value::Int(blob_arg(arg(0)?)?.len() as i64),
        Func::BlobSub => {
            let bytes = blob_arg(arg(0)?)?;
            let (length, offset) = (arg(1)?.int(), arg(2)?.int());
            let range = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(length).ok())
                .and_then(|(o, l)| Some(o..o.checked_add(l)?))
                .filter(|r| !bytes.is_empty() && r.end <= bytes.len())
                .ok_or_else(|| {
                    format!(
                        "blob.sub(): {length} bytes at offset {offset} of a {}-byte BLOB",
                        bytes.len()
                    )
                })?;
            Value::Blob(Cow::Owned(bytes[range].to_vec()))
        }
        Func::StdPort => match arg(0)? {
            Value::Ip(a) => Value::Int(i64::from(a.port())),
            _ => Value::Int(0),
        },
        Func::StdStrstr => {
            let (hay, needle) = (text_arg(0)?, text_arg(1)?);
            match hay {
                Cow::Borrowed(h) => h
                    .find(needle.as_ref())
                    .map_or(Value::None, |i| Value::str(&h[i..])),
                Cow::Owned(h) => h
                    .find(needle.as_ref())
                    .map_or(Value::None, |i| Value::Str(Cow::Owned(h[i..].to_string()))),
            }
        }
        Func::StdRandom => {
            let (lo, hi) = (arg(0)?.number(), arg(1)?.number());
            Value::Real(lo + (hi - lo) * random_unit())
        }
        Func::StdNow => Value::Time(epoch(std::time::SystemTime::now())),
        Func::StdBan => Value::Bool(env.ban(&text_arg(0)?).is_ok()),
        Func::StdCacheReqBody(size) => Value::Bool(env.cache_req_body(*size)),
        Func::PurgeHard => Value::Int(env.purge(None) as i64),
        Func::XkeyPurge => Value::Int(env.purge_keys(&text_arg(0)?, false) as i64),
        Func::XkeySoftPurge => Value::Int(env.purge_keys(&text_arg(0)?, true) as i64),
        Func::Throttle(op) => {
            let key = text_arg(0)?;
            let (limit, period, block) = (arg(1)?.int(), arg(2)?.number(), arg(3)?.number());
            env.throttle(*op, &key, limit, period, block)
        }
        Func::PurgeSoft => Value::Int(env.purge(Some(SoftPurge {
            ttl: arg(0)?.number(),
            grace: arg(1)?.number(),
            keep: arg(2)?.number(),
        })) as i64),
        Func::CookieGet => {
            let name = text_arg(0)?;
            match env.state().cookies.get(&name) {
                Some(v) => Value::str(v),
                None => Value::None,
            }
        }
        Func::CookieIsSet => Value::Bool(env.state().cookies.get(&text_arg(0)?).is_some()),
        Func::CookieGetString => Value::Str(Cow::Owned(env.state().cookies.to_header())),
        Func::DirectorBackend(t) => Value::Backend(BackendSel {
            target: *t,
            hash: None,
        }),
        Func::DirectorHash(t) => {
            let key = text_arg(0)?;
            let mut h = std::collections::hash_map::DefaultHasher::new();
            key.hash(&mut h);
            Value::Backend(BackendSel {
                target: *t,
                hash: Some(h.finish()),
            })
        }
        // Functions for their effect only (the checker never makes them values).
        Func::HashData
        | Func::Ban
        | Func::BanUrl
        | Func::Synthetic
        | Func::StdLog
        | Func::StdSyslog
        | Func::StdCollect(..)
        | Func::StdTimestamp
        | Func::CookieParse
        | Func::CookieSet
        | Func::CookieDelete
        | Func::CookieFilter
        | Func::CookieKeep
        | Func::CookieFilterRe(_)
        | Func::CookieKeepRe(_)
        | Func::CookieClean
        | Func::Rollback => Value::None,
    })
}

/// An address in text (`10.0.0.1`, `::1`, `10.0.0.1:80`, `[::1]:80`). Names are not
/// resolved on the request path.
fn parse_ip(s: &str) -> Option<SocketAddr> {
    let s = s.trim();
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, 0));
    }
    s.parse::<SocketAddr>().ok()
}

/// A duration as `std.duration` reads it: a number and a unit (`10s`, `1.5m`, `100ms`).
fn parse_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let f = crate::vcl::duration_unit(unit.trim())?;
    let d = n * f;
    d.is_finite().then_some(d)
}

/// The query string's parameters sorted by name (stable), as `std.querysort`.
fn querysort(url: Cow<'_, str>) -> Cow<'_, str> {
    let Some((path, query)) = url.split_once('?') else {
        return url;
    };
    let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    if params.len() < 2 && !query.is_empty() && !query.contains('&') {
        return url;
    }
    params.sort_by(|a, b| {
        let ka = a.split('=').next().unwrap_or("");
        let kb = b.split('=').next().unwrap_or("");
        ka.cmp(kb)
    });
    let mut out = String::with_capacity(url.len());
    out.push_str(path);
    if !params.is_empty() {
        out.push('?');
        out.push_str(&params.join("&"));
    }
    Cow::Owned(out)
}

fn random_unit() -> f64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            std::collections::hash_map::RandomState::new().build_hasher().finish() | 1
        );
    }
    let x = STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    });
    (x >> 11) as f64 / (1u64 << 53) as f64
}

use std::hash::BuildHasher;

/// A vmod_blob scheme named by an ENUM argument (checked when the VCL was compiled).
fn blob_scheme(name: &str) -> Result<crate::vcl::blob::Scheme, String> {
    crate::vcl::blob::Scheme::by_name(name).ok_or_else(|| format!("unknown encoding {name}"))
}

/// A BLOB argument's bytes (an unset one, such as `req.hash` before vcl_hash, is empty).
fn blob_arg(v: Value<'_>) -> Result<Vec<u8>, String> {
    match v {
        Value::Blob(b) => Ok(b.into_owned()),
        Value::None => Ok(Vec::new()),
        other => Err(format!("expected a BLOB, got {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn querysort_sorts_by_name() {
        assert_eq!(querysort(Cow::Borrowed("/a?b=2&a=1&c")), "/a?a=1&b=2&c");
        assert_eq!(querysort(Cow::Borrowed("/a")), "/a");
        assert_eq!(querysort(Cow::Borrowed("/a?x=1")), "/a?x=1");
    }

    #[test]
    fn durations_and_addresses() {
        assert_eq!(parse_duration("10s"), Some(10.0));
        assert_eq!(parse_duration("1.5m"), Some(90.0));
        assert_eq!(parse_duration("100ms"), Some(0.1));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_ip("10.0.0.1").map(|a| a.port()), Some(0));
        assert_eq!(parse_ip("[::1]:80").map(|a| a.port()), Some(80));
        assert!(parse_ip("example.com").is_none());
    }
}
