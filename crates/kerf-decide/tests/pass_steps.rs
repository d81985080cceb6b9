//! The steps of one pass over a workload: which one comes first when several are due, and
//! the guardrails around them (freeze, pause, D21 hold, AP-58), without a server.

use kerf_testkit::decide as fixture;

use chrono::{DateTime, Duration, Utc};
use fixture::*;
use kerf_api::hub::PauseScope;
use kerf_api::policy::{Mode, Window, WorkloadKind};
use kerf_api::rsr::{
    ChangeState, HpaChange, HpaOrder, RightsizingRecommendationStatus, WatchStatus,
};
use kerf_api::wellknown as wk;
use kerf_api::{Condition, ConditionStatus, Resource, Strategy};
use kerf_decide::effective::{EffectivePolicy, Layer, Sourced};
use kerf_decide::facts::Facts;
use kerf_decide::health::{Breach, BreachReason};
use kerf_decide::pass::{
    Outdated, PassFacts, SETTLE_RECHECK, Step, StepKind, WorkloadState, canary_watch_due, frozen,
    left_to_wind_down, next_step, on_delete_due, on_delete_waits_for_controller, release_due,
    rolling, settle_wake, wake_times, watch_due,
};
use kerf_decide::pipeline::{Outcome, ReportKind};

/// One workload's pass, owned, so edits can be combined.
#[derive(Clone)]
struct Scene {
    status: RightsizingRecommendationStatus,
    facts: Facts,
    policy: EffectivePolicy,
    withdrawn: bool,
    workload: WorkloadState,
    breach: Option<Breach>,
    outdated: Outdated,
}

impl Scene {
    /// A workload that passes every check: a new decision applies a change.
    fn fresh() -> Scene {
        Scene {
            status: RightsizingRecommendationStatus::default(),
            facts: facts(),
            policy: policy(),
            withdrawn: false,
            workload: WorkloadState {
                kind: WorkloadKind::Deployment,
                replicas: Some(3),
                status_replicas: Some(3),
                updated_replicas: Some(3),
                generation: Some(2),
                observed_generation: Some(2),
                on_delete: false,
                desired_number_scheduled: None,
                updated_number_scheduled: None,
                template_covers_change: false,
                pods_settled: true,
                rollout_complete: false,
                hpa_target: None,
            },
            breach: None,
            outdated: Outdated::None,
        }
    }

    /// An OnDelete StatefulSet whose applied rollout change (with a higher HPA target
    /// written already) is under a running health watch.
    fn applied() -> Scene {
        let mut s = Scene::fresh();
        let mut change = applied_change(Duration::minutes(5), ChangeState::Applied);
        change.strategy = Strategy::Rollout;
        change.hpa = Some(HpaChange {
            name: "checkout".into(),
            resource: Resource::Cpu,
            from: 60,
            to: 80,
            order: HpaOrder::After,
            written: true,
        });
        s.status.change = Some(Box::new(change));
        s.status.watch = Some(watch(None));
        s.workload.kind = WorkloadKind::StatefulSet;
        s.workload.on_delete = true;
        s.workload.template_covers_change = true;
        s
    }

    fn pass_facts(&self) -> PassFacts<'_> {
        PassFacts {
            status: &self.status,
            facts: &self.facts,
            withdrawn: self.withdrawn,
            workload: self.workload.clone(),
            breach: self.breach.clone(),
            outdated: self.outdated.clone(),
        }
    }

    fn step(&self) -> Step {
        next_step(&self.pass_facts(), &self.policy, now())
    }
}

fn watch(end: Option<DateTime<Utc>>) -> WatchStatus {
    WatchStatus {
        start: now() - Duration::minutes(5),
        end,
        baselines: Default::default(),
        aggregated: None,
    }
}

fn breach() -> Breach {
    Breach {
        reason: BreachReason::Restarts,
        restore: vec![Resource::Cpu],
        details: Default::default(),
        message: "restarts reached 3".into(),
    }
}

fn open_freeze() -> Window {
    Window {
        start: Some("2026-06-03T11:00:00Z".into()),
        end: Some("2026-06-03T13:00:00Z".into()),
        ..Window::default()
    }
}

fn freeze_policy(p: &mut EffectivePolicy) {
    p.freeze_windows = Sourced::new(vec![open_freeze()].into(), Layer::Policy);
}

fn release_cpu(s: &mut Scene) {
    set_mode(&mut s.policy, Mode::Audit, Mode::AutoPatch);
}

fn hpa_after_waits(s: &mut Scene) {
    if let Some(h) = s.status.change.as_mut().and_then(|c| c.hpa.as_mut()) {
        h.written = false;
    }
    s.workload.rollout_complete = true;
    s.workload.hpa_target = Some(60);
}

/// The applied change is the change of the recommendation the rsr holds now.
fn of_current_recommendation(s: &mut Scene) {
    let current = s.facts.recommendation.recommendation_id.clone();
    if let Some(c) = s.status.change.as_mut() {
        c.recommendation_id = current;
    }
}

/// The applied rollout of the rsr's recommendation still runs: an old replica is there.
fn rollout_of_current_recommendation(s: &mut Scene) {
    of_current_recommendation(s);
    s.workload.status_replicas = Some(4);
}

fn outdated_pods(s: &mut Scene) {
    s.outdated = Outdated::Ready(vec!["db-2".into()]);
}

type Edit = fn(&mut Scene);

/// Edits of an applied change that each make one step kind due.
fn applied_edits() -> Vec<(StepKind, Edit)> {
    vec![
        (StepKind::Withdrawn, |s| s.withdrawn = true),
        (StepKind::Release, release_cpu),
        (StepKind::RollBack, |s| s.breach = Some(breach())),
        (StepKind::HpaAfter, hpa_after_waits),
        (StepKind::Evict, outdated_pods),
        (StepKind::Settle, rollout_of_current_recommendation),
        (StepKind::Revert, |s| s.policy.revert = true),
    ]
}

#[test]
fn step_kinds_are_tried_in_their_order() {
    let mut sorted = StepKind::ORDER;
    sorted.sort();
    assert_eq!(sorted, StepKind::ORDER);
}

// rule: AP-58, design D21, D22
#[test]
fn for_every_pair_of_due_steps_the_earlier_one_is_the_pass() {
    for (a, edit_a) in applied_edits() {
        let mut alone = Scene::applied();
        edit_a(&mut alone);
        assert_eq!(alone.step().kind(), a, "{a:?} alone");
        for (b, edit_b) in applied_edits() {
            if a >= b {
                continue;
            }
            for order in [[edit_a, edit_b], [edit_b, edit_a]] {
                let mut s = Scene::applied();
                order.iter().for_each(|e| e(&mut s));
                assert_eq!(s.step().kind(), a, "{a:?} and {b:?} due");
            }
        }
    }
}

// rule: AP-58
#[test]
fn ap_58_no_ondelete_eviction_during_a_health_breach() {
    let mut s = Scene::applied();
    outdated_pods(&mut s);
    assert!(matches!(s.step(), Step::Evict(p) if p == ["db-2"]));
    s.breach = Some(breach());
    assert!(matches!(s.step(), Step::RollBack(b) if b.reason == BreachReason::Restarts));
}

// rule: AP-34, EV-39
#[test]
fn no_ondelete_eviction_under_a_freeze_or_a_pause() {
    let mut s = Scene::applied();
    outdated_pods(&mut s);
    freeze_policy(&mut s.policy);
    assert_eq!(s.step().kind(), StepKind::Report);
    let mut s = Scene::applied();
    outdated_pods(&mut s);
    pause(&mut s.facts, PauseScope::Cluster);
    assert_eq!(s.step().kind(), StepKind::Report);
}

// rule: AP-52
#[test]
fn ap_52_ondelete_pods_wait_for_the_controller_to_see_the_template() {
    let mut s = Scene::applied();
    outdated_pods(&mut s);
    s.workload.generation = Some(3);
    assert!(!on_delete_due(&s.status, &s.workload));
    assert!(on_delete_waits_for_controller(&s.status, &s.workload));
    assert_ne!(s.step().kind(), StepKind::Evict);
    s.workload.observed_generation = Some(3);
    assert!(on_delete_due(&s.status, &s.workload));
    assert!(!on_delete_waits_for_controller(&s.status, &s.workload));
    s.workload.on_delete = false;
    assert!(!on_delete_due(&s.status, &s.workload));
}

// rule: design D25
#[test]
fn a_change_in_flight_is_carried_on_and_nothing_new_is_decided() {
    for state in [ChangeState::Intent, ChangeState::Applying] {
        let mut s = Scene::fresh();
        s.status.change = Some(Box::new(applied_change(Duration::seconds(1), state)));
        // The facts alone would apply a change: the pass still only carries the change on.
        assert!(matches!(decide_only(&s).outcome, Outcome::Apply(_)));
        assert!(
            matches!(s.step(), Step::Resume { may_start: true }),
            "{state:?}"
        );
        s.withdrawn = true;
        assert_eq!(s.step().kind(), StepKind::Withdrawn);
    }
}

fn decide_only(s: &Scene) -> kerf_decide::Decision {
    kerf_decide::decide(&s.facts, &s.policy, now())
}

// rule: AP-36, AP-37, EV-39
#[test]
fn a_change_in_flight_starts_no_resize_under_a_freeze_or_a_pause() {
    let mut s = Scene::fresh();
    s.status.change = Some(Box::new(applied_change(
        Duration::seconds(1),
        ChangeState::Applying,
    )));
    freeze_policy(&mut s.policy);
    assert!(matches!(s.step(), Step::Resume { may_start: false }));
    let mut s = Scene::fresh();
    s.status.change = Some(Box::new(applied_change(
        Duration::seconds(1),
        ChangeState::Applying,
    )));
    pause(&mut s.facts, PauseScope::Fleet);
    assert!(matches!(s.step(), Step::Resume { may_start: false }));
    s.facts.hub.pause = None;
    s.facts.cluster_freeze.now = true;
    assert!(frozen(&s.facts, &s.policy, now()));
}

/// An in-flight in-place change whose canary pods are watched until `end`.
fn canary_watching(s: &mut Scene, end: DateTime<Utc>) {
    let mut c = applied_change(Duration::seconds(1), ChangeState::Applying);
    c.canary = Some(kerf_api::rsr::CanaryRecord {
        pods: vec!["web-1".into()],
        stage: kerf_api::rsr::CanaryStage::Watching,
        watch: Some(watch(Some(end))),
    });
    s.status.change = Some(Box::new(c));
}

// rule: RB-11, design D25 (apply.canary)
#[test]
fn a_breach_of_the_canary_is_rolled_back_before_the_change_goes_on() {
    let mut s = Scene::fresh();
    canary_watching(&mut s, now() + Duration::minutes(5));
    assert!(canary_watch_due(&s.status));
    assert!(matches!(s.step(), Step::Resume { may_start: true }));
    s.breach = Some(breach());
    assert!(matches!(s.step(), Step::RollBack(b) if b.reason == BreachReason::Restarts));
}

#[test]
fn a_running_canary_wakes_the_workload_at_its_end() {
    let mut s = Scene::fresh();
    let end = now() + Duration::minutes(5);
    canary_watching(&mut s, end);
    let wakes = wake_times(None, &s.status, &s.policy, now());
    assert!(wakes.contains(&end), "{wakes:?}");
    if let Some(k) = s.status.change.as_mut().and_then(|c| c.canary.as_mut()) {
        k.stage = kerf_api::rsr::CanaryStage::Passed;
    }
    assert!(!canary_watch_due(&s.status));
}

// rule: RB-28
#[test]
fn a_rollback_in_flight_is_carried_on() {
    let mut s = Scene::applied();
    if let Some(c) = s.status.change.as_mut() {
        c.state = ChangeState::RollingBack;
    }
    outdated_pods(&mut s);
    assert_eq!(s.step().kind(), StepKind::ResumeRollback);
}

// rule: design D21, AP-21, EV-46
#[test]
fn d21_the_resources_that_left_auto_patch_are_released() {
    let mut s = Scene::applied();
    assert_eq!(release_due(&s.status, &s.policy), None);
    release_cpu(&mut s);
    let Step::Release(rel) = s.step() else {
        panic!("release expected, got {:?}", s.step().kind());
    };
    assert_eq!(rel.resources, [Resource::Cpu]);
    assert_eq!((rel.previous, rel.new), (Mode::AutoPatch, Mode::Audit));
    // An approved change keeps its fields in audit; it leaves only with mode off (D27).
    if let Some(c) = s.status.change.as_mut() {
        c.approval_id = Some("ap-1".into());
    }
    assert_eq!(release_due(&s.status, &s.policy), None);
    set_mode(&mut s.policy, Mode::Off, Mode::AutoPatch);
    assert_eq!(
        release_due(&s.status, &s.policy).map(|r| (r.previous, r.new)),
        Some((Mode::Audit, Mode::Off))
    );
}

// rule: design D21, AP-35
#[test]
fn d21_a_release_held_by_a_freeze_reports_the_freeze_for_its_resources() {
    let mut s = Scene::applied();
    release_cpu(&mut s);
    freeze_policy(&mut s.policy);
    let Step::Report(d) = s.step() else {
        panic!("report expected, got {:?}", s.step().kind());
    };
    let end: DateTime<Utc> = "2026-06-03T13:00:00Z".parse().unwrap();
    assert_eq!(d.hold_until, Some(end));
    let held = d
        .decision
        .reports
        .iter()
        .chain(std::iter::empty())
        .any(|r| r.reason == wk::REASON_FREEZE_WINDOW && r.resource == Resource::Cpu);
    let whole = matches!(&d.decision.outcome, Outcome::Block(b)
        if b.reason == wk::REASON_FREEZE_WINDOW && b.resources.contains(&Resource::Cpu));
    assert!(held || whole, "{:?}", d.decision);
    assert!(
        !d.decision
            .reports
            .iter()
            .any(|r| r.kind == ReportKind::Skipped && r.resource == Resource::Cpu),
        "the mode skip gives way to the hold"
    );
}

// rule: design D21, EV-39
#[test]
fn d21_a_release_held_by_a_pause_reports_the_pause() {
    let mut s = Scene::applied();
    set_mode(&mut s.policy, Mode::Audit, Mode::Audit);
    pause(&mut s.facts, PauseScope::Cluster);
    let Step::Report(d) = s.step() else {
        panic!("report expected, got {:?}", s.step().kind());
    };
    let Outcome::Block(b) = &d.decision.outcome else {
        panic!("block expected: {:?}", d.decision.outcome);
    };
    assert_eq!(b.reason, wk::REASON_PAUSED);
    assert!(
        d.decision.message.contains("release of cpu waits"),
        "{}",
        d.decision.message
    );
    assert_eq!(d.hold_until, None);
}

// rule: design D22
#[test]
fn d22_the_higher_hpa_target_waits_for_the_completed_rollout() {
    let mut s = Scene::applied();
    hpa_after_waits(&mut s);
    assert_eq!(s.step().kind(), StepKind::HpaAfter);
    s.workload.rollout_complete = false;
    assert_ne!(s.step().kind(), StepKind::HpaAfter);
    s.workload.rollout_complete = true;
    s.workload.template_covers_change = false;
    assert_ne!(s.step().kind(), StepKind::HpaAfter);
    s.workload.template_covers_change = true;
    s.workload.hpa_target = Some(80);
    assert_eq!(
        s.step().kind(),
        StepKind::HpaAfter,
        "already there: recorded"
    );
    // rule: AP-22
    s.workload.hpa_target = Some(70);
    assert_ne!(
        s.step().kind(),
        StepKind::HpaAfter,
        "changed by someone else"
    );
    s.workload.hpa_target = None;
    assert_ne!(s.step().kind(), StepKind::HpaAfter, "HPA gone");
}

// rule: GR-44
#[test]
fn a_new_decision_starts_a_change_or_reports() {
    let s = Scene::fresh();
    assert_eq!(s.step().kind(), StepKind::Start);
    let mut off = Scene::fresh();
    set_mode(&mut off.policy, Mode::Off, Mode::Off);
    assert_eq!(off.step().kind(), StepKind::Report);
}

// rule: RB-19
#[test]
fn rb_19_an_ended_watch_is_evaluated_once_more_until_healthy_is_reported() {
    let mut s = Scene::applied();
    assert!(watch_due(&s.status, now()), "a rollout's watch runs");
    s.status.watch = Some(watch(Some(now() + Duration::minutes(20))));
    assert!(watch_due(&s.status, now()));
    s.status.watch = Some(watch(Some(now() - Duration::minutes(1))));
    assert!(watch_due(&s.status, now()), "Healthy not reported yet");
    s.status.conditions.push(Condition {
        type_: wk::CONDITION_HEALTH_WATCH.to_owned(),
        status: ConditionStatus::True,
        reason: wk::CONDITION_REASON_HEALTHY.to_owned(),
        message: String::new(),
        last_transition_time: now(),
        observed_generation: None,
    });
    assert!(!watch_due(&s.status, now()));
    assert!(!watch_due(
        &RightsizingRecommendationStatus::default(),
        now()
    ));
}

#[test]
fn a_rollout_runs_until_every_replica_is_updated() {
    let mut w = Scene::fresh().workload;
    assert!(!rolling(&w));
    w.generation = Some(3);
    assert!(rolling(&w), "template not observed yet");
    w.observed_generation = Some(3);
    w.updated_replicas = Some(2);
    assert!(rolling(&w), "one replica not updated");
    w.updated_replicas = Some(3);
    w.status_replicas = Some(4);
    assert!(rolling(&w), "an old replica still runs");
    w.status_replicas = Some(3);
    w.kind = WorkloadKind::DaemonSet;
    w.desired_number_scheduled = Some(4);
    w.updated_number_scheduled = Some(3);
    assert!(rolling(&w));
    w.updated_number_scheduled = Some(4);
    assert!(!rolling(&w));
}

// rule: AP-10
#[test]
fn ap_10_an_in_place_change_is_looked_at_again_at_its_fallback_time() {
    let mut s = Scene::fresh();
    let mut change = applied_change(Duration::seconds(30), ChangeState::Applying);
    change.first_resize_at = Some(now() - Duration::seconds(30));
    s.status.change = Some(Box::new(change));
    let at = wake_times(None, &s.status, &s.policy, now());
    let fallback = now() - Duration::seconds(30) + s.policy.fallback_after.value;
    assert_eq!(at, [fallback.max(now() + Duration::seconds(1))]);
    let mut watched = Scene::applied();
    let end = now() + Duration::minutes(10);
    watched.status.watch = Some(watch(Some(end)));
    assert_eq!(
        wake_times(None, &watched.status, &watched.policy, now()),
        [end]
    );
}

// rule: AP-56, AP-58
#[test]
fn waiting_ondelete_pods_are_looked_at_again() {
    use kerf_decide::pass::{ON_DELETE_RECHECK, on_delete_wake};
    let wake = |s: &Scene| on_delete_wake(&s.pass_facts(), &s.policy, now());
    let mut s = Scene::applied();
    assert_eq!(wake(&s), None, "nothing outdated");
    let settled = now() + Duration::seconds(20);
    s.outdated = Outdated::Waiting {
        until: Some(settled),
    };
    assert_eq!(wake(&s), Some(settled), "a pod settles until then");
    outdated_pods(&mut s);
    assert_eq!(wake(&s), None, "evicted in this pass");
    s.breach = Some(breach());
    assert_eq!(
        wake(&s),
        Some(now() + ON_DELETE_RECHECK),
        "held by the breach"
    );
    s.breach = None;
    s.workload.generation = Some(3);
    assert_eq!(
        wake(&s),
        Some(now() + ON_DELETE_RECHECK),
        "controller behind"
    );
}

/// An in-place change of the rsr's recommendation, applied a few seconds ago, whose pods
/// do not show its values yet (a resize accepted, pending or Deferred).
fn settling_in_place() -> Scene {
    let mut s = Scene::fresh();
    s.status.change = Some(Box::new(applied_change(
        Duration::seconds(3),
        ChangeState::Applied,
    )));
    of_current_recommendation(&mut s);
    s.workload.pods_settled = false;
    s
}

fn wake_of(s: &Scene) -> Option<DateTime<Utc>> {
    settle_wake(&s.pass_facts(), &s.policy, now())
}

#[test]
fn an_in_place_change_whose_pods_do_not_show_it_yet_is_not_decided_again() {
    let mut s = settling_in_place();
    // The facts alone would start a change: the pass only follows the applied one.
    assert!(matches!(decide_only(&s).outcome, Outcome::Apply(_)));
    assert!(matches!(s.step(), Step::Settle));
    assert_eq!(wake_of(&s), Some(now() + SETTLE_RECHECK));
    s.workload.pods_settled = true;
    assert_eq!(s.step().kind(), StepKind::Start, "settled: decided again");
    assert_eq!(wake_of(&s), None);
}

#[test]
fn a_rollout_settles_once_the_template_holds_the_change_and_every_replica_runs_it() {
    for strategy in [Strategy::Rollout, Strategy::Deferred] {
        let mut s = settling_in_place();
        s.workload.pods_settled = true;
        if let Some(c) = s.status.change.as_mut() {
            c.strategy = strategy;
        }
        assert_eq!(s.step().kind(), StepKind::Settle, "{strategy:?}: template");
        s.workload.template_covers_change = true;
        s.workload.generation = Some(3);
        let want = match strategy {
            Strategy::Rollout => StepKind::Settle,
            _ => StepKind::Start,
        };
        assert_eq!(s.step().kind(), want, "{strategy:?}: rollout running");
        s.workload.observed_generation = Some(3);
        assert_eq!(s.step().kind(), StepKind::Start, "{strategy:?}: settled");
    }
}

#[test]
fn a_new_recommendation_is_decided_while_the_last_change_settles() {
    let mut s = settling_in_place();
    s.facts.recommendation.recommendation_id = "rec-2".into();
    assert_eq!(s.step().kind(), StepKind::Start);
    assert_eq!(wake_of(&s), None);
}

#[test]
fn an_in_place_change_stops_holding_decisions_back_after_fallback_after() {
    // Applied 3 s ago: a 4 s fallbackAfter ends in 1 s, a 3 s one has ended.
    let mut s = settling_in_place();
    s.policy.fallback_after.value = Duration::seconds(4);
    assert_eq!(
        wake_of(&s),
        Some(now() + Duration::seconds(1)),
        "ends first"
    );
    assert_eq!(s.step().kind(), StepKind::Settle);
    s.policy.fallback_after.value = Duration::seconds(3);
    assert_eq!(s.step().kind(), StepKind::Start, "fallbackAfter passed");
}

#[test]
fn only_an_applied_change_settles() {
    for state in [
        ChangeState::RolledBack,
        ChangeState::Released,
        ChangeState::Applying,
    ] {
        let mut s = settling_in_place();
        if let Some(c) = s.status.change.as_mut() {
            c.state = state;
        }
        assert_ne!(s.step().kind(), StepKind::Settle, "{state:?}");
    }
}

// A workload that left the agent's scope: what the agent did winds down as when it leaves
// auto-patch (its fields are released, an approved change's too), nothing new starts.
#[test]
fn a_workload_outside_the_scope_has_its_applied_change_released_and_nothing_new() {
    let mut s = Scene::applied();
    assert!(left_to_wind_down(&s.status));
    s.policy = s.policy.clone().outside_scope();
    let Step::Release(rel) = s.step() else {
        panic!("release expected, got {:?}", s.step().kind());
    };
    assert_eq!(rel.new, Mode::Off);
    assert_eq!(s.policy.mode.cpu.layer, Layer::Scope);
    if let Some(c) = s.status.change.as_mut() {
        c.approval_id = Some("ap-1".into());
    }
    assert_eq!(s.step().kind(), StepKind::Release);
    // Once released, or rolled back, nothing is left to finish.
    for state in [ChangeState::Released, ChangeState::RolledBack] {
        if let Some(c) = s.status.change.as_mut() {
            c.state = state;
        }
        assert!(!left_to_wind_down(&s.status));
    }
    let winding: Vec<StepKind> = StepKind::ORDER
        .into_iter()
        .filter(|k| k.winds_down())
        .collect();
    assert!(!winding.contains(&StepKind::Start) && !winding.contains(&StepKind::Report));
    assert!(!winding.contains(&StepKind::Revert) && !winding.contains(&StepKind::Withdrawn));
    assert_eq!(winding.len(), 7, "{winding:?}");
}
