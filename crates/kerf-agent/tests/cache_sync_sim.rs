//! The agent's slim caches fed by real watches: kerf-sim runs in-process, the CRDs are
//! applied through its API, and `CacheSet::start` lists and watches every kind over HTTPS,
//! over the cluster or in a list of namespaces.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kerf_agent::cache::metrics::CacheMetrics;
use kerf_agent::cache::{CacheSet, Change, PodInfo, WorkloadKey};
use kerf_api::{Mode, RightsizingPolicy, WorkloadKind};
use kerf_sim::sim::{Sim, SimConfig};
use kerf_testkit::{apply_crds, eventually};
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(15);
const NS: &str = "shop";

fn policy_api(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::erase::<RightsizingPolicy>(&()),
    )
}

async fn create<K>(api: &Api<K>, v: Value) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    api.create(&PostParams::default(), &serde_json::from_value(v)?)
        .await?;
    Ok(())
}

/// Namespace `shop` with Deployment `web` (2 replicas), its PDB and HPA, and policy `good`.
async fn seed(client: &Client) -> anyhow::Result<()> {
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": NS, "labels": {"team": "checkout"}}}),
    )
    .await?;
    let labels = json!({"app": "web"});
    create(&Api::<Deployment>::namespaced(client.clone(), NS), json!({
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                "name": "app", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}}]}}}
    }))
    .await?;
    create(
        &Api::<PodDisruptionBudget>::namespaced(client.clone(), NS),
        json!({
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}
        }),
    )
    .await?;
    create(&Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), NS), json!({
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 70}}}]}
    }))
    .await?;
    let policies = policy_api(client);
    create(&policies, policy_json("good", json!(10))).await?;
    Ok(())
}

fn policy_json(name: &str, priority: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingPolicy",
        "metadata": {"name": name},
        "spec": {"priority": priority, "mode": "audit", "selector": {"namespaces": [NS]},
            "guardrails": {"cooldown": "12h"}}
    })
}

/// Policy `bad`, whose priority does not fit the typed field (int32), written straight
/// into kerf-sim's store: the API server refuses it (the CRD says int32), so it reaches a
/// cluster only through an older CRD.
fn seed_unconvertible_policy(sim: &Sim) -> anyhow::Result<()> {
    let store = &sim.context().store;
    let kind = store
        .lookup("kerf.getkerf.dev", "v1alpha1", "rightsizingpolicies")
        .ok_or_else(|| anyhow::anyhow!("the policy CRD is not served"))?;
    store.create(
        &kind,
        policy_json("bad", json!(4_294_967_296_i64)),
        "kubectl",
    )?;
    Ok(())
}

async fn start_sim() -> anyhow::Result<Sim> {
    Sim::start(SimConfig {
        nodes: 2,
        swap_nodes: vec!["sim-node-2".into()],
        kubelet_ready_delay: Duration::from_millis(100),
        ..SimConfig::default()
    })
    .await
}

// design D3, D4; rule: AP-14
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_sync_from_the_sim_and_follow_changes() {
    let sim = start_sim().await.unwrap();
    let client = sim.client();
    apply_crds(&client).await.unwrap();
    seed(&client).await.unwrap();
    seed_unconvertible_policy(&sim).unwrap();

    let cache = CacheSet::new();
    let _watches = cache.start(client.clone(), CacheMetrics::default(), &[]);
    tokio::time::timeout(WAIT, cache.wait_synced())
        .await
        .expect("every watch lists once");
    assert!(cache.is_synced());

    let key = WorkloadKey::new(NS, WorkloadKind::Deployment, "web");
    let pods = workload_and_pods_are_cached(&cache, &key).await;
    pdb_hpa_and_namespace_are_cached(&cache, &key);
    nodes_are_cached(&cache).await;
    a_node_and_the_pods_on_it_hold_one_copy_of_its_name(&cache, &pods);
    policies_are_cached(&cache);
    a_pod_deletion_is_a_change_of_its_workload(&cache, &client, &key, &pods[0].name).await;
}

/// The workload and its pods, found through the ReplicaSet the Deployment owns; returns
/// the pods.
#[allow(clippy::unwrap_used, clippy::expect_used)] // test helper: a failure fails the test
async fn workload_and_pods_are_cached(cache: &CacheSet, key: &WorkloadKey) -> Vec<Arc<PodInfo>> {
    let pods = eventually("both pods of web", WAIT, || async {
        Some(cache.pods_of(key)).filter(|p| p.len() == 2 && p.iter().all(|p| p.ready))
    })
    .await
    .unwrap();
    let w = cache.workload(key).expect("web is cached");
    assert_eq!(w.replicas, Some(2));
    assert_eq!(&*w.containers[0].name, "app");
    assert_eq!(
        w.containers[0].requests.cpu.as_ref().map(|q| q.as_str()),
        Some("100m")
    );
    let sets = cache.replicasets_of(NS, "web");
    assert_eq!(sets.len(), 1);
    for p in &pods {
        let owner = p.owner.as_ref().expect("pods have a controller");
        assert_eq!(&*owner.kind, "ReplicaSet");
        assert_eq!(*owner.name, *sets[0].name);
        assert_eq!(p.workload_hint(), Some(key.clone()));
    }
    assert_eq!(
        cache.deployment_of_replicaset(NS, &sets[0].name).as_deref(),
        Some("web")
    );
    pods
}

/// PDB, HPA and namespace.
#[allow(clippy::expect_used)] // test helper: a failure fails the test
fn pdb_hpa_and_namespace_are_cached(cache: &CacheSet, key: &WorkloadKey) {
    let pdbs = cache.pdbs_in(NS);
    assert_eq!(pdbs.len(), 1);
    assert_eq!(pdbs[0].name, "web");
    assert_eq!(pdbs[0].min_available, Some(IntOrString::Int(1)));
    let hpas = cache.hpas_for(key);
    assert_eq!(hpas.len(), 1);
    assert_eq!(hpas[0].max_replicas, Some(5));
    assert_eq!(hpas[0].resource_metrics[0].average_utilization, Some(70));
    let ns = cache.namespace(NS).expect("namespace is cached");
    assert_eq!(ns.labels.get("team").map(String::as_str), Some("checkout"));
}

/// Nodes: swap is what the sim's kubelet reports on its swap node.
#[allow(clippy::unwrap_used, clippy::expect_used)] // test helper: a failure fails the test
async fn nodes_are_cached(cache: &CacheSet) {
    let plain = cache.node("sim-node-1").expect("sim-node-1 is cached");
    assert_eq!(
        plain.allocatable_cpu.as_ref().map(|q| q.as_str()),
        Some("4")
    );
    assert!(!plain.swap);
    eventually("sim-node-2 to report swap", WAIT, || async {
        cache.node("sim-node-2").filter(|n| n.swap).map(|_| ())
    })
    .await
    .unwrap();
}

/// The pod watch and the node watch intern node names in one table: a node and the pods
/// on it hold one copy of its name.
#[allow(clippy::expect_used)] // test helper: a failure fails the test
fn a_node_and_the_pods_on_it_hold_one_copy_of_its_name(cache: &CacheSet, pods: &[Arc<PodInfo>]) {
    for p in pods {
        let on = p.node_name.as_ref().expect("the pods are bound");
        let node = cache.node(on).expect("their node is cached");
        assert!(Arc::ptr_eq(on, &node.name), "{on}: one copy of the name");
    }
    assert_eq!(
        cache.node_names().len(),
        2,
        "each of the sim's two nodes once"
    );
}

/// Policies: the good one typed, the bad one kept with the field named.
#[allow(clippy::expect_used, clippy::panic)] // test helper: a failure fails the test
fn policies_are_cached(cache: &CacheSet) {
    let policies = cache.policies();
    assert_eq!(policies.len(), 2);
    let by_name = |n: &str| {
        policies
            .iter()
            .find(|p| &*p.name == n)
            .unwrap_or_else(|| panic!("policy {n} is cached"))
    };
    let good = by_name("good").policy.as_ref().expect("good converts");
    assert_eq!(good.spec.priority, Some(10));
    assert_eq!(good.spec.mode, Some(Mode::Audit));
    let bad = by_name("bad")
        .policy
        .as_ref()
        .expect_err("bad does not convert");
    assert_eq!(bad.field, "spec.priority");
}

/// A later pod change arrives as a change of its workload: deleting a pod.
#[allow(clippy::unwrap_used, clippy::expect_used)] // test helper: a failure fails the test
async fn a_pod_deletion_is_a_change_of_its_workload(
    cache: &CacheSet,
    client: &Client,
    key: &WorkloadKey,
    pod_name: &str,
) {
    let mut changes = cache.subscribe();
    Api::<Pod>::namespaced(client.clone(), NS)
        .delete(pod_name, &DeleteParams::default())
        .await
        .unwrap();
    let seen = tokio::time::timeout(WAIT, async {
        loop {
            match changes.recv().await {
                Ok(Change::Workload(k)) if k == *key => {
                    let p = cache.pod(NS, pod_name);
                    if p.is_none_or(|p| p.deletion_timestamp.is_some()) {
                        return Ok(());
                    }
                }
                Ok(_) => {}
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .expect("the pod change is notified");
    seen.unwrap();
}

/// Namespace `ns` with Deployment `web` of one pod.
async fn namespace_with_web(client: &Client, ns: &str) -> anyhow::Result<()> {
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": ns}}),
    )
    .await?;
    let labels = json!({"app": "web"});
    create(
        &Api::<Deployment>::namespaced(client.clone(), ns),
        json!({
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                    "name": "app", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}
        }),
    )
    .await?;
    create(
        &Api::<PodDisruptionBudget>::namespaced(client.clone(), ns),
        json!({
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}
        }),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_started_for_a_list_of_namespaces_hold_those_namespaces_only() {
    let sim = start_sim().await.unwrap();
    let client = sim.client();
    apply_crds(&client).await.unwrap();
    for ns in ["north", "south", "west"] {
        namespace_with_web(&client, ns).await.unwrap();
    }

    let cache = CacheSet::new();
    let listed = ["north".to_owned(), "south".to_owned()];
    let _watches = cache.start(client.clone(), CacheMetrics::default(), &listed);
    tokio::time::timeout(WAIT, cache.wait_synced())
        .await
        .expect("every watch of every namespace lists once");
    let key = |ns| WorkloadKey::new(ns, WorkloadKind::Deployment, "web");
    for ns in ["north", "south"] {
        eventually("the pod of web", WAIT, || async {
            (cache.pods_of(&key(ns)).len() == 1).then_some(())
        })
        .await
        .unwrap();
        assert_eq!(cache.pdbs_in(ns).len(), 1, "the PDB of {ns}");
    }
    assert_eq!(cache.workload_count(), 2);
    assert!(cache.workload(&key("west")).is_none());
    assert!(cache.pdbs_in("west").is_empty());
    assert!(cache.replicasets_of("west", "web").is_empty());
    assert!(
        cache.namespace("west").is_some(),
        "namespaces are watched over the cluster"
    );
    assert!(cache.node("sim-node-1").is_some());
}
