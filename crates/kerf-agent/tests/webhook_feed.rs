//! The webhook's index follows the agent's caches: an rsr and a ReplicaSet applied to
//! the caches reach the index, and a rolled-back or deleted rsr leaves it. The live values
//! of a workload outside the agent's scope never reach it.

use std::sync::Arc;
use std::time::Duration;

use kerf_agent::cache::pods::OwnerRef;
use kerf_agent::cache::{CacheSet, Interner, ReplicaSetInfo, RsrEntry};
use kerf_agent::scope::Scope;
use kerf_agent::webhook::{SharedIndex, feed};
use kerf_api::WorkloadKind;
use kube::api::DynamicObject;
use serde_json::json;

fn rsr_entry(phase: &str) -> anyhow::Result<RsrEntry> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingRecommendation",
        "metadata": {"name": "web", "namespace": "demo", "resourceVersion": "1",
            "labels": {"kerf.getkerf.dev/workload-kind": "Deployment",
                       "kerf.getkerf.dev/workload-name": "web"}},
        "spec": {"workloadRef": {"kind": "Deployment", "name": "web"},
                 "recommendationID": "r1", "containers": []},
        "status": {"phase": phase, "live": {"containers": [{"name": "app",
            "requests": {"cpu": "120m"}, "base": {"requests": {"cpu": "250m"}}}]}}
    }))?;
    Ok(RsrEntry::from_dynamic(obj, &mut Interner::default()))
}

/// Waits until `check` holds on the index.
async fn until(index: &SharedIndex, check: impl Fn(&SharedIndex) -> bool) -> bool {
    for _ in 0..200 {
        if check(index) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

// rule: AP-06, RB-21
#[tokio::test]
async fn index_follows_the_caches() {
    let cache = CacheSet::new();
    let index = SharedIndex::new();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(feed::feed(
        cache.clone(),
        index.clone(),
        Scope::default(),
        stop,
    ));

    cache.apply_rsr(rsr_entry("Applied").unwrap());
    cache.apply_replicaset(ReplicaSetInfo {
        namespace: Arc::from("demo"),
        name: Arc::from("web-5d8c"),
        owner: Some(OwnerRef {
            kind: Arc::from("Deployment"),
            name: Arc::from("web"),
            uid: "u".into(),
        }),
        pod_template_hash: Some("5d8c".into()),
        revision: Some("1".into()),
    });
    let live = |i: &SharedIndex| {
        i.read()
            .live_for("demo", WorkloadKind::Deployment, "web")
            .is_some()
    };
    assert!(until(&index, live).await, "live values never indexed");
    let mapped = |i: &SharedIndex| i.read().deployment_of("demo", "web-5d8c") == Some("web");
    assert!(until(&index, mapped).await, "ReplicaSet never indexed");

    cache.apply_rsr(rsr_entry("RolledBack").unwrap());
    assert!(
        until(&index, |i| !live(i)).await,
        "rolled-back values still live"
    );

    cache.apply_rsr(rsr_entry("Applied").unwrap());
    assert!(until(&index, live).await);
    cache.delete_rsr("demo", "web");
    assert!(until(&index, |i| !live(i)).await, "deleted rsr still live");

    let _ = stop_tx.send(true);
    assert!(
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .is_ok()
    );
}

// The webhook does not patch the pods of a workload outside the scope.
#[test]
fn live_values_outside_the_scope_are_not_indexed() {
    let cache = CacheSet::new();
    cache.apply_rsr(rsr_entry("Applied").unwrap());
    let live = |scope: &Scope| {
        feed::rebuild(&cache, scope)
            .live_for("demo", WorkloadKind::Deployment, "web")
            .is_some()
    };
    assert!(live(&Scope::default()), "in the scope: indexed");
    let elsewhere = Scope {
        namespaces: vec!["other".to_owned()],
        ..Scope::default()
    };
    assert!(!live(&elsewhere), "namespace demo is outside the scope");
    let selected = Scope {
        workload_selector: kerf_agent::scope::parse_selector("kerf=on").unwrap(),
        ..Scope::default()
    };
    assert!(
        !live(&selected),
        "the workload's labels are not known: not indexed"
    );
}
