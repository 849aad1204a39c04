//! HTTP-date parsing for the fields a cache reads (`Expires`, `Date`, `Last-Modified`).
//!
//! RFC 9110 §5.6.7 defines three formats — IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the
//! obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`, a two-digit year read with the 50-year
//! rule) and asctime (`Sun Nov  6 08:49:37 1994`) — and recipients must accept all three.
//! Anything else is *invalid*, which for `Expires` means "already expired" (RFC 9111 §5.3) and
//! for `Last-Modified` "no heuristic freshness": a parser that reads more than the grammar
//! (another zone, a two-digit year in the IMF form, a missing comma, doubled spaces, dashes in
//! the IMF form, periods in the time, a one-digit hour) guesses a date the origin may not have
//! meant and caches what it must not (issue 32; the RFC 9111 conformance suite checks each).
//! The one leniency kept is letter case: names (`sun`, `NOV`, `gmt`) match in any case, as
//! origins send them and as the suite expects. The weekday is not checked against the date
//! (RFC 9110 gives it no meaning).

use std::time::{Duration, SystemTime};

/// Parses an HTTP-date in any of the three formats of RFC 9110 §5.6.7, exactly as the grammar
/// writes them except for letter case. A two-digit (RFC 850) year is the one in the century that
/// puts it at most 50 years after `now`. Whitespace around the value (the field's OWS) is
/// ignored. `None` when it is not a date.
pub fn parse(text: &str, now: SystemTime) -> Option<SystemTime> {
    let b = text.trim_matches([' ', '\t']).as_bytes();
    let (year, month, day, time) = match b.iter().position(|&c| c == b',') {
        Some(3) if is_weekday(&b[..3]) => imf_fixdate(&b[4..])?,
        Some(n) if is_long_weekday(&b[..n]) => rfc850(&b[n + 1..], now)?,
        Some(_) => return None,
        None => asctime(b)?,
    };
    if day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let (hour, min, sec) = time;
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + min * 60 + sec);
    if secs >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs as u64))
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
    }
}

/// A date's parts: year, month (1-12), day, (hour, minute, second).
type Parts = (i64, u32, u32, (u32, u32, u32));

/// After `day-name ","`: `SP 2DIGIT SP month SP 4DIGIT SP time-of-day SP "GMT"`.
fn imf_fixdate(b: &[u8]) -> Option<Parts> {
    if b.len() != 25 || ![0, 3, 7, 12, 21].iter().all(|&i| b[i] == b' ') {
        return None;
    }
    let day = digits(&b[1..3])?;
    let month = month_of(&b[4..7])?;
    let year = digits(&b[8..12])?;
    let time = time_of_day(&b[13..21])?;
    is_gmt(&b[22..25]).then_some((i64::from(year), month, day, time))
}

/// After `day-name-l ","`: `SP 2DIGIT "-" month "-" 2DIGIT SP time-of-day SP "GMT"`.
fn rfc850(b: &[u8], now: SystemTime) -> Option<Parts> {
    if b.len() != 23 || b[0] != b' ' || b[3] != b'-' || b[7] != b'-' || b[10] != b' ' {
        return None;
    }
    if b[19] != b' ' {
        return None;
    }
    let day = digits(&b[1..3])?;
    let month = month_of(&b[4..7])?;
    let year = two_digit_year(i64::from(digits(&b[8..10])?), now);
    let time = time_of_day(&b[11..19])?;
    is_gmt(&b[20..23]).then_some((year, month, day, time))
}

/// `day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time-of-day SP 4DIGIT`.
fn asctime(b: &[u8]) -> Option<Parts> {
    if b.len() != 24 || ![3, 7, 10, 19].iter().all(|&i| b[i] == b' ') || !is_weekday(&b[..3]) {
        return None;
    }
    let month = month_of(&b[4..7])?;
    let day = match b[8] {
        b' ' => digits(&b[9..10])?,
        _ => digits(&b[8..10])?,
    };
    let time = time_of_day(&b[11..19])?;
    let year = digits(&b[20..24])?;
    Some((i64::from(year), month, day, time))
}

/// `2DIGIT ":" 2DIGIT ":" 2DIGIT`; hour 00-23, minute 00-59, second 00-60 (a leap second
/// counts as :59).
fn time_of_day(b: &[u8]) -> Option<(u32, u32, u32)> {
    if b.len() != 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let (hour, min, sec) = (digits(&b[0..2])?, digits(&b[3..5])?, digits(&b[6..8])?);
    (hour <= 23 && min <= 59 && sec <= 60).then_some((hour, min, sec.min(59)))
}

/// The value of a run of ASCII digits (all of `b`, at most 4).
fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |n, &d| n * 10 + u32::from(d - b'0')))
}

const MONTHS: [&[u8; 3]; 12] = [
    b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec",
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

fn month_of(b: &[u8]) -> Option<u32> {
    MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(b))
        .map(|i| i as u32 + 1)
}

/// `day-name`: the three-letter weekday, any case.
fn is_weekday(b: &[u8]) -> bool {
    b.len() == 3
        && WEEKDAYS
            .iter()
            .any(|d| d.as_bytes()[..3].eq_ignore_ascii_case(b))
}

/// `day-name-l`: the full weekday, any case.
fn is_long_weekday(b: &[u8]) -> bool {
    WEEKDAYS
        .iter()
        .any(|d| d.as_bytes().eq_ignore_ascii_case(b))
}

/// `GMT`, any case; no other zone (RFC 9110 §5.6.7: "GMT" is the only one).
fn is_gmt(b: &[u8]) -> bool {
    b.eq_ignore_ascii_case(b"gmt")
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
    const AUG18: &str = "Thu, 18 Aug 2050 02:01:18 GMT";

    #[test]
    fn the_three_formats() {
        assert_eq!(p(NOV6).as_deref(), Some(NOV6));
        assert_eq!(p("Sunday, 06-Nov-94 08:49:37 GMT").as_deref(), Some(NOV6));
        assert_eq!(p("Sun Nov  6 08:49:37 1994").as_deref(), Some(NOV6));
        assert_eq!(p("Sun Nov 06 08:49:37 1994").as_deref(), Some(NOV6));
        assert_eq!(p(AUG18).as_deref(), Some(AUG18));
        assert_eq!(
            p("Thursday, 18-Aug-50 02:01:18 GMT").as_deref(),
            Some(AUG18)
        );
        assert_eq!(
            p("Thu Aug  8 02:01:18 2050").as_deref(),
            Some("Mon, 08 Aug 2050 02:01:18 GMT"),
            "the weekday is not checked"
        );
    }

    /// Issue 32: names match in any letter case; nothing else is lenient.
    #[test]
    fn invalid_expires_means_expired_any_letter_case_is_valid() {
        for text in [
            "thu, 18 aug 2050 02:01:18 gmt",
            "THU, 18 AUG 2050 02:01:18 GMT",
            "tHu, 18 aUg 2050 02:01:18 GmT",
            "THURSDAY, 18-AUG-50 02:01:18 GMT",
            "thursday, 18-aug-50 02:01:18 gmt",
            "thu aug 18 02:01:18 2050",
            "  Thu, 18 Aug 2050 02:01:18 GMT\t",
        ] {
            assert_eq!(p(text).as_deref(), Some(AUG18), "{text:?}");
        }
        assert_eq!(
            p("Thu, 19 Nov 1981 08:52:00 GMT").as_deref(),
            Some("Thu, 19 Nov 1981 08:52:00 GMT"),
            "PHP's session Expires"
        );
        assert!(parse("Fri, 01 Jan 1960 00:00:00 GMT", now()).unwrap() < SystemTime::UNIX_EPOCH);
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
            None,
            "RFC 850 takes the full weekday"
        );
        assert_eq!(
            p("Wednesday, 01-Jan-30 00:00:00 GMT").as_deref(),
            Some("Tue, 01 Jan 2030 00:00:00 GMT")
        );
    }

    /// Issue 32: each shape the RFC 9111 conformance suite calls invalid (and therefore an
    /// already expired `Expires`), plus the other ways off the grammar.
    #[test]
    fn invalid_expires_means_expired_shapes() {
        for text in [
            // another zone than GMT
            "Thu, 18 Aug 2050 02:01:18 UTC",
            "Thu, 18 Aug 2050 02:01:18 AEST",
            "Thu, 18 Aug 2050 02:01:18 +0000",
            "Thu, 18 Aug 2050 02:01:18 UT",
            "Thursday, 18-Aug-50 02:01:18 UTC",
            // two-digit year in the IMF-fixdate form
            "Thu, 18 Aug 50 02:01:18 GMT",
            // missing comma
            "Thu 18 Aug 2050 02:01:18 GMT",
            "Thursday 18-Aug-50 02:01:18 GMT",
            // doubled spaces
            "Thu, 18 Aug 2050  02:01:18 GMT",
            "Thu,  18 Aug 2050 02:01:18 GMT",
            "Thu, 18  Aug  2050 02:01:18 GMT",
            "Thu Aug  18 02:01:18 2050",
            // dashes in the IMF-fixdate form
            "Thu, 18-Aug-2050 02:01:18 GMT",
            "Thursday, 18-Aug-2050 02:01:18 GMT",
            // periods in the time
            "Thu, 18 Aug 2050 02.01.18 GMT",
            "Thu, 18 Aug 2050 02:01:18.5 GMT",
            // one-digit hour, minute, second or (IMF) day
            "Thu, 18 Aug 2050 2:01:18 GMT",
            "Thu, 18 Aug 2050 02:1:18 GMT",
            "Thu, 18 Aug 2050 02:01:8 GMT",
            "Thu, 8 Aug 2050 02:01:18 GMT",
            "Thu Aug 8 02:01:18 2050",
            // other parts missing, out of place or out of range
            "",
            "0",
            "-1",
            "now",
            "Thu, 18 Aug 2050",
            "Thu, 18 Aug 2050 02:01 GMT",
            "18 Aug 2050 02:01:18 GMT",
            "Thu, 18 August 2050 02:01:18 GMT",
            "Thursday, 18 Aug 2050 02:01:18 GMT",
            "Thu, Aug 18 2050 02:01:18 GMT",
            "Thu, 18 Aug 2050 02:01:18 GMT GMT",
            "Thu, 18 Aug 2050 02:01:18 GMTX",
            "Thu, 18 Aug 2050 24:00:00 GMT",
            "Thu, 18 Aug 2050 02:61:18 GMT",
            "Thu, 18 Aug 2050 02:01:61 GMT",
            "Thu, 31 Nov 2050 02:01:18 GMT",
            "Sun, 29 Feb 1995 08:49:37 GMT",
            "Thu, 00 Aug 2050 02:01:18 GMT",
            "Thu, 18 Aug 2050 02:01:18 GMT, Thu, 18 Aug 2050 02:01:18 GMT",
            "Xyz, 18 Aug 2050 02:01:18 GMT",
            "Thu Aug 18 02:01:18 50",
            "Thu Aug 18 02:01:18 2050 GMT",
            "Thu, 18 Aug 2050\t02:01:18 GMT",
            "Thu, 18 Aug +050 02:01:18 GMT",
        ] {
            assert_eq!(p(text), None, "{text:?}");
        }
        assert_eq!(
            p("Tue, 29 Feb 2000 00:00:00 GMT").as_deref(),
            Some("Tue, 29 Feb 2000 00:00:00 GMT")
        );
    }
}
