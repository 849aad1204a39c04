//! `cache.refresh_ahead`: a share of the freshness lifetime or a duration, in the units of
//! the rest of the file.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use super::{duration_from_secs, duration_text, parse_duration};

/// `cache.refresh_ahead`: how close to expiry a requested object is refreshed in the
/// background — `"off"` (or `false`, `"0s"`), a share of the object's freshness lifetime
/// (`"10%"`: its last tenth, 1–99 %), or a duration (`"30s"`: its last 30 seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RefreshAhead {
    #[default]
    Off,
    /// The last this-many percent of the freshness lifetime.
    Percent(u8),
    /// The last this-long of the freshness lifetime.
    Before(Duration),
}

impl RefreshAhead {
    /// How long before expiry an object with freshness lifetime `ttl` is refreshed; `None`
    /// when off.
    pub fn window(self, ttl: Duration) -> Option<Duration> {
        match self {
            RefreshAhead::Off => None,
            RefreshAhead::Percent(p) => Some(ttl * u32::from(p) / 100),
            RefreshAhead::Before(d) => Some(d),
        }
    }

    pub(super) fn parse(text: &str) -> Result<RefreshAhead, String> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("off") {
            return Ok(RefreshAhead::Off);
        }
        if let Some(p) = t.strip_suffix('%') {
            return match p.trim().parse::<u8>() {
                Ok(p @ 1..=99) => Ok(RefreshAhead::Percent(p)),
                _ => Err(format!(
                    "`{text}`: a share of the TTL is a whole percentage from 1% to 99%"
                )),
            };
        }
        match parse_duration(t) {
            Ok(d) if d.is_zero() => Ok(RefreshAhead::Off),
            Ok(d) => Ok(RefreshAhead::Before(d)),
            Err(e) => Err(format!(
                "{e}; refresh_ahead is \"off\", a share of the TTL such as \"10%\", or a duration such as \"30s\""
            )),
        }
    }
}

struct RefreshAheadVisitor;
impl de::Visitor<'_> for RefreshAheadVisitor {
    type Value = RefreshAhead;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("\"off\", a share of the TTL such as \"10%\", or a duration such as \"30s\"")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<RefreshAhead, E> {
        RefreshAhead::parse(v).map_err(E::custom)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<RefreshAhead, E> {
        if v {
            Err(E::custom(
                "refresh_ahead = true does not say when: use a share of the TTL such as \"10%\" or a duration such as \"30s\"",
            ))
        } else {
            Ok(RefreshAhead::Off)
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<RefreshAhead, E> {
        let d = duration_from_secs(v).map_err(E::custom)?;
        Ok(if d.is_zero() {
            RefreshAhead::Off
        } else {
            RefreshAhead::Before(d)
        })
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<RefreshAhead, E> {
        self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl<'de> Deserialize<'de> for RefreshAhead {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RefreshAheadVisitor)
    }
}

impl Serialize for RefreshAhead {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RefreshAhead::Off => s.serialize_str("off"),
            RefreshAhead::Percent(p) => s.serialize_str(&format!("{p}%")),
            RefreshAhead::Before(d) => s.serialize_str(&duration_text(*d)),
        }
    }
}
