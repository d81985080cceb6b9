//! What each policy covers: matched and governed counts, and the overlaps the `Overlap`
//! condition names (issue 32: where two policies match the same workload, both show it).

use std::collections::BTreeMap;

use kerf_api::policy::WorkloadKind;
use kerf_decide::coverage::{OVERLAP_NAMED_MAX, Shared, coverage, overlap_message};
use kerf_decide::select::WorkloadMeta;
use kerf_testkit::api::policy;

fn workload(namespace: &str, name: &str, app: &str) -> WorkloadMeta {
    WorkloadMeta {
        namespace: namespace.into(),
        namespace_labels: BTreeMap::new(),
        kind: WorkloadKind::Deployment,
        name: name.into(),
        labels: BTreeMap::from([("app".to_owned(), app.to_owned())]),
        annotations: BTreeMap::new(),
    }
}

/// shop: checkout, cart; other: billing.
fn cluster() -> Vec<WorkloadMeta> {
    vec![
        workload("shop", "checkout", "checkout"),
        workload("shop", "cart", "cart"),
        workload("other", "billing", "billing"),
    ]
}

#[test]
fn counts_matched_and_governed_and_names_who_wins_a_shared_workload() {
    let policies = [
        policy("shop", "{priority: 10, selector: {namespaces: [shop]}}"),
        policy(
            "checkout",
            "{priority: 20, selector: {workloadSelector: {matchLabels: {app: checkout}}}}",
        ),
        policy("everything", "selector: {all: true}"),
    ];
    let c = coverage(&policies, &cluster());
    let counts: Vec<_> = c
        .iter()
        .map(|(n, c)| (n.as_str(), c.matched, c.governed))
        .collect();
    assert_eq!(
        counts,
        [("checkout", 1, 1), ("everything", 3, 1), ("shop", 2, 1)]
    );
    let shop = &c["shop"];
    assert_eq!(
        shop.shared["checkout"],
        Shared {
            other_priority: 20,
            workloads: 1,
            governed_here: 0,
            governed_there: 1,
            pinned: 0,
        }
    );
    assert_eq!(shop.shared["everything"].workloads, 2);
    assert_eq!(shop.shared["everything"].governed_here, 1);
    assert_eq!(shop.shared["everything"].governed_elsewhere(), 1);
    assert_eq!(
        overlap_message(shop).as_deref(),
        Some(
            "policy checkout (priority 20) also matches 1 workload: checkout governs 1 \
             (checkout has the higher priority); policy everything (priority 0) also matches \
             2 workloads: this policy governs 1, a policy of higher precedence or a pin \
             governs 1 (this policy has the higher priority)"
        )
    );
    let everything = overlap_message(&c["everything"]).unwrap_or_default();
    assert!(
        everything.contains("policy shop (priority 10) also matches 2 workloads: shop governs 1"),
        "{everything}"
    );
}

#[test]
fn a_tie_goes_to_the_smaller_name_and_the_message_says_so() {
    let policies = [
        policy("b-team", "selector: {namespaces: [shop]}"),
        policy("a-team", "selector: {namespaces: [shop, other]}"),
    ];
    let c = coverage(&policies, &cluster());
    assert_eq!((c["a-team"].matched, c["a-team"].governed), (3, 3));
    assert_eq!((c["b-team"].matched, c["b-team"].governed), (2, 0));
    assert_eq!(
        overlap_message(&c["b-team"]).as_deref(),
        Some(
            "policy a-team (priority 0) also matches 2 workloads: a-team governs 2 \
             (same priority: the smaller name wins)"
        )
    );
}

#[test]
fn a_policy_without_a_term_matches_governs_and_overlaps_nothing() {
    let policies = [
        policy("pruned", "selector: {}"),
        policy("kinds-only", "selector: {kinds: [Deployment]}"),
        policy("absent", "{priority: 100}"),
        policy("shop", "selector: {namespaces: [shop]}"),
    ];
    let c = coverage(&policies, &cluster());
    for name in ["pruned", "kinds-only", "absent"] {
        assert_eq!((c[name].matched, c[name].governed), (0, 0), "{name}");
        assert_eq!(overlap_message(&c[name]), None, "{name}");
    }
    assert_eq!((c["shop"].matched, c["shop"].governed), (2, 2));
    assert_eq!(overlap_message(&c["shop"]), None);
}

#[test]
fn a_pin_governs_its_workload_and_the_overlap_says_it_was_pinned() {
    let mut w = workload("shop", "checkout", "checkout");
    w.annotations
        .insert("kerf.getkerf.dev/policy".into(), "special".into());
    let policies = [
        policy("shop", "{priority: 10, selector: {namespaces: [shop]}}"),
        policy("special", "selector: {namespaces: [elsewhere]}"),
    ];
    let c = coverage(&policies, &[w]);
    assert_eq!((c["special"].matched, c["special"].governed), (1, 1));
    assert_eq!((c["shop"].matched, c["shop"].governed), (1, 0));
    assert_eq!(
        overlap_message(&c["shop"]).as_deref(),
        Some(
            "policy special (priority 0) also matches 1 workload: special governs 1, 1 pinned \
             by annotation (this policy has the higher priority)"
        )
    );
}

#[test]
fn the_message_names_a_bounded_number_of_other_policies() {
    let mut policies = vec![policy("a", "selector: {all: true}")];
    for i in 0..OVERLAP_NAMED_MAX + 3 {
        policies.push(policy(&format!("p{i}"), "selector: {namespaces: [shop]}"));
    }
    let c = coverage(&policies, &cluster());
    let m = overlap_message(&c["a"]).unwrap_or_default();
    assert_eq!(m.matches("also matches").count(), OVERLAP_NAMED_MAX, "{m}");
    assert!(m.ends_with("; and 3 more policies"), "{m}");
}
