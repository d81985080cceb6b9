//! After a partial rollback (one resource restored, RB-35), the resource the rollback kept
//! is not applied again with the same values, not even after the cooldown (RB-31,
//! docs/health.md); a recommendation whose values differ for it goes in.

use kerf_testkit::decide as fixture;

use chrono::Duration;
use fixture::*;
use kerf_api::wellknown as wk;
use kerf_api::{Resource, ResourceValues};
use kerf_decide::decide;
use kerf_decide::facts::Facts;

/// The template is at 500m/256Mi (in place, the rollback cleared the live values, so the
/// template is what new pods get). A change to 250m/128Mi was rolled back for memory only,
/// `ago` ago; the recommendation is `cpu`/`memory`.
fn after_memory_rollback(cpu: &str, memory: &str, ago: Duration) -> Facts {
    let mut f = facts();
    f.recommendation.containers[0] = recommendation(cpu, memory);
    let to = ResourceValues {
        cpu: q("250m"),
        memory: q("128Mi"),
    };
    rolled_back(&mut f, ago, wk::REASON_OOM_KILLS, &[Resource::Memory], to);
    if let Some(c) = f.state.change.as_mut() {
        c.resources = Resource::ALL.to_vec();
    }
    f
}

// rule: RB-31, RB-35
#[test]
fn rb_31_the_resource_a_partial_rollback_kept_is_not_applied_again() {
    // Long after the cooldown, the same recommendation: nothing goes in.
    let f = after_memory_rollback("250m", "128Mi", Duration::hours(30));
    let d = decide(&f, &policy(), now());
    assert_eq!(skip(&d).reason, wk::REASON_NO_SIGNIFICANT_CHANGE, "{d:?}");

    // Another cpu value goes in; memory keeps the value the rollback restored.
    let f = after_memory_rollback("300m", "128Mi", Duration::hours(30));
    let d = decide(&f, &policy(), now());
    assert_eq!(apply(&d).resources, vec![Resource::Cpu], "{d:?}");
    assert_eq!(
        to_request(&d, "app", Resource::Cpu).as_deref(),
        Some("300m")
    );
    assert_eq!(to_request(&d, "app", Resource::Memory), None);
}

// rule: RB-31
#[test]
fn rb_31_a_rolled_back_recommendation_does_not_go_in_again_for_a_resource_its_change_left_out() {
    // The recommendation went in as two changes: CPU first, while a cooldown held its memory
    // decrease, then memory, which was rolled back. The rolled-back change names memory only;
    // the rollback cleared the live values, so CPU reads as the template's 500m again.
    let mut f = facts();
    f.recommendation.containers[0] = recommendation("250m", "128Mi");
    oom_rolled_back(&mut f, Duration::hours(30), "128Mi");
    let same = f.recommendation.recommendation_id.clone();
    if let Some(c) = f.state.change.as_mut() {
        c.recommendation_id = same;
        c.containers[0].from.requests.cpu = None;
        c.containers[0].from.requests.memory = q("256Mi");
    }
    let d = decide(&f, &policy(), now());
    assert_eq!(skip(&d).reason, wk::REASON_NO_SIGNIFICANT_CHANGE, "{d:?}");

    // Another recommendation with these values: only the values the rollback removed stay out.
    if let Some(c) = f.state.change.as_mut() {
        c.recommendation_id = "rec-0".into();
    }
    let d = decide(&f, &policy(), now());
    assert_eq!(apply(&d).resources, vec![Resource::Cpu], "{d:?}");
}
