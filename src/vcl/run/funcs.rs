//! Built-in and VMOD functions that return a value (`std.*`, `regsub`, `blob.*`, `cookie.*`,
//! `purge.*`, `xkey.*`, directors' `.backend()`), each reading its arguments only when it
//! needs them.

use std::borrow::Cow;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::{IpAddr, SocketAddr};

use super::state::{Env, SoftPurge};
use super::value::{BackendSel, Value, epoch};
use crate::vcl::ir::Func;
use crate::vcl::pcre::Pattern;

/// A call's arguments, evaluated when read (the evaluator's callback: a fallback argument is
/// only evaluated when it is used).
pub(super) struct Args<'a, 'f> {
    env: &'a dyn Env,
    eval: &'f dyn Fn(usize) -> Result<Value<'a>, String>,
}

impl<'a, 'f> Args<'a, 'f> {
    pub(super) fn new(
        env: &'a dyn Env,
        eval: &'f dyn Fn(usize) -> Result<Value<'a>, String>,
    ) -> Self {
        Args { env, eval }
    }

    /// Argument `i` (unset when the call has fewer).
    fn get(&self, i: usize) -> Result<Value<'a>, String> {
        (self.eval)(i)
    }

    /// Argument `i` as text.
    fn text(&self, i: usize) -> Result<Cow<'a, str>, String> {
        Ok(self.get(i)?.text(&|t| self.env.target_name(t)))
    }
}

/// A value-returning function.
pub(super) fn call<'a>(f: &'a Func, a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    let env = a.env;
    Ok(match f {
        Func::Regsub(re) => regsub(re, false, a)?,
        Func::Regsuball(re) => regsub(re, true, a)?,
        Func::Replacement => Value::Str(Cow::Owned(crate::vcl::replacement(&a.text(0)?))),
        Func::StdToLower => Value::Str(to_case(a.text(0)?, false)),
        Func::StdToUpper => Value::Str(to_case(a.text(0)?, true)),
        Func::StdIp => std_ip(a)?,
        Func::StdHealthy => Value::Bool(matches!(a.get(0)?, Value::Backend(b) if env.healthy(b))),
        Func::StdQuerySort => Value::Str(querysort(a.text(0)?)),
        Func::StdRound => Value::Real(a.get(0)?.number().round()),
        Func::StdReal2Integer | Func::StdTime2Integer => to_integer(a)?,
        Func::StdReal2Time => Value::Time(finite_or_fallback(a)?),
        Func::StdTime2Real => Value::Real(finite_or_fallback(a)?),
        Func::StdGetenv => std_getenv(&a.text(0)?),
        Func::StdDuration | Func::StdInteger | Func::StdReal => parsed_or_fallback(f, a)?,
        Func::StdTime => std_time(a)?,
        Func::FileRead(t) => Value::Str(Cow::Borrowed(&t.text)),
        Func::BlobDecode => blob_decode(a)?,
        Func::BlobEncode => blob_encode(a)?,
        Func::BlobTranscode => blob_transcode(a)?,
        Func::BlobEqual => Value::Bool(blob_arg(a.get(0)?)? == blob_arg(a.get(1)?)?),
        Func::BlobLength => Value::Int(blob_arg(a.get(0)?)?.len() as i64),
        Func::BlobSub => blob_sub(a)?,
        Func::StdPort => Value::Int(match a.get(0)? {
            Value::Ip(ip) => i64::from(ip.port()),
            _ => 0,
        }),
        Func::StdStrstr => strstr(a.text(0)?, &a.text(1)?),
        Func::StdRandom => {
            let (lo, hi) = (a.get(0)?.number(), a.get(1)?.number());
            Value::Real(lo + (hi - lo) * random_unit())
        }
        Func::StdNow => Value::Time(epoch(std::time::SystemTime::now())),
        Func::StdBan => Value::Bool(match a.get(0)? {
            Value::None => env.vcl_ban(None),
            v => env.vcl_ban(Some(&v.text(&|t| env.target_name(t)))),
        }),
        Func::StdBanError => Value::Str(Cow::Owned(
            env.state()
                .ban_error
                .lock()
                .map(|e| e.clone())
                .unwrap_or_default(),
        )),
        Func::StdCacheReqBody(size) => Value::Bool(env.cache_req_body(*size)),
        Func::PurgeHard => Value::Int(env.purge(None) as i64),
        Func::XkeyPurge => Value::Int(env.purge_keys(&a.text(0)?, false) as i64),
        Func::XkeySoftPurge => Value::Int(env.purge_keys(&a.text(0)?, true) as i64),
        Func::Throttle(op) => {
            let key = a.text(0)?;
            let (limit, period, block) = (a.get(1)?.int(), a.get(2)?.number(), a.get(3)?.number());
            env.throttle(*op, &key, limit, period, block)
        }
        Func::PurgeSoft => purge_soft(a)?,
        Func::CookieGet => match env.state().cookies.get(&a.text(0)?) {
            Some(v) => Value::str(v),
            None => Value::None,
        },
        Func::CookieIsSet => Value::Bool(env.state().cookies.get(&a.text(0)?).is_some()),
        Func::CookieGetString => Value::Str(Cow::Owned(env.state().cookies.to_header())),
        Func::DirectorBackend(t) => Value::Backend(BackendSel {
            target: *t,
            hash: None,
        }),
        Func::DirectorHash(t) => director_hash(*t, a)?,
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

/// `std.real2time` / `std.time2real`: the first argument when it is a finite number, else the
/// fallback (only then evaluated).
fn finite_or_fallback(a: &Args<'_, '_>) -> Result<f64, String> {
    match a.get(0)?.number() {
        r if r.is_finite() => Ok(r),
        _ => Ok(a.get(1)?.number()),
    }
}

/// `std.duration`, `std.integer`, `std.real`: the first argument's text parsed, else the
/// fallback (only then evaluated).
fn parsed_or_fallback<'a>(f: &Func, a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    let text = a.text(0)?;
    Ok(match f {
        Func::StdDuration => match parse_duration(&text) {
            Some(d) => Value::Duration(d),
            None => Value::Duration(a.get(1)?.number()),
        },
        Func::StdInteger => match text.trim().parse::<i64>() {
            Ok(n) => Value::Int(n),
            Err(_) => Value::Int(a.get(1)?.int()),
        },
        _ => match text.trim().parse::<f64>() {
            Ok(r) if r.is_finite() => Value::Real(r),
            _ => Value::Real(a.get(1)?.number()),
        },
    })
}

/// `purge.soft(ttl, grace, keep)`: the number of objects it reached.
fn purge_soft<'a>(a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    let soft = SoftPurge {
        ttl: a.get(0)?.number(),
        grace: a.get(1)?.number(),
        keep: a.get(2)?.number(),
    };
    Ok(Value::Int(a.env.purge(Some(soft)) as i64))
}

/// A hash director's `.backend(key)`: the director with the key's hash.
fn director_hash<'a>(target: u16, a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    a.text(0)?.hash(&mut h);
    Ok(Value::Backend(BackendSel {
        target,
        hash: Some(h.finish()),
    }))
}

/// `regsub` / `regsuball` (`all`). Past the match limit the subject is left as it is, as
/// VRT_regsub.
fn regsub<'a>(re: &Pattern, all: bool, a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    let subject = a.text(0)?;
    let with = a.text(1)?;
    let replaced: Cow<'a, str> = match subject {
        Cow::Borrowed(s) => re.replace(s, with.as_ref(), all).unwrap_or_else(|_| {
            a.env.match_limit_hit();
            Cow::Borrowed(s)
        }),
        Cow::Owned(s) => Cow::Owned(match re.replace(&s, with.as_ref(), all) {
            Ok(r) => r.into_owned(),
            Err(_) => {
                a.env.match_limit_hit();
                s
            }
        }),
    };
    Ok(Value::Str(replaced))
}

/// `std.tolower` / `std.toupper` (`upper`): borrowed when nothing changes.
fn to_case(s: Cow<'_, str>, upper: bool) -> Cow<'_, str> {
    let changes = if upper {
        s.bytes().any(|b| b.is_ascii_lowercase())
    } else {
        s.bytes().any(|b| b.is_ascii_uppercase())
    };
    match (changes || !s.is_ascii(), upper) {
        (false, _) => s,
        (true, true) => Cow::Owned(s.to_uppercase()),
        (true, false) => Cow::Owned(s.to_lowercase()),
    }
}

/// `std.real2integer` / `std.time2integer`: vmod_std's VCL_INT_MAX, integers stay exact
/// through the double they come from; past it, the fallback.
fn to_integer<'a>(a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    const MAX: f64 = ((1u64 << 53) - 1) as f64;
    let r = a.get(0)?.number().round();
    Ok(if r.is_finite() && (-MAX..=MAX).contains(&r) {
        Value::Int(r as i64)
    } else {
        Value::Int(a.get(1)?.int())
    })
}

/// `std.ip(s, fallback, resolve, p)`. An address without a port takes `p` (default "80"), as
/// vmod_std's does: what `std.port()` reads back.
fn std_ip<'a>(a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    let s = a.text(0)?;
    let with_port = parse_ip(&s).and_then(|ip| {
        if s.trim().parse::<IpAddr>().is_err() {
            return Some(ip);
        }
        let p = a.text(3).ok()?;
        let port = match p.trim() {
            "" => Some(80),
            "http" => Some(80),
            "https" => Some(443),
            n => n.parse::<u16>().ok(),
        }?;
        Some(SocketAddr::new(ip.ip(), port))
    });
    match with_port {
        Some(ip) => Ok(Value::Ip(ip)),
        None => match a.get(1)? {
            v @ Value::Ip(_) => Ok(v),
            _ => Err(format!(
                "std.ip(\"{s}\"): not an IP address and no fallback"
            )),
        },
    }
}

/// `std.getenv(name)`: as getenv(3) in varnishd, read at the call, unset when there is none
/// (a value that is not UTF-8 reads with U+FFFD for its stray bytes). A name no variable can
/// have (empty, with `=` or NUL — it may come from a request) is never looked up: it is unset.
fn std_getenv(name: &str) -> Value<'static> {
    match (!name.is_empty() && !name.contains(['=', '\0']))
        .then(|| std::env::var_os(name))
        .flatten()
    {
        Some(v) => Value::Str(Cow::Owned(v.to_string_lossy().into_owned())),
        None => Value::None,
    }
}

/// `std.time(s, fallback)`: an HTTP date or seconds since the epoch.
fn std_time<'a>(a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    let s = a.text(0)?;
    Ok(
        match httpdate::parse_http_date(s.trim())
            .ok()
            .map(epoch)
            .or_else(|| s.trim().parse::<f64>().ok().filter(|t| t.is_finite()))
        {
            Some(t) => Value::Time(t),
            None => Value::Time(a.get(1)?.number()),
        },
    )
}

/// `std.strstr(hay, needle)`: `hay` from the first `needle` on, unset when there is none.
fn strstr<'a>(hay: Cow<'a, str>, needle: &str) -> Value<'a> {
    match hay {
        Cow::Borrowed(h) => h.find(needle).map_or(Value::None, |i| Value::str(&h[i..])),
        Cow::Owned(h) => h
            .find(needle)
            .map_or(Value::None, |i| Value::Str(Cow::Owned(h[i..].to_string()))),
    }
}

/// `blob.decode(decoding, length, encoded)`.
fn blob_decode<'a>(a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    let scheme = blob_scheme(&a.text(0)?)?;
    let length = a.get(1)?.int();
    let bytes = crate::vcl::blob::decode(scheme, &a.text(2)?, length)
        .map_err(|e| format!("blob.decode(): {e}"))?;
    Ok(Value::Blob(Cow::Owned(bytes)))
}

/// `blob.encode(encoding, case, blob)`.
fn blob_encode<'a>(a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    let scheme = blob_scheme(&a.text(0)?)?;
    let bytes = blob_arg(a.get(2)?)?;
    let text = crate::vcl::blob::encode(scheme, &a.text(1)?, &bytes)
        .map_err(|e| format!("blob.encode(): {e}"))?;
    Ok(Value::Str(Cow::Owned(text)))
}

/// `blob.transcode(decoding, encoding, case, length, encoded)`.
fn blob_transcode<'a>(a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    let from = blob_scheme(&a.text(0)?)?;
    let to = blob_scheme(&a.text(1)?)?;
    let bytes = crate::vcl::blob::decode(from, &a.text(4)?, a.get(3)?.int())
        .map_err(|e| format!("blob.transcode(): {e}"))?;
    let text = crate::vcl::blob::encode(to, &a.text(2)?, &bytes)
        .map_err(|e| format!("blob.transcode(): {e}"))?;
    Ok(Value::Str(Cow::Owned(text)))
}

/// `blob.sub(blob, length, offset)`: an error past the BLOB's end.
fn blob_sub<'a>(a: &Args<'a, '_>) -> Result<Value<'a>, String> {
    let bytes = blob_arg(a.get(0)?)?;
    let (length, offset) = (a.get(1)?.int(), a.get(2)?.int());
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
    Ok(Value::Blob(Cow::Owned(bytes[range].to_vec())))
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
