//! Values at run time, borrowed from the request where they can be (reading `req.url` or a
//! header copies nothing), and written as strings the way Varnish writes them.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A backend value: a target of the program (backend or director) and, for a hash
/// director's `.backend(key)`, the key's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendSel {
    /// Index into `Program::targets`; `NONE` for no backend.
    pub target: u16,
    pub hash: Option<u64>,
}

impl BackendSel {
    pub const NONE: u16 = u16::MAX;

    pub fn none() -> BackendSel {
        BackendSel {
            target: Self::NONE,
            hash: None,
        }
    }
}

/// A value.
#[derive(Debug, Clone)]
pub enum Value<'a> {
    /// An unset string (a header that is not there).
    None,
    Str(Cow<'a, str>),
    Int(i64),
    Real(f64),
    Bool(bool),
    /// Seconds.
    Duration(f64),
    /// Seconds since the Unix epoch.
    Time(f64),
    /// An address (and port: `std.port()`; 0 for an address written in VCL).
    Ip(SocketAddr),
    Backend(BackendSel),
    Bytes(u64),
    /// A BLOB (vmod_blob, `req.hash`): written as `:base64:`.
    Blob(Cow<'a, [u8]>),
}

impl<'a> Value<'a> {
    pub fn str(s: &'a str) -> Value<'a> {
        Value::Str(Cow::Borrowed(s))
    }

    /// The value as a string, for comparisons and concatenation (unset is "").
    /// `names` gives backend names.
    pub fn text(&self, names: &dyn Fn(u16) -> &'a str) -> Cow<'a, str> {
        match self {
            Value::None => Cow::Borrowed(""),
            Value::Str(s) => s.clone(),
            Value::Backend(b) if b.target == BackendSel::NONE => Cow::Borrowed(""),
            Value::Backend(b) => Cow::Borrowed(names(b.target)),
            other => {
                let mut out = String::new();
                other.write_to(&mut out, names);
                Cow::Owned(out)
            }
        }
    }

    /// Appends the value as Varnish writes it.
    pub fn write_to(&self, out: &mut String, names: &dyn Fn(u16) -> &'a str) {
        match self {
            Value::None => {}
            Value::Str(s) => out.push_str(s),
            Value::Int(n) => {
                let _ = write!(out, "{n}");
            }
            Value::Real(r) | Value::Duration(r) => {
                let _ = write!(out, "{r:.3}");
            }
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Time(t) => out.push_str(&http_date(*t)),
            Value::Ip(ip) => {
                let _ = write!(out, "{}", ip.ip().to_canonical());
            }
            Value::Backend(b) if b.target == BackendSel::NONE => {}
            Value::Backend(b) => out.push_str(names(b.target)),
            Value::Bytes(n) => {
                let _ = write!(out, "{n}");
            }
            Value::Blob(b) => out.push_str(&crate::vcl::blob::as_text(b)),
        }
    }

    /// Whether the value is set (a condition on a STRING, HEADER or BACKEND).
    pub fn is_set(&self) -> bool {
        match self {
            Value::None => false,
            Value::Backend(b) => b.target != BackendSel::NONE,
            _ => true,
        }
    }

    /// The value as a number of the numeric types (INT, REAL, DURATION, TIME, BYTES).
    pub fn number(&self) -> f64 {
        match self {
            Value::Int(n) => *n as f64,
            Value::Real(r) | Value::Duration(r) | Value::Time(r) => *r,
            Value::Bytes(n) => *n as f64,
            Value::Bool(b) => f64::from(u8::from(*b)),
            _ => 0.0,
        }
    }

    pub fn int(&self) -> i64 {
        match self {
            Value::Int(n) => *n,
            Value::Bytes(n) => i64::try_from(*n).unwrap_or(i64::MAX),
            other => other.number() as i64,
        }
    }

    pub fn truth(&self) -> bool {
        match self {
            Value::Bool(b) => *b,
            other => other.is_set(),
        }
    }

    /// An owned copy (nothing borrowed from the request).
    pub fn into_owned(self) -> Value<'static> {
        match self {
            Value::None => Value::None,
            Value::Str(s) => Value::Str(Cow::Owned(s.into_owned())),
            Value::Int(n) => Value::Int(n),
            Value::Real(r) => Value::Real(r),
            Value::Bool(b) => Value::Bool(b),
            Value::Duration(d) => Value::Duration(d),
            Value::Time(t) => Value::Time(t),
            Value::Ip(ip) => Value::Ip(ip),
            Value::Backend(b) => Value::Backend(b),
            Value::Bytes(n) => Value::Bytes(n),
            Value::Blob(b) => Value::Blob(Cow::Owned(b.into_owned())),
        }
    }
}

/// Seconds since the epoch of a system time.
pub fn epoch(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// An HTTP date (IMF-fixdate) of seconds since the epoch.
pub fn http_date(t: f64) -> String {
    // Beyond what a date can say (a VCL's `now + 1000000000y`): the largest one that is.
    let t = if t.is_finite() && t > 0.0 {
        t.min(253_402_300_799.0)
    } else {
        0.0
    };
    let d = Duration::try_from_secs_f64(t).unwrap_or(Duration::ZERO);
    httpdate::fmt_http_date(UNIX_EPOCH + d)
}

/// The longest duration VCL's lifetimes and timeouts count with, as Shellac's settings: 10
/// years (`set beresp.ttl = 1000000000y;` is 10 years; no clock arithmetic can overflow).
pub const MAX_DURATION: f64 = 315_360_000.0;

/// A duration of seconds as a std `Duration` (negative and invalid are zero, beyond
/// [`MAX_DURATION`] is that).
pub fn to_duration(secs: f64) -> Duration {
    if secs.is_finite() && secs > 0.0 {
        Duration::from_secs_f64(secs.min(MAX_DURATION))
    } else {
        Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: Value<'_>) -> String {
        v.text(&|_| "b1").into_owned()
    }

    #[test]
    fn written_as_varnish_writes_them() {
        assert_eq!(s(Value::Int(42)), "42");
        assert_eq!(s(Value::Real(1.5)), "1.500");
        assert_eq!(s(Value::Duration(120.0)), "120.000");
        assert_eq!(s(Value::Bool(true)), "true");
        assert_eq!(
            s(Value::Ip("[::ffff:10.0.0.1]:80".parse().unwrap())),
            "10.0.0.1"
        );
        assert_eq!(s(Value::Time(0.0)), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            s(Value::Backend(BackendSel {
                target: 0,
                hash: None
            })),
            "b1"
        );
        assert_eq!(s(Value::None), "");
        // Dates past year 9999 (or not numbers) do not panic.
        assert_eq!(s(Value::Time(1e30)), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(s(Value::Time(f64::NAN)), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(to_duration(1e30), Duration::from_secs(315_360_000));
        assert_eq!(to_duration(-5.0), Duration::ZERO);
        assert_eq!(to_duration(f64::INFINITY), Duration::ZERO);
        assert!(!Value::None.is_set());
        assert!(!Value::Backend(BackendSel::none()).is_set());
    }
}
