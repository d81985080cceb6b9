//! The scope's selector syntax and its verdicts.

use std::collections::BTreeMap;

use kerf_api::VecMap;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn workload(pairs: &[(&str, &str)]) -> VecMap<String, String> {
    labels(pairs).into_iter().collect()
}

fn selector(text: &str) -> Selector {
    match parse_selector(text) {
        Ok(Some(s)) => s,
        other => panic!("{text:?} did not parse: {other:?}"),
    }
}

/// Whether the workload selector `text` selects a workload with `pairs`.
fn selects(text: &str, pairs: &[(&str, &str)]) -> bool {
    let scope = Scope {
        workload_selector: Some(selector(text)),
        ..Scope::default()
    };
    scope.contains("a", &labels(&[]), &workload(pairs))
}

/// A row of the matching table: the selector, the workload's labels, whether it selects.
type Row<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);

#[test]
fn selectors_match_as_kubernetes_label_selectors_do() {
    let rows: &[Row<'_>] = &[
        ("team=a", &[("team", "a")], true),
        ("team=a", &[("team", "b")], false),
        ("team=a", &[], false),
        ("team==a", &[("team", "a")], true),
        ("team!=a", &[("team", "b")], true),
        ("team!=a", &[], true),
        ("team!=a", &[("team", "a")], false),
        ("tier in (web, api)", &[("tier", "api")], true),
        ("tier in (web,api)", &[("tier", "db")], false),
        ("tier in (web,api)", &[], false),
        ("tier notin (db)", &[("tier", "web")], true),
        ("tier notin (db)", &[], true),
        ("tier notin (db)", &[("tier", "db")], false),
        ("kerf", &[("kerf", "")], true),
        ("kerf", &[], false),
        ("!legacy", &[], true),
        ("!legacy", &[("legacy", "yes")], false),
        ("team=a,!legacy", &[("team", "a")], true),
        ("team=a,!legacy", &[("team", "a"), ("legacy", "1")], false),
        ("example.com/team=a", &[("example.com/team", "a")], true),
        ("team=", &[("team", "")], true),
    ];
    for (text, pairs, want) in rows {
        assert_eq!(selects(text, pairs), *want, "{text:?} on {pairs:?}");
    }
}

#[test]
fn a_bad_selector_is_refused_naming_the_requirement() {
    let rows = [
        ("team in (a", "without its ')'"),
        ("team in ()", "must not be empty"),
        ("team=a,,tier=b", "requirement 2"),
        ("Team_=a", "not a label key"),
        ("team=a b", "not a label value"),
        ("replicas>2", "operator > is not supported"),
        ("team a", "expected key=value"),
        ("team in (a)) ", "without its '('"),
        ("team between (a)", "expected key in"),
        ("-x/y=a", "not a label key"),
    ];
    for (text, why) in rows {
        let e = parse_selector(text).expect_err(text);
        assert!(e.contains(why), "{text:?}: {e}");
    }
}

#[test]
fn an_empty_selector_is_no_selector() {
    assert_eq!(parse_selector("").expect("empty"), None);
    assert_eq!(parse_selector("  ").expect("blank"), None);
}

#[test]
fn the_default_scope_is_the_whole_cluster() {
    let scope = Scope::default();
    assert!(scope.is_cluster());
    assert_eq!(scope.verdict("any", None, None), Verdict::In);
}

#[test]
fn a_namespace_outside_the_list_is_out_whatever_else_is_known() {
    let scope = Scope {
        namespaces: vec!["a".to_owned(), "c".to_owned()],
        ..Scope::default()
    };
    assert_eq!(scope.verdict("a", None, None), Verdict::In);
    assert_eq!(
        scope.verdict("b", None, None),
        Verdict::Out("namespace \"b\" is not in scope.namespaces (a, c)".to_owned())
    );
}

#[test]
fn the_namespace_selector_reads_the_namespace_labels() {
    let scope = Scope {
        namespace_selector: Some(selector("team=payments")),
        ..Scope::default()
    };
    let payments = labels(&[("team", "payments")]);
    assert!(scope.contains("p", &payments, &workload(&[])));
    assert!(!scope.contains("q", &labels(&[("team", "web")]), &workload(&[])));
    assert!(matches!(
        scope.verdict("q", Some(&labels(&[])), None),
        Verdict::Out(why) if why.contains("scope.namespaceSelector \"team=payments\"")
    ));
    // Labels not known: not in, and not reported as out either.
    assert_eq!(scope.verdict("p", None, None), Verdict::Unknown);
}

#[test]
fn the_workload_selector_reads_the_workload_labels() {
    let scope = Scope {
        workload_selector: Some(selector("kerf.getkerf.dev/managed=true")),
        ..Scope::default()
    };
    let on = workload(&[("kerf.getkerf.dev/managed", "true")]);
    assert!(scope.contains("a", &labels(&[]), &on));
    assert!(matches!(
        scope.verdict("a", None, Some(&workload(&[]))),
        Verdict::Out(why) if why.contains("scope.workloadSelector")
    ));
    assert_eq!(scope.verdict("a", None, None), Verdict::Unknown);
}

#[test]
fn a_known_exclusion_wins_over_an_unknown_label() {
    let scope = Scope {
        namespace_selector: Some(selector("team=payments")),
        workload_selector: Some(selector("kerf")),
        ..Scope::default()
    };
    assert!(matches!(
        scope.verdict("a", None, Some(&workload(&[]))),
        Verdict::Out(_)
    ));
}

/// A cache holding Deployment `a/web` labelled `kerf: on` and namespace `a` labelled
/// `team: payments`.
fn cache() -> CacheSet {
    use crate::cache::workloads::DeploymentWire;
    use crate::cache::{Interner, NamespaceInfo};
    let cache = CacheSet::new();
    let wire: DeploymentWire = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "a", "uid": "u", "labels": {"kerf": "on"}},
        "spec": {"template": {"spec": {"containers": [{"name": "app"}]}}},
    }))
    .unwrap();
    cache.apply_workload(wire.into_info(&mut Interner::default()));
    cache.apply_namespace(NamespaceInfo {
        name: "a".into(),
        labels: labels(&[("team", "payments")]),
    });
    cache
}

#[test]
fn the_caches_give_the_labels_the_scope_reads() {
    use kerf_api::WorkloadKind;
    let cache = cache();
    let web = WorkloadKey::new("a", WorkloadKind::Deployment, "web");
    let gone = WorkloadKey::new("a", WorkloadKind::Deployment, "gone");
    let elsewhere = WorkloadKey::new("c", WorkloadKind::Deployment, "web");
    let by_namespace = |text: &str| Scope {
        namespace_selector: Some(selector(text)),
        ..Scope::default()
    };
    assert_eq!(
        in_cache(&by_namespace("team=payments"), &cache, &web),
        Verdict::In
    );
    assert!(matches!(
        in_cache(&by_namespace("team=web"), &cache, &web),
        Verdict::Out(_)
    ));
    assert_eq!(
        in_cache(&by_namespace("team=payments"), &cache, &elsewhere),
        Verdict::Unknown,
        "namespace c is not in the caches"
    );
    let by_label = Scope {
        workload_selector: Some(selector("kerf=on")),
        ..Scope::default()
    };
    assert_eq!(in_cache(&by_label, &cache, &web), Verdict::In);
    assert_eq!(in_cache(&by_label, &cache, &gone), Verdict::Unknown);
    let listed = Scope {
        namespaces: vec!["b".to_owned()],
        ..Scope::default()
    };
    assert!(matches!(in_cache(&listed, &cache, &gone), Verdict::Out(_)));
}
