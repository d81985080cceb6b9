//! What `kubectl get rsr` and `kubectl describe rsr` show, built by the pure status and
//! summary code from a real decision: CPU and MEMORY as the pods are meant to run them,
//! `current→recommended` in every mode, REASON of the phase, the `-o wide` fields, the
//! Progressing rule, skip and block messages with the requests.

use kerf_testkit::decide as pipeline_fixture;

use chrono::Duration;
use kerf_api::Resource;
use kerf_api::policy::{Mode, Strategy};
use kerf_api::rsr::{
    CanaryRecord, CanaryStage, ChangeProgress, ChangeState, Phase, RightsizingRecommendationStatus,
    RollbackRecord, WatchStatus,
};
use kerf_api::wellknown as wk;
use kerf_decide::effective::{Layer, PolicyProblem};
use kerf_decide::facts::Facts;
use kerf_decide::status::{self, Invalid, StatusInput, text};
use pipeline_fixture::status::{audit_status, build, build_after, in_place_change};
use pipeline_fixture::{MI, facts, now, policy, recommendation, set_mode, set_strategy, values};

fn cells(s: &RightsizingRecommendationStatus) -> (String, String, String) {
    let sum = s.summary.clone().unwrap_or_default();
    (
        sum.cpu.unwrap_or_default(),
        sum.memory.unwrap_or_default(),
        sum.reason.unwrap_or_default(),
    )
}

/// The checkout template: 500m/512Mi, the hub recommending 300m/384Mi.
fn checkout() -> Facts {
    let mut f = facts();
    f.workload.containers[0].requests = values(Some(500), Some(512 * MI));
    f.workload.containers[0].limits = values(None, None);
    f.recommendation.containers = vec![recommendation("300m", "384Mi")];
    f
}

#[test]
fn audit_shows_current_then_recommended_in_quantity_form() {
    let s = audit_status();
    assert_eq!(s.phase, Some(Phase::Skipped));
    assert_eq!(
        cells(&s),
        ("800m→400m".into(), "2Gi→1536Mi".into(), "ModeAudit".into())
    );
}

// rule: RB-05
#[test]
fn a_memory_only_rollback_of_an_in_place_change_shows_the_cpu_the_pods_keep() {
    let mut f = checkout();
    let mut prev = RightsizingRecommendationStatus {
        change: Some(Box::new(in_place_change(ChangeState::RolledBack))),
        ..Default::default()
    };
    prev.last_rollback = Some(RollbackRecord {
        time: now() - Duration::minutes(5),
        reason: wk::REASON_OOM_KILLS.into(),
        resources: vec![Resource::Memory],
        change_id: "chg-1".into(),
    });
    let s = build(&mut f, &policy(), &prev);
    assert_eq!(s.phase, Some(Phase::RolledBack));
    assert_eq!(
        cells(&s),
        ("300m".into(), "512Mi→384Mi".into(), "OOMKills".into())
    );
}

#[test]
fn an_in_place_change_released_to_audit_shows_the_values_the_pods_still_run() {
    let mut f = checkout();
    f.recommendation.containers = vec![recommendation("250m", "384Mi")];
    let prev = RightsizingRecommendationStatus {
        change: Some(Box::new(in_place_change(ChangeState::Released))),
        ..Default::default()
    };
    let mut p = policy();
    set_mode(&mut p, Mode::Audit, Mode::Audit);
    let s = build(&mut f, &p, &prev);
    assert_eq!(s.phase, Some(Phase::Released));
    assert_eq!(
        cells(&s),
        ("300m→250m".into(), "384Mi".into(), "ModeChanged".into())
    );
}

#[test]
fn a_later_pass_with_nothing_to_do_keeps_the_reason_of_applied() {
    let mut f = checkout();
    f.workload.containers[0].requests = values(Some(300), Some(384 * MI));
    let mut change = in_place_change(ChangeState::Applied);
    change.strategy = Strategy::Rollout;
    let s = build_after(&mut f, change.clone());
    assert_eq!(s.phase, Some(Phase::Applied));
    assert_eq!(
        cells(&s),
        (
            "300m".into(),
            "384Mi".into(),
            "RecommendationApplied".into()
        )
    );
    // An approved-once change keeps its own reason.
    let mut approved = change;
    approved.approval_id = Some("appr-7".into());
    let s = build_after(&mut f, approved);
    assert_eq!(cells(&s).2, "ApprovedOnce");
}

#[test]
fn a_running_canary_shows_in_reason_and_its_end_in_next() {
    let mut f = checkout();
    let mut change = in_place_change(ChangeState::Applying);
    change.applied_at = None;
    change.progress = Some(ChangeProgress {
        pods_accepted: 1,
        pods_total: 3,
    });
    let end = now() + Duration::minutes(10);
    change.canary = Some(CanaryRecord {
        pods: vec!["checkout-1".into()],
        stage: CanaryStage::Resizing,
        watch: None,
    });
    let s = build_after(&mut f, change.clone());
    assert_eq!(s.phase, Some(Phase::Applying));
    assert_eq!(cells(&s).2, "CanaryResizing");

    change.canary = Some(CanaryRecord {
        pods: vec!["checkout-1".into()],
        stage: CanaryStage::Watching,
        watch: Some(WatchStatus {
            start: now(),
            end: Some(end),
            baselines: Default::default(),
            aggregated: None,
        }),
    });
    let s = build_after(&mut f, change.clone());
    assert_eq!(cells(&s).2, "CanaryWatching");
    let sum = s.summary.clone().unwrap_or_default();
    assert_eq!(sum.next.as_deref(), Some("2026-06-03T12:10:00Z"));

    // Once the canary passed the change reads as any other.
    if let Some(k) = change.canary.as_mut() {
        k.stage = CanaryStage::Passed;
    }
    let s = build_after(&mut f, change);
    assert_eq!(cells(&s).2, "RecommendationApplied");
}

#[test]
fn an_invalid_annotation_names_itself_and_calls_for_one_warning() {
    let mut f = checkout();
    let mut p = policy();
    set_mode(&mut p, Mode::Off, Mode::Off);
    p.problems.push(PolicyProblem {
        field: "kerf.getkerf.dev/mode".into(),
        layer: Layer::Annotation,
        value: "banana".into(),
        message: "not a mode; off is used".into(),
    });
    let first = build(&mut f, &p, &RightsizingRecommendationStatus::default());
    assert_eq!(cells(&first).2, "InvalidAnnotation");
    let (reason, message) = status::invalid_warning(&Default::default(), &first)
        .unwrap_or_else(|| panic!("no warning: {:?}", first.conditions));
    assert_eq!(reason, "InvalidAnnotation");
    assert!(message.contains("banana"), "{message}");
    // The same problem on the next pass: no second warning.
    let again = build(&mut f, &p, &first);
    assert_eq!(status::invalid_warning(&first, &again), None);
}

#[test]
fn an_invalid_policy_field_names_itself() {
    let mut f = checkout();
    let mut p = policy();
    set_mode(&mut p, Mode::Audit, Mode::Audit);
    p.problems.push(PolicyProblem {
        field: "spec.freezeWindows[0].schedule".into(),
        layer: Layer::Policy,
        value: "0 25 * * *".into(),
        message: "hour 25 is out of range; the window is treated as open".into(),
    });
    let s = build(&mut f, &p, &RightsizingRecommendationStatus::default());
    assert_eq!(cells(&s).2, "InvalidPolicy");
    let valid = s.conditions.iter().find(|c| c.type_ == "Valid");
    assert_eq!(valid.map(|c| c.reason.as_str()), Some("InvalidPolicy"));
    assert!(status::invalid_warning(&Default::default(), &s).is_some());
}

#[test]
fn wide_fields_name_the_policy_the_last_change_and_when_the_block_ends() {
    let mut f = checkout();
    f.workload.containers[0].requests = values(Some(300), Some(384 * MI));
    f.recommendation.containers = vec![recommendation("250m", "300Mi")];
    let mut change = in_place_change(ChangeState::Applied);
    change.strategy = Strategy::Rollout;
    change.applied_at = Some(now() - Duration::hours(1));
    let s = build_after(&mut f, change);
    let sum = s.summary.clone().unwrap_or_default();
    assert_eq!(sum.policy.as_deref(), Some("shop-default"));
    assert_eq!(sum.last_change, Some(now() - Duration::hours(1)));
    // The cooldown blocks the next step until 24h after the change.
    assert_eq!(
        sum.next.as_deref(),
        Some("2026-06-04T11:00:00Z"),
        "{:?} {:?}",
        s.conditions,
        kerf_decide::decide(&f, &policy(), now()).outcome
    );
}

fn has_progressing(s: &RightsizingRecommendationStatus) -> bool {
    s.conditions
        .iter()
        .any(|c| c.type_ == wk::CONDITION_PROGRESSING)
}

#[test]
fn progressing_shows_only_for_workloads_changed_by_rollout() {
    let mut f = checkout();
    let in_place = build(&mut f, &policy(), &Default::default());
    assert!(!has_progressing(&in_place), "{:?}", in_place.conditions);
    let mut audit = policy();
    set_mode(&mut audit, Mode::Audit, Mode::Audit);
    set_strategy(&mut audit, Strategy::Rollout);
    let s = build(&mut f, &audit, &Default::default());
    assert!(!has_progressing(&s), "{:?}", s.conditions);
    let mut rollout = policy();
    set_strategy(&mut rollout, Strategy::Rollout);
    let s = build(&mut f, &rollout, &Default::default());
    assert!(has_progressing(&s), "{:?}", s.conditions);
    // An in-place workload whose pods roll out shows it while the rollout lasts.
    let d = kerf_decide::decide(&f, &policy(), now());
    let rolling = status::build_status(&StatusInput {
        previous: &in_place,
        decision: Some(&d),
        facts: Some(&f),
        policy_name: None,
        generation: Some(1),
        invalid: &[] as &[Invalid],
        rollout_in_progress: true,
        withdrawn: false,
        now: now(),
    });
    assert!(has_progressing(&rolling));
}

#[test]
fn skip_and_block_messages_carry_the_requests() {
    let mut f = facts();
    f.workload.containers[0].requests = values(Some(800), Some(2048 * MI));
    f.recommendation.containers = vec![recommendation("400m", "1536Mi")];
    let mut p = policy();
    set_mode(&mut p, Mode::Audit, Mode::Audit);
    let s = build(&mut f, &p, &RightsizingRecommendationStatus::default());
    let sum = s.summary.clone().unwrap_or_default();
    assert_eq!(
        text::with_requests("cpu and memory are in mode audit", &sum),
        "cpu and memory are in mode audit (cpu 800m→400m, memory 2Gi→1536Mi)"
    );
}

// rule: AP-24
#[test]
fn deferred_names_the_window_and_when_it_opens() {
    let mut f = checkout();
    let mut p = policy();
    set_strategy(&mut p, Strategy::Deferred);
    let window = kerf_api::policy::Window {
        start: Some("2026-06-03T18:00:00Z".into()),
        end: Some("2026-06-03T20:00:00Z".into()),
        ..Default::default()
    };
    p.maintenance_windows =
        kerf_decide::effective::Sourced::new(vec![window].into(), Layer::Policy);
    let s = build(&mut f, &p, &RightsizingRecommendationStatus::default());
    assert_eq!(s.phase, Some(Phase::Deferred));
    assert_eq!(
        cells(&s),
        (
            "500m→300m".into(),
            "512Mi→384Mi".into(),
            "OutsideMaintenanceWindow".into()
        )
    );
    let sum = s.summary.unwrap_or_default();
    assert_eq!(sum.next.as_deref(), Some("2026-06-03T18:00:00Z"));
    assert_eq!(sum.last_change, None);
}
