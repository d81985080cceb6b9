//! Bad policies: each fails to convert or to validate, with a message naming the field
//! (design D3, section 11).

use kerf_api::rsr::RightsizingRecommendationSpec;
use kerf_api::validate::{
    FieldError, from_value, policy_from_value, policy_spec_from_value, validate_policy,
    validate_recommendation_spec,
};
use serde_json::{Value, json};

use kerf_api::policy::{
    LABEL_SELECTOR_EMPTY_MESSAGE, SELECTOR_ALL_WITH_TERMS_MESSAGE,
    SELECTOR_EMPTY_NAMESPACES_MESSAGE, SELECTOR_NO_TERM_MESSAGE, SELECTOR_REQUIRED_MESSAGE,
};
use kerf_testkit::api::{errors_of, only_error, paths, selector_errors_of};

#[test]
fn the_documented_examples_are_valid() {
    let spec = r#"
priority: 10
selector:
  namespaces: [payments-prod]
  kinds: [Deployment, StatefulSet]
mode: audit
resources:
  cpu: {mode: auto-patch}
  memory: {mode: audit}
recommendation: {window: 336h, cpuPercentile: 90, memoryPercentile: 99, headroomPercent: 15, limits: Keep}
guardrails:
  learningPeriod: 336h
  minConfidence: "0.8"
  maxChangePercent: 30
  minCPU: 50m
  minMemory: 64Mi
  cooldown: 48h
  rollback: {watchDuration: 1h, oomKills: 1, restarts: 3, throttlingRatio: "0.2"}
apply:
  strategy: deferred
  fallbackAfter: 10m
  maintenanceWindows:
    - {schedule: "0 2 * * 0", duration: 3h, timeZone: Europe/Berlin}
    - {start: "2026-12-20T00:00:00Z", end: "2026-12-21T00:00:00Z"}
  freezeWindows:
    - {schedule: "0 18 * * 5", duration: 62h, timeZone: Europe/Berlin}
hpa: {coordination: true, minTargetUtilization: 50, maxTargetUtilization: 90}
"#;
    assert_eq!(errors_of(spec), vec![]);
}

#[test]
fn an_empty_spec_sets_nothing_and_is_refused_for_its_missing_selector() {
    let spec = policy_spec_from_value(&json!({})).unwrap();
    assert_eq!(spec.mode, None);
    assert_eq!(spec.guardrails, None);
    let errs = validate_policy(&spec);
    assert_eq!(paths(&errs), ["spec.selector"]);
    assert_eq!(errs[0].message, SELECTOR_REQUIRED_MESSAGE);
    // Nothing is written back that the user did not set (design D1).
    assert_eq!(serde_json::to_value(&spec).unwrap(), json!({}));
}

// Issue 32: a policy must say what it selects. Each bad selector is named with the words of
// the CRD's CEL rule, so the condition and the API server's refusal agree.
#[test]
fn a_selector_without_a_term_is_named_with_the_cel_rules_words() {
    let cases = [
        ("mode: audit", "spec.selector", SELECTOR_REQUIRED_MESSAGE),
        ("selector: {}", "spec.selector", SELECTOR_NO_TERM_MESSAGE),
        (
            "selector: {kinds: [Deployment]}",
            "spec.selector",
            SELECTOR_NO_TERM_MESSAGE,
        ),
        (
            "selector: {all: false}",
            "spec.selector",
            SELECTOR_NO_TERM_MESSAGE,
        ),
        (
            "selector: {namespaces: [], workloadSelector: {matchLabels: {a: b}}}",
            "spec.selector.namespaces",
            SELECTOR_EMPTY_NAMESPACES_MESSAGE,
        ),
        (
            "selector: {workloadSelector: {}}",
            "spec.selector.workloadSelector",
            LABEL_SELECTOR_EMPTY_MESSAGE,
        ),
        (
            "selector: {namespaces: [a], namespaceSelector: {matchLabels: {}}}",
            "spec.selector.namespaceSelector",
            LABEL_SELECTOR_EMPTY_MESSAGE,
        ),
        (
            "selector: {all: true, namespaces: [a]}",
            "spec.selector",
            SELECTOR_ALL_WITH_TERMS_MESSAGE,
        ),
    ];
    for (yaml, path, message) in cases {
        let errs = selector_errors_of(yaml);
        assert_eq!(paths(&errs), [path], "{yaml}");
        assert_eq!(errs[0].message, message, "{yaml}");
    }
    let good = [
        "selector: {all: true}",
        "selector: {all: true, kinds: [StatefulSet]}",
        "selector: {namespaces: [a], kinds: [Deployment]}",
        "selector: {namespaceSelector: {matchLabels: {team: a}}}",
        "selector: {workloadSelector: {matchExpressions: [{key: app, operator: Exists}]}}",
    ];
    for yaml in good {
        assert_eq!(selector_errors_of(yaml), vec![], "{yaml}");
    }
}

#[test]
fn an_unknown_mode_names_spec_mode() {
    let err = only_error("mode: aggressive", "spec.mode");
    assert!(err.message.contains("aggressive"), "{err}");
    only_error(
        "resources: {memory: {mode: yolo}}",
        "spec.resources.memory.mode",
    );
}

#[test]
fn an_unknown_strategy_names_the_field() {
    only_error("apply: {strategy: blue-green}", "spec.apply.strategy");
}

#[test]
fn a_negative_max_change_percent_names_the_field() {
    let path = "spec.guardrails.maxChangePercent";
    let err = only_error("guardrails: {maxChangePercent: -5}", path);
    assert!(err.message.contains("-5"), "{err}");
}

#[test]
fn a_max_change_percent_of_101_names_the_field() {
    let path = "spec.guardrails.maxChangePercent";
    let err = only_error("guardrails: {maxChangePercent: 101}", path);
    assert!(err.message.contains("1 to 100"), "{err}");
    assert_eq!(errors_of("guardrails: {maxChangePercent: 0}").len(), 1);
    assert!(errors_of("guardrails: {maxChangePercent: 100}").is_empty());
    assert!(errors_of("guardrails: {maxChangePercent: 1}").is_empty());
}

#[test]
fn a_window_with_schedule_and_start_names_the_window() {
    let err = only_error(
        r#"apply: {maintenanceWindows: [{schedule: "0 2 * * 0", duration: 1h}, {schedule: "0 2 * * 0", duration: 1h, start: "2026-01-01T00:00:00Z"}]}"#,
        "spec.apply.maintenanceWindows[1].start",
    );
    assert!(
        err.message.contains("either schedule and duration"),
        "{err}"
    );
}

#[test]
fn a_schedule_without_duration_names_the_duration() {
    let errs = errors_of(
        r#"apply: {freezeWindows: [{schedule: "0 2 * * 0"}, {schedule: "0 3 * * 0", duration: 1h}, {schedule: "0 4 * * 0"}]}"#,
    );
    assert_eq!(
        paths(&errs),
        [
            "spec.apply.freezeWindows[0].duration",
            "spec.apply.freezeWindows[2].duration"
        ]
    );
}

#[test]
fn a_one_off_window_must_end_after_it_starts() {
    for (windows, path) in [
        (
            r#"[{start: "2026-12-21T00:00:00Z", end: "2026-12-20T00:00:00Z"}]"#,
            "spec.apply.maintenanceWindows[0].end",
        ),
        (
            r#"[{start: "tomorrow", end: "2026-12-20T00:00:00Z"}]"#,
            "spec.apply.maintenanceWindows[0].start",
        ),
        (
            r#"[{end: "2026-12-20T00:00:00Z"}]"#,
            "spec.apply.maintenanceWindows[0].start",
        ),
    ] {
        only_error(&format!("apply: {{maintenanceWindows: {windows}}}"), path);
    }
}

#[test]
fn a_malformed_duration_names_the_field() {
    only_error(
        "apply: {maintenanceWindows: [{schedule: '0 2 * * *', duration: 3 hours}]}",
        "spec.apply.maintenanceWindows[0].duration",
    );
    let errs = errors_of("guardrails: {cooldown: 1d, rollback: {watchDuration: 30x}}");
    assert_eq!(
        paths(&errs),
        [
            "spec.guardrails.cooldown",
            "spec.guardrails.rollback.watchDuration"
        ]
    );
    assert!(errors_of("guardrails: {cooldown: 1h30m, learningPeriod: 1s}").is_empty());
}

// rule: GR-10
#[test]
fn a_min_confidence_of_1_5_names_the_field() {
    let err = only_error(
        r#"guardrails: {minConfidence: "1.5"}"#,
        "spec.guardrails.minConfidence",
    );
    assert!(err.message.contains("0 to 1"), "{err}");
    only_error(
        r#"guardrails: {rollback: {throttlingRatio: "-0.2"}}"#,
        "spec.guardrails.rollback.throttlingRatio",
    );
    assert!(
        errors_of(r#"guardrails: {minConfidence: "1", rollback: {throttlingRatio: "0"}}"#)
            .is_empty()
    );
}

// rule: GR-10
#[test]
fn an_unquoted_min_confidence_fails_to_convert_naming_the_field() {
    only_error(
        "guardrails: {minConfidence: 0.7}",
        "spec.guardrails.minConfidence",
    );
}

// rule: AP-32
#[test]
fn seventeen_maintenance_windows_name_the_list() {
    let window = json!({"schedule": "0 2 * * 0", "duration": "1h"});
    let all = json!({"all": true});
    let spec = json!({"selector": all, "apply": {"maintenanceWindows": vec![window.clone(); 17]}});
    let errs = validate_policy(&policy_spec_from_value(&spec).unwrap());
    assert_eq!(paths(&errs), ["spec.apply.maintenanceWindows"]);
    assert!(errs[0].message.contains("at most 16"), "{}", errs[0]);
    let spec = json!({"selector": all, "apply": {"maintenanceWindows": vec![window.clone(); 16], "freezeWindows": vec![window; 17]}});
    let errs = validate_policy(&policy_spec_from_value(&spec).unwrap());
    assert_eq!(paths(&errs), ["spec.apply.freezeWindows"]);
}

#[test]
fn every_invalid_field_is_named_not_only_the_first() {
    let errs = errors_of(
        r#"
guardrails: {minConfidence: "2", maxChangePercent: 0, minCPU: lots, rollback: {oomKills: 0}}
recommendation: {cpuPercentile: 0}
hpa: {minTargetUtilization: 90, maxTargetUtilization: 50}
selector: {namespaces: ["a-namespace-name-that-is-much-longer-than-the-sixty-three-characters-allowed"]}
"#,
    );
    assert_eq!(
        paths(&errs),
        [
            "spec.selector.namespaces[0]",
            "spec.recommendation.cpuPercentile",
            "spec.guardrails.minConfidence",
            "spec.guardrails.maxChangePercent",
            "spec.guardrails.minCPU",
            "spec.guardrails.rollback.oomKills",
            "spec.hpa.minTargetUtilization",
        ]
    );
}

#[test]
fn a_whole_object_that_does_not_convert_names_the_path_from_its_root() {
    let obj = json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1",
        "kind": "RightsizingPolicy",
        "metadata": {"name": "p"},
        "spec": {"apply": {"maintenanceWindows": [{}, {}, {"schedule": "x", "duration": 5}]}},
    });
    let err = policy_from_value(&obj).unwrap_err();
    assert_eq!(err.path, "spec.apply.maintenanceWindows[2].duration");
    assert!(
        err.to_string()
            .starts_with("spec.apply.maintenanceWindows[2].duration: "),
        "{err}"
    );
    let rsr = json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1",
        "kind": "RightsizingRecommendation",
        "metadata": {"name": "checkout", "namespace": "shop"},
        "spec": {"workloadRef": {"kind": "CronJob", "name": "checkout"}, "recommendationID": "r", "containers": []},
    });
    let err = kerf_api::validate::recommendation_from_value(&rsr).unwrap_err();
    assert_eq!(err.path, "spec.workloadRef.kind");
}

#[test]
fn quantities_convert_from_strings_and_numbers_and_bad_ones_are_named() {
    assert!(errors_of("guardrails: {minCPU: 1, minMemory: 64Mi}").is_empty());
    assert!(errors_of("guardrails: {minCPU: 0.5}").is_empty());
    only_error("guardrails: {minMemory: 64MB}", "spec.guardrails.minMemory");
}

/// A hub recommendation as its rsr spec, with `edit` applied to the JSON first.
fn recommendation_errors(edit: impl FnOnce(&mut Value)) -> Vec<FieldError> {
    let mut spec = json!({
        "workloadRef": {"kind": "Deployment", "name": "web", "uid": "u-1"},
        "recommendationID": "rec-1",
        "confidence": "0.9",
        "dataCoverage": {"covered": "336h", "window": "336h"},
        "settings": {"window": "336h", "cpuPercentile": 90, "memoryPercentile": 99,
            "headroomPercent": 15, "limits": "Keep"},
        "containers": [{"name": "app", "requests": {"cpu": "250m", "memory": "512Mi"},
            "limits": {"memory": "1Gi"}, "confidence": "0.9"}],
    });
    edit(&mut spec);
    match from_value::<RightsizingRecommendationSpec>(&spec, "spec") {
        Ok(s) => validate_recommendation_spec(&s),
        Err(e) => vec![e],
    }
}

#[test]
fn a_valid_recommendation_has_no_refused_field() {
    assert_eq!(recommendation_errors(|_| {}), vec![]);
}

#[test]
fn a_recommendation_with_a_quantity_the_schema_refuses_names_the_field() {
    let errors = recommendation_errors(|s| s["containers"][0]["requests"]["cpu"] = json!("12Q"));
    assert_eq!(paths(&errors), ["spec.containers[0].requests.cpu"]);
    assert!(
        errors[0].message.contains("\"12Q\" is not a quantity"),
        "{errors:?}"
    );
    let errors = recommendation_errors(|s| s["containers"][0]["limits"]["memory"] = json!("1 Gi"));
    assert_eq!(paths(&errors), ["spec.containers[0].limits.memory"]);
}

#[test]
fn every_refused_field_of_a_recommendation_is_named() {
    let errors = recommendation_errors(|s| {
        s["recommendationID"] = json!("r".repeat(129));
        s["confidence"] = json!("1.5");
        s["dataCoverage"]["window"] = json!("two weeks");
        s["settings"]["cpuPercentile"] = json!(0);
        s["containers"][0]["name"] = json!("c".repeat(64));
        s["containers"][0]["removeLimits"] = json!(["cpu", "memory", "cpu"]);
    });
    assert_eq!(
        paths(&errors),
        [
            "spec.recommendationID",
            "spec.confidence",
            "spec.dataCoverage.window",
            "spec.settings.cpuPercentile",
            "spec.containers[0].name",
            "spec.containers[0].removeLimits",
        ]
    );
}

#[test]
fn a_recommendation_with_too_many_containers_names_the_list() {
    let errors = recommendation_errors(|s| {
        let one = s["containers"][0].clone();
        s["containers"] = Value::Array((0..65).map(|_| one.clone()).collect());
    });
    assert_eq!(paths(&errors), ["spec.containers"]);
}
