//! Rows and conditions that agree with what they show, built by the status and summary
//! code from a real decision: a released workload back in auto-patch no longer reads
//! Released/ModeChanged, a MODE set by an annotation says so, an annotation key Kerf does
//! not read is named (Valid=False, once as a Warning) without changing REASON, a block
//! names itself on the Blocked condition, and a refused recommendation warns once per
//! recommendation id.

use kerf_testkit::decide as pipeline_fixture;

use kerf_api::condition::{Condition, ConditionStatus};
use kerf_api::policy::{Mode, Strategy};
use kerf_api::rsr::{ChangeState, Phase, RightsizingRecommendationStatus};
use kerf_api::wellknown as wk;
use kerf_decide::effective::{Layer, Sourced};
use kerf_decide::status;
use pipeline_fixture::status::{build, in_place_change, invalid_only};
use pipeline_fixture::{effective_with, now, policy, set_mode, template};

fn released() -> RightsizingRecommendationStatus {
    RightsizingRecommendationStatus {
        change: Some(Box::new(in_place_change(ChangeState::Released))),
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

fn blocked(s: &RightsizingRecommendationStatus) -> Option<(ConditionStatus, String, String)> {
    s.conditions
        .iter()
        .find(|c| c.type_ == wk::CONDITION_BLOCKED)
        .map(|c| (c.status, c.reason.clone(), c.message.clone()))
}

// rule: GR-39
#[test]
fn a_block_sets_the_blocked_condition_with_its_reason_and_message() {
    let mut f = template(300, 384, "250m", "300Mi");
    let none = RightsizingRecommendationStatus::default();
    let s = build(&mut f, &policy(), &none);
    assert_eq!(
        blocked(&s),
        Some((
            ConditionStatus::False,
            wk::CONDITION_REASON_NOT_BLOCKED.into(),
            String::new()
        ))
    );
    // A change that went in two hours ago: the cooldown blocks the next one.
    let mut change = in_place_change(ChangeState::Applied);
    change.strategy = Strategy::Rollout;
    let prev = RightsizingRecommendationStatus {
        change: Some(Box::new(change)),
        ..Default::default()
    };
    let s = build(&mut f, &policy(), &prev);
    let d = kerf_decide::decide(&f, &policy(), now());
    let kerf_decide::Outcome::Block(b) = &d.outcome else {
        panic!("expected a block: {:?}", d.outcome);
    };
    assert!(!d.message.is_empty());
    assert_eq!(
        blocked(&s),
        Some((ConditionStatus::True, b.reason.into(), d.message.clone()))
    );
}

fn refused(id: &str) -> RightsizingRecommendationStatus {
    let invalid = [status::Invalid {
        reason: wk::CONDITION_REASON_INVALID_SPEC,
        message: format!(
            "recommendation {id:?} refused: spec.containers[0].requests.cpu: \"12Q\" is not a quantity"
        ),
    }];
    invalid_only(&invalid, true)
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
