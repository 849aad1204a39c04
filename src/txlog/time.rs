//! Wall-clock times as log lines print them: NCSA `[10/Oct/2000:13:55:36 +0000]` and ISO
//! 8601 with milliseconds, each cached per second (the writer prints many lines a second).

use std::cell::RefCell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 → (year, month 1-12, day 1-31); Howard Hinnant's civil_from_days.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u64,
    minute: u64,
    second: u64,
}

fn civil(t: SystemTime) -> Civil {
    let secs = unix_secs(t);
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    Civil {
        year,
        month,
        day,
        hour: rem / 3600,
        minute: rem % 3600 / 60,
        second: rem % 60,
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The text of one wall-clock second, for the records that fall into it.
struct SecondText {
    /// `[start, end)` of that second; comparing `SystemTime`s is cheaper than converting each
    /// record's time to seconds since the epoch.
    start: SystemTime,
    end: SystemTime,
    text: String,
}

impl SecondText {
    const fn new() -> SecondText {
        SecondText {
            start: UNIX_EPOCH,
            end: UNIX_EPOCH,
            text: String::new(),
        }
    }

    /// The cached text for `t`, rebuilt by `build(seconds since the epoch, text)` when `t` is
    /// in another second.
    fn get(&mut self, t: SystemTime, build: impl FnOnce(u64, &mut String)) -> &str {
        if !(self.start <= t && t < self.end) {
            let secs = unix_secs(t);
            self.start = UNIX_EPOCH + Duration::from_secs(secs);
            self.end = self.start + Duration::from_secs(1);
            self.text.clear();
            build(secs, &mut self.text);
        }
        &self.text
    }
}

thread_local! {
    /// The writer formats many records per second: keep the last second's text.
    static CLF: RefCell<SecondText> = const { RefCell::new(SecondText::new()) };
    static ISO: RefCell<SecondText> = const { RefCell::new(SecondText::new()) };
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `10/Oct/2000:13:55:36 +0000` (the tests read the cached text through it).
#[cfg(test)]
fn clf_time(t: SystemTime, out: &mut Vec<u8>) {
    let mut bracketed = Vec::with_capacity(28);
    bracketed_clf_time(t, &mut bracketed);
    out.extend_from_slice(&bracketed[1..bracketed.len() - 1]);
}

/// `[10/Oct/2000:13:55:36 +0000]` (`%t`): the cached text includes the brackets, so a line
/// copies one piece.
pub(super) fn bracketed_clf_time(t: SystemTime, out: &mut Vec<u8>) {
    CLF.with_borrow_mut(|cached| {
        let text = cached.get(t, |secs, text| {
            let c = civil(UNIX_EPOCH + Duration::from_secs(secs));
            let month = MONTHS[(c.month as usize).saturating_sub(1).min(11)];
            let _ = std::fmt::Write::write_fmt(
                text,
                format_args!(
                    "[{:02}/{month}/{}:{:02}:{:02}:{:02} +0000]",
                    c.day, c.year, c.hour, c.minute, c.second
                ),
            );
        });
        match text.as_bytes().first_chunk::<28>() {
            // Years 1000-9999: always 28 bytes, one fixed-size copy.
            Some(all) if text.len() == 28 => out.extend_from_slice(all),
            _ => out.extend_from_slice(text.as_bytes()),
        }
    });
}

/// `2000-10-10T13:55:36.123Z`
pub(super) fn iso_time(t: SystemTime, out: &mut Vec<u8>) {
    ISO.with_borrow_mut(|cached| {
        let text = cached.get(t, |secs, text| {
            let c = civil(UNIX_EPOCH + Duration::from_secs(secs));
            let _ = std::fmt::Write::write_fmt(
                text,
                format_args!(
                    "{}-{:02}-{:02}T{:02}:{:02}:{:02}",
                    c.year, c.month, c.day, c.hour, c.minute, c.second
                ),
            );
        });
        out.extend_from_slice(text.as_bytes());
    });
    let millis = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_millis());
    out.extend_from_slice(&[
        b'.',
        b'0' + (millis / 100) as u8,
        b'0' + (millis / 10 % 10) as u8,
        b'0' + (millis % 10) as u8,
        b'Z',
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        let mut s = Vec::new();
        clf_time(UNIX_EPOCH + Duration::from_secs(971_186_136), &mut s);
        assert_eq!(s, b"10/Oct/2000:13:55:36 +0000");
        let mut s = Vec::new();
        iso_time(UNIX_EPOCH + Duration::from_millis(971_186_136_042), &mut s);
        assert_eq!(s, b"2000-10-10T13:55:36.042Z");
        // The per-second cache: the next second, the last instant of the first, then back.
        let mut s = Vec::new();
        for ms in [971_186_137_000, 971_186_136_999, 971_186_137_500] {
            clf_time(UNIX_EPOCH + Duration::from_millis(ms), &mut s);
            s.push(b' ');
        }
        assert_eq!(
            s,
            b"10/Oct/2000:13:55:37 +0000 10/Oct/2000:13:55:36 +0000 10/Oct/2000:13:55:37 +0000 "
        );
    }
}
