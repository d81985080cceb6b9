//! `explain`: every step with its value, threshold and verdict, and when the change could
//! go in next.

use kerf_testkit::decide as fixture;

use chrono::Duration;
use fixture::*;
use kerf_api::policy::{Mode, Strategy};
use kerf_api::rsr::ChangeState;
use kerf_api::wellknown as wk;
use kerf_decide::effective::{Layer, Sourced};
use kerf_decide::explain;
use kerf_decide::explain::{NextChange, Verdict, WindowState};
use kerf_decide::pipeline::Check;
use kerf_decide::window::WindowList;

// rule: GR-21, GR-42
#[test]
fn explain_says_when_the_cooldown_ends() {
    let mut f = facts();
    f.state.change = Some(applied_change(Duration::hours(20), ChangeState::Applied));
    let e = explain(&f, &policy(), now());
    let step = e.steps.iter().find(|s| s.check == Check::Cooldown).unwrap();
    assert_eq!(step.verdict, Verdict::Block(wk::REASON_COOLDOWN));
    assert!(step.decisive);
    assert_eq!(step.number, Some(10));
    assert_eq!(e.cooldown_end, Some(now() + Duration::hours(4)));
    assert_eq!(e.next_change_at, Some(now() + Duration::hours(4)));
    assert_eq!(e.decision.reason(), wk::REASON_COOLDOWN);
}

// rule: GR-11
#[test]
fn explain_shows_values_and_thresholds() {
    let e = explain(&facts(), &policy(), now());
    assert!(
        e.steps
            .iter()
            .all(|s| s.verdict == Verdict::Pass && !s.decisive)
    );
    let shown = |check| {
        let step = e.steps.iter().find(|s| s.check == check).unwrap();
        (step.value.clone(), step.threshold.clone())
    };
    assert_eq!(
        shown(Check::LearningPeriod),
        ("240h".to_owned(), "168h".to_owned())
    );
    assert_eq!(
        shown(Check::Confidence),
        ("0.9".to_owned(), "0.7".to_owned())
    );
    assert_eq!(e.next_change_at, Some(now()));
}

// rule: GR-46
#[test]
fn a_block_with_no_end_of_its_own_has_no_next_change_time() {
    let mut f = facts();
    f.hub.last_success = None;
    let e = explain(&f, &policy(), now());
    assert_eq!(e.next_change_at, None);
}

fn hourly_two_hour_window() -> kerf_api::policy::Window {
    kerf_api::policy::Window {
        schedule: Some("0 * * * *".into()),
        duration: Some(kerf_api::GoDuration::from("2h")),
        ..Default::default()
    }
}

// rule: GR-45
#[test]
fn a_skip_waits_for_nothing() {
    let mut p = policy();
    set_mode(&mut p, Mode::Audit, Mode::Audit);
    let e = explain(&facts(), &p, now());
    assert_eq!(e.next_change, NextChange::NoChange(wk::REASON_MODE_AUDIT));
    assert_eq!(e.next_change_at, None);
    let text = e.next_change.to_string();
    assert!(!text.contains("does not end by itself"), "{text}");
    assert!(text.contains("no change to make (ModeAudit)"), "{text}");
}

// rule: GR-46
#[test]
fn a_block_with_no_end_of_its_own_is_held() {
    let mut f = facts();
    f.hub.last_success = None;
    let e = explain(&f, &policy(), now());
    assert_eq!(e.next_change, NextChange::Held);
    assert!(e.next_change.to_string().contains("does not end by itself"));
}

// rule: GR-56, AP-29
#[test]
fn a_maintenance_window_open_now_is_shown_open_not_with_its_next_opening() {
    let mut p = policy();
    set_strategy(&mut p, Strategy::Deferred);
    p.maintenance_windows = Sourced::new(
        WindowList::new(vec![hourly_two_hour_window()]),
        Layer::Policy,
    );
    // Every minute of an hour: the opening of the last full hour is still open.
    for minute in [0, 1, 39, 59] {
        let at = now() + Duration::minutes(minute) + Duration::milliseconds(250);
        let mut f = facts();
        f.hub.last_success = Some(at);
        let e = explain(&f, &p, at);
        assert!(
            matches!(e.maintenance, WindowState::OpenUntil(Some(end)) if end > at),
            "{minute}: {:?}",
            e.maintenance
        );
        assert!(e.maintenance.to_string().starts_with("open now, until "));
        assert_eq!(e.next_window, None, "{minute}");
        assert_eq!(e.next_change, NextChange::Now, "{minute}");
    }
}

// rule: GR-52, AP-39
#[test]
fn a_freeze_window_open_now_is_shown_open() {
    let mut p = policy();
    p.freeze_windows = Sourced::new(
        WindowList::new(vec![hourly_two_hour_window()]),
        Layer::Policy,
    );
    let at = now() + Duration::minutes(39);
    let mut f = facts();
    f.hub.last_success = Some(at);
    let e = explain(&f, &p, at);
    assert!(
        matches!(e.freeze, WindowState::OpenUntil(Some(_))),
        "{:?}",
        e.freeze
    );
    assert_eq!(e.cluster_freeze, WindowState::NoneConfigured);
    assert_eq!(e.decision.reason(), wk::REASON_FREEZE_WINDOW);
}

#[test]
fn explain_lists_current_and_target_values_in_every_mode() {
    for (mode, tag) in [(Mode::AutoPatch, ""), (Mode::Audit, " [mode audit]")] {
        let mut p = policy();
        set_mode(&mut p, mode, mode);
        let e = explain(&facts(), &p, now());
        let lines: Vec<String> = e.targets.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            vec![
                format!("app/cpu: request 500m \u{2192} 250m, limit none (kept){tag}"),
                format!("app/memory: request 256Mi (kept), limit 512Mi (kept){tag}"),
            ]
        );
    }
}

// One time format across messages, status, explain and report (issue 32): RFC 3339 UTC
// with `Z` and whole seconds.
#[test]
fn blocked_messages_and_window_states_write_times_in_utc_with_z_and_whole_seconds() {
    let mut f = facts();
    let ago = Duration::hours(20) - Duration::milliseconds(400);
    f.state.change = Some(applied_change(ago, ChangeState::Applied));
    let e = explain(&f, &policy(), now());
    assert_eq!(
        e.decision.message,
        "cooldown: held until 2026-06-03T16:00:00Z"
    );

    let mut p = policy();
    set_strategy(&mut p, Strategy::Deferred);
    let nightly = kerf_api::policy::Window {
        schedule: Some("0 3 * * *".into()),
        duration: Some(kerf_api::GoDuration::from("1h")),
        ..Default::default()
    };
    p.maintenance_windows = Sourced::new(WindowList::new(vec![nightly]), Layer::Policy);
    let e = explain(&facts(), &p, now());
    assert!(
        e.decision
            .message
            .ends_with("next window opens 2026-06-04T03:00:00Z"),
        "{}",
        e.decision.message
    );
    assert_eq!(
        e.maintenance.to_string(),
        "closed, next opens 2026-06-04T03:00:00Z"
    );
    for text in [e.decision.message.clone(), e.maintenance.to_string()] {
        assert!(!text.contains("+00:00") && !text.contains(" UTC"), "{text}");
    }
}
