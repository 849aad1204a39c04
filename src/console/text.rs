//! What every screen shares: numbers as the screens show them (ratios, durations, sizes,
//! uptime), percent-encoded query values, and a screen drawn once or redrawn each second.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Duration;

use serde_json::Value;

/// Clears the terminal and homes the cursor (plain ANSI).
pub(super) const CLEAR: &str = "\x1b[H\x1b[2J";

pub(super) fn ratio(v: &Value) -> String {
    v.as_f64()
        .map_or("  -   ".into(), |r| format!("{:5.1}%", r * 100.0))
}

pub(super) fn duration_us(v: &Value) -> String {
    match v.as_u64() {
        None => "-".into(),
        Some(us) if us < 1000 => format!("{us}µs"),
        Some(us) if us < 1_000_000 => format!("{:.1}ms", us as f64 / 1000.0),
        Some(us) => format!("{:.2}s", us as f64 / 1e6),
    }
}

pub(super) fn uptime(secs: u64) -> String {
    format!(
        "{}d+{:02}:{:02}:{:02}",
        secs / 86_400,
        secs % 86_400 / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Prints `screen` once (returns true: done) or redraws it and waits a second before the next
/// refresh (false).
pub(super) fn show(screen: &str, once: bool) -> io::Result<bool> {
    let mut stdout = io::stdout().lock();
    if once {
        stdout.write_all(screen.as_bytes())?;
        return Ok(true);
    }
    write!(stdout, "{CLEAR}{screen}")?;
    stdout.flush()?;
    drop(stdout);
    std::thread::sleep(Duration::from_secs(1));
    Ok(false)
}

/// A byte count in the largest unit that keeps it above 10.
pub(super) fn human_bytes(n: u64) -> String {
    match n {
        n if n < 10 * 1024 => format!("{n}B"),
        n if n < 10 * 1024 * 1024 => format!("{}KiB", n / 1024),
        n if n < 10 * 1024 * 1024 * 1024 => format!("{}MiB", n >> 20),
        n => format!("{}GiB", n >> 30),
    }
}

/// Percent-encodes a query value (everything but unreserved characters).
pub fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}
