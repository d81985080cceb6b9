//! Maintenance and freeze windows (AP-29 to AP-33, AP-38, AP-39).
//!
//! A window is recurring (a 5-field cron `schedule`, a Go `duration`, an IANA `timeZone`
//! that defaults to UTC) or one-off (`start` and `end`, RFC 3339). A recurring window is
//! open for `duration` from each time its schedule fires. Daylight-saving changes follow
//! one rule, written down in `docs/windows.md`: a local time that a clock change skips
//! fires at the first instant after the gap, and a local time that it repeats fires once,
//! at its first occurrence. Durations are absolute time.
//!
//! Nothing here reads a clock: every question takes `now`.

use std::str::FromStr;

use chrono::{DateTime, Duration, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use kerf_api::policy::Window;

use crate::duration::{DurationError, parse_go_duration};

/// The most windows one list may hold (AP-32, rule reading 14).
pub const MAX_WINDOWS: usize = 16;

/// How many back-to-back openings [`evaluate_windows`] follows to find where an open
/// list closes; past that, `open_until` is a lower bound.
const MAX_CHAINED_OPENINGS: usize = 100;

/// Why a window, or a list of windows, is invalid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// A field holds a bad value, e.g. `schedule "61 * * * *": minute out of range`.
    #[error("{field} {value:?}: {reason}")]
    Field {
        /// The field's name as the resource spells it.
        field: &'static str,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The window sets neither shape, or a mix of both.
    #[error(
        "a window is either schedule and duration (with an optional timeZone) or start and end; it sets {found}"
    )]
    Shape {
        /// The fields the window sets.
        found: String,
    },
    /// The list holds more than [`MAX_WINDOWS`] windows.
    #[error("{count} windows: a list holds at most 16")]
    TooMany {
        /// How many windows the list holds.
        count: usize,
    },
}

impl WindowError {
    /// A short label for metrics and event reasons.
    pub fn category(&self) -> &'static str {
        "InvalidWindow"
    }

    fn field(field: &'static str, value: &str, reason: impl Into<String>) -> Self {
        WindowError::Field {
            field,
            value: value.to_owned(),
            reason: reason.into(),
        }
    }
}

/// A validated window.
#[derive(Clone, Debug)]
pub struct ParsedWindow {
    shape: Shape,
}

#[derive(Clone, Debug)]
enum Shape {
    Recurring(Box<Recurring>),
    OneOff {
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    },
}

#[derive(Clone, Debug)]
struct Recurring {
    cron: Cron,
    duration: Duration,
    zone: Tz,
}

/// Validates a window: its shape, schedule, duration, time zone, or start and end.
pub fn parse_window(w: &Window) -> Result<ParsedWindow, WindowError> {
    let shape = match (&w.schedule, &w.duration, &w.start, &w.end) {
        (Some(schedule), Some(duration), None, None) => Shape::Recurring(Box::new(Recurring {
            cron: parse_schedule(schedule)?,
            duration: parse_window_duration(duration.as_str())?,
            zone: parse_zone(w.time_zone.as_deref())?,
        })),
        (None, None, Some(start), Some(end)) if w.time_zone.is_none() => {
            let (start, end) = parse_one_off(start, end)?;
            Shape::OneOff { start, end }
        }
        _ => {
            return Err(WindowError::Shape {
                found: fields_set(w),
            });
        }
    };
    Ok(ParsedWindow { shape })
}

fn fields_set(w: &Window) -> String {
    let fields = [
        ("schedule", w.schedule.is_some()),
        ("duration", w.duration.is_some()),
        ("timeZone", w.time_zone.is_some()),
        ("start", w.start.is_some()),
        ("end", w.end.is_some()),
    ];
    let set: Vec<&str> = fields.iter().filter(|f| f.1).map(|f| f.0).collect();
    if set.is_empty() {
        "no field".to_owned()
    } else {
        set.join(", ")
    }
}

fn parse_schedule(schedule: &str) -> Result<Cron, WindowError> {
    let bad = |reason: String| WindowError::field("schedule", schedule, reason);
    check_schedule(schedule).map_err(bad)?;
    let cron = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(schedule)
        .map_err(|e| bad(e.to_string()))?;
    // A schedule such as `0 0 30 2 *` passes every field check and never fires.
    let origin = NaiveDate::from_ymd_opt(2000, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .unwrap_or_default();
    cron.find_next_occurrence(&origin, true)
        .map_err(|_| bad("never fires".to_owned()))?;
    Ok(cron)
}

fn parse_window_duration(duration: &str) -> Result<Duration, WindowError> {
    let d = parse_go_duration(duration).map_err(|DurationError::Invalid { reason, .. }| {
        WindowError::field("duration", duration, reason)
    })?;
    if d < Duration::seconds(1) {
        return Err(WindowError::field(
            "duration",
            duration,
            "must be at least 1s",
        ));
    }
    Ok(d)
}

fn parse_zone(zone: Option<&str>) -> Result<Tz, WindowError> {
    match zone {
        None => Ok(Tz::UTC),
        Some(name) => Tz::from_str(name)
            .map_err(|_| WindowError::field("timeZone", name, "unknown time zone")),
    }
}

fn parse_one_off(start: &str, end: &str) -> Result<(DateTime<Utc>, DateTime<Utc>), WindowError> {
    let parse = |field: &'static str, value: &str| {
        DateTime::parse_from_rfc3339(value)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| WindowError::field(field, value, format!("not an RFC 3339 time: {e}")))
    };
    let (start_at, end_at) = (parse("start", start)?, parse("end", end)?);
    if end_at <= start_at {
        return Err(WindowError::field(
            "end",
            end,
            format!("must be after start {start:?}"),
        ));
    }
    Ok((start_at, end_at))
}

/// One field of a 5-field cron expression.
struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    /// Names for the values from `min` on (`JAN` is 1, `SUN` is 0).
    names: &'static [&'static str],
}

const MONTHS: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

const FIELDS: [FieldSpec; 5] = [
    FieldSpec {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
    },
    FieldSpec {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
    },
    FieldSpec {
        name: "day-of-month",
        min: 1,
        max: 31,
        names: &[],
    },
    FieldSpec {
        name: "month",
        min: 1,
        max: 12,
        names: MONTHS,
    },
    FieldSpec {
        name: "day-of-week",
        min: 0,
        max: 7,
        names: DAYS,
    },
];

/// Accepts the standard 5-field form only: numbers, names of months and weekdays, `*`,
/// lists, ranges, and steps on `*` or a range. Rejects seconds and year fields,
/// `@daily`-style nicknames and the extensions `?`, `L`, `W`, `#` and `+`.
fn check_schedule(schedule: &str) -> Result<(), String> {
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() != FIELDS.len() {
        return Err(format!(
            "expected 5 fields (minute hour day-of-month month day-of-week), found {}",
            fields.len()
        ));
    }
    for (field, spec) in fields.iter().zip(FIELDS.iter()) {
        for item in field.split(',') {
            check_item(item, spec)?;
        }
    }
    Ok(())
}

fn check_item(item: &str, spec: &FieldSpec) -> Result<(), String> {
    let (range, step) = match item.split_once('/') {
        Some((range, step)) => (range, Some(step)),
        None => (item, None),
    };
    if let Some(step) = step {
        let n =
            number(step).ok_or_else(|| format!("{} step {step:?} is not a number", spec.name))?;
        if n == 0 || n > spec.max {
            return Err(format!("{} step out of range", spec.name));
        }
        if range != "*" && !range.contains('-') {
            return Err(format!(
                "{} step {item:?} needs * or a range before /",
                spec.name
            ));
        }
    }
    if range == "*" {
        return Ok(());
    }
    let (lo, hi) = range.split_once('-').unwrap_or((range, range));
    let (lo, mut hi) = (spec.value(lo)?, spec.value(hi)?);
    if spec.names == DAYS && hi == 0 && lo > 0 {
        hi = 7; // `FRI-SUN`
    }
    if lo > hi {
        return Err(format!("{} range {range:?} runs backwards", spec.name));
    }
    Ok(())
}

impl FieldSpec {
    fn value(&self, text: &str) -> Result<u32, String> {
        if let Some(n) = number(text) {
            if n < self.min || n > self.max {
                return Err(format!("{} out of range", self.name));
            }
            return Ok(n);
        }
        let offset = if self.names == MONTHS { 1 } else { 0 };
        self.names
            .iter()
            .position(|name| name.eq_ignore_ascii_case(text))
            .and_then(|i| u32::try_from(i).ok())
            .map(|i| i + offset)
            .ok_or_else(|| format!("{} value {text:?} is not allowed", self.name))
    }
}

/// A plain decimal number; anything with more than four digits is out of every range.
fn number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = text.trim_start_matches('0');
    if significant.len() > 4 {
        return Some(u32::MAX);
    }
    Some(significant.parse().unwrap_or(0))
}

impl ParsedWindow {
    /// Whether the window is open at `now` (AP-29, AP-31): some opening has begun at or
    /// before `now` and ends after it.
    pub fn is_open(&self, now: DateTime<Utc>) -> bool {
        self.current_end(now).is_some()
    }

    /// The start of the next opening strictly after `now`; `None` for a one-off window
    /// that has started.
    pub fn next_open(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.shape {
            Shape::OneOff { start, .. } => Some(*start).filter(|s| *s > now),
            Shape::Recurring(r) => r.next_start(now),
        }
    }

    /// The end of the opening that contains `now` (the latest, if openings overlap), or
    /// `None` when the window is closed.
    pub fn current_end(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.shape {
            Shape::OneOff { start, end } => Some(*end).filter(|_| *start <= now && now < *end),
            Shape::Recurring(r) => r
                .last_start(now)
                .and_then(|s| s.checked_add_signed(r.duration))
                .filter(|end| now < *end),
        }
    }

    /// Whether this is a recurring window (as opposed to a one-off).
    pub fn is_recurring(&self) -> bool {
        matches!(self.shape, Shape::Recurring(_))
    }
}

impl Recurring {
    /// The latest opening start at or before `now`.
    fn last_start(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let wall = self.wall_limit(now)?;
        let fire = self.cron.find_previous_occurrence(&wall, true).ok()?;
        self.fire_instant(fire)
    }

    /// The earliest opening start strictly after `now`.
    fn next_start(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let wall = self.wall_limit(now)?;
        let fire = self.cron.find_next_occurrence(&wall, false).ok()?;
        self.fire_instant(fire)
    }

    /// The latest local wall time whose fire instant is at or before `now`.
    ///
    /// Fire instants grow with wall time, so schedule searches run on wall times from
    /// this limit. It is `now`'s wall time, except in the second pass of a repeated hour:
    /// every wall time of that hour already fired in the first pass, so the limit is the
    /// last wall time before the clock went back.
    fn wall_limit(&self, now: DateTime<Utc>) -> Option<NaiveDateTime> {
        let local = now.with_timezone(&self.zone);
        let wall = local.naive_local();
        let LocalResult::Ambiguous(earlier, _) = self.zone.from_local_datetime(&wall) else {
            return Some(wall);
        };
        let offset_now = local.offset().fix();
        if earlier.offset().fix() == offset_now {
            return Some(wall);
        }
        let back = first_second(earlier.timestamp(), now.timestamp(), |s| {
            self.offset_at(s) == Some(offset_now)
        })?;
        let before = DateTime::from_timestamp(back, 0)? - Duration::nanoseconds(1);
        Some(before.with_timezone(&self.zone).naive_local())
    }

    /// The instant a wall time fires at: its single instant; the first of two in a
    /// repeated hour; the first instant after the gap for a skipped wall time.
    fn fire_instant(&self, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
        match self.zone.from_local_datetime(&wall) {
            LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
            LocalResult::Ambiguous(earlier, _) => Some(earlier.with_timezone(&Utc)),
            LocalResult::None => self.gap_end(wall),
        }
    }

    /// The first instant whose wall time is past `wall`, a wall time inside a gap. UTC
    /// offsets lie between -12h and +14h, so it lies in that span around `wall`.
    fn gap_end(&self, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
        let at = wall.and_utc().timestamp();
        let second = first_second(at - 15 * 3600, at + 13 * 3600, |s| {
            DateTime::from_timestamp(s, 0)
                .is_some_and(|t| t.with_timezone(&self.zone).naive_local() > wall)
        })?;
        DateTime::from_timestamp(second, 0)
    }

    fn offset_at(&self, second: i64) -> Option<chrono::FixedOffset> {
        DateTime::from_timestamp(second, 0).map(|t| t.with_timezone(&self.zone).offset().fix())
    }
}

/// The first second in `(lo, hi]` where `pred` holds, for a `pred` false at `lo`, true at
/// `hi` and changing once in between. Time-zone changes happen on whole seconds.
fn first_second(mut lo: i64, mut hi: i64, pred: impl Fn(i64) -> bool) -> Option<i64> {
    if pred(lo) || !pred(hi) {
        return None;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// What a list of windows is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowKind {
    /// Deferred changes go in while one is open; an invalid one counts as closed (AP-33).
    Maintenance,
    /// Nothing is applied while one is open; an invalid one counts as open (AP-39).
    Freeze,
}

/// The verdict on a list of windows at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowVerdict {
    /// Whether the list counts as open: a valid window is open, or (freeze only) the list
    /// or one of its windows is invalid.
    pub open: bool,
    /// The earliest start of an opening strictly after now, among the valid windows;
    /// `None` when there is none or the list as a whole is invalid.
    pub next_open: Option<DateTime<Utc>>,
    /// While open: when the list closes, following back-to-back and overlapping openings
    /// of all windows. `None` when closed, or when an invalid freeze window holds the
    /// list open with no end.
    pub open_until: Option<DateTime<Utc>>,
    /// The invalid windows by index in the list; a list that is too long reports
    /// [`WindowError::TooMany`] at index 16, the first window past the limit.
    pub errors: Vec<(usize, WindowError)>,
}

/// Evaluates a list of windows at `now`. Any open window opens the list. An invalid
/// maintenance window counts as closed (AP-33); an invalid freeze window counts as open
/// (AP-39). A list of more than 16 windows is invalid as a whole (rule reading 14):
/// closed for maintenance, open for freeze.
pub fn evaluate_windows(kind: WindowKind, windows: &[Window], now: DateTime<Utc>) -> WindowVerdict {
    let fail_open = kind == WindowKind::Freeze;
    if windows.len() > MAX_WINDOWS {
        return WindowVerdict {
            open: fail_open,
            next_open: None,
            open_until: None,
            errors: vec![(
                MAX_WINDOWS,
                WindowError::TooMany {
                    count: windows.len(),
                },
            )],
        };
    }
    let mut valid = Vec::with_capacity(windows.len());
    let mut errors = Vec::new();
    for (i, w) in windows.iter().enumerate() {
        match parse_window(w) {
            Ok(parsed) => valid.push(parsed),
            Err(e) => errors.push((i, e)),
        }
    }
    let held_open = fail_open && !errors.is_empty();
    let open_until = if held_open {
        None
    } else {
        list_open_until(&valid, now)
    };
    WindowVerdict {
        open: held_open || open_until.is_some(),
        next_open: valid.iter().filter_map(|w| w.next_open(now)).min(),
        open_until,
        errors,
    }
}

/// When the open list closes, following openings that continue one another; `None` when
/// no window is open at `now`.
fn list_open_until(valid: &[ParsedWindow], now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let latest_end = |at| valid.iter().filter_map(|w| w.current_end(at)).max();
    let mut end = latest_end(now)?;
    for _ in 0..MAX_CHAINED_OPENINGS {
        match latest_end(end) {
            Some(later) if later > end => end = later,
            _ => break,
        }
    }
    Some(end)
}
