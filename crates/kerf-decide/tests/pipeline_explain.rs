//! `explain`: every step with its value, threshold and verdict, and when the change could
//! go in next.

#[path = "pipeline_fixture/mod.rs"]
mod fixture;

use chrono::Duration;
use fixture::*;
use kerf_api::rsr::ChangeState;
use kerf_api::wellknown as wk;
use kerf_decide::explain;
use kerf_decide::explain::Verdict;
use kerf_decide::pipeline::Check;

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
    let learning = e
        .steps
        .iter()
        .find(|s| s.check == Check::LearningPeriod)
        .unwrap();
    assert_eq!(
        (learning.value.as_str(), learning.threshold.as_str()),
        ("240h", "168h")
    );
    let confidence = e
        .steps
        .iter()
        .find(|s| s.check == Check::Confidence)
        .unwrap();
    assert_eq!(
        (confidence.value.as_str(), confidence.threshold.as_str()),
        ("0.9", "0.7")
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
