//! Policy selection (design D13).

use std::collections::BTreeMap;

use kerf_api::policy::{RightsizingPolicy, WorkloadKind};
use kerf_decide::select::{Selection, WorkloadMeta, select_policy};
use kerf_testkit::api::{labels, policy};

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

fn selected(policies: &[RightsizingPolicy], w: &WorkloadMeta) -> Option<String> {
    select_policy(policies, w)
        .policy()
        .and_then(|p| p.metadata.name.clone())
}

// A policy must say what it selects: a selector without a term selects nothing, never
// everything (a misspelt field pruned by the API server leaves `selector: {}`).
#[test]
fn a_selector_without_a_term_selects_nothing() {
    let w = workload();
    let no_term = [
        "{}",
        "selector: {}",
        "selector: {kinds: [Deployment]}",
        "selector: {namespaces: []}",
        "selector: {namespaces: [], kinds: []}",
        "selector: {all: false}",
        "selector: {workloadSelector: {}}",
        "selector: {namespaceSelector: {matchLabels: {}}}",
        "selector: {workloadSelector: {matchExpressions: []}}",
        "selector: {namespaces: [payments-prod], workloadSelector: {}}",
        "selector: {all: true, namespaces: [payments-prod]}",
        "selector: {all: true, workloadSelector: {matchLabels: {app: checkout}}}",
    ];
    for spec in no_term {
        assert_eq!(selected(&[policy("a", spec)], &w), None, "{spec}");
        let with_a_good_one = [policy("a", spec), policy("z", "selector: {all: true}")];
        assert_eq!(
            selected(&with_a_good_one, &w).as_deref(),
            Some("z"),
            "{spec}"
        );
    }
}

#[test]
fn all_true_selects_every_workload_of_its_kinds() {
    let w = workload();
    assert_eq!(
        selected(&[policy("a", "selector: {all: true}")], &w).as_deref(),
        Some("a")
    );
    let deployments = [policy("a", "selector: {all: true, kinds: [Deployment]}")];
    assert_eq!(selected(&deployments, &w).as_deref(), Some("a"));
    let sts = WorkloadMeta {
        kind: WorkloadKind::StatefulSet,
        ..workload()
    };
    assert_eq!(selected(&deployments, &sts), None);
}

#[test]
fn every_set_selector_part_must_match() {
    let w = workload();
    let yes = [
        "selector: {namespaces: [other, payments-prod]}",
        "selector: {namespaceSelector: {matchLabels: {env: prod}}}",
        "selector: {workloadSelector: {matchLabels: {app: checkout}}}",
        "selector: {namespaces: [payments-prod], kinds: [Deployment]}",
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
        "selector: {all: true, kinds: [StatefulSet, DaemonSet]}",
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
        policy("zeta", "{priority: 10, selector: {all: true}}"),
        policy("alpha", "{priority: 5, selector: {all: true}}"),
        policy("beta", "{priority: 10, selector: {all: true}}"),
        policy(
            "omega",
            "{priority: 100, selector: {namespaces: [elsewhere]}}",
        ),
    ];
    assert_eq!(selected(&policies, &w).as_deref(), Some("beta"));
    let unset = [
        policy("b", "selector: {all: true}"),
        policy("a", "{priority: 0, selector: {all: true}}"),
        policy("c", "{priority: -1, selector: {all: true}}"),
    ];
    assert_eq!(selected(&unset, &w).as_deref(), Some("a"));
}

#[test]
fn a_pin_selects_its_policy_even_if_the_selector_does_not_match() {
    let mut w = workload();
    w.annotations
        .insert("kerf.getkerf.dev/policy".into(), "special".into());
    let policies = [
        policy("top", "{priority: 100, selector: {all: true}}"),
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
    let policies = [policy("top", "selector: {all: true}")];
    let s = select_policy(&policies, &w);
    assert!(matches!(s, Selection::PinMissing("gone")));
    assert!(s.policy().is_none());
}

#[test]
fn no_policy_selects_nothing() {
    let w = workload();
    assert!(matches!(select_policy(&[], &w), Selection::None));
}
