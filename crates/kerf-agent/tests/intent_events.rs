//! The events of a change as the intent record writes them: a new change records only the
//! id of its `applied` event, and every message names the values it is about.

use kerf_testkit::decide as pipeline_fixture;

use kerf_agent::intent;
use kerf_api::Resource;
use kerf_api::rsr::ChangeState;
use kerf_api::wellknown as wk;
use kerf_decide::facts::Facts;
use kerf_decide::status::text;
use pipeline_fixture::status::in_place_change;
use pipeline_fixture::{MI, facts, now, policy, recommendation, values};

/// The checkout template: 500m/512Mi, the hub recommending 300m/384Mi.
fn checkout() -> Facts {
    let mut f = facts();
    f.workload.containers[0].requests = values(Some(500), Some(512 * MI));
    f.workload.containers[0].limits = values(None, None);
    f.recommendation.containers = vec![recommendation("300m", "384Mi")];
    f
}

// rule: design D25
#[test]
fn a_new_change_records_only_the_applied_event_id() {
    let mut f = checkout();
    let d = kerf_decide::decide(&f, &policy(), now());
    let kerf_decide::Outcome::Apply(plan) = &d.outcome else {
        panic!("expected a change: {:?}", d.outcome);
    };
    let mut change = intent::new_change(plan, now());
    assert!(change.event_ids.applied.is_some());
    assert_eq!(change.event_ids.fallback, None);
    assert_eq!(change.event_ids.rolled_back, None);
    assert_eq!(change.event_ids.released, None);
    assert_eq!(change.event_ids.failed, None);
    // Allocated once the outcome is decided, and kept from then on.
    let id = intent::allocate(&mut change.event_ids.rolled_back);
    assert_eq!(change.event_ids.rolled_back, Some(id.to_string()));
    assert_eq!(intent::allocate(&mut change.event_ids.rolled_back), id);
    f.state.change = Some(change);
}

#[test]
fn event_messages_carry_the_values() {
    let change = in_place_change(ChangeState::Applied);
    assert_eq!(
        text::applied(&change),
        "cpu 500m→300m, memory 512Mi→384Mi in place on 3 pods"
    );
    let w = kerf_api::event::EventWorkload {
        namespace: "shop".into(),
        kind: "Deployment".into(),
        name: "checkout".into(),
    };
    let e = intent::applied_event(&change, w.clone(), None, now());
    assert_eq!(
        e.message.as_deref(),
        Some("cpu 500m→300m, memory 512Mi→384Mi in place on 3 pods")
    );
    assert_eq!(
        text::rolled_back(&change, &[Resource::Memory], "1 OOM kill"),
        "1 OOM kill: restored memory 384Mi→512Mi"
    );
    let released = intent::released_event(
        &change,
        w.clone(),
        &[Resource::Cpu],
        uuid::Uuid::new_v4(),
        ("auto-patch", "audit"),
        now(),
    );
    let text = released.message.unwrap_or_default();
    assert!(text.contains("cpu 500m→300m"), "{text}");
    let mut rollout = change.clone();
    let fb = intent::fallback_event(
        &mut rollout,
        w.clone(),
        "ResizeInfeasible",
        "node full",
        now(),
    );
    assert_eq!(
        fb.message.as_deref(),
        Some("cpu 500m→300m, memory 512Mi→384Mi now by rollout: node full")
    );
    assert_eq!(rollout.event_ids.fallback, Some(fb.id.to_string()));
    let failed = intent::failed_event(
        &change,
        w,
        wk::REASON_RESIZE_ERROR,
        &text::failed(&change, "resize", "forbidden"),
        now(),
    );
    assert!(
        failed
            .message
            .unwrap_or_default()
            .starts_with("resize of cpu 500m→300m"),
    );
}
