//! Lenient HTTP-date parsing for the fields a cache reads (`Expires`, `Date`, `Last-Modified`).
//!
//! RFC 9110 §5.6.7 asks recipients to accept all three formats HTTP has used — IMF-fixdate
//! (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`)
//! and asctime (`Sun Nov  6 08:49:37 1994`) — and to be robust beyond the grammar. Origins
//! (old PHP, Java app servers, hand-written `Expires`) send lower-case names, a one-digit day,
//! a four-digit year in the RFC 850 form, or `UTC` instead of `GMT`. A strict parser reads all
//! of those as "invalid", which for `Expires` means "already expired" (RFC 9111 §5.3) and for
//! `Last-Modified` means "no heuristic": the response is not cached at all. This parser reads
//! the date the origin meant, and still refuses anything it cannot read without guessing
//! (another time zone, a missing part, an impossible day).

use std::time::{Duration, SystemTime};

/// Parses an HTTP-date in any of the three formats, case-insensitively, with the leniencies
/// above. The weekday is not checked against the date (the date is what matters). A two-digit
/// year is the one in the century that puts it at most 50 years after `now` (RFC 9110
/// §5.6.7). `None` when it is not a date.
pub fn parse(text: &str, now: SystemTime) -> Option<SystemTime> {
    let mut weekday = false;
    let mut month = None;
    let mut time = None;
    let mut zone = false;
    let mut numbers: Vec<&str> = Vec::with_capacity(2);
    for token in text.split([' ', '\t', ',', '-']).filter(|t| !t.is_empty()) {
        if token.contains(':') {
            if time.replace(parse_time(token)?).is_some() {
                return None;
            }
        } else if token.bytes().all(|b| b.is_ascii_digit()) {
            if numbers.len() == 2 {
                return None;
            }
            numbers.push(token);
        } else if let Some(m) = month_of(token) {
            if month.replace(m).is_some() {
                return None;
            }
        } else if is_weekday(token) && !weekday && month.is_none() && numbers.is_empty() {
            weekday = true;
        } else if is_gmt(token) && !zone && time.is_some() {
            zone = true;
        } else {
            return None;
        }
    }
    let (month, (hour, min, sec)) = (month?, time?);
    let [day, year] = numbers[..] else {
        return None;
    };
    if day.len() > 2 {
        return None;
    }
    let day: u32 = day.parse().ok()?;
    let year: i64 = match year.len() {
        2 => two_digit_year(year.parse().ok()?, now),
        4 => year.parse().ok()?,
        _ => return None,
    };
    if day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + min * 60 + sec);
    if secs >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs as u64))
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
    }
}

/// `HH:MM:SS` (a one-digit hour allowed); a leap second (`:60`) counts as `:59`.
fn parse_time(token: &str) -> Option<(u32, u32, u32)> {
    let mut parts = token.split(':');
    let mut field = |max_len: usize, limit: u32| -> Option<u32> {
        let p = parts.next()?;
        if p.is_empty() || p.len() > max_len || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let v: u32 = p.parse().ok()?;
        (v <= limit).then_some(v)
    };
    let (hour, min, sec) = (field(2, 23)?, field(2, 59)?, field(2, 60)?);
    if parts.next().is_some() {
        return None;
    }
    Some((hour, min, sec.min(59)))
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// A name is its three-letter abbreviation or the full word, in any case.
fn name_matches(token: &str, full: &str) -> bool {
    let t = token.as_bytes();
    (t.len() == 3 || t.len() == full.len()) && full.as_bytes()[..t.len()].eq_ignore_ascii_case(t)
}

fn month_of(token: &str) -> Option<u32> {
    MONTHS
        .iter()
        .position(|m| name_matches(token, m))
        .map(|i| i as u32 + 1)
}

fn is_weekday(token: &str) -> bool {
    WEEKDAYS.iter().any(|d| name_matches(token, d))
}

/// `GMT` and the spellings that mean the same offset.
fn is_gmt(token: &str) -> bool {
    ["gmt", "utc", "ut", "z", "+0000"]
        .iter()
        .any(|z| token.eq_ignore_ascii_case(z))
}

/// RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is in the past century.
fn two_digit_year(yy: i64, now: SystemTime) -> i64 {
    let now_days = match now.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => (d.as_secs() / 86_400) as i64,
        Err(_) => 0,
    };
    let this_year = civil_year(now_days);
    let mut year = this_year - this_year.rem_euclid(100) + yy;
    if year > this_year + 50 {
        year -= 100;
    }
    year
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The year of a day count since 1970-01-01 (the inverse of [`days_from_civil`], year only).
fn civil_year(days: i64) -> i64 {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let year = yoe + era * 400;
    if mp >= 10 { year + 1 } else { year }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> SystemTime {
        httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap()
    }

    fn p(text: &str) -> Option<String> {
        parse(text, now()).map(httpdate::fmt_http_date)
    }

    const NOV6: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

    #[test]
    fn the_three_formats() {
        assert_eq!(p(NOV6).as_deref(), Some(NOV6));
        assert_eq!(p("Sunday, 06-Nov-94 08:49:37 GMT").as_deref(), Some(NOV6));
        assert_eq!(p("Sun Nov  6 08:49:37 1994").as_deref(), Some(NOV6));
        assert_eq!(p("Sun Nov 06 08:49:37 1994").as_deref(), Some(NOV6));
    }

    #[test]
    fn what_origins_actually_send() {
        for text in [
            "sun, 06 nov 1994 08:49:37 gmt",
            "SUNDAY, 06-NOV-94 08:49:37 GMT",
            "sun nov  6 08:49:37 1994",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 8:49:37 GMT",
            "Mon, 06 Nov 1994 08:49:37 GMT",
            "06 Nov 1994 08:49:37 GMT",
            "Sun, 06 November 1994 08:49:37 GMT",
            "  Sun,  06 Nov 1994 08:49:37 GMT ",
            "Sun, 06 Nov 1994 08:49:37 +0000",
        ] {
            assert_eq!(p(text).as_deref(), Some(NOV6), "{text:?}");
        }
        assert_eq!(
            p("Thu, 19 Nov 1981 08:52:00 GMT").as_deref(),
            Some("Thu, 19 Nov 1981 08:52:00 GMT"),
            "PHP's session Expires"
        );
        assert!(parse("Thu, 01 Jan 1960 00:00:00 GMT", now()).unwrap() < SystemTime::UNIX_EPOCH);
        assert_eq!(
            p("Sun, 31 Dec 1995 23:59:60 GMT").as_deref(),
            Some("Sun, 31 Dec 1995 23:59:59 GMT"),
            "leap second"
        );
    }

    /// RFC 9110 §5.6.7: at most 50 years in the future, else the previous century.
    #[test]
    fn two_digit_years() {
        assert_eq!(
            p("Friday, 01-Jan-76 00:00:00 GMT").as_deref(),
            Some("Wed, 01 Jan 2076 00:00:00 GMT")
        );
        assert_eq!(
            p("Friday, 01-Jan-77 00:00:00 GMT").as_deref(),
            Some("Sat, 01 Jan 1977 00:00:00 GMT")
        );
        assert_eq!(
            p("Wed, 01-Jan-30 00:00:00 GMT").as_deref(),
            Some("Tue, 01 Jan 2030 00:00:00 GMT")
        );
    }

    #[test]
    fn not_dates() {
        for text in [
            "",
            "0",
            "-1",
            "now",
            "Sun, 06 Nov 1994",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 06 Nov 1994 08:49:37 +0100",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 29 Feb 1995 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:61:00 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 06 Nov 94 08:49:37 08:49:37 GMT",
            "Sun, 06 Nov Dec 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 1995 08:49:37 GMT",
            "Sun, 006 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT GMT",
            "Sun, 06 Nov 1994 08:49:37 GMTX",
            "Nov, 06 Sun 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37.5 GMT",
        ] {
            assert_eq!(p(text), None, "{text:?}");
        }
        assert_eq!(
            p("Tue, 29 Feb 2000 00:00:00 GMT").as_deref(),
            Some("Tue, 29 Feb 2000 00:00:00 GMT")
        );
    }
}
