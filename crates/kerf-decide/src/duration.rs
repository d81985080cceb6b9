//! Go durations (`168h`, `1h30m`, `1.5h`, `500ms`), as Kerf's resources write them.
//!
//! Parsing follows Go's `time.ParseDuration`: an optional sign, then one or more
//! `<decimal><unit>` pairs with units `ns`, `us` (or `µs`, `μs`), `ms`, `s`, `m`, `h`; a
//! bare `0` is zero. Fractions below a nanosecond are truncated, and a duration past
//! Go's limit (2^63 - 1 ns, about 292 years) is rejected.

use std::fmt;

use chrono::{DateTime, Datelike, Duration, Timelike, Utc};

/// Why a duration could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text is not a Go duration, or it is out of range.
    #[error("invalid duration {value:?}: {reason}")]
    Invalid {
        /// The duration as written.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl DurationError {
    /// A short label for metrics and event reasons.
    pub fn category(&self) -> &'static str {
        "InvalidDuration"
    }
}

const NANOS_PER_SECOND: i128 = 1_000_000_000;

/// Fraction digits kept; later ones are below a nanosecond for every unit but `h`, and Go
/// drops them as well.
const MAX_FRACTION_DIGITS: u32 = 18;

/// Parses a Go duration.
pub fn parse_go_duration(s: &str) -> Result<Duration, DurationError> {
    let bad = |reason: &str| DurationError::Invalid {
        value: s.to_owned(),
        reason: reason.to_owned(),
    };
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(Duration::zero());
    }
    if rest.is_empty() {
        return Err(bad("empty"));
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let (nanos, tail) = read_component(rest).map_err(bad)?;
        total = total
            .checked_add(nanos)
            .ok_or_else(|| bad("out of range"))?;
        rest = tail;
    }
    let total = if negative { -total } else { total };
    i64::try_from(total)
        .map(Duration::nanoseconds)
        .map_err(|_| bad("out of range"))
}

/// Reads one `<decimal><unit>` pair; returns its nanoseconds and the rest of the text.
fn read_component(s: &str) -> Result<(i128, &str), &'static str> {
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, rest) = s.split_at(number_end);
    let unit_end = rest
        .find(|c: char| c.is_ascii_digit() || c == '.')
        .unwrap_or(rest.len());
    let (unit, rest) = rest.split_at(unit_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err("expected a number");
    }
    if fraction.contains('.') {
        return Err("more than one decimal point");
    }
    let unit_nanos = unit_nanos(unit)?;
    let mut nanos: i128 = 0;
    for b in whole.bytes() {
        nanos = nanos
            .checked_mul(10)
            .and_then(|n| n.checked_add(i128::from(b - b'0')))
            .filter(|n| *n <= i128::from(i64::MAX))
            .ok_or("out of range")?;
    }
    nanos *= unit_nanos;
    Ok((nanos + fraction_nanos(fraction, unit_nanos), rest))
}

/// `0.<fraction>` of `unit_nanos`, truncated to whole nanoseconds.
fn fraction_nanos(fraction: &str, unit_nanos: i128) -> i128 {
    let mut numerator: i128 = 0;
    let mut denominator: i128 = 1;
    for b in fraction.bytes().take(MAX_FRACTION_DIGITS as usize) {
        numerator = numerator * 10 + i128::from(b - b'0');
        denominator *= 10;
    }
    numerator * unit_nanos / denominator
}

fn unit_nanos(unit: &str) -> Result<i128, &'static str> {
    Ok(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SECOND,
        "m" => 60 * NANOS_PER_SECOND,
        "h" => 3600 * NANOS_PER_SECOND,
        "" => return Err("missing unit"),
        _ => return Err("unknown unit"),
    })
}

/// Formats a duration in compact Go syntax, leaving out zero parts: `"30m"`, `"1h30m"`,
/// `"168h"`, `"1s"`, `"2h45m0.5s"`, `"500ms"`, `"0s"`. [`parse_go_duration`] reads it back.
pub fn format_go_duration(d: Duration) -> String {
    let seconds = i128::from(d.num_seconds());
    let nanos = seconds * NANOS_PER_SECOND + i128::from(d.subsec_nanos());
    if nanos == 0 {
        return "0s".to_owned();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let nanos = nanos.unsigned_abs();
    let total_seconds = nanos / 1_000_000_000;
    let sub = nanos % 1_000_000_000;
    if total_seconds == 0 {
        return format!("{sign}{}", format_subsecond(sub));
    }
    let (h, m, s) = (
        total_seconds / 3600,
        total_seconds / 60 % 60,
        total_seconds % 60,
    );
    let mut out = sign.to_owned();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || sub > 0 {
        out.push_str(&format!("{s}{}s", decimal_fraction(sub, 9)));
    }
    out
}

/// Below a second: `ns`, `µs` or `ms`, whichever keeps the integer part below 1000.
fn format_subsecond(nanos: u128) -> String {
    if nanos < 1_000 {
        format!("{nanos}ns")
    } else if nanos < 1_000_000 {
        format!("{}{}µs", nanos / 1_000, decimal_fraction(nanos % 1_000, 3))
    } else {
        format!(
            "{}{}ms",
            nanos / 1_000_000,
            decimal_fraction(nanos % 1_000_000, 6)
        )
    }
}

/// `.5` for `500` of width 3, empty for 0.
fn decimal_fraction(value: u128, width: usize) -> String {
    if value == 0 {
        return String::new();
    }
    let digits = format!("{value:0width$}");
    format!(".{}", digits.trim_end_matches('0'))
}

/// A time as Kerf writes it in every message, status, report and explanation: RFC 3339 in
/// UTC with `Z` and whole seconds (`2026-06-04T00:00:00Z`), as
/// `to_rfc3339_opts(SecondsFormat::Secs, true)` writes it, into the message being written
/// rather than a `String` of its own. A fraction of a second is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rfc3339(pub DateTime<Utc>);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_date_time(f, self.0)?;
        f.write_str("Z")
    }
}

/// A time as the agent's log lines carry it: [`Rfc3339`] with milliseconds
/// (`2026-06-04T00:00:00.123Z`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rfc3339Millis(pub DateTime<Utc>);

impl fmt::Display for Rfc3339Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_date_time(f, self.0)?;
        let millis = self.0.nanosecond() % 1_000_000_000 / 1_000_000;
        write!(f, ".{millis:03}Z")
    }
}

/// `YYYY-MM-DDTHH:MM:SS` of `t` in UTC; a leap second reads as second 60.
fn write_date_time(f: &mut fmt::Formatter<'_>, t: DateTime<Utc>) -> fmt::Result {
    let t = t.naive_utc();
    let year = t.year();
    if (0..=9999).contains(&year) {
        write!(f, "{year:04}")?;
    } else {
        write!(f, "{year:+05}")?;
    }
    let second = t.second() + u32::from(t.nanosecond() >= 1_000_000_000);
    let (month, day, hour, minute) = (t.month(), t.day(), t.hour(), t.minute());
    write!(f, "-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // design D2: durations use Go syntax
    #[test]
    fn go_forms_parse() {
        let cases = [
            ("168h", Duration::hours(168)),
            ("30m", Duration::minutes(30)),
            ("1h30m", Duration::minutes(90)),
            ("1.5h", Duration::minutes(90)),
            ("90s", Duration::seconds(90)),
            ("500ms", Duration::milliseconds(500)),
            (
                "2h45m0.5s",
                Duration::milliseconds((2 * 3600 + 45 * 60) * 1000 + 500),
            ),
            ("1us", Duration::microseconds(1)),
            ("1µs", Duration::microseconds(1)),
            ("1μs", Duration::microseconds(1)),
            ("7ns", Duration::nanoseconds(7)),
            (".5s", Duration::milliseconds(500)),
            ("1.s", Duration::seconds(1)),
            ("0", Duration::zero()),
            ("0s", Duration::zero()),
            ("+5m", Duration::minutes(5)),
            ("-5m", Duration::minutes(-5)),
            ("1m1m", Duration::minutes(2)),
            ("1.0000000001s", Duration::seconds(1)),
            ("2562047h47m16.854775807s", Duration::nanoseconds(i64::MAX)),
            ("-2562047h47m16.854775808s", Duration::nanoseconds(i64::MIN)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_go_duration(text), Ok(expected), "{text}");
        }
    }

    // design D2: a bad duration is an error naming the value
    #[test]
    fn bad_durations_name_the_value() {
        let cases = [
            ("", "empty"),
            ("-", "empty"),
            ("1", "missing unit"),
            ("h", "expected a number"),
            ("1d", "unknown unit"),
            ("1.2.3s", "more than one decimal point"),
            ("1h 30m", "unknown unit"),
            (" 1h", "expected a number"),
            ("2562047h47m16.854775808s", "out of range"),
            ("99999999999999999999h", "out of range"),
        ];
        for (text, reason) in cases {
            let err = parse_go_duration(text).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid duration {text:?}: {reason}")
            );
            assert_eq!(err.category(), "InvalidDuration");
        }
    }

    // design D2: durations are written in compact Go syntax
    #[test]
    fn format_is_compact() {
        let cases = [
            (Duration::minutes(30), "30m"),
            (Duration::minutes(90), "1h30m"),
            (Duration::hours(168), "168h"),
            (Duration::seconds(1), "1s"),
            (Duration::zero(), "0s"),
            (Duration::milliseconds(500), "500ms"),
            (Duration::microseconds(1500), "1.5ms"),
            (Duration::nanoseconds(1500), "1.5µs"),
            (Duration::nanoseconds(7), "7ns"),
            (Duration::milliseconds(9_900_500), "2h45m0.5s"),
            (Duration::seconds(3601), "1h1s"),
            (Duration::minutes(-5), "-5m"),
        ];
        for (d, text) in cases {
            assert_eq!(format_go_duration(d), text);
        }
    }

    proptest! {
        // design D2: formatting then parsing gives the duration back
        #[test]
        fn format_round_trips(nanos in any::<i64>()) {
            let d = Duration::nanoseconds(nanos);
            prop_assert_eq!(parse_go_duration(&format_go_duration(d)), Ok(d));
        }
    }

    // design D5: times in messages read as RFC 3339 UTC with `Z` and whole seconds
    #[test]
    fn rfc3339_writes_utc_with_z_and_whole_seconds() {
        use chrono::{SecondsFormat, TimeZone};
        let base = Utc
            .with_ymd_and_hms(2026, 6, 4, 0, 0, 0)
            .single()
            .unwrap_or_default();
        let far = Utc
            .with_ymd_and_hms(12026, 1, 2, 3, 4, 5)
            .single()
            .unwrap_or_default();
        for nanos in [0, 1_000_000, 123_456_000, 999_999_999, 7, 1_000] {
            for t in [base, base - Duration::days(40_000), far] {
                let t = t + Duration::nanoseconds(nanos);
                let secs = Rfc3339(t).to_string();
                let millis = Rfc3339Millis(t).to_string();
                assert_eq!(secs, t.to_rfc3339_opts(SecondsFormat::Secs, true));
                assert_eq!(millis, t.to_rfc3339_opts(SecondsFormat::Millis, true));
                assert!(secs.ends_with('Z') && !secs.contains('.'), "{secs}");
            }
        }
        assert_eq!(
            Rfc3339(base + Duration::milliseconds(123)).to_string(),
            "2026-06-04T00:00:00Z"
        );
        assert_eq!(
            Rfc3339Millis(base + Duration::milliseconds(123)).to_string(),
            "2026-06-04T00:00:00.123Z"
        );
    }
}
