//! Recurring windows across daylight-saving changes (docs/windows.md). Europe/Berlin in
//! 2026: the clocks go from 02:00 CET to 03:00 CEST on Sunday 29 March (01:00 UTC), and
//! from 03:00 CEST back to 02:00 CET on Sunday 25 October (01:00 UTC).

use chrono::{DateTime, Utc};
use kerf_api::GoDuration;
use kerf_api::policy::Window;
use kerf_decide::window::{ParsedWindow, WindowKind, evaluate_windows, parse_window};

#[allow(clippy::unwrap_used)]
fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn berlin_window(schedule: &str, duration: &str) -> Window {
    Window {
        schedule: Some(schedule.to_owned()),
        duration: Some(GoDuration::from(duration)),
        time_zone: Some("Europe/Berlin".to_owned()),
        ..Window::default()
    }
}

#[allow(clippy::unwrap_used)]
fn berlin(schedule: &str, duration: &str) -> ParsedWindow {
    parse_window(&berlin_window(schedule, duration)).unwrap()
}

// rule: AP-30 — a skipped local time fires at the first instant after the gap
#[test]
fn spring_forward_skipped_time_fires_when_the_gap_ends() {
    let w = berlin("30 2 * * *", "1h");
    // Saturday: 02:30 CET = 01:30 UTC.
    assert!(w.is_open(at("2026-03-28T01:30:00Z")));
    // Sunday: 02:30 does not exist; the window opens at 03:00 CEST = 01:00 UTC.
    assert!(!w.is_open(at("2026-03-29T00:59:59Z")));
    assert!(w.is_open(at("2026-03-29T01:00:00Z")));
    assert_eq!(
        w.current_end(at("2026-03-29T01:00:00Z")),
        Some(at("2026-03-29T02:00:00Z"))
    );
    assert!(!w.is_open(at("2026-03-29T02:00:00Z")));
    // Monday: 02:30 CEST = 00:30 UTC.
    assert!(w.is_open(at("2026-03-30T00:30:00Z")));
    assert!(!w.is_open(at("2026-03-30T00:29:59Z")));
}

// rule: AP-29, AP-30 — the documented example on the day the clocks go forward
#[test]
fn sunday_two_am_window_on_spring_forward_day() {
    let w = berlin("0 2 * * 0", "3h");
    assert!(!w.is_open(at("2026-03-29T00:59:59Z")));
    assert!(w.is_open(at("2026-03-29T01:00:00Z")));
    // Durations are absolute: three hours from 03:00 CEST is 06:00 CEST = 04:00 UTC.
    assert!(w.is_open(at("2026-03-29T03:59:59Z")));
    assert!(!w.is_open(at("2026-03-29T04:00:00Z")));
}

// rule: AP-30 — a repeated local time fires once, at its first occurrence
#[test]
fn fall_back_repeated_time_fires_once() {
    let w = berlin("30 2 * * *", "1h");
    // 02:30 CEST = 00:30 UTC fires; 02:30 CET = 01:30 UTC does not fire again.
    assert!(!w.is_open(at("2026-10-25T00:29:59Z")));
    assert!(w.is_open(at("2026-10-25T00:30:00Z")));
    assert!(w.is_open(at("2026-10-25T01:29:59Z")));
    assert!(!w.is_open(at("2026-10-25T01:30:00Z")));
    assert!(!w.is_open(at("2026-10-25T02:00:00Z")));
    assert_eq!(
        w.current_end(at("2026-10-25T01:00:00Z")),
        Some(at("2026-10-25T01:30:00Z"))
    );
    // During the repeated hour the next opening is the next day's, 02:30 CET.
    assert_eq!(
        w.next_open(at("2026-10-25T01:10:00Z")),
        Some(at("2026-10-26T01:30:00Z"))
    );
    assert_eq!(
        w.next_open(at("2026-10-25T00:10:00Z")),
        Some(at("2026-10-25T00:30:00Z"))
    );
    // Monday: 02:30 CET = 01:30 UTC.
    assert!(w.is_open(at("2026-10-26T01:30:00Z")));
}

// rule: AP-29, AP-30 — durations are absolute time across the fall-back change
#[test]
fn duration_is_absolute_across_fall_back() {
    let w = berlin("0 2 * * 0", "3h");
    // 02:00 CEST = 00:00 UTC; three hours later is 03:00 UTC = 04:00 CET.
    assert!(w.is_open(at("2026-10-25T00:00:00Z")));
    assert!(w.is_open(at("2026-10-25T02:59:59Z")));
    assert!(!w.is_open(at("2026-10-25T03:00:00Z")));
}

// rule: AP-30 — every-15-minutes schedules in the repeated hour fire in its first pass only
#[test]
fn interval_schedule_in_the_repeated_hour() {
    let w = berlin("*/15 * * * *", "10m");
    assert!(w.is_open(at("2026-10-25T00:05:00Z"))); // 02:05 CEST
    assert!(!w.is_open(at("2026-10-25T01:05:00Z"))); // 02:05 CET, repeated
    assert_eq!(
        w.next_open(at("2026-10-25T01:05:00Z")),
        Some(at("2026-10-25T02:00:00Z"))
    ); // 03:00 CET
    assert!(w.is_open(at("2026-10-25T02:05:00Z")));
    // In the gap every skipped firing lands on 03:00 CEST.
    assert!(w.is_open(at("2026-03-29T01:05:00Z")));
    assert_eq!(
        w.current_end(at("2026-03-29T01:05:00Z")),
        Some(at("2026-03-29T01:10:00Z"))
    );
    assert_eq!(
        w.next_open(at("2026-03-29T00:50:00Z")),
        Some(at("2026-03-29T01:00:00Z"))
    );
}

// rule: AP-30 — next_open across a daylight-saving change
#[test]
fn next_open_across_dst_changes() {
    let w = berlin("0 2 * * 0", "3h");
    // The Sunday before spring forward, after the window: next is the gap instant.
    assert_eq!(
        w.next_open(at("2026-03-22T05:00:00Z")),
        Some(at("2026-03-29T01:00:00Z"))
    );
    // After it: 02:00 CEST.
    assert_eq!(
        w.next_open(at("2026-03-29T04:00:00Z")),
        Some(at("2026-04-05T00:00:00Z"))
    );
    // Before fall back: 02:00 CEST, the first occurrence.
    assert_eq!(
        w.next_open(at("2026-10-18T12:00:00Z")),
        Some(at("2026-10-25T00:00:00Z"))
    );
    // After it: 02:00 CET.
    assert_eq!(
        w.next_open(at("2026-10-25T03:00:00Z")),
        Some(at("2026-11-01T01:00:00Z"))
    );
    // Through the list verdict too.
    let v = evaluate_windows(
        WindowKind::Maintenance,
        &[berlin_window("0 2 * * 0", "3h")],
        at("2026-03-22T05:00:00Z"),
    );
    assert!(!v.open);
    assert_eq!(v.next_open, Some(at("2026-03-29T01:00:00Z")));
}

// rule: AP-30 — the freeze example: Friday 18:00 for 62h across spring forward
#[test]
fn weekend_freeze_across_spring_forward_is_62_hours() {
    let w = berlin("0 18 * * 5", "62h");
    // Friday 27 March 18:00 CET = 17:00 UTC; 62 hours later is 07:00 UTC Monday,
    // which is 09:00 CEST.
    assert!(w.is_open(at("2026-03-30T06:59:59Z")));
    assert!(!w.is_open(at("2026-03-30T07:00:00Z")));
}
