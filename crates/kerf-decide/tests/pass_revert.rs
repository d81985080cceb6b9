//! The revert of a workload to its template values (annotation `kerf.getkerf.dev/revert`):
//! which change puts the values back (in place: the pods; rollout: the template), what a
//! held workload reports, and what a bad annotation value does.

use kerf_testkit::decide as fixture;

use chrono::Duration;
use fixture::*;
use kerf_api::Resource;
use kerf_api::policy::{Mode, Strategy};
use kerf_api::rsr::{ChangeState, Phase, RightsizingRecommendationStatus};
use kerf_api::wellknown as wk;
use kerf_decide::effective::EffectivePolicy;
use kerf_decide::facts::Facts;
use kerf_decide::pass::{
    Outdated, PassFacts, Step, StepKind, WorkloadState, next_step, release_due, revert_plan,
};
use kerf_decide::pipeline::Outcome;

fn reverting() -> EffectivePolicy {
    let mut p = policy();
    p.revert = true;
    p
}

fn workload_state() -> WorkloadState {
    WorkloadState {
        kind: kerf_api::WorkloadKind::Deployment,
        on_delete: false,
        generation: Some(1),
        observed_generation: Some(1),
        replicas: Some(3),
        status_replicas: Some(3),
        updated_replicas: Some(3),
        desired_number_scheduled: None,
        updated_number_scheduled: None,
        template_covers_change: false,
        pods_settled: true,
        rollout_complete: true,
        hpa_target: None,
    }
}

fn step(s: &RightsizingRecommendationStatus, f: &Facts, p: &EffectivePolicy) -> Step {
    let pf = PassFacts {
        status: s,
        facts: f,
        withdrawn: false,
        workload: workload_state(),
        breach: None,
        outdated: Outdated::None,
    };
    next_step(&pf, p, now())
}

/// The fixture's pods after an in-place change of cpu 500m -> 300m that was released
/// (mode off): the template still says 500m.
fn pods_at_300m() -> (Facts, RightsizingRecommendationStatus) {
    let mut f = facts();
    for p in &mut f.pods {
        p.containers[0].requests.cpu = Some(300);
    }
    let mut change = applied_change(Duration::hours(1), ChangeState::Released);
    change.containers[0].from.requests.cpu = q("500m");
    change.containers[0].to.requests.cpu = q("300m");
    let s = RightsizingRecommendationStatus {
        change: Some(Box::new(change)),
        ..Default::default()
    };
    (f, s)
}

#[test]
fn revert_resizes_pods_back_to_the_template_in_place() {
    let (f, s) = pods_at_300m();
    let plan = revert_plan(&f, &s).unwrap();
    assert_eq!(plan.strategy, Strategy::InPlace);
    assert_eq!(plan.reason, wk::REASON_REVERTED);
    assert_eq!(plan.resources, vec![Resource::Cpu]);
    let c = &plan.containers[0];
    assert_eq!(c.from.requests.cpu, q("300m"));
    assert_eq!(c.to.requests.cpu, q("500m"));
    // Memory runs the template's value: it is not part of the revert.
    assert_eq!(c.to.requests.memory, None);
    let Step::Revert(d) = step(&s, &f, &reverting()) else {
        panic!("a revert is due");
    };
    assert_eq!(d.decision.phase, Phase::Applying);
    assert_eq!(
        d.decision.summary().cpu.as_deref(),
        Some("300m\u{2192}500m")
    );
    assert_eq!(d.decision.reason(), wk::REASON_REVERTED);
}

#[test]
fn without_the_annotation_a_released_change_is_not_reverted() {
    let (f, s) = pods_at_300m();
    let mut p = policy();
    p.mode.cpu.value = Mode::Off;
    p.mode.memory.value = Mode::Off;
    assert_ne!(step(&s, &f, &p).kind(), StepKind::Revert);
}

#[test]
fn a_reverted_workload_is_held_and_no_recommendation_starts() {
    // The fixture's pods run the template's values and the recommendation would apply.
    let f = facts();
    let s = RightsizingRecommendationStatus::default();
    assert_eq!(step(&s, &f, &policy()).kind(), StepKind::Start);
    assert!(revert_plan(&f, &s).is_none());
    let Step::Report(d) = step(&s, &f, &reverting()) else {
        panic!("a held workload reports");
    };
    let Outcome::Skip(skip) = &d.decision.outcome else {
        panic!("skip expected");
    };
    assert_eq!(skip.reason, wk::REASON_REVERT_REQUESTED);
    assert_eq!(skip.resources, &Resource::ALL);
    assert_eq!(d.decision.phase, Phase::Skipped);
    // The row shows no move.
    assert_eq!(d.decision.summary().cpu.as_deref(), Some("500m"));
}

#[test]
fn revert_after_a_rollout_puts_the_template_back_to_the_values_before_kerf() {
    let mut f = facts();
    let mut change = applied_change(Duration::hours(1), ChangeState::Applied);
    change.strategy = Strategy::Rollout;
    let s = RightsizingRecommendationStatus {
        change: Some(Box::new(change)),
        ..Default::default()
    };
    // The template holds the change's 500m: back to the 1 from before it.
    let plan = revert_plan(&f, &s).unwrap();
    assert_eq!(plan.strategy, Strategy::Rollout);
    assert_eq!(plan.containers[0].from.requests.cpu, q("500m"));
    assert_eq!(plan.containers[0].to.requests.cpu, q("1"));
    // The owner applied other values since: nothing of Kerf's is left to revert.
    f.workload.containers[0].requests.cpu = Some(700);
    for p in &mut f.pods {
        p.containers[0].requests.cpu = Some(700);
    }
    assert!(revert_plan(&f, &s).is_none());
}

#[test]
fn an_applied_rollout_revert_hands_every_field_over_even_after_the_annotation_goes() {
    let mut change = applied_change(Duration::minutes(1), ChangeState::Applied);
    change.strategy = Strategy::Rollout;
    change.revert = true;
    change.resources = Resource::ALL.to_vec();
    let s = RightsizingRecommendationStatus {
        change: Some(Box::new(change)),
        ..Default::default()
    };
    for p in [reverting(), policy()] {
        let rel = release_due(&s, &p).unwrap();
        assert_eq!(rel.resources, Resource::ALL.to_vec());
    }
    // A revert is never reverted again by itself.
    assert!(revert_plan(&facts(), &s).is_none());
}

fn annotated(value: &str) -> EffectivePolicy {
    effective_under(
        &workload_meta("payments", &[(wk::ANNOTATION_REVERT, value)]),
        &[],
    )
}

#[test]
fn revert_annotation_true_and_false() {
    assert!(annotated("true").revert);
    assert!(annotated(" true ").problems.is_empty());
    let off = annotated("false");
    assert!(!off.revert);
    assert!(off.problems.is_empty());
}

#[test]
fn a_bad_revert_value_reverts_nothing_and_counts_as_off() {
    let ep = annotated("ture");
    assert!(!ep.revert);
    assert_eq!(ep.mode.cpu.value, Mode::Off);
    assert_eq!(ep.mode.memory.value, Mode::Off);
    let p = &ep.problems[0];
    assert_eq!(p.field, wk::ANNOTATION_REVERT);
    assert_eq!(p.value, "ture");
    assert!(p.message.contains("nothing is reverted"), "{}", p.message);
}

#[test]
fn a_revert_waits_for_a_rollout_in_progress() {
    let (f, s) = pods_at_300m();
    let mut w = workload_state();
    w.updated_replicas = Some(1);
    let pf = PassFacts {
        status: &s,
        facts: &f,
        withdrawn: false,
        workload: w,
        breach: None,
        outdated: Outdated::None,
    };
    let step = next_step(&pf, &reverting(), now());
    assert_eq!(step.kind(), StepKind::Report, "{step:?}");
}

/// The next step with the workload state `w`.
fn step_in(
    s: &RightsizingRecommendationStatus,
    f: &Facts,
    w: WorkloadState,
) -> kerf_decide::pass::Step {
    let pf = PassFacts {
        status: s,
        facts: f,
        withdrawn: false,
        workload: w,
        breach: None,
        outdated: Outdated::None,
    };
    next_step(&pf, &reverting(), now())
}

#[test]
fn pods_still_taking_an_in_place_revert_do_not_start_a_second_one() {
    // The revert 300m -> 500m went in and was released; the pods' spec holds 500m but
    // their status still reports 300m (the kubelet has not actuated the resize yet).
    let (f, mut s) = pods_at_300m();
    if let Some(c) = s.change.as_mut() {
        c.revert = true;
        c.containers[0].from.requests.cpu = q("300m");
        c.containers[0].to.requests.cpu = q("500m");
    }
    let mut w = workload_state();
    w.pods_settled = false;
    let waiting = step_in(&s, &f, w.clone());
    assert_eq!(waiting.kind(), StepKind::Report, "{waiting:?}");
    // Once the pods settled, pods still running other values are reverted again.
    w.pods_settled = true;
    assert_eq!(step_in(&s, &f, w).kind(), StepKind::Revert);
}

#[test]
fn unsettled_pods_of_a_change_that_is_not_a_revert_do_not_hold_the_revert_back() {
    let (f, s) = pods_at_300m();
    let mut w = workload_state();
    w.pods_settled = false;
    assert_eq!(step_in(&s, &f, w).kind(), StepKind::Revert);
}
