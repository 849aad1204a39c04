//! Human-friendly units in the config file: durations (`"30s"`) and sizes (`"512MiB"`).
//!
//! Every spelling of a value (string, integer, float) goes through one checked constructor, so
//! no value in a file can panic later: a duration is at most [`MAX_DURATION`] (10 years), which
//! `Instant::now() + d` and `SystemTime::now() + d` always survive; a size at most [`MAX_SIZE`].

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

mod refresh;
#[cfg(test)]
mod tests;

pub use refresh::RefreshAhead;

/// A duration written as `"250ms"`, `"30s"`, `"5m"`, `"2h"`, `"1d"`, `"1w"` or a number of
/// seconds (integer or decimal). At most [`MAX_DURATION`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

/// A byte size written as `"512MiB"`, `"64KiB"`, `"1GB"`, `"100B"` or a whole number of bytes.
/// At most [`MAX_SIZE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Size(pub u64);

/// The longest duration a setting may hold: 10 years (of 365 days).
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 86400);

/// The largest size a setting may hold: 10^18 bytes (1 EB).
pub const MAX_SIZE: u64 = 1_000_000_000_000_000_000;

const NANOS_PER_SEC: u128 = 1_000_000_000;

fn out_of_range(text: &str) -> String {
    format!("duration `{text}` is out of range (at most 10 years)")
}

/// Splits `"1.5 MiB"` into the number's integer digits, its fraction digits and the unit.
/// `None` when the number is not `DIGITS[.DIGITS]`.
fn split_number(t: &str) -> Option<(&str, &str, &str)> {
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    Some((int, frac, unit.trim()))
}

/// `int.frac × scale`, exactly (fraction digits beyond the 18th are dropped: they are worth
/// less than one unit of `scale / 10^18`). `None` on overflow.
fn scaled(int: &str, frac: &str, scale: u128) -> Option<u128> {
    let whole: u128 = if int.is_empty() {
        0
    } else if int.len() > 30 {
        return None;
    } else {
        int.parse().ok()?
    };
    let frac = &frac[..frac.len().min(18)];
    let part = if frac.is_empty() {
        0
    } else {
        let digits: u128 = frac.parse().ok()?;
        digits.checked_mul(scale)? / 10u128.pow(frac.len() as u32)
    };
    whole.checked_mul(scale)?.checked_add(part)
}

/// Parses `"1.5s"`, `"500ms"`, `"2m"`, `"1h"`, `"1d"`, `"1w"`, `"10"` (seconds), exactly (no
/// floating point). Refuses negative values and anything over [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("`{text}`: a duration cannot be negative"));
    }
    let Some((int, frac, unit)) = split_number(t) else {
        return Err(format!(
            "`{text}` is not a duration (examples: \"500ms\", \"30s\", \"5m\", \"2h\", \"1d\")"
        ));
    };
    let scale: u128 = match unit {
        "ms" => 1_000_000,
        "" | "s" => NANOS_PER_SEC,
        "m" => 60 * NANOS_PER_SEC,
        "h" => 3600 * NANOS_PER_SEC,
        "d" => 86400 * NANOS_PER_SEC,
        "w" => 7 * 86400 * NANOS_PER_SEC,
        other => {
            return Err(format!(
                "unknown duration unit `{other}` in `{text}` (use ms, s, m, h, d or w)"
            ));
        }
    };
    let nanos = scaled(int, frac, scale).ok_or_else(|| out_of_range(text))?;
    duration_from_nanos(nanos).ok_or_else(|| out_of_range(text))
}

fn duration_from_nanos(nanos: u128) -> Option<Duration> {
    if nanos > MAX_DURATION.as_nanos() {
        return None;
    }
    let secs = u64::try_from(nanos / NANOS_PER_SEC).ok()?;
    Some(Duration::new(secs, (nanos % NANOS_PER_SEC) as u32))
}

/// A duration given as a number of seconds (a TOML float): finite, not negative, at most
/// [`MAX_DURATION`]. Checked before `Duration::from_secs_f64`, which panics on the rest.
pub fn duration_from_secs_f64(secs: f64) -> Result<Duration, String> {
    if secs.is_nan() {
        return Err("a duration must be a number of seconds, not nan".into());
    }
    if secs < 0.0 {
        return Err(format!("`{secs}`: a duration cannot be negative"));
    }
    if secs > MAX_DURATION.as_secs_f64() {
        return Err(out_of_range(&format!("{secs}")));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A duration given as a whole number of seconds (a TOML integer), at most [`MAX_DURATION`].
pub fn duration_from_secs(secs: i64) -> Result<Duration, String> {
    let Ok(secs) = u64::try_from(secs) else {
        return Err(format!("`{secs}`: a duration cannot be negative"));
    };
    if secs > MAX_DURATION.as_secs() {
        return Err(out_of_range(&secs.to_string()));
    }
    Ok(Duration::from_secs(secs))
}

/// Parses `"512MiB"`, `"1GB"`, `"64k"`, `"1.5KiB"`, `"100"` (bytes), exactly. Binary (KiB) and
/// decimal (KB) units; a fraction of a byte is dropped. At most [`MAX_SIZE`].
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("`{text}`: a size cannot be negative"));
    }
    let Some((int, frac, unit)) = split_number(t) else {
        return Err(format!(
            "`{text}` is not a size (examples: \"64KiB\", \"512MiB\", \"2GiB\")"
        ));
    };
    let scale: u128 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "kb" => 1_000,
        "m" | "mib" => 1 << 20,
        "mb" => 1_000_000,
        "g" | "gib" => 1 << 30,
        "gb" => 1_000_000_000,
        "t" | "tib" => 1 << 40,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "unknown size unit `{unit}` in `{text}` (use B, KiB, MiB, GiB, TiB or KB, MB, GB, TB)"
            ));
        }
    };
    scaled(int, frac, scale)
        .filter(|b| *b <= u128::from(MAX_SIZE))
        .map(|b| b as u64)
        .ok_or_else(|| format!("size `{text}` is out of range (at most 1 EB)"))
}

/// A size given as a TOML integer: not negative, at most [`MAX_SIZE`].
pub fn size_from_int(bytes: i64) -> Result<u64, String> {
    match u64::try_from(bytes) {
        Err(_) => Err(format!("`{bytes}`: a size cannot be negative")),
        Ok(b) if b > MAX_SIZE => Err(format!("size `{b}` is out of range (at most 1 EB)")),
        Ok(b) => Ok(b),
    }
}

/// The exact text of a duration in the config's own syntax, in its largest whole unit
/// (`"2h"`, `"90s"`, `"250ms"`, `"1.0000005s"`): `parse_duration` gives back the same value.
pub fn duration_text(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    for (unit, scale) in [
        ("w", 7 * 86400 * NANOS_PER_SEC),
        ("d", 86400 * NANOS_PER_SEC),
        ("h", 3600 * NANOS_PER_SEC),
        ("m", 60 * NANOS_PER_SEC),
        ("s", NANOS_PER_SEC),
        ("ms", 1_000_000),
    ] {
        if nanos.is_multiple_of(scale) {
            return format!("{}{unit}", nanos / scale);
        }
    }
    let frac = format!("{:09}", d.subsec_nanos());
    format!("{}.{}s", d.as_secs(), frac.trim_end_matches('0'))
}

/// The exact text of a size in its largest whole binary unit (`"256MiB"`, `"1500B"`):
/// `parse_size` gives back the same value.
pub fn size_text(bytes: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes != 0 && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// Formats a byte count the way operators write it: `256 MiB`, `6.3 KiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Formats a duration compactly for messages: `250ms`, `30s`, `2m`, `1h30m`.
pub fn format_duration(d: Duration) -> String {
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return duration_text(d);
    }
    if d.subsec_nanos() != 0 {
        return format!("{}ms", d.as_millis());
    }
    let secs = d.as_secs();
    let (d_, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    for (v, u) in [(d_, "d"), (h, "h"), (m, "m"), (s, "s")] {
        if v > 0 {
            out.push_str(&format!("{v}{u}"));
        }
    }
    if out.is_empty() {
        out.push_str("0s");
    }
    out
}

struct DurVisitor;
impl<'de> de::Visitor<'de> for DurVisitor {
    type Value = Dur;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a duration such as \"30s\", \"500ms\" or \"2h\"")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
        parse_duration(v).map(Dur).map_err(E::custom)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
        duration_from_secs(v).map(Dur).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
        duration_from_secs(i64::try_from(v).unwrap_or(i64::MAX))
            .map(Dur)
            .map_err(E::custom)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
        duration_from_secs_f64(v).map(Dur).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DurVisitor)
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&duration_text(self.0))
    }
}

struct SizeVisitor;
impl<'de> de::Visitor<'de> for SizeVisitor {
    type Value = Size;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a size such as \"512MiB\" or \"64KiB\"")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
        parse_size(v).map(Size).map_err(E::custom)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
        size_from_int(v).map(Size).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
        size_from_int(i64::try_from(v).unwrap_or(i64::MAX))
            .map(Size)
            .map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SizeVisitor)
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&size_text(self.0))
    }
}
