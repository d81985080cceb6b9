//! Slim caches: decoding real objects (managedFields dropped) and index maintenance.

use std::sync::Arc;

use kerf_agent::cache::cluster::{HpaInfo, HpaWire, NodeIndex, NodeInfo, NodeShape, NodeWire};
use kerf_agent::cache::pods::PodWire;
use kerf_agent::cache::workloads::{DeploymentWire, ReplicaSetWire};
use kerf_agent::cache::{
    CacheSet, Change, ChangeSet, Interner, PodInfo, PodPhase, PolicyEntry, ReplicaSetInfo,
    RsrEntry, WorkloadKey,
};
use kerf_api::WorkloadKind;
use kube::api::DynamicObject;
use serde_json::json;

fn pod_json(name: &str, rs: &str) -> serde_json::Value {
    json!({
      "apiVersion": "v1", "kind": "Pod",
      "metadata": {
        "name": name, "namespace": "shop", "uid": format!("uid-{name}"), "resourceVersion": "42",
        "creationTimestamp": "2025-06-01T10:00:00Z",
        "labels": {"app": "checkout", "pod-template-hash": "7d9f8"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": "rs-uid", "controller": true, "blockOwnerDeletion": true}],
        "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2025-06-01T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}}]
      },
      "spec": {
        "nodeName": "node-a",
        "containers": [{"name": "app", "image": "shop/checkout:1", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}},
                        "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]}],
        "initContainers": [
          {"name": "migrate", "image": "shop/migrate:1"},
          {"name": "proxy", "image": "envoy", "restartPolicy": "Always", "resources": {"requests": {"cpu": 1}}}
        ],
        "volumes": [{"name": "x", "emptyDir": {}}]
      },
      "status": {
        "phase": "Running", "qosClass": "Burstable",
        "conditions": [
          {"type": "Ready", "status": "True", "lastTransitionTime": "2025-06-01T10:01:00Z"},
          {"type": "PodResizePending", "status": "True", "reason": "Deferred", "message": "Node didn't have enough capacity: cpu", "lastTransitionTime": "2025-06-01T11:00:00Z"}
        ],
        "containerStatuses": [{"name": "app", "ready": true, "restartCount": 2, "image": "x", "imageID": "y",
          "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
          "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}}}],
        "initContainerStatuses": [{"name": "proxy", "ready": true, "restartCount": 0}]
      }
    })
}

#[allow(clippy::unwrap_used)] // test fixture: a bad fixture fails the test
fn pod(name: &str, rs: &str) -> PodInfo {
    let wire: PodWire = serde_json::from_value(pod_json(name, rs)).unwrap();
    PodInfo::from_wire(wire, &mut Interner::default())
}

#[test]
fn a_pod_decodes_into_the_slim_form_without_managed_fields() {
    let wire: PodWire =
        serde_json::from_value(pod_json("checkout-7d9f8-abcde", "checkout-7d9f8")).unwrap();
    assert!(wire.metadata.managed_fields.is_none());
    let p = PodInfo::from_wire(wire, &mut Interner::default());
    assert_eq!(&*p.namespace, "shop");
    assert_eq!(p.uid.to_string(), "uid-checkout-7d9f8-abcde");
    assert_eq!(p.node_name.as_deref(), Some("node-a"));
    assert_eq!(p.phase, PodPhase::Running);
    assert!(p.ready);
    assert_eq!(
        p.ready_since().unwrap().to_rfc3339(),
        "2025-06-01T10:01:00+00:00"
    );
    let pending = p.resize_pending.as_ref().unwrap();
    assert_eq!(pending.reason.as_deref(), Some("Deferred"));
    assert!(p.resize_in_progress.is_none());
    let owner = p.owner.as_ref().unwrap();
    assert_eq!(
        (&*owner.kind, &*owner.name),
        ("ReplicaSet", "checkout-7d9f8")
    );
    assert_eq!(
        p.workload_hint(),
        Some(WorkloadKey::new(
            "shop",
            WorkloadKind::Deployment,
            "checkout"
        ))
    );
    // containers, then sidecars; the plain init container is left out
    let names: Vec<&str> = p.containers.iter().map(|c| &*c.name).collect();
    assert_eq!(names, ["app", "proxy"]);
    let app = &p.containers[0];
    assert_eq!(app.requests.cpu.as_ref().unwrap().as_str(), "250m");
    assert!(app.resize_policy.memory_restart && !app.resize_policy.cpu_restart);
    assert_eq!(app.restart_count, 2);
    assert_eq!(app.last_terminated_reason.as_deref(), Some("OOMKilled"));
    assert_eq!(
        app.status_resources()
            .unwrap()
            .limits
            .memory
            .as_ref()
            .unwrap()
            .as_str(),
        "512Mi"
    );
    assert!(p.containers[1].sidecar);
    assert_eq!(p.containers[1].requests.cpu.as_ref().unwrap().as_str(), "1");
}

#[allow(clippy::unwrap_used)] // test fixture: a bad fixture fails the test
fn deployment() -> DeploymentWire {
    serde_json::from_value(json!({
      "apiVersion": "apps/v1", "kind": "Deployment",
      "metadata": {"name": "checkout", "namespace": "shop", "uid": "d-uid", "generation": 7, "resourceVersion": "9",
        "labels": {"team": "pay"},
        "annotations": {"kerf.getkerf.dev/mode": "auto-patch", "kubectl.kubernetes.io/last-applied-configuration": "{\"huge\": true}"},
        "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
      "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "checkout"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
        "template": {"metadata": {"labels": {"app": "checkout"}}, "spec": {"containers": [{
          "name": "app", "image": "shop/checkout:1", "command": ["java"], "args": ["-Xmx512m", "-jar", "app.jar"],
          "env": [{"name": "JAVA_OPTS", "value": "-XX:MaxRAMPercentage=75"}, {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
          "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}},
      "status": {"observedGeneration": 7, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
        "conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}, {"type": "Other", "status": "True"}]}
    }))
    .unwrap()
}

#[test]
fn a_deployment_keeps_only_what_decisions_read() {
    let w = deployment().into_info(&mut Interner::default());
    assert_eq!(
        w.key,
        WorkloadKey::new("shop", WorkloadKind::Deployment, "checkout")
    );
    assert_eq!(w.generation, Some(7));
    assert_eq!(w.replicas, Some(3));
    assert!(
        !w.annotations
            .contains_key("kubectl.kubernetes.io/last-applied-configuration")
    );
    assert_eq!(
        w.annotations
            .get("kerf.getkerf.dev/mode")
            .map(String::as_str),
        Some("auto-patch")
    );
    assert_eq!(w.strategy.type_.as_deref(), Some("RollingUpdate"));
    assert!(w.strategy.max_surge.is_some());
    let c = &w.containers[0];
    assert_eq!(c.args, ["-Xmx512m", "-jar", "app.jar"]);
    assert_eq!(c.env.len(), 1, "only literal env values are kept");
    assert_eq!(w.status.conditions.len(), 1);
    assert_eq!(
        w.condition("Progressing").unwrap().reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );
}

#[allow(clippy::unwrap_used)] // test fixture: a bad fixture fails the test
fn replicaset(name: &str, deployment: &str) -> ReplicaSetInfo {
    let wire: ReplicaSetWire = serde_json::from_value(json!({
      "metadata": {"name": name, "namespace": "shop", "labels": {"pod-template-hash": "7d9f8"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment, "uid": "d-uid", "controller": true}]}
    }))
    .unwrap();
    ReplicaSetInfo::from_wire(wire, &mut Interner::default())
}

#[test]
fn pods_are_found_by_workload_through_their_replicasets() {
    let cache = CacheSet::new();
    let mut changes = cache.subscribe();
    let key = WorkloadKey::new("shop", WorkloadKind::Deployment, "checkout");
    cache.apply_pod(pod("checkout-7d9f8-a", "checkout-7d9f8"));
    assert_eq!(changes.try_recv().unwrap(), Change::Workload(key.clone()));
    assert!(cache.pods_of(&key).is_empty(), "no ReplicaSet known yet");
    cache.apply_replicaset(replicaset("checkout-7d9f8", "checkout"));
    cache.apply_pod(pod("checkout-7d9f8-b", "checkout-7d9f8"));
    let names: Vec<String> = cache
        .pods_of(&key)
        .iter()
        .map(|p| p.name.to_string())
        .collect();
    assert_eq!(names, ["checkout-7d9f8-a", "checkout-7d9f8-b"]);
    assert_eq!(
        cache
            .deployment_of_replicaset("shop", "checkout-7d9f8")
            .as_deref(),
        Some("checkout")
    );

    // modify: the pod moves to another owner
    cache.apply_pod(pod("checkout-7d9f8-a", "other-7d9f8"));
    assert_eq!(cache.pods_of(&key).len(), 1);
    // delete
    cache.delete_pod("shop", "checkout-7d9f8-b");
    assert!(cache.pods_of(&key).is_empty());
    assert!(cache.pod("shop", "checkout-7d9f8-a").is_some());
}

#[test]
fn workloads_hpas_and_nodes_are_indexed() {
    let cache = CacheSet::new();
    let w = deployment().into_info(&mut Interner::default());
    let key = w.key.clone();
    cache.apply_workload(w);
    assert_eq!(cache.workload(&key).unwrap().uid, "d-uid");
    let hpa: HpaWire = serde_json::from_value(json!({
      "metadata": {"name": "checkout", "namespace": "shop"},
      "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "checkout"}, "maxReplicas": 10,
        "metrics": [{"type": "Pods", "pods": {}}, {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]}
    }))
    .unwrap();
    cache.apply_hpa(HpaInfo::from_wire(hpa, &mut Interner::default()));
    let hpas = cache.hpas_for(&key);
    assert_eq!(hpas.len(), 1);
    assert_eq!(hpas[0].resource_metrics[0].index, 1);
    assert_eq!(hpas[0].resource_metrics[0].average_utilization, Some(60));
    // The one metric kept, with no room left from the wire list.
    assert_eq!(hpas[0].resource_metrics.capacity(), 1);
    cache.delete_workload(&key);
    assert!(cache.workload(&key).is_none());

    let node: NodeWire = serde_json::from_value(json!({
      "metadata": {"name": "node-a"},
      "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "nodeInfo": {"kubeletVersion": "v1.33.0", "swap": {"capacity": 4_294_967_296_i64}}}
    }))
    .unwrap();
    cache.apply_node(NodeInfo::from_wire(node, &mut Interner::default()));
    let n = cache.node("node-a").unwrap();
    assert!(n.swap);
    assert_eq!(n.allocatable_cpu.as_ref().unwrap().as_str(), "4");
}

/// The nodes of a pool keep one copy of their labels and allocatable resources; each
/// reads back every label, its hostname among them, in key order (what
/// `unsupportedNodeSelectors` are matched against).
// rule: AP-15
#[test]
fn nodes_of_a_pool_share_their_labels_and_each_reads_its_own_hostname() {
    let mut interner = Interner::default();
    let mut node = |name: &str, hostname: &str| {
        let wire: NodeWire = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": hostname, "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": "z1"}},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}},
        }))
        .unwrap();
        NodeInfo::from_wire(wire, &mut interner)
    };
    let (a, b, odd) = (node("a", "a"), node("b", "b"), node("c", "c.example"));
    let labels = |n: &NodeInfo| -> Vec<(String, String)> {
        n.labels()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    let want = |host: &str| -> Vec<(String, String)> {
        [
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/hostname", host),
            ("topology.kubernetes.io/zone", "z1"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .to_vec()
    };
    assert_eq!(labels(&a), want("a"));
    assert_eq!(labels(&b), want("b"));
    // A hostname that is not the node's name is one of its labels like any other.
    assert_eq!(labels(&odd), want("c.example"));
    assert!(std::ptr::eq(
        &*a as *const NodeShape,
        &*b as *const NodeShape
    ));
    assert!(!std::ptr::eq(
        &*a as *const NodeShape,
        &*odd as *const NodeShape
    ));
    assert_eq!(b.allocatable_memory.as_ref().unwrap().as_str(), "16Gi");
}

#[allow(clippy::unwrap_used)] // test fixture: a bad fixture fails the test
fn node_info(v: serde_json::Value) -> NodeInfo {
    let wire: NodeWire = serde_json::from_value(v).unwrap();
    NodeInfo::from_wire(wire, &mut Interner::default())
}

// rule: AP-14
#[test]
fn swap_is_read_from_the_reported_swap_capacity_only() {
    let with_capacity = |c: i64| {
        node_info(
            json!({"metadata": {"name": "n"}, "status": {"nodeInfo": {"swap": {"capacity": c}}}}),
        )
    };
    assert!(with_capacity(1).swap);
    assert!(!with_capacity(0).swap);
    assert!(!node_info(json!({"metadata": {"name": "n"}, "status": {"nodeInfo": {}}})).swap);
    assert!(
        !node_info(json!({"metadata": {"name": "n"}, "status": {"nodeInfo": {"swap": {}}}})).swap
    );
    // Labels are no signal: neither kubelets nor kerf-sim's mark alone counts.
    for label in ["node.kubernetes.io/swap", "kerf-sim/swap"] {
        let n = node_info(json!({"metadata": {"name": "n", "labels": {label: "true"}}}));
        assert!(!n.swap, "{label}");
    }
}

#[allow(clippy::unwrap_used)] // test fixture: a bad fixture fails the test
fn dynamic(v: serde_json::Value) -> DynamicObject {
    serde_json::from_value(v).unwrap()
}

// design D3
#[test]
fn a_malformed_policy_is_kept_with_the_field_named() {
    let obj = dynamic(json!({
      "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingPolicy",
      "metadata": {"name": "bad", "managedFields": [{"manager": "kubectl"}]},
      "spec": {"mode": "auto-patch", "guardrails": {"maxChangePercent": "half"}}
    }));
    let e = PolicyEntry::from_dynamic(obj, &mut Interner::default());
    let err = e.policy.unwrap_err();
    assert_eq!(err.field, "spec.guardrails.maxChangePercent");

    let good = dynamic(json!({
      "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingPolicy",
      "metadata": {"name": "good", "managedFields": [{"manager": "kubectl"}]},
      "spec": {"mode": "audit"}
    }));
    let e = PolicyEntry::from_dynamic(good, &mut Interner::default());
    let p = e.policy.unwrap();
    assert!(p.metadata.managed_fields.is_none());
    assert_eq!(p.spec.mode, Some(kerf_api::Mode::Audit));
}

#[test]
fn rsrs_are_found_by_workload_labels() {
    let cache = CacheSet::new();
    let obj = dynamic(json!({
      "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingRecommendation",
      "metadata": {"name": "checkout-deployment", "namespace": "shop",
        "labels": {"kerf.getkerf.dev/workload-kind": "Deployment", "kerf.getkerf.dev/workload-name": "checkout"}},
      "spec": {"workloadRef": {"kind": "Deployment", "name": "checkout"}, "containers": "not-a-list"}
    }));
    cache.apply_rsr(RsrEntry::from_dynamic(obj, &mut Interner::default()));
    let key = WorkloadKey::new("shop", WorkloadKind::Deployment, "checkout");
    let found = cache.rsrs_for(&key);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name, "checkout-deployment");
    assert!(found[0].rsr.as_ref().unwrap_err().field.starts_with("spec"));
    // design D4: the name of a new rsr is looked up by namespace and name
    let by_name = cache.rsr("shop", "checkout-deployment");
    assert_eq!(
        by_name.map(|e| e.name.clone()).as_deref(),
        Some("checkout-deployment")
    );
    assert!(cache.rsr("other", "checkout-deployment").is_none());
    assert!(cache.rsr("shop", "checkout").is_none());
    cache.delete_rsr("shop", "checkout-deployment");
    assert!(cache.rsrs_for(&key).is_empty());
    assert!(cache.rsr("shop", "checkout-deployment").is_none());
}

#[tokio::test]
async fn caches_are_ready_only_when_every_watch_has_listed() {
    let cache = CacheSet::new();
    for w in &kerf_agent::cache::WATCHES[1..] {
        cache.mark_synced(w);
    }
    assert!(!cache.is_synced());
    let waiter = tokio::spawn({
        let c = cache.clone();
        async move { c.wait_synced().await }
    });
    cache.mark_synced(kerf_agent::cache::WATCHES[0]);
    assert!(cache.is_synced());
    tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
}

/// The node index holds each node by value, 24 bytes, its name interned (the pods on it
/// hold the same), found by name; a cordoned node reads as such, in a shape of its own; a node that changes what a pass reads is a change of
/// every workload, an update that changes nothing is none, and a relist keeps the last of
/// a name listed twice.
#[test]
fn the_node_index_holds_nodes_by_value_and_reports_only_what_changed() {
    assert_eq!(std::mem::size_of::<NodeInfo>(), 24);
    let mut interner = Interner::default();
    let cordoned: NodeWire = serde_json::from_value(json!({
        "metadata": {"name": "x", "labels": {"kubernetes.io/hostname": "x"}},
        "spec": {"unschedulable": true},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}},
    }))
    .unwrap();
    let cordoned = NodeInfo::from_wire(cordoned, &mut interner);
    assert!(cordoned.unschedulable && !cordoned.swap);
    assert_eq!(interner.count::<NodeShape>(), 1);
    let mut node = |name: &str, cpu: &str| {
        let wire: NodeWire = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi"}},
        }))
        .unwrap();
        let n = NodeInfo::from_wire(wire, &mut interner);
        assert!(!n.unschedulable, "{name} takes pods");
        n
    };
    let mut index = NodeIndex::default();
    let mut changes = ChangeSet::new();
    for name in ["c", "a", "b"] {
        index.upsert(node(name, "4"), &mut changes);
    }
    assert_eq!(changes, ChangeSet::from([Change::All]));
    assert_eq!(index.len(), 3);
    let cpu = |index: &NodeIndex, name: &str| {
        index
            .get(name)
            .and_then(|n| n.allocatable_cpu.clone())
            .map(|q| q.as_str().to_owned())
    };
    assert_eq!(cpu(&index, "a").as_deref(), Some("4"));
    assert!(index.get("d").is_none());
    // The same node again: no change.
    let mut changes = ChangeSet::new();
    index.upsert(node("b", "4"), &mut changes);
    assert!(changes.is_empty(), "{changes:?}");
    // A node with a new allocatable CPU: every workload's pass may read it.
    index.upsert(node("b", "8"), &mut changes);
    assert_eq!(changes, ChangeSet::from([Change::All]));
    assert_eq!(cpu(&index, "b").as_deref(), Some("8"));
    // A relist of the same nodes in another order: no change; a name twice keeps its last.
    let mut changes = ChangeSet::new();
    index.replace(
        vec![
            node("b", "8"),
            node("c", "4"),
            node("a", "2"),
            node("a", "4"),
        ],
        &mut changes,
    );
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!(index.len(), 3);
    assert_eq!(cpu(&index, "a").as_deref(), Some("4"));
    // A relist without one: a change, and it is gone.
    index.replace(vec![node("a", "4"), node("c", "4")], &mut changes);
    assert_eq!(changes, ChangeSet::from([Change::All]));
    assert!(index.get("b").is_none());
    let mut changes = ChangeSet::new();
    index.remove("zz", &mut changes);
    assert!(changes.is_empty(), "a node never held is no change");
    index.remove("a", &mut changes);
    assert_eq!(changes, ChangeSet::from([Change::All]));
    assert_eq!(
        (index.get("a").is_none(), index.get("c").is_some()),
        (true, true)
    );
    // Each reads back its hostname as its label.
    let c = index.get("c").unwrap();
    assert!(
        Arc::ptr_eq(&c.name, &interner.intern_node_name("c")),
        "one copy of the name"
    );
    assert!(
        c.labels()
            .any(|(k, v)| k == "kubernetes.io/hostname" && v == "c")
    );
}
