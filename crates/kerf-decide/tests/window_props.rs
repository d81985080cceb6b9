//! Property tests: a window's answers agree with its definition at random instants,
//! including the days around daylight-saving changes.
//!
//! The reference enumerates the schedule's local wall times forward and maps each to an
//! instant by the documented rule (docs/windows.md) on its own: the single instant; the
//! first of two in a repeated hour; for a skipped time, the first whole minute after it
//! that exists.

use std::str::FromStr;

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::{Cron, Direction};
use kerf_api::GoDuration;
use kerf_api::policy::Window;
use kerf_decide::duration::format_go_duration;
use kerf_decide::window::parse_window;
use proptest::prelude::*;

const SCHEDULES: &[&str] = &[
    "30 2 * * *",
    "0 2 * * 0",
    "*/15 * * * *",
    "0 1-3 * * *",
    "0 18 * * 5",
    "15,45 2 * * *",
    "0 3 * * *",
    "59 1 * * *",
    "0 2 * * *",
    "*/20 2 * * *",
    "0 0 29 2 *",
];
const DURATIONS: &[i64] = &[1, 600, 3600, 5400, 3 * 3600, 62 * 3600];
const ZONES: &[&str] = &[
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
];
/// Daylight-saving changes in 2026 (UTC seconds): Berlin, New York, Lord Howe.
const CHANGES: &[i64] = &[
    1_774_746_000, // 2026-03-29T01:00:00Z
    1_792_890_000, // 2026-10-25T01:00:00Z
    1_772_953_200, // 2026-03-08T07:00:00Z
    1_793_512_800, // 2026-11-01T06:00:00Z
    1_775_314_800, // 2026-04-04T15:00:00Z
    1_791_048_600, // 2026-10-03T15:30:00Z
];

fn instant_of(zone: Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    let mut wall = wall;
    for _ in 0..24 * 60 {
        match zone.from_local_datetime(&wall) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => {
                return Some(t.with_timezone(&Utc));
            }
            LocalResult::None => wall += Duration::minutes(1),
        }
    }
    None
}

/// Every opening start from `from` to `to`, by the definition.
fn reference_starts(
    schedule: &str,
    zone: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let Ok(cron) = Cron::from_str(schedule) else {
        return Vec::new();
    };
    let first = (from - Duration::days(1))
        .with_timezone(&zone)
        .naive_local();
    let last = (to + Duration::days(1)).with_timezone(&zone).naive_local();
    cron.iter_from(first, Direction::Forward)
        .take_while(|wall| *wall <= last)
        .filter_map(|wall| instant_of(zone, wall))
        .collect()
}

fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    let near_change = (0..CHANGES.len(), -4 * 86_400i64..4 * 86_400, 0u32..3)
        .prop_map(|(i, offset, frac)| (CHANGES[i] + offset, frac * 400_000_000));
    let anywhere = (1_735_689_600i64..1_830_297_600, Just(0u32)); // 2025 to 2028
    prop_oneof![near_change, anywhere]
        .prop_map(|(secs, nanos)| DateTime::from_timestamp(secs, nanos).unwrap_or_default())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    // rule: AP-29, AP-30
    #[test]
    fn recurring_window_agrees_with_its_definition(
        s in 0..SCHEDULES.len(), d in 0..DURATIONS.len(), z in 0..ZONES.len(), now in instant(),
    ) {
        let duration = Duration::seconds(DURATIONS[d]);
        let window = Window {
            schedule: Some(SCHEDULES[s].to_owned()),
            duration: Some(GoDuration(format_go_duration(duration))),
            time_zone: Some(ZONES[z].to_owned()),
            ..Window::default()
        };
        let parsed = parse_window(&window).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let zone = Tz::from_str(ZONES[z]).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let horizon = if SCHEDULES[s] == "0 0 29 2 *" { Duration::days(1500) } else { Duration::days(9) };
        let starts = reference_starts(SCHEDULES[s], zone, now - duration - Duration::days(2), now + horizon);
        let containing_end = starts.iter().filter(|f| **f <= now && now < **f + duration).map(|f| *f + duration).max();
        let next = starts.iter().filter(|f| **f > now).min().copied();
        prop_assert_eq!(parsed.is_open(now), containing_end.is_some());
        prop_assert_eq!(parsed.current_end(now), containing_end);
        prop_assert_eq!(parsed.next_open(now), next);
    }

    // rule: AP-31
    #[test]
    fn one_off_window_agrees_with_its_definition(start in 0i64..1_000_000, len in 1i64..1_000_000, now in -10i64..2_100_000) {
        let base = 1_767_225_600; // 2026-01-01T00:00:00Z
        let t = |s: i64| DateTime::from_timestamp(base + s, 0).unwrap_or_default();
        let window = Window {
            start: Some(t(start).to_rfc3339()),
            end: Some(t(start + len).to_rfc3339()),
            ..Window::default()
        };
        let parsed = parse_window(&window).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let open = start <= now && now < start + len;
        prop_assert_eq!(parsed.is_open(t(now)), open);
        prop_assert_eq!(parsed.current_end(t(now)), open.then(|| t(start + len)));
        prop_assert_eq!(parsed.next_open(t(now)), (start > now).then(|| t(start)));
    }
}
