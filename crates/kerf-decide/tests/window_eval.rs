//! Maintenance and freeze windows: recurring, one-off, invalid windows and lists.

use chrono::{DateTime, Utc};
use kerf_api::GoDuration;
use kerf_api::policy::Window;
use kerf_decide::window::{WindowError, WindowKind, evaluate_windows, parse_window};

#[allow(clippy::unwrap_used)]
fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn recurring(schedule: &str, duration: &str, zone: Option<&str>) -> Window {
    Window {
        schedule: Some(schedule.to_owned()),
        duration: Some(GoDuration::from(duration)),
        time_zone: zone.map(str::to_owned),
        ..Window::default()
    }
}

fn one_off(start: &str, end: &str) -> Window {
    Window {
        start: Some(start.to_owned()),
        end: Some(end.to_owned()),
        ..Window::default()
    }
}

#[allow(clippy::unwrap_used)]
fn error_of(w: &Window) -> String {
    parse_window(w).unwrap_err().to_string()
}

// rule: AP-29
#[test]
fn recurring_window_is_open_for_its_duration_from_each_firing() {
    // 2026-01-04 is a Sunday.
    let w = parse_window(&recurring("0 2 * * 0", "3h", None)).unwrap();
    assert!(!w.is_open(at("2026-01-04T01:59:59Z")));
    assert!(w.is_open(at("2026-01-04T02:00:00Z")));
    assert!(w.is_open(at("2026-01-04T04:59:59.999Z")));
    assert!(!w.is_open(at("2026-01-04T05:00:00Z")));
    assert!(!w.is_open(at("2026-01-07T03:00:00Z")));
    assert!(w.is_open(at("2026-01-11T03:00:00Z")));
    assert_eq!(
        w.current_end(at("2026-01-04T03:00:00Z")),
        Some(at("2026-01-04T05:00:00Z"))
    );
    assert_eq!(w.current_end(at("2026-01-04T05:00:00Z")), None);
    assert_eq!(
        w.next_open(at("2026-01-04T03:00:00Z")),
        Some(at("2026-01-11T02:00:00Z"))
    );
    assert_eq!(
        w.next_open(at("2026-01-04T01:00:00Z")),
        Some(at("2026-01-04T02:00:00Z"))
    );
    // Strictly after now.
    assert_eq!(
        w.next_open(at("2026-01-04T02:00:00Z")),
        Some(at("2026-01-11T02:00:00Z"))
    );
}

// rule: AP-29
#[test]
fn an_opening_that_began_long_before_now_still_counts() {
    // Fridays 18:00 for 62 hours: open through the weekend.
    let w = parse_window(&recurring("0 18 * * 5", "62h", None)).unwrap();
    // 2026-01-09 is a Friday.
    assert!(w.is_open(at("2026-01-12T07:59:59Z")));
    assert!(!w.is_open(at("2026-01-12T08:00:00Z")));
    assert_eq!(
        w.current_end(at("2026-01-10T12:00:00Z")),
        Some(at("2026-01-12T08:00:00Z"))
    );
}

// rule: AP-29 — overlapping openings of one window run until the last one ends
#[test]
fn overlapping_openings_end_with_the_latest() {
    let w = parse_window(&recurring("0 * * * *", "90m", None)).unwrap();
    assert!(w.is_open(at("2026-01-01T00:10:00Z")));
    assert_eq!(
        w.current_end(at("2026-01-01T01:10:00Z")),
        Some(at("2026-01-01T02:30:00Z"))
    );
    let v = evaluate_windows(
        WindowKind::Maintenance,
        &[recurring("0 * * * *", "90m", None)],
        at("2026-01-01T01:10:00Z"),
    );
    assert!(v.open);
    // Back-to-back openings are followed for a while, then reported as a lower bound.
    assert!(v.open_until.unwrap() > at("2026-01-01T02:30:00Z"));
}

// rule: AP-30
#[test]
fn time_zone_defaults_to_utc() {
    let w = parse_window(&recurring("0 2 * * *", "1h", None)).unwrap();
    let utc = parse_window(&recurring("0 2 * * *", "1h", Some("UTC"))).unwrap();
    for t in [
        "2026-01-04T02:30:00Z",
        "2026-07-04T02:30:00Z",
        "2026-01-04T01:30:00Z",
    ] {
        assert_eq!(w.is_open(at(t)), utc.is_open(at(t)), "{t}");
    }
    assert!(w.is_open(at("2026-07-04T02:30:00Z")));
}

// rule: AP-30
#[test]
fn schedule_is_read_in_its_time_zone() {
    let w = parse_window(&recurring("0 2 * * 0", "3h", Some("Europe/Berlin"))).unwrap();
    // Winter: 02:00 CET is 01:00 UTC.
    assert!(w.is_open(at("2026-01-04T01:00:00Z")));
    assert!(!w.is_open(at("2026-01-04T04:00:00Z")));
    // Summer: 02:00 CEST is 00:00 UTC.
    assert!(w.is_open(at("2026-07-05T00:00:00Z")));
    assert!(!w.is_open(at("2026-07-05T03:00:00Z")));
    assert_eq!(
        w.next_open(at("2026-07-01T00:00:00Z")),
        Some(at("2026-07-05T00:00:00Z"))
    );
    // America/New_York, winter: 02:00 EST is 07:00 UTC.
    let ny = parse_window(&recurring("0 2 * * 0", "3h", Some("America/New_York"))).unwrap();
    assert!(ny.is_open(at("2026-01-04T07:00:00Z")));
    assert!(!ny.is_open(at("2026-01-04T06:59:59Z")));
}

// rule: AP-31
#[test]
fn one_off_window_is_open_from_start_to_end() {
    let w = parse_window(&one_off("2026-12-20T00:00:00Z", "2026-12-21T00:00:00Z")).unwrap();
    assert!(!w.is_open(at("2026-12-19T23:59:59Z")));
    assert!(w.is_open(at("2026-12-20T00:00:00Z")));
    assert!(w.is_open(at("2026-12-20T23:59:59Z")));
    assert!(!w.is_open(at("2026-12-21T00:00:00Z")));
    assert_eq!(
        w.next_open(at("2026-12-01T00:00:00Z")),
        Some(at("2026-12-20T00:00:00Z"))
    );
    assert_eq!(w.next_open(at("2026-12-20T00:00:00Z")), None);
    assert_eq!(w.next_open(at("2027-01-01T00:00:00Z")), None);
    assert_eq!(
        w.current_end(at("2026-12-20T06:00:00Z")),
        Some(at("2026-12-21T00:00:00Z"))
    );
    // Offsets in RFC 3339 are honoured.
    let berlin = parse_window(&one_off(
        "2026-12-20T01:00:00+01:00",
        "2026-12-20T02:00:00+01:00",
    ))
    .unwrap();
    assert!(berlin.is_open(at("2026-12-20T00:30:00Z")));
}

// rule: AP-33
#[test]
fn invalid_maintenance_window_counts_as_closed() {
    let now = at("2026-01-04T02:30:00Z");
    let bad = recurring("61 * * * *", "3h", None);
    let v = evaluate_windows(WindowKind::Maintenance, std::slice::from_ref(&bad), now);
    assert!(!v.open);
    assert_eq!(v.open_until, None);
    assert_eq!(v.next_open, None);
    assert_eq!(v.errors.len(), 1);
    assert_eq!(v.errors[0].0, 0);
    assert_eq!(
        v.errors[0].1.to_string(),
        r#"schedule "61 * * * *": minute out of range"#
    );
    // A valid window next to it still opens the list.
    let good = recurring("0 2 * * *", "1h", None);
    let v = evaluate_windows(WindowKind::Maintenance, &[bad, good], now);
    assert!(v.open);
    assert_eq!(v.open_until, Some(at("2026-01-04T03:00:00Z")));
    assert_eq!(v.errors.iter().map(|e| e.0).collect::<Vec<_>>(), vec![0]);
}

// rule: AP-39
#[test]
fn invalid_freeze_window_counts_as_open() {
    let now = at("2026-01-04T12:00:00Z");
    let bad = recurring("0 2 * * *", "3h", Some("Mars/Olympus"));
    let good = recurring("0 2 * * *", "1h", None);
    let v = evaluate_windows(WindowKind::Freeze, &[good, bad], now);
    assert!(v.open);
    assert_eq!(v.open_until, None);
    assert_eq!(v.errors.len(), 1);
    assert_eq!(v.errors[0].0, 1);
    assert_eq!(
        v.errors[0].1.to_string(),
        r#"timeZone "Mars/Olympus": unknown time zone"#
    );
}

// rule: AP-38
#[test]
fn freeze_windows_accept_both_forms() {
    let windows = [
        recurring("0 18 * * 5", "62h", Some("Europe/Berlin")),
        one_off("2026-12-20T00:00:00Z", "2026-12-21T00:00:00Z"),
    ];
    // Saturday 2026-01-10.
    let v = evaluate_windows(WindowKind::Freeze, &windows, at("2026-01-10T12:00:00Z"));
    assert!(v.open && v.errors.is_empty());
    // 18:00 CET Friday + 62h = 08:00 CET Monday = 07:00 UTC.
    assert_eq!(v.open_until, Some(at("2026-01-12T07:00:00Z")));
    let v = evaluate_windows(WindowKind::Freeze, &windows, at("2026-12-20T12:00:00Z"));
    assert!(v.open);
    let v = evaluate_windows(WindowKind::Freeze, &windows, at("2026-01-13T12:00:00Z"));
    assert!(!v.open);
    assert_eq!(v.open_until, None);
    assert_eq!(v.next_open, Some(at("2026-01-16T17:00:00Z")));
}

// rule: AP-32, reading 14
#[test]
fn more_than_sixteen_windows_make_the_list_invalid() {
    let now = at("2026-01-04T02:30:00Z");
    let sixteen = vec![recurring("0 2 * * *", "1h", None); 16];
    assert!(evaluate_windows(WindowKind::Maintenance, &sixteen, now).open);
    assert!(
        evaluate_windows(WindowKind::Maintenance, &sixteen, now)
            .errors
            .is_empty()
    );
    let seventeen = vec![recurring("0 2 * * *", "1h", None); 17];
    let m = evaluate_windows(WindowKind::Maintenance, &seventeen, now);
    assert!(!m.open);
    assert_eq!(m.next_open, None);
    assert_eq!(m.errors, vec![(16, WindowError::TooMany { count: 17 })]);
    assert_eq!(
        m.errors[0].1.to_string(),
        "17 windows: a list holds at most 16"
    );
    let f = evaluate_windows(WindowKind::Freeze, &seventeen, at("2026-01-04T12:00:00Z"));
    assert!(f.open);
    assert_eq!(f.open_until, None);
    assert_eq!(f.errors.len(), 1);
}

// rule: AP-29 — any open window opens the list, and back-to-back openings join up
#[test]
fn list_is_open_while_any_window_is_and_until_the_last_joined_opening_ends() {
    let windows = [
        recurring("0 2 * * *", "1h", None),
        recurring("0 3 * * *", "1h", None),
        one_off("2026-01-04T04:00:00Z", "2026-01-04T04:30:00Z"),
        recurring("0 6 * * *", "1h", None),
    ];
    let v = evaluate_windows(
        WindowKind::Maintenance,
        &windows,
        at("2026-01-04T02:30:00Z"),
    );
    assert!(v.open);
    assert_eq!(v.open_until, Some(at("2026-01-04T04:30:00Z")));
    assert_eq!(v.next_open, Some(at("2026-01-04T03:00:00Z")));
    let v = evaluate_windows(
        WindowKind::Maintenance,
        &windows,
        at("2026-01-04T05:00:00Z"),
    );
    assert!(!v.open);
    assert_eq!(v.next_open, Some(at("2026-01-04T06:00:00Z")));
    let v = evaluate_windows(WindowKind::Maintenance, &[], at("2026-01-04T05:00:00Z"));
    assert!(!v.open && v.next_open.is_none() && v.errors.is_empty());
}

// rule: AP-29, AP-33 — schedules are 5-field cron; other forms are errors naming the value
#[test]
fn non_standard_schedules_are_rejected() {
    let cases = [
        ("61 * * * *", "minute out of range"),
        ("0 24 * * *", "hour out of range"),
        ("0 0 0 * *", "day-of-month out of range"),
        ("0 0 32 * *", "day-of-month out of range"),
        ("0 0 * 13 *", "month out of range"),
        ("0 0 * * 8", "day-of-week out of range"),
        (
            "0 0 2 * * 0",
            "expected 5 fields (minute hour day-of-month month day-of-week), found 6",
        ),
        (
            "0 0 2 * * 0 2026",
            "expected 5 fields (minute hour day-of-month month day-of-week), found 7",
        ),
        (
            "0 2 * *",
            "expected 5 fields (minute hour day-of-month month day-of-week), found 4",
        ),
        (
            "@daily",
            "expected 5 fields (minute hour day-of-month month day-of-week), found 1",
        ),
        ("0 2 L * *", r#"day-of-month value "L" is not allowed"#),
        ("0 2 15W * *", r#"day-of-month value "15W" is not allowed"#),
        ("0 2 ? * *", r#"day-of-month value "?" is not allowed"#),
        ("0 2 * * 5#2", r#"day-of-week value "5#2" is not allowed"#),
        ("0 2 * * +MON", r#"day-of-week value "+MON" is not allowed"#),
        (
            "0/10 * * * *",
            r#"minute step "0/10" needs * or a range before /"#,
        ),
        ("*/0 * * * *", "minute step out of range"),
        ("30-10 * * * *", r#"minute range "30-10" runs backwards"#),
        ("0 0 30 2 *", "never fires"),
        (
            "",
            "expected 5 fields (minute hour day-of-month month day-of-week), found 0",
        ),
    ];
    for (schedule, reason) in cases {
        let message = error_of(&recurring(schedule, "1h", None));
        assert_eq!(message, format!("schedule {schedule:?}: {reason}"));
    }
}

// rule: AP-29 — standard forms all parse
#[test]
fn standard_schedules_are_accepted() {
    for schedule in [
        "0 2 * * 0",
        "0 2 * * 7",
        "*/15 * * * *",
        "0 1-5/2 * * MON-FRI",
        "0 18 * * fri",
        "0 0 1 JAN,jul *",
        "0 0 29 2 *",
        "5,35 */6 1-15 * *",
        "0 22 * * FRI-SUN",
        "  0   2 * * 0 ",
    ] {
        assert!(
            parse_window(&recurring(schedule, "1h", None)).is_ok(),
            "{schedule}"
        );
    }
    // Weekday 7 is Sunday, like 0.
    let w = parse_window(&recurring("0 2 * * 7", "1h", None)).unwrap();
    assert!(w.is_open(at("2026-01-04T02:30:00Z")));
    // Day of month and day of week: either matches (standard cron).
    let w = parse_window(&recurring("0 2 1 * MON", "1h", None)).unwrap();
    assert!(w.is_open(at("2026-01-01T02:30:00Z"))); // the 1st, a Thursday
    assert!(w.is_open(at("2026-01-05T02:30:00Z"))); // a Monday
    assert!(!w.is_open(at("2026-01-06T02:30:00Z")));
}

// rule: AP-33, AP-39 — the other fields are checked and named too
#[test]
fn bad_fields_are_named_with_their_value() {
    assert_eq!(
        error_of(&recurring("0 2 * * *", "3x", None)),
        r#"duration "3x": unknown unit"#
    );
    assert_eq!(
        error_of(&recurring("0 2 * * *", "500ms", None)),
        r#"duration "500ms": must be at least 1s"#
    );
    assert_eq!(
        error_of(&recurring("0 2 * * *", "-1h", None)),
        r#"duration "-1h": must be at least 1s"#
    );
    assert_eq!(
        error_of(&recurring("0 2 * * *", "1h", Some("europe/berlin"))),
        r#"timeZone "europe/berlin": unknown time zone"#
    );
    assert!(
        error_of(&one_off("yesterday", "2026-12-21T00:00:00Z"))
            .starts_with(r#"start "yesterday": not an RFC 3339 time"#)
    );
    assert!(
        error_of(&one_off("2026-12-20T00:00:00Z", "2026-12-21"))
            .starts_with(r#"end "2026-12-21": not an RFC 3339 time"#)
    );
    assert_eq!(
        error_of(&one_off("2026-12-20T00:00:00Z", "2026-12-20T00:00:00Z")),
        r#"end "2026-12-20T00:00:00Z": must be after start "2026-12-20T00:00:00Z""#
    );
}

// rule: AP-33, AP-39 — a window is one shape or the other
#[test]
fn mixed_or_partial_shapes_are_rejected() {
    let mixed = Window {
        start: Some("2026-12-20T00:00:00Z".into()),
        ..recurring("0 2 * * *", "1h", None)
    };
    assert_eq!(
        error_of(&mixed),
        "a window is either schedule and duration (with an optional timeZone) or start and end; it sets schedule, duration, start"
    );
    let no_duration = Window {
        schedule: Some("0 2 * * *".into()),
        ..Window::default()
    };
    assert!(error_of(&no_duration).ends_with("it sets schedule"));
    let zoned_one_off = Window {
        time_zone: Some("UTC".into()),
        ..one_off("2026-12-20T00:00:00Z", "2026-12-21T00:00:00Z")
    };
    assert!(error_of(&zoned_one_off).ends_with("it sets timeZone, start, end"));
    assert!(error_of(&Window::default()).ends_with("it sets no field"));
    let err = parse_window(&Window::default()).unwrap_err();
    assert_eq!(err.category(), "InvalidWindow");
}
