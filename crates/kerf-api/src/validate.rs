//! Checks of Kerf's resources outside the API server.
//!
//! The API server checks a policy against the CRD schema, but a policy can reach the agent
//! without that check (an older CRD, a copy read from a file). [`validate_policy`] checks
//! what the schema checks (ranges, patterns, the shape of a window, list and string
//! bounds) and names every invalid field, so the agent can set `Valid=False` listing them.
//! [`from_value`] turns a JSON object into a typed resource and, when it does not convert,
//! names the field that failed. A window's cron `schedule` and `timeZone` are read with
//! [`parse_schedule`] and [`parse_time_zone`], the same functions kerf-decide evaluates
//! windows with, so the policy's `Valid` condition names exactly the windows that
//! evaluation treats as invalid.

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use chrono::{DateTime, Datelike, NaiveDate};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::{Cron, Weekday};
use regex::Regex;
use serde::de::DeserializeOwned;

use crate::duration::{GO_DURATION_PATTERN, GoDuration, UNIT_DECIMAL_PATTERN, UnitDecimal};
use crate::policy::{
    ApplySettings, Guardrails, HpaSettings, LabelSelector, PolicySelector, RecommendationSettings,
    RightsizingPolicy, RightsizingPolicySpec, RollbackSettings, Window,
};
use crate::quantity::{QUANTITY_MAX_LENGTH, QUANTITY_PATTERN, Quantity};
use crate::rsr::RightsizingRecommendation;

mod recommendation;
mod selector;

pub use recommendation::{RECOMMENDATION_ID_MAX_LENGTH, validate_recommendation_spec};
pub use selector::{selector_problems, selects_explicitly};

/// Most maintenance or freeze windows a policy may list (AP-32).
pub const MAX_WINDOWS: usize = 16;

/// Longest Go duration accepted.
pub const DURATION_MAX_LENGTH: usize = 32;

/// Longest decimal string accepted.
pub const UNIT_DECIMAL_MAX_LENGTH: usize = 16;

/// The message of a window that is neither recurring nor one-off (same as the CRD rule).
pub const WINDOW_SHAPE_MESSAGE: &str =
    "a window is either schedule and duration (with an optional timeZone) or start and end";

/// One invalid field: where it is and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FieldError {
    /// Path of the field from the object's root, for example
    /// `spec.apply.maintenanceWindows[2].duration`.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, message: impl fmt::Display) -> Self {
        FieldError {
            path: path.into(),
            message: message.to_string(),
        }
    }
}

/// Converts a JSON value into `T`. A failure names the field that did not convert, with
/// its path prefixed by `prefix` (for example `spec` when `value` is a policy's spec).
pub fn from_value<T: DeserializeOwned>(
    value: &serde_json::Value,
    prefix: &str,
) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = match (prefix.is_empty(), inner.as_str()) {
            (true, _) => inner.clone(),
            (false, ".") => prefix.to_owned(),
            (false, _) => format!("{prefix}.{inner}"),
        };
        FieldError::new(path, e.into_inner())
    })
}

/// Converts a whole `RightsizingPolicy` object; paths start at the object's root.
pub fn policy_from_value(value: &serde_json::Value) -> Result<RightsizingPolicy, FieldError> {
    from_value(value, "")
}

/// Converts a policy's `spec`; paths start with `spec.`.
pub fn policy_spec_from_value(
    value: &serde_json::Value,
) -> Result<RightsizingPolicySpec, FieldError> {
    from_value(value, "spec")
}

/// Converts a whole `RightsizingRecommendation` object; paths start at the object's root.
pub fn recommendation_from_value(
    value: &serde_json::Value,
) -> Result<RightsizingRecommendation, FieldError> {
    from_value(value, "")
}

/// Every invalid field of a policy's spec, in field order; empty when the spec is valid.
/// Paths start with `spec.`. The selector's problems ([`selector_problems`]) come first.
pub fn validate_policy(spec: &RightsizingPolicySpec) -> Vec<FieldError> {
    let mut c = Checker {
        errors: selector_problems(spec),
    };
    if let Some(s) = &spec.selector {
        c.selector("spec.selector", s);
    }
    if let Some(r) = &spec.recommendation {
        c.recommendation("spec.recommendation", r);
    }
    if let Some(g) = &spec.guardrails {
        c.guardrails("spec.guardrails", g);
    }
    if let Some(a) = &spec.apply {
        c.apply("spec.apply", a);
    }
    if let Some(h) = &spec.hpa {
        c.hpa("spec.hpa", h);
    }
    c.errors
}

fn compiled(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

static GO_DURATION_RE: LazyLock<Option<Regex>> = LazyLock::new(|| compiled(GO_DURATION_PATTERN));
static UNIT_DECIMAL_RE: LazyLock<Option<Regex>> = LazyLock::new(|| compiled(UNIT_DECIMAL_PATTERN));
static QUANTITY_RE: LazyLock<Option<Regex>> = LazyLock::new(|| compiled(QUANTITY_PATTERN));

/// True when `s` matches the pattern; a pattern that does not compile matches nothing.
fn matches(re: &LazyLock<Option<Regex>>, s: &str) -> bool {
    re.as_ref().is_some_and(|re| re.is_match(s))
}

/// True when `s` is a Go duration as the CRD accepts it.
pub fn is_go_duration(s: &str) -> bool {
    s.len() <= DURATION_MAX_LENGTH && matches(&GO_DURATION_RE, s)
}

/// True when `s` is a decimal from 0 to 1 as the CRD accepts it.
pub fn is_unit_decimal(s: &str) -> bool {
    s.len() <= UNIT_DECIMAL_MAX_LENGTH && matches(&UNIT_DECIMAL_RE, s)
}

/// True when `s` is a quantity as the CRD accepts it.
pub fn is_quantity(s: &str) -> bool {
    s.len() <= QUANTITY_MAX_LENGTH && matches(&QUANTITY_RE, s)
}

#[derive(Default)]
struct Checker {
    errors: Vec<FieldError>,
}

impl Checker {
    fn push(&mut self, path: &str, message: impl fmt::Display) {
        self.errors.push(FieldError::new(path, message));
    }

    fn range(&mut self, path: &str, value: Option<i64>, min: i64, max: i64) {
        if let Some(v) = value
            && !(min..=max).contains(&v)
        {
            self.push(path, format!("{v} is out of range: must be {min} to {max}"));
        }
    }

    fn max_len(&mut self, path: &str, s: &str, max: usize) {
        let n = s.chars().count();
        if n > max {
            self.push(path, format!("too long: {n} characters, at most {max}"));
        }
    }

    fn max_items(&mut self, path: &str, n: usize, max: usize) {
        if n > max {
            self.push(path, format!("too many items: {n}, at most {max}"));
        }
    }

    /// Names `value` at `path` unless `valid` accepts it; `what` says what it should be.
    fn written(&mut self, path: &str, value: Option<&str>, valid: fn(&str) -> bool, what: &str) {
        if let Some(v) = value
            && !valid(v)
        {
            self.push(path, format!("{v:?} is not {what}"));
        }
    }

    fn duration(&mut self, path: &str, d: Option<&GoDuration>) {
        let what = "a Go duration such as 30m, 1h30m or 168h";
        self.written(path, d.map(GoDuration::as_str), is_go_duration, what);
    }

    fn unit_decimal(&mut self, path: &str, d: Option<&UnitDecimal>) {
        let what = "a quoted decimal from 0 to 1 such as \"0.7\"";
        self.written(path, d.map(UnitDecimal::as_str), is_unit_decimal, what);
    }

    fn quantity(&mut self, path: &str, q: Option<&Quantity>) {
        let what = "a quantity such as 250m or 512Mi";
        self.written(path, q.map(Quantity::as_str), is_quantity, what);
    }

    fn strings(&mut self, path: &str, items: &[String], max_items: usize, max_len: usize) {
        self.max_items(path, items.len(), max_items);
        for (i, s) in items.iter().enumerate() {
            self.max_len(&format!("{path}[{i}]"), s, max_len);
        }
    }

    fn selector(&mut self, path: &str, s: &PolicySelector) {
        if let Some(ns) = &s.namespaces {
            self.strings(&format!("{path}.namespaces"), ns, 256, 63);
        }
        if let Some(l) = &s.namespace_selector {
            self.label_selector(&format!("{path}.namespaceSelector"), l);
        }
        if let Some(l) = &s.workload_selector {
            self.label_selector(&format!("{path}.workloadSelector"), l);
        }
        if let Some(k) = &s.kinds {
            self.max_items(&format!("{path}.kinds"), k.len(), 3);
        }
    }

    fn label_selector(&mut self, path: &str, l: &LabelSelector) {
        for (key, value) in l.match_labels.iter().flatten() {
            self.max_len(&format!("{path}.matchLabels.{key}"), value, 63);
        }
        let Some(exprs) = &l.match_expressions else {
            return;
        };
        let path = format!("{path}.matchExpressions");
        self.max_items(&path, exprs.len(), 32);
        for (i, e) in exprs.iter().enumerate() {
            self.max_len(&format!("{path}[{i}].key"), &e.key, 317);
            if let Some(v) = &e.values {
                self.strings(&format!("{path}[{i}].values"), v, 64, 63);
            }
        }
    }

    fn recommendation(&mut self, path: &str, r: &RecommendationSettings) {
        self.duration(&format!("{path}.window"), r.window.as_ref());
        let pct = |v: Option<u8>| v.map(i64::from);
        self.range(
            &format!("{path}.cpuPercentile"),
            pct(r.cpu_percentile),
            1,
            100,
        );
        self.range(
            &format!("{path}.memoryPercentile"),
            pct(r.memory_percentile),
            1,
            100,
        );
        let headroom = r.headroom_percent.map(i64::from);
        self.range(&format!("{path}.headroomPercent"), headroom, 0, 1000);
    }

    fn guardrails(&mut self, path: &str, g: &Guardrails) {
        self.duration(
            &format!("{path}.learningPeriod"),
            g.learning_period.as_ref(),
        );
        self.unit_decimal(&format!("{path}.minConfidence"), g.min_confidence.as_ref());
        let max_change = g.max_change_percent.map(i64::from);
        self.range(&format!("{path}.maxChangePercent"), max_change, 1, 100);
        self.quantity(&format!("{path}.minCPU"), g.min_cpu.as_ref());
        self.quantity(&format!("{path}.minMemory"), g.min_memory.as_ref());
        self.duration(&format!("{path}.cooldown"), g.cooldown.as_ref());
        if let Some(r) = &g.rollback {
            self.rollback(&format!("{path}.rollback"), r);
        }
    }

    fn rollback(&mut self, path: &str, r: &RollbackSettings) {
        self.duration(&format!("{path}.watchDuration"), r.watch_duration.as_ref());
        self.range(
            &format!("{path}.oomKills"),
            r.oom_kills.map(i64::from),
            1,
            1000,
        );
        self.range(
            &format!("{path}.restarts"),
            r.restarts.map(i64::from),
            1,
            1000,
        );
        let ratio = r.throttling_ratio.as_ref();
        self.unit_decimal(&format!("{path}.throttlingRatio"), ratio);
    }

    fn apply(&mut self, path: &str, a: &ApplySettings) {
        self.duration(&format!("{path}.fallbackAfter"), a.fallback_after.as_ref());
        let remaining = a.min_window_remaining.as_ref();
        self.duration(&format!("{path}.minWindowRemaining"), remaining);
        for (name, windows) in [
            ("maintenanceWindows", &a.maintenance_windows),
            ("freezeWindows", &a.freeze_windows),
        ] {
            let Some(windows) = windows else { continue };
            let list = format!("{path}.{name}");
            self.max_items(&list, windows.len(), MAX_WINDOWS);
            for (i, w) in windows.iter().enumerate() {
                self.window(&format!("{list}[{i}]"), w);
            }
        }
    }

    fn window(&mut self, path: &str, w: &Window) {
        let recurring = w.schedule.is_some() && w.duration.is_some();
        let one_off = w.start.is_some() && w.end.is_some();
        let shaped = (recurring && w.start.is_none() && w.end.is_none())
            || (one_off && w.schedule.is_none() && w.duration.is_none() && w.time_zone.is_none());
        if !shaped {
            let field = window_shape_field(w);
            self.push(&format!("{path}{field}"), WINDOW_SHAPE_MESSAGE);
        }
        if let Some(s) = &w.schedule {
            let field = format!("{path}.schedule");
            self.max_len(&field, s, 128);
            if let Err(reason) = parse_schedule(s) {
                self.push(
                    &field,
                    format!("{s:?} is not a 5-field cron schedule: {reason}"),
                );
            }
        }
        self.duration(&format!("{path}.duration"), w.duration.as_ref());
        if let Some(tz) = &w.time_zone {
            let field = format!("{path}.timeZone");
            self.max_len(&field, tz, 64);
            if parse_time_zone(tz).is_err() {
                self.push(
                    &field,
                    format!("{tz:?} is not an IANA time zone such as Europe/Berlin"),
                );
            }
        }
        let start = self.time(&format!("{path}.start"), w.start.as_deref());
        let end = self.time(&format!("{path}.end"), w.end.as_deref());
        if let (Some(start), Some(end)) = (start, end)
            && end <= start
        {
            self.push(&format!("{path}.end"), "end must be after start");
        }
    }

    fn time(&mut self, path: &str, t: Option<&str>) -> Option<DateTime<chrono::FixedOffset>> {
        let t = t?;
        self.max_len(path, t, 64);
        match DateTime::parse_from_rfc3339(t) {
            Ok(t) => Some(t),
            Err(e) => {
                self.push(path, format!("{t:?} is not an RFC 3339 time: {e}"));
                None
            }
        }
    }

    fn hpa(&mut self, path: &str, h: &HpaSettings) {
        let min = h.min_target_utilization.map(i64::from);
        let max = h.max_target_utilization.map(i64::from);
        self.range(&format!("{path}.minTargetUtilization"), min, 1, 100);
        self.range(&format!("{path}.maxTargetUtilization"), max, 1, 100);
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            self.push(
                &format!("{path}.minTargetUtilization"),
                "minTargetUtilization must not exceed maxTargetUtilization",
            );
        }
    }
}

/// The field a malformed window is named by: the one that completes the other shape, or
/// the field missing from the shape begun.
fn window_shape_field(w: &Window) -> &'static str {
    let recurring_begun = w.schedule.is_some() || w.duration.is_some() || w.time_zone.is_some();
    let one_off_begun = w.start.is_some() || w.end.is_some();
    match (recurring_begun, one_off_begun) {
        (true, true) if w.start.is_some() => ".start",
        (true, true) => ".end",
        (true, false) if w.schedule.is_none() => ".schedule",
        (true, false) => ".duration",
        (false, true) if w.start.is_none() => ".start",
        (false, true) => ".end",
        (false, false) => "",
    }
}

/// Reads a window's `timeZone`: an IANA name such as `Europe/Berlin` or `UTC`.
pub fn parse_time_zone(name: &str) -> Result<Tz, String> {
    Tz::from_str(name).map_err(|_| "unknown time zone".to_owned())
}

/// Reads a window's `schedule`: the standard 5-field cron form only (numbers, names of
/// months and weekdays, `*`, lists, ranges, and steps on `*` or a range). Seconds and year
/// fields, `@daily`-style nicknames, the extensions `?`, `L`, `W`, `#` and `+`, and a
/// schedule that never fires (`0 0 30 2 *`) are errors; the error says what is wrong.
pub fn parse_schedule(schedule: &str) -> Result<Cron, String> {
    check_schedule(schedule)?;
    let cron = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(schedule)
        .map_err(|e| e.to_string())?;
    // A schedule such as `0 0 30 2 *` passes every field check and never fires.
    if !fires(&cron) {
        return Err("never fires".to_owned());
    }
    Ok(cron)
}

/// Whether the schedule fires at all: some second, minute and hour fire, and some day
/// from 2000 to 2008 does. Days repeat with the calendar, and the rarest day a 5-field
/// schedule can name, 29 February, comes at least every 8 years, so this answers as a
/// search to the end of croner's range would, in at most 3,288 steps.
fn fires(cron: &Cron) -> bool {
    let p = &cron.pattern;
    let some = |n: u32, hit: &dyn Fn(u32) -> bool| (0..n).any(hit);
    if !(some(60, &|v| p.second_match(v).unwrap_or(false))
        && some(60, &|v| p.minute_match(v).unwrap_or(false))
        && some(24, &|v| p.hour_match(v).unwrap_or(false)))
    {
        return false;
    }
    let (Some(mut day), Some(end)) = (
        NaiveDate::from_ymd_opt(2000, 1, 1),
        NaiveDate::from_ymd_opt(2009, 1, 1),
    ) else {
        return false;
    };
    while day < end {
        let weekday = Weekday::from_days_from_sunday(day.weekday().num_days_from_sunday());
        let (y, m, d) = (day.year(), day.month(), day.day());
        if p.month_match(m).unwrap_or(false) && p.day_match(y, m, d, weekday).unwrap_or(false) {
            return true;
        }
        let Some(next) = day.succ_opt() else {
            return false;
        };
        day = next;
    }
    false
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

/// Accepts the standard 5-field form only (see [`parse_schedule`]).
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
