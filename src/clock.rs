//! A cheap shared millisecond clock for timeouts and health state that live in atomics.
//!
//! Every request reads it a few times (connection phases, timeouts), so it is the kernel's
//! coarse monotonic clock: a vDSO read of a value the kernel updates every tick (1–4 ms), about
//! a fifth of `Instant::now()` plus the subtraction and division of `elapsed().as_millis()`
//! (bench/RESULTS.md, "hit path"). Its resolution is far finer than any timeout it serves.

use std::sync::OnceLock;
use std::time::Instant;

/// Milliseconds on a monotonic clock with an arbitrary origin: only differences mean anything.
/// Never 0 in practice (it counts from boot), which callers may use as "unset".
pub fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes one `timespec` through the pointer, which points to a
    // live, properly aligned local for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    if rc == 0 && ts.tv_sec >= 0 {
        return ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000;
    }
    // No coarse clock (not Linux): milliseconds since the first call, plus one so the value
    // is never 0.
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// Length of [`date_line`]: `date: ` + an IMF-fixdate (29 bytes) + CRLF + the blank line's CRLF.
pub const DATE_LINE_LEN: usize = 39;

/// `date: Tue, 24 Nov 2026 04:29:13 GMT\r\n\r\n`: the `Date` field hyper adds to every
/// response and the blank line after it, for a response head written without hyper (a fast
/// hit, server/h1/answers.rs). Formatted at most once per second per thread.
pub fn date_line() -> [u8; DATE_LINE_LEN] {
    use std::cell::Cell;
    thread_local! {
        static LAST: Cell<(u64, [u8; DATE_LINE_LEN])> = const { Cell::new((0, [0; DATE_LINE_LEN])) };
    }
    let secs = unix_seconds();
    LAST.with(|last| {
        let (at, line) = last.get();
        if at == secs {
            return line;
        }
        let mut line = [0u8; DATE_LINE_LEN];
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        let date = httpdate::HttpDate::from(time).to_string();
        let text = format!("date: {date}\r\n\r\n");
        if text.len() == DATE_LINE_LEN {
            line.copy_from_slice(text.as_bytes());
        }
        last.set((secs, line));
        line
    })
}

/// Whole seconds since the Unix epoch, from the kernel's coarse real-time clock (a vDSO read).
fn unix_seconds() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as in `now_ms`: one `timespec` written through a pointer to a live local.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    if rc == 0 && ts.tv_sec > 0 {
        return ts.tv_sec as u64;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_line_is_an_http_date_field() {
        let line = date_line();
        let text = std::str::from_utf8(&line).unwrap();
        assert!(
            text.starts_with("date: ") && text.ends_with(" GMT\r\n\r\n"),
            "{text}"
        );
        let parsed = httpdate::parse_http_date(&text[6..35]).unwrap();
        let now = std::time::SystemTime::now();
        let off = now.duration_since(parsed).unwrap_or_default();
        assert!(off < std::time::Duration::from_secs(3), "{text}");
    }

    #[test]
    fn monotonic_and_in_milliseconds() {
        let a = now_ms();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let b = now_ms();
        assert!(a > 0);
        // A sleep of 50 ms is at least 50 ms; the coarse clock may lag by a tick (≤ 10 ms).
        assert!(b >= a + 30, "{a} -> {b}");
    }
}
