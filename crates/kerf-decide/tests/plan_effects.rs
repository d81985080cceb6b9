//! The action planner: which effects carry a recorded change onto its workload in one
//! pass, by strategy, canary and the in-place state machine's outcome.

use kerf_testkit::decide as fixture;

use chrono::Duration;
use fixture::*;
use kerf_api::policy::{Strategy, WorkloadKind};
use kerf_api::rsr::{CanaryRecord, CanaryStage, ChangeRecord, ChangeState, HpaOrder, WatchStatus};
use kerf_api::{ResourceRequirements, ResourceValues};
use kerf_decide::canary::{CanaryPolicy, CanarySize};
use kerf_decide::effective::{EffectivePolicy, Layer, Sourced};
use kerf_decide::facts::{Facts, PodFacts, ResizeCondition};
use kerf_decide::inplace::FallbackReason;
use kerf_decide::plan::{
    self, ChangeFacts, Effect, FallbackGate, StatusEdit, advance, canary_choice,
};

fn cpu(v: &str) -> ResourceRequirements {
    ResourceRequirements {
        requests: ResourceValues {
            cpu: q(v),
            memory: None,
        },
        limits: ResourceValues::default(),
    }
}

/// An in-place change from 1 to 500m, in flight.
fn change(strategy: Strategy) -> ChangeRecord {
    ChangeRecord {
        strategy,
        applied_at: None,
        ..applied_change(Duration::zero(), ChangeState::Applying)
    }
}

/// A running pod whose spec holds `spec` and whose status shows `status`.
fn pod(name: &str, spec: &str, status: &str) -> PodFacts {
    PodFacts {
        name: name.into(),
        node: Some("node-a".into()),
        spec_resources: vec![("app".into(), cpu(spec))],
        status_resources: vec![("app".into(), cpu(status))],
        current_revision: true,
        ..PodFacts::default()
    }
}

fn pending(p: PodFacts, reason: &str) -> PodFacts {
    PodFacts {
        resize_conditions: vec![ResizeCondition {
            type_: "PodResizePending".into(),
            reason: Some(reason.into()),
            message: Some("no room".into()),
            since: Some(now()),
        }],
        ..p
    }
}

fn old_pods(n: usize) -> Vec<PodFacts> {
    (0..n).map(|i| pod(&format!("p{i}"), "1", "1")).collect()
}

fn planned(
    change: &ChangeRecord,
    f: &Facts,
    p: &EffectivePolicy,
    pods: &[PodFacts],
) -> Vec<Effect> {
    advance(
        change,
        &ChangeFacts {
            facts: f,
            policy: p,
            pods,
            template_covers: false,
            may_start: true,
            now: now(),
        },
    )
}

fn resized(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Resize { pods, .. } => Some(pods.iter().map(|p| p.name.clone())),
            _ => None,
        })
        .flatten()
        .collect()
}

fn canary_policy(pods: u32) -> EffectivePolicy {
    let mut p = policy();
    p.canary = Sourced::new(
        Some(CanaryPolicy {
            size: CanarySize::Pods(pods),
            duration: Duration::minutes(5),
        }),
        Layer::Policy,
    );
    p
}

// rule: AP-04, AP-05
#[test]
fn ap_04_every_running_pod_is_resized_and_the_template_is_left_alone() {
    let effects = planned(
        &change(Strategy::InPlace),
        &facts(),
        &policy(),
        &old_pods(3),
    );
    assert_eq!(resized(&effects), ["p0", "p1", "p2"]);
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::ApplyTemplate { .. }))
    );
    assert!(!effects.contains(&Effect::Status(StatusEdit::Applying)));
    let mut intent = change(Strategy::InPlace);
    intent.state = ChangeState::Intent;
    let effects = planned(&intent, &facts(), &policy(), &old_pods(1));
    assert_eq!(effects[0], Effect::Status(StatusEdit::Applying));
}

// rule: AP-07
#[test]
fn ap_07_a_rollout_writes_a_lower_hpa_target_then_the_template_then_applied() {
    let c = change(Strategy::Rollout);
    let effects = planned(&c, &facts(), &policy(), &old_pods(3));
    let kinds: Vec<&str> = effects.iter().map(Effect::kind).collect();
    assert_eq!(
        kinds,
        ["patch_hpa", "apply_template", "mark_applied", "start_watch"],
        "{effects:?}"
    );
    assert_eq!(effects[0], Effect::PatchHpa(HpaOrder::Before));
    let covered = advance(
        &c,
        &ChangeFacts {
            facts: &facts(),
            policy: &policy(),
            pods: &[],
            template_covers: true,
            may_start: true,
            now: now(),
        },
    );
    assert_eq!(
        covered,
        [
            Effect::PatchHpa(HpaOrder::Before),
            Effect::MarkApplied,
            Effect::StartWatch
        ]
    );
    // A deferred change whose window opened goes in as a rollout.
    let deferred = planned(&change(Strategy::Deferred), &facts(), &policy(), &[]);
    assert!(deferred.contains(&Effect::MarkApplied));
}

// rule: EV-10
#[test]
fn ev_10_applied_is_recorded_once_every_pod_accepted() {
    let pods = [pod("p0", "500m", "500m"), pod("p1", "500m", "1")];
    let effects = planned(&change(Strategy::InPlace), &facts(), &policy(), &pods);
    assert!(!effects.contains(&Effect::MarkApplied));
    assert!(effects.contains(&Effect::Status(StatusEdit::Progress {
        accepted: 1,
        total: 2
    })));
    let pods = [pod("p0", "500m", "500m"), pod("p1", "500m", "500m")];
    let effects = planned(&change(Strategy::InPlace), &facts(), &policy(), &pods);
    let tail = &effects[effects.len() - 3..];
    assert_eq!(
        tail,
        [
            Effect::Status(StatusEdit::ProgressComplete { targeted: 2 }),
            Effect::MarkApplied,
            Effect::StartWatch
        ]
    );
}

// rule: AP-08, AP-10, AP-11, EV-44
#[test]
fn ap_08_an_infeasible_resize_falls_back_at_once() {
    let pods = [pending(pod("p0", "500m", "1"), "Infeasible")];
    let effects = planned(&change(Strategy::InPlace), &facts(), &policy(), &pods);
    assert!(
        effects.iter().any(|e| matches!(
            e,
            Effect::FallBack {
                reason: FallbackReason::ResizeInfeasible,
                ..
            }
        )),
        "{effects:?}"
    );
    // The API's Infeasible answer to a resize (design D17) leads to the same fallback.
    let gate = FallbackGate {
        kind: WorkloadKind::Deployment,
        rollout_safe: true,
    };
    let after = plan::on_infeasible(&change(Strategy::InPlace), gate, "full".into(), None);
    assert_eq!(
        after,
        [Effect::FallBack {
            reason: FallbackReason::ResizeInfeasible,
            message: "full".into()
        }]
    );
}

// rule: AP-09, EV-45
#[test]
fn ap_09_a_deferred_resize_falls_back_once_fallback_after_has_passed() {
    let pods = [pending(pod("p0", "500m", "1"), "Deferred")];
    let mut c = change(Strategy::InPlace);
    c.first_resize_at = Some(now() - Duration::minutes(9));
    let effects = planned(&c, &facts(), &policy(), &pods);
    assert!(!effects.iter().any(|e| e.kind() == "fall_back"));
    c.first_resize_at = Some(now() - Duration::minutes(10));
    let effects = planned(&c, &facts(), &policy(), &pods);
    assert!(effects.iter().any(|e| matches!(
        e,
        Effect::FallBack {
            reason: FallbackReason::ResizeDeferredTimeout,
            ..
        }
    )));
}

// rule: EV-41
#[test]
fn ev_41_an_unsafe_fallback_is_refused_and_the_resized_pods_go_back() {
    let mut f = facts();
    single_replica_recreate(&mut f);
    let pods = [pending(pod("p0", "500m", "1"), "Infeasible")];
    let effects = planned(&change(Strategy::InPlace), &f, &policy(), &pods);
    let n = effects.len() - 1;
    assert_eq!(effects[n], Effect::StartWatch);
    assert_eq!(
        effects[n - 2],
        Effect::ResizeBack {
            pods: vec!["p0".into()],
            to: vec![("app".into(), cpu("1"))]
        }
    );
    assert!(matches!(
        &effects[n - 1],
        Effect::Refuse { fallback_reason: FallbackReason::ResizeInfeasible, message }
            if message.contains("on node node-a")
    ));
}

// design D18
#[test]
fn a_daemonset_refuses_the_fallback_of_an_infeasible_answer() {
    let gate = FallbackGate {
        kind: WorkloadKind::DaemonSet,
        rollout_safe: true,
    };
    let after = plan::on_infeasible(
        &change(Strategy::InPlace),
        gate,
        "full".into(),
        Some("n1".into()),
    );
    assert!(matches!(&after[1], Effect::Refuse { message, .. } if message.contains("DaemonSet")));
}

// rule: AP-36, AP-37
#[test]
fn ap_37_a_freeze_starts_no_resize_but_follows_the_submitted_ones() {
    let pods = [pod("p0", "500m", "1"), pod("p1", "1", "1")];
    let f = facts();
    let p = policy();
    let frozen = advance(
        &change(Strategy::InPlace),
        &ChangeFacts {
            facts: &f,
            policy: &p,
            pods: &pods,
            template_covers: false,
            may_start: false,
            now: now(),
        },
    );
    assert!(resized(&frozen).is_empty());
    assert!(frozen.contains(&Effect::Status(StatusEdit::Progress {
        accepted: 0,
        total: 2
    })));
}

// design D16, D25: the canary is recorded in the intent, before any resize.
#[test]
fn the_canary_is_chosen_before_any_resize_and_holds_the_others_back() {
    let p = canary_policy(1);
    let c = change(Strategy::InPlace);
    let chosen = canary_choice(&c, p.canary.value, &old_pods(3), now());
    assert_eq!(chosen.as_deref().map(<[String]>::len), Some(1));
    assert_eq!(
        canary_choice(
            &change(Strategy::Rollout),
            p.canary.value,
            &old_pods(3),
            now()
        ),
        None
    );
    let mut c = c;
    c.canary = Some(plan::chosen_canary(chosen.unwrap_or_default()));
    let effects = planned(&c, &facts(), &p, &old_pods(3));
    assert_eq!(resized(&effects).len(), 1, "{effects:?}");
}

// design D16: the canary watch holds every other pod until it ends, then they go.
#[test]
fn the_canary_watch_holds_then_passes() {
    let p = canary_policy(1);
    let mut c = change(Strategy::InPlace);
    let end = now() + Duration::minutes(3);
    c.canary = Some(CanaryRecord {
        pods: vec!["p0".into()],
        stage: CanaryStage::Watching,
        watch: Some(WatchStatus {
            start: now(),
            end: Some(end),
            baselines: Default::default(),
            aggregated: None,
        }),
    });
    let pods = [pod("p0", "500m", "500m"), pod("p1", "1", "1")];
    let effects = planned(&c, &facts(), &p, &pods);
    assert!(effects.contains(&Effect::WakeAt(end)));
    assert!(resized(&effects).is_empty());
    if let Some(k) = c.canary.as_mut().and_then(|k| k.watch.as_mut()) {
        k.end = Some(now());
    }
    let effects = planned(&c, &facts(), &p, &pods);
    assert!(effects.contains(&Effect::Status(StatusEdit::CanaryStage {
        stage: CanaryStage::Passed,
        until: None
    })));
    assert_eq!(
        resized(&effects),
        ["p1"],
        "the pods left go once the canary passed"
    );
}

// rule: RB-03
#[test]
fn rb_03_a_plan_starts_the_watch_last_after_the_change_is_applied() {
    let accepted = [pod("p0", "500m", "500m"), pod("p1", "500m", "500m")];
    for (strategy, pods) in [
        (Strategy::InPlace, accepted.to_vec()),
        (Strategy::Rollout, old_pods(3)),
        (Strategy::Deferred, old_pods(3)),
    ] {
        let effects = planned(&change(strategy), &facts(), &policy(), &pods);
        let at = |want: &Effect| effects.iter().position(|e| e == want);
        assert_eq!(
            at(&Effect::StartWatch),
            Some(effects.len() - 1),
            "{effects:?}"
        );
        assert!(
            at(&Effect::MarkApplied) < at(&Effect::StartWatch),
            "{effects:?}"
        );
    }
}
