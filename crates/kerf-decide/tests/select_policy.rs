//! Policy selection (design D13).

use std::collections::BTreeMap;

use kerf_api::policy::{RightsizingPolicy, WorkloadKind};
use kerf_decide::select::{Selection, WorkloadMeta, select_policy};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn workload() -> WorkloadMeta {
    WorkloadMeta {
        namespace: "payments-prod".into(),
        namespace_labels: labels(&[("env", "prod"), ("team", "payments")]),
        kind: WorkloadKind::Deployment,
        name: "checkout".into(),
        labels: labels(&[("app", "checkout"), ("tier", "web")]),
        annotations: BTreeMap::new(),
    }
}

#[allow(clippy::unwrap_used)]
fn policy(name: &str, spec_yaml: &str) -> RightsizingPolicy {
    RightsizingPolicy::new(name, serde_yaml::from_str(spec_yaml).unwrap())
}

fn selected(policies: &[RightsizingPolicy], w: &WorkloadMeta) -> Option<String> {
    select_policy(policies, w)
        .policy()
        .and_then(|p| p.metadata.name.clone())
}

#[test]
fn an_empty_or_absent_selector_matches_everything() {
    let w = workload();
    assert_eq!(selected(&[policy("a", "{}")], &w).as_deref(), Some("a"));
    assert_eq!(
        selected(&[policy("a", "selector: {}")], &w).as_deref(),
        Some("a")
    );
    assert_eq!(
        selected(&[policy("a", "selector: {namespaces: [], kinds: []}")], &w).as_deref(),
        Some("a")
    );
}

#[test]
fn every_set_selector_part_must_match() {
    let w = workload();
    let yes = [
        "selector: {namespaces: [other, payments-prod]}",
        "selector: {namespaceSelector: {matchLabels: {env: prod}}}",
        "selector: {workloadSelector: {matchLabels: {app: checkout}}}",
        "selector: {kinds: [Deployment]}",
        "selector: {namespaces: [payments-prod], kinds: [Deployment, DaemonSet], workloadSelector: {matchLabels: {tier: web}}}",
        "selector: {workloadSelector: {matchExpressions: [{key: tier, operator: In, values: [web, api]}]}}",
        "selector: {workloadSelector: {matchExpressions: [{key: tier, operator: NotIn, values: [db]}]}}",
        "selector: {namespaceSelector: {matchExpressions: [{key: team, operator: Exists}]}}",
        "selector: {namespaceSelector: {matchExpressions: [{key: legacy, operator: DoesNotExist}]}}",
    ];
    for spec in yes {
        assert_eq!(
            selected(&[policy("a", spec)], &w).as_deref(),
            Some("a"),
            "{spec}"
        );
    }
    let no = [
        "selector: {namespaces: [payments-dev]}",
        "selector: {namespaceSelector: {matchLabels: {env: dev}}}",
        "selector: {workloadSelector: {matchLabels: {app: cart}}}",
        "selector: {kinds: [StatefulSet, DaemonSet]}",
        "selector: {namespaces: [payments-prod], kinds: [StatefulSet]}",
        "selector: {workloadSelector: {matchExpressions: [{key: tier, operator: In, values: [api]}]}}",
        "selector: {workloadSelector: {matchExpressions: [{key: tier, operator: NotIn, values: [web]}]}}",
        "selector: {workloadSelector: {matchExpressions: [{key: tier, operator: DoesNotExist}]}}",
        "selector: {namespaceSelector: {matchExpressions: [{key: legacy, operator: Exists}]}}",
    ];
    for spec in no {
        assert_eq!(selected(&[policy("a", spec)], &w), None, "{spec}");
    }
}

#[test]
fn kinds_default_to_all_three() {
    let p = [policy("a", "selector: {namespaces: [payments-prod]}")];
    for kind in WorkloadKind::ALL {
        let w = WorkloadMeta { kind, ..workload() };
        assert_eq!(selected(&p, &w).as_deref(), Some("a"), "{kind}");
    }
}

#[test]
fn the_highest_priority_wins_then_the_smallest_name() {
    let w = workload();
    let policies = [
        policy("zeta", "{priority: 10}"),
        policy("alpha", "{priority: 5}"),
        policy("beta", "{priority: 10}"),
        policy(
            "omega",
            "{priority: 100, selector: {namespaces: [elsewhere]}}",
        ),
    ];
    assert_eq!(selected(&policies, &w).as_deref(), Some("beta"));
    let unset = [
        policy("b", "{}"),
        policy("a", "{priority: 0}"),
        policy("c", "{priority: -1}"),
    ];
    assert_eq!(selected(&unset, &w).as_deref(), Some("a"));
}

#[test]
fn a_pin_selects_its_policy_even_if_the_selector_does_not_match() {
    let mut w = workload();
    w.annotations
        .insert("kerf.getkerf.dev/policy".into(), "special".into());
    let policies = [
        policy("top", "{priority: 100}"),
        policy("special", "selector: {namespaces: [elsewhere]}"),
    ];
    let s = select_policy(&policies, &w);
    assert!(matches!(s, Selection::Pinned(_)));
    assert_eq!(s.name(), Some("special"));
}

#[test]
fn a_pin_to_a_missing_policy_selects_nothing() {
    let mut w = workload();
    w.annotations
        .insert("kerf.getkerf.dev/policy".into(), "gone".into());
    let policies = [policy("top", "{}")];
    let s = select_policy(&policies, &w);
    assert!(matches!(s, Selection::PinMissing("gone")));
    assert!(s.policy().is_none());
}

#[test]
fn no_policy_selects_nothing() {
    let w = workload();
    assert!(matches!(select_policy(&[], &w), Selection::None));
}
