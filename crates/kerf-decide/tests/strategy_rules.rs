//! Which strategy carries a change, single-replica safety and the fallback gate.

use kerf_testkit::decide as fixture;

use fixture::*;
use kerf_api::Resource;
use kerf_api::policy::{Strategy, WorkloadKind};
use kerf_api::rsr::StrategyStatus;
use kerf_api::wellknown as wk;
use kerf_decide::decide;
use kerf_decide::effective::{EffectivePolicy, Layer, Sourced};
use kerf_decide::facts::{Facts, ResizePolicy};
use kerf_decide::replicas::{PdbInput, ReplicaInput};
use kerf_decide::strategy::fallback_allowed;

fn strategy_of(f: &Facts, p: &EffectivePolicy) -> Strategy {
    apply(&decide(f, p, now())).strategy
}

fn sticky(f: &mut Facts, configured: Strategy) {
    f.state.strategy = Some(StrategyStatus {
        configured,
        effective: Strategy::Rollout,
        fallback_reason: Some(wk::REASON_RESIZE_INFEASIBLE.into()),
    });
}

/// The policy with the rollout strategy.
fn rollout_policy() -> EffectivePolicy {
    let mut p = policy();
    set_strategy(&mut p, Strategy::Rollout);
    p
}

/// Asserts the change is blocked as unsafe for a single replica.
fn assert_single_replica_unsafe(f: &Facts, p: &EffectivePolicy) {
    assert_eq!(
        decide(f, p, now()).reason(),
        wk::REASON_SINGLE_REPLICA_UNSAFE
    );
}

// rule: AP-01
#[test]
fn ap_01_the_policy_sets_the_strategy() {
    let p = rollout_policy();
    assert_eq!(strategy_of(&facts(), &p), Strategy::Rollout);
}

// rule: AP-02
#[test]
fn ap_02_the_annotation_layer_beats_the_policy() {
    let mut p = policy();
    p.strategy = Sourced::new(Strategy::InPlace, Layer::Annotation);
    let d = decide(&facts(), &p, now());
    assert_eq!(
        (apply(&d).strategy, d.strategy.configured),
        (Strategy::InPlace, Strategy::InPlace)
    );
}

// rule: AP-03
#[test]
fn ap_03_in_place_by_default() {
    assert_eq!(strategy_of(&facts(), &policy()), Strategy::InPlace);
}

// rule: AP-12
#[test]
fn ap_12_after_a_fallback_later_changes_use_rollout() {
    let mut f = facts();
    sticky(&mut f, Strategy::InPlace);
    let d = decide(&f, &policy(), now());
    assert_eq!(apply(&d).strategy, Strategy::Rollout);
    assert_eq!(
        d.strategy.fallback_reason.as_deref(),
        Some(wk::REASON_RESIZE_INFEASIBLE)
    );
}

// rule: AP-13
#[test]
fn ap_13_the_sticky_rollout_ends_when_the_configured_strategy_changes() {
    let mut f = facts();
    sticky(&mut f, Strategy::Rollout);
    assert_eq!(strategy_of(&f, &policy()), Strategy::InPlace);
}

// rule: AP-22
#[test]
fn ap_22_hpa_coordination_always_uses_rollout() {
    let mut f = facts();
    f.hpa = Some(cpu_hpa(60));
    f.recommendation.containers[0] = recommendation("400m", "256Mi");
    let d = decide(&f, &policy(), now());
    let a = apply(&d);
    assert_eq!(a.strategy, Strategy::Rollout);
    let hpa = a.hpa.clone().unwrap();
    assert_eq!((hpa.resource, hpa.from, hpa.to), (Resource::Cpu, 60, 75));
    assert!(d.strategy.forced_by_hpa);
}

// rule: EV-33
#[test]
fn a_hpa_target_outside_the_bounds_blocks_hpa_coupled() {
    let mut f = facts();
    f.hpa = Some(cpu_hpa(60));
    // 500m -> 250m doubles the target to 120 %, above the default maximum of 90.
    let b = block(&decide(&f, &policy(), now())).clone();
    assert_eq!(
        (b.reason, b.resources.to_vec()),
        (wk::REASON_HPA_COUPLED, vec![Resource::Cpu])
    );
    f.recommendation.containers[0] = recommendation("400m", "256Mi");
    let a = apply(&decide(&f, &policy(), now())).clone();
    assert_eq!(a.hpa.map(|h| (h.from, h.to)), Some((60, 75)));
}

// rule: AP-44, AP-46
#[test]
fn ap_46_a_single_replica_in_place_resize_without_restart_goes_in() {
    let mut f = facts();
    single_replica_recreate(&mut f);
    assert_eq!(strategy_of(&f, &policy()), Strategy::InPlace);
}

// rule: AP-44, AP-47
#[test]
fn ap_47_a_single_replica_resize_that_restarts_is_blocked() {
    let mut f = facts();
    f.workload.replicas.replicas = Some(1);
    resize(&mut f, Resource::Cpu, ResizePolicy::RestartContainer);
    let b = block(&decide(&f, &policy(), now())).clone();
    assert_eq!(b.reason, wk::REASON_SINGLE_REPLICA_UNSAFE);
    // A restart policy on a resource that does not change does not matter.
    resize(&mut f, Resource::Cpu, ResizePolicy::NotRequired);
    resize(&mut f, Resource::Memory, ResizePolicy::RestartContainer);
    assert_eq!(strategy_of(&f, &policy()), Strategy::InPlace);
}

// rule: AP-45
#[test]
fn ap_45_a_pdb_allowing_no_disruption_makes_a_workload_single_replica() {
    let mut f = facts();
    resize(&mut f, Resource::Cpu, ResizePolicy::RestartContainer);
    f.workload.replicas.pdbs = vec![PdbInput {
        name: "checkout".into(),
        min_available: Some("100%".into()),
        max_unavailable: None,
        expected_pods: 3,
    }];
    assert_single_replica_unsafe(&f, &policy());
}

// rule: AP-48
#[test]
fn ap_48_a_single_replica_rollout_needs_surge_and_no_unavailability() {
    let p = rollout_policy();
    let mut f = facts();
    f.workload.replicas = ReplicaInput {
        replicas: Some(1),
        ..ReplicaInput::default()
    };
    assert_eq!(
        strategy_of(&f, &p),
        Strategy::Rollout,
        "default surge 25% rounds up to 1"
    );
    f.workload.replicas.max_surge = Some("0".into());
    f.workload.replicas.max_unavailable = Some("1".into());
    assert_single_replica_unsafe(&f, &p);
}

// rule: AP-49
#[test]
fn ap_49_a_recreate_deployment_never_qualifies() {
    let p = rollout_policy();
    let mut f = facts();
    single_replica_recreate(&mut f);
    assert_single_replica_unsafe(&f, &p);
}

// rule: AP-50
#[test]
fn ap_50_a_statefulset_never_qualifies() {
    let p = rollout_policy();
    let mut f = facts();
    f.workload.kind = WorkloadKind::StatefulSet;
    f.workload.replicas = ReplicaInput {
        kind: WorkloadKind::StatefulSet,
        replicas: Some(1),
        ..ReplicaInput::default()
    };
    assert_single_replica_unsafe(&f, &p);
}

// rule: AP-51
#[test]
fn ap_51_allow_disruption_lifts_single_replica_unsafe() {
    let mut p = rollout_policy();
    p.allow_disruption = true;
    let mut f = facts();
    single_replica_recreate(&mut f);
    assert_eq!(strategy_of(&f, &p), Strategy::Rollout);
}

// rule: EV-41
#[test]
fn ev_41_a_fallback_to_an_unsafe_rollout_is_refused_with_its_reason() {
    let mut f = facts();
    single_replica_recreate(&mut f);
    let refusal = fallback_allowed(&f, &policy(), wk::REASON_RESIZE_DEFERRED_TIMEOUT).unwrap_err();
    assert_eq!(refusal.reason, wk::REASON_SINGLE_REPLICA_UNSAFE);
    assert_eq!(
        refusal
            .details
            .get(wk::DETAIL_FALLBACK_REASON)
            .map(String::as_str),
        Some(wk::REASON_RESIZE_DEFERRED_TIMEOUT)
    );
    let mut p = policy();
    p.allow_disruption = true;
    assert!(fallback_allowed(&f, &p, wk::REASON_RESIZE_INFEASIBLE).is_ok());
    assert!(fallback_allowed(&facts(), &policy(), wk::REASON_RESIZE_INFEASIBLE).is_ok());
}

// design D18
#[test]
fn a_daemonset_never_falls_back() {
    let mut f = facts();
    f.workload.kind = WorkloadKind::DaemonSet;
    f.workload.replicas = ReplicaInput {
        kind: WorkloadKind::DaemonSet,
        desired_number_scheduled: 5,
        ..ReplicaInput::default()
    };
    let mut p = policy();
    p.allow_disruption = true;
    let refusal = fallback_allowed(&f, &p, wk::REASON_RESIZE_INFEASIBLE).unwrap_err();
    assert_eq!(refusal.reason, wk::REASON_SINGLE_REPLICA_UNSAFE);
    assert!(refusal.details.contains_key(wk::DETAIL_FALLBACK_REASON));
}

// rule: EV-33
#[test]
fn a_hpa_target_is_checked_again_on_the_values_that_go_in() {
    let mut f = facts();
    f.hpa = Some(cpu_hpa(60));
    let mut side = app_container();
    side.name = "side".into();
    f.workload.containers.push(side);
    let mut side_rec = recommendation("600m", "256Mi");
    side_rec.name = "side".into();
    f.recommendation.containers.push(side_rec);
    flag(&mut f, kerf_api::rsr::ContainerFlag::Throttled);
    let mut p = policy();
    p.hpa_min_target = Sourced::new(56, Layer::Policy);
    // Proposed: 1000m -> 850m, target 71 %. The throttled app keeps 500m: 1000m -> 1100m
    // gives 55 %, below the minimum of 56.
    let b = block(&decide(&f, &p, now())).clone();
    assert_eq!(
        (b.reason, b.check),
        (
            wk::REASON_HPA_COUPLED,
            kerf_decide::pipeline::Check::HpaCoupling
        )
    );
    p.hpa_min_target = Sourced::new(50, Layer::Policy);
    let a = apply(&decide(&f, &p, now())).clone();
    assert_eq!(a.hpa.map(|h| (h.from, h.to)), Some((60, 55)));
}
