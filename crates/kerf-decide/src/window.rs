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

use std::ops::Deref;

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use kerf_api::policy::Window;
use kerf_api::validate::{parse_schedule as read_schedule, parse_time_zone};

use crate::duration::{DurationError, parse_go_duration};

mod schedule;

pub use schedule::Schedule;

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
    schedule: Schedule,
    duration: Duration,
    zone: Tz,
}

/// Validates a window: its shape, schedule, duration, time zone, or start and end.
pub fn parse_window(w: &Window) -> Result<ParsedWindow, WindowError> {
    let shape = match (&w.schedule, &w.duration, &w.start, &w.end) {
        (Some(schedule), Some(duration), None, None) => Shape::Recurring(Box::new(Recurring {
            schedule: parse_schedule(schedule)?,
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

/// The schedule as kerf-api's policy validation reads it, so both name the same windows.
fn parse_schedule(schedule: &str) -> Result<Schedule, WindowError> {
    read_schedule(schedule)
        .map(|cron| Schedule::new(&cron))
        .map_err(|reason| WindowError::field("schedule", schedule, reason))
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
        Some(name) => {
            parse_time_zone(name).map_err(|reason| WindowError::field("timeZone", name, reason))
        }
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

    /// [`ParsedWindow::current_end`] and [`ParsedWindow::next_open`] at once, converting
    /// `now` to the window's time zone once.
    pub fn end_and_next(
        &self,
        now: DateTime<Utc>,
    ) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
        let Shape::Recurring(r) = &self.shape else {
            return (self.current_end(now), self.next_open(now));
        };
        let Some(wall) = r.wall_limit(now) else {
            return (None, None);
        };
        let end = r
            .schedule
            .prev(wall, true)
            .and_then(|fire| r.fire_instant(fire))
            .and_then(|s| s.checked_add_signed(r.duration))
            .filter(|end| now < *end);
        let next = r
            .schedule
            .next(wall, false)
            .and_then(|fire| r.fire_instant(fire));
        (end, next)
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
        let fire = self.schedule.prev(wall, true)?;
        self.fire_instant(fire)
    }

    /// The earliest opening start strictly after `now`.
    fn next_start(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let wall = self.wall_limit(now)?;
        let fire = self.schedule.next(wall, false)?;
        self.fire_instant(fire)
    }

    /// The latest local wall time whose fire instant is at or before `now`.
    ///
    /// Fire instants grow with wall time, so schedule searches run on wall times from
    /// this limit. It is `now`'s wall time, except in the second pass of a repeated hour:
    /// every wall time of that hour already fired in the first pass, so the limit is the
    /// last wall time before the clock went back.
    fn wall_limit(&self, now: DateTime<Utc>) -> Option<NaiveDateTime> {
        if self.zone == Tz::UTC {
            return Some(now.naive_utc()); // no hour repeats in UTC
        }
        let utc = now.naive_utc();
        let offset_now = self.zone.offset_from_utc_datetime(&utc).fix();
        let wall = utc.checked_add_offset(offset_now)?;
        let LocalResult::Ambiguous(earlier, _) = self.zone.offset_from_local_datetime(&wall) else {
            return Some(wall);
        };
        let earlier = earlier.fix();
        if earlier == offset_now {
            return Some(wall);
        }
        let earlier_at = wall.checked_sub_offset(earlier)?.and_utc().timestamp();
        let back = first_second(earlier_at, now.timestamp(), |s| {
            self.offset_at(s) == Some(offset_now)
        })?;
        let before = DateTime::from_timestamp(back, 0)? - Duration::nanoseconds(1);
        Some(before.with_timezone(&self.zone).naive_local())
    }

    /// The instant a wall time fires at: its single instant; the first of two in a
    /// repeated hour; the first instant after the gap for a skipped wall time.
    fn fire_instant(&self, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
        if self.zone == Tz::UTC {
            return Some(wall.and_utc());
        }
        let offset = match self.zone.offset_from_local_datetime(&wall) {
            LocalResult::Single(o) | LocalResult::Ambiguous(o, _) => o.fix(),
            LocalResult::None => return self.gap_end(wall),
        };
        wall.checked_sub_offset(offset).map(|t| t.and_utc())
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
///
/// This validates every window on each call; [`WindowList`] validates once.
pub fn evaluate_windows(kind: WindowKind, windows: &[Window], now: DateTime<Utc>) -> WindowVerdict {
    WindowList::new(windows.to_vec()).evaluate(kind, now)
}

/// A list of windows as written, each validated once when the list is made.
///
/// It reads as the windows as written (`Deref` to `[Window]`), compares and serializes as
/// them, and evaluates without parsing a schedule or time zone again.
#[derive(Clone, Debug, Default)]
pub struct WindowList {
    windows: Vec<Window>,
    valid: Vec<ParsedWindow>,
    /// The invalid windows by index in the list.
    errors: Vec<(usize, WindowError)>,
}

impl WindowList {
    /// Validates every window of `windows`.
    pub fn new(windows: Vec<Window>) -> WindowList {
        let mut valid = Vec::with_capacity(windows.len());
        let mut errors = Vec::new();
        for (i, w) in windows.iter().enumerate() {
            match parse_window(w) {
                Ok(parsed) => valid.push(parsed),
                Err(e) => errors.push((i, e)),
            }
        }
        WindowList {
            windows,
            valid,
            errors,
        }
    }

    /// The windows as written.
    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    /// The invalid windows by index in the list (a list that is too long is not one of
    /// them: see [`WindowList::too_long`]).
    pub fn window_errors(&self) -> &[(usize, WindowError)] {
        &self.errors
    }

    /// Whether the list holds more than [`MAX_WINDOWS`] windows, which makes it invalid as
    /// a whole.
    pub fn too_long(&self) -> bool {
        self.windows.len() > MAX_WINDOWS
    }

    /// Whether the list, or one of its windows, is invalid.
    pub fn has_errors(&self) -> bool {
        self.too_long() || !self.errors.is_empty()
    }

    /// The verdict on the list at `now` (see [`evaluate_windows`]).
    pub fn evaluate(&self, kind: WindowKind, now: DateTime<Utc>) -> WindowVerdict {
        let status = self.status(kind, now);
        let errors = if self.too_long() {
            vec![(
                MAX_WINDOWS,
                WindowError::TooMany {
                    count: self.windows.len(),
                },
            )]
        } else {
            self.errors.clone()
        };
        WindowVerdict {
            open: status.open,
            next_open: status.next_open,
            open_until: status.open_until,
            errors,
        }
    }

    /// The `open` and `open_until` of [`WindowList::evaluate`]: whether the list counts as
    /// open at `now` and, while open, when it closes.
    pub fn open_until(
        &self,
        kind: WindowKind,
        now: DateTime<Utc>,
    ) -> (bool, Option<DateTime<Utc>>) {
        let fail_open = kind == WindowKind::Freeze;
        if self.too_long() {
            return (fail_open, None);
        }
        if fail_open && !self.errors.is_empty() {
            return (true, None);
        }
        let until = list_open_until(&self.valid, now);
        (until.is_some(), until)
    }

    /// The `open`, `open_until` and `next_open` of [`WindowList::evaluate`] (what a
    /// deferred change reads), each window's time zone read once.
    pub fn status(&self, kind: WindowKind, now: DateTime<Utc>) -> WindowStatus {
        if self.too_long() {
            let open = kind == WindowKind::Freeze;
            return WindowStatus {
                open,
                open_until: None,
                next_open: None,
            };
        }
        let mut latest_end = None;
        let mut next_open = None;
        for w in &self.valid {
            let (end, next) = w.end_and_next(now);
            latest_end = latest_end.max(end);
            next_open = match (next_open, next) {
                (Some(a), Some(b)) => Some(std::cmp::min(a, b)),
                (a, b) => a.or(b),
            };
        }
        if kind == WindowKind::Freeze && !self.errors.is_empty() {
            return WindowStatus {
                open: true,
                open_until: None,
                next_open,
            };
        }
        let open_until = latest_end.map(|end| chain_openings(&self.valid, end));
        WindowStatus {
            open: open_until.is_some(),
            open_until,
            next_open,
        }
    }

    /// The `next_open` of [`WindowList::evaluate`]: the earliest start of an opening
    /// strictly after `now` among the valid windows; `None` for a list that is too long.
    pub fn next_open(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if self.too_long() {
            return None;
        }
        self.valid.iter().filter_map(|w| w.next_open(now)).min()
    }
}

impl From<Vec<Window>> for WindowList {
    fn from(windows: Vec<Window>) -> WindowList {
        WindowList::new(windows)
    }
}

impl Deref for WindowList {
    type Target = [Window];

    fn deref(&self) -> &[Window] {
        &self.windows
    }
}

impl PartialEq for WindowList {
    fn eq(&self, other: &WindowList) -> bool {
        self.windows == other.windows
    }
}

impl serde::Serialize for WindowList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.windows.serialize(serializer)
    }
}

/// When the open list closes, following openings that continue one another; `None` when
/// no window is open at `now`.
fn list_open_until(valid: &[ParsedWindow], now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let end = valid.iter().filter_map(|w| w.current_end(now)).max()?;
    Some(chain_openings(valid, end))
}

/// Follows openings that continue one another from `end`, the latest end of the openings
/// that contain now.
fn chain_openings(valid: &[ParsedWindow], mut end: DateTime<Utc>) -> DateTime<Utc> {
    let latest_end = |at| valid.iter().filter_map(|w| w.current_end(at)).max();
    for _ in 0..MAX_CHAINED_OPENINGS {
        match latest_end(end) {
            Some(later) if later > end => end = later,
            _ => break,
        }
    }
    end
}

/// Whether a list of windows is open, until when, and when it opens next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowStatus {
    /// As [`WindowVerdict::open`].
    pub open: bool,
    /// As [`WindowVerdict::open_until`].
    pub open_until: Option<DateTime<Utc>>,
    /// As [`WindowVerdict::next_open`].
    pub next_open: Option<DateTime<Utc>>,
}
