//! Rows and messages that agree with what they show, built by the agent's own status,
//! summary and report code from a real decision: a released workload back in auto-patch
//! no longer reads Released/ModeChanged, a MODE set by an annotation says so, an annotation
//! key Kerf does not read is named (Valid=False, once as a Warning) without changing
//! REASON, a NoSignificantChange event names only values that stay, and a refused
//! recommendation warns once per recommendation id.

#[path = "../../kerf-decide/tests/pipeline_fixture/mod.rs"]
mod pipeline_fixture;
mod status_support;

use kerf_agent::reconcile::report;
use kerf_agent::status;
use kerf_api::condition::{Condition, ConditionStatus};
use kerf_api::event::{EventType, EventWorkload};
use kerf_api::policy::Mode;
use kerf_api::rsr::{ChangeState, Phase, RightsizingRecommendationStatus};
use kerf_api::wellknown as wk;
use kerf_decide::effective::{Layer, Sourced};
use pipeline_fixture::{effective_with, now, policy, set_mode, template};
use status_support::{build, in_place_change};

fn released() -> RightsizingRecommendationStatus {
    RightsizingRecommendationStatus {
        change: Some(in_place_change(ChangeState::Released)),
        ..Default::default()
    }
}

fn mode_and_reason(s: &RightsizingRecommendationStatus) -> (Option<Phase>, String, String) {
    let sum = s.summary.clone().unwrap_or_default();
    (
        s.phase,
        sum.mode.unwrap_or_default(),
        sum.reason.unwrap_or_default(),
    )
}

fn valid(s: &RightsizingRecommendationStatus) -> Option<&Condition> {
    s.conditions.iter().find(|c| c.type_ == wk::CONDITION_VALID)
}

#[test]
fn a_released_workload_back_in_auto_patch_shows_the_decision_not_mode_changed() {
    // The pods run the released 300m/384Mi and the template now says the same.
    let mut f = template(300, 384, "300m", "384Mi");
    let mut audit = policy();
    set_mode(&mut audit, Mode::Audit, Mode::Audit);
    let s = build(&mut f, &audit, &released());
    assert_eq!(
        mode_and_reason(&s),
        (
            Some(Phase::Released),
            "audit".into(),
            wk::REASON_MODE_CHANGED.into()
        )
    );
    // The mode goes back to auto-patch: the row's reason changes with it.
    let s = build(&mut f, &policy(), &s);
    assert_eq!(
        mode_and_reason(&s),
        (
            Some(Phase::Skipped),
            "auto-patch".into(),
            wk::REASON_NO_SIGNIFICANT_CHANGE.into()
        )
    );
}

#[test]
fn a_mode_set_above_the_policy_says_where_it_comes_from() {
    let mut f = template(800, 2048, "400m", "1536Mi");
    let none = RightsizingRecommendationStatus::default();
    let with_layer = |mode: Mode, layer: Layer| {
        let mut p = policy();
        p.mode.cpu = Sourced::new(mode, layer);
        p.mode.memory = Sourced::new(mode, layer);
        p
    };
    let cases = [
        (with_layer(Mode::Audit, Layer::Policy), "audit"),
        (
            with_layer(Mode::Audit, Layer::Annotation),
            "audit (annotation)",
        ),
        (
            with_layer(Mode::Off, Layer::HubOverride),
            "off (hub override)",
        ),
        (with_layer(Mode::Audit, Layer::ClusterDefaults), "audit"),
    ];
    for (p, want) in cases {
        let s = build(&mut f, &p, &none);
        assert_eq!(mode_and_reason(&s).1, want);
    }
    let mut mixed = policy();
    mixed.mode.memory = Sourced::new(Mode::Audit, Layer::Annotation);
    let s = build(&mut f, &mixed, &none);
    assert_eq!(
        mode_and_reason(&s).1,
        "cpu:auto-patch,memory:audit (annotation)"
    );
}

#[test]
fn an_unknown_annotation_key_is_named_on_valid_and_warned_once_but_keeps_reason() {
    let mut f = template(800, 2048, "400m", "1536Mi");
    let none = RightsizingRecommendationStatus::default();
    let clean = build(&mut f, &effective_with("payments", "audit", &[]), &none);
    let typo = effective_with("payments", "audit", &[("kerf.getkerf.dev/modee", "off")]);
    let s = build(&mut f, &typo, &none);
    let v = valid(&s)
        .cloned()
        .unwrap_or_else(|| panic!("no Valid condition"));
    assert_eq!(v.status, ConditionStatus::False);
    assert_eq!(v.reason, wk::CONDITION_REASON_UNKNOWN_ANNOTATION);
    assert_eq!(
        v.message,
        "kerf.getkerf.dev/modee = \"off\": not an annotation Kerf reads (the nearest known key \
         is kerf.getkerf.dev/mode); ignored, it changes nothing"
    );
    // The row reads as without the key: the key changes nothing, so it is not the reason.
    assert_eq!(mode_and_reason(&s), mode_and_reason(&clean));
    assert_eq!(mode_and_reason(&s).2, wk::REASON_MODE_AUDIT);
    // One Warning when it appears, none on the next pass that finds the same.
    let warning = status::invalid_warning(&clean, &s);
    assert_eq!(
        warning.map(|w| w.0),
        Some(wk::CONDITION_REASON_UNKNOWN_ANNOTATION)
    );
    let again = build(&mut f, &typo, &s);
    assert_eq!(status::invalid_warning(&s, &again), None);
}

// rule: GR-24
#[test]
fn a_no_significant_change_event_lists_no_value_that_would_move() {
    // cpu (auto-patch) stays at 300m; memory (audit) would move 512Mi -> 384Mi.
    let mut f = template(300, 512, "300m", "384Mi");
    let mut p = policy();
    set_mode(&mut p, Mode::AutoPatch, Mode::Audit);
    f.state = Default::default();
    let d = kerf_decide::decide(&f, &p, now());
    let s = build(&mut f, &p, &RightsizingRecommendationStatus::default());
    let workload = EventWorkload {
        namespace: "payments".into(),
        kind: "Deployment".into(),
        name: "checkout".into(),
    };
    let mut reports = report::reports(&d, &workload, "rec-1", now());
    report::add_requests(&mut reports, s.summary.as_ref());
    let message = |reason: &str| {
        reports
            .iter()
            .find(|r| r.event.reason == reason)
            .and_then(|r| r.event.message.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        message(wk::REASON_NO_SIGNIFICANT_CHANGE),
        "no value would move by the tolerance of 5 % or more: cpu 300m; memory is in mode audit"
    );
    // The mode's own skip of memory shows the columns, memory's move included.
    assert_eq!(
        message(wk::REASON_MODE_AUDIT),
        format!(
            "{} (cpu 300m, memory 512Mi\u{2192}384Mi)",
            d.reports
                .iter()
                .find(|r| r.reason == wk::REASON_MODE_AUDIT)
                .map(|r| r.message.clone())
                .unwrap_or_default()
        )
    );
    assert!(reports.iter().all(|r| r.event.type_ == EventType::Skipped));
}

fn refused(id: &str) -> RightsizingRecommendationStatus {
    let invalid = [status::Invalid {
        reason: wk::CONDITION_REASON_INVALID_SPEC,
        message: format!(
            "recommendation {id:?} refused: spec.containers[0].requests.cpu: \"12Q\" is not a quantity"
        ),
    }];
    status::build_status(&status::StatusInput {
        previous: &RightsizingRecommendationStatus::default(),
        decision: None,
        facts: None,
        policy_name: None,
        generation: Some(1),
        invalid: &invalid,
        rollout_in_progress: false,
        withdrawn: true,
        now: now(),
    })
}

#[test]
fn a_refused_recommendation_warns_once_per_recommendation_id() {
    let none = RightsizingRecommendationStatus::default();
    let first = refused("rec-bad");
    let v = valid(&first).cloned().unwrap_or_else(|| panic!("no Valid"));
    assert_eq!(
        (v.status, v.reason.as_str()),
        (ConditionStatus::False, wk::CONDITION_REASON_INVALID_SPEC)
    );
    let warned = status::refused_warning(&none, &first);
    assert_eq!(
        warned,
        Some((wk::CONDITION_REASON_INVALID_SPEC, v.message.clone()))
    );
    // The next pass, or a restart that reads the same status back: no second Warning.
    assert_eq!(status::refused_warning(&first, &refused("rec-bad")), None);
    // The hub's next recommendation is refused too: a Warning of its own.
    let second = refused("rec-bad-2");
    let again = status::refused_warning(&first, &second);
    assert!(
        again.is_some_and(|(_, m)| m.contains("rec-bad-2")),
        "{second:?}"
    );
    // An invalid annotation is not a refused recommendation.
    assert_eq!(status::refused_warning(&none, &none), None);
}
