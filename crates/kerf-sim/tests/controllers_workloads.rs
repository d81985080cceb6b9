//! The simulated controllers through kube's real Client: a Deployment rolls within
//! maxSurge / maxUnavailable, a StatefulSet with OnDelete keeps old pods until they are
//! deleted, a DaemonSet covers every node and a PDB reports its budget.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kerf_sim::sim::{Sim, SimConfig};
use kerf_sim::store::{Store, gvr};
use kerf_testkit::eventually;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use serde_json::{Value, json};

async fn start() -> anyhow::Result<Sim> {
    Sim::start(SimConfig {
        kubelet_ready_delay: Duration::from_millis(150),
        ..SimConfig::default()
    })
    .await
}

fn template(app: &str, env: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
            "env": [{"name": "V", "value": env}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    })
}

/// How long the controllers get to reach the state a test expects.
const SETTLE: Duration = Duration::from_secs(10);

fn is_ready(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

async fn pods(api: &Api<Pod>, app: &str) -> anyhow::Result<Vec<Value>> {
    kerf_testkit::app_objects(api, app).await
}

/// The API of `K` in namespace `default`.
fn default_ns<K>(sim: &Sim) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    Api::namespaced(sim.client(), "default")
}

/// The pods of `app` in namespace `default`, read straight from the store.
fn store_pods(store: &Store, app: &str) -> Vec<Value> {
    store
        .list(&gvr::PODS, Some("default"))
        .0
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app"] == app)
        .collect()
}

/// Replaces the pod template of workload `name` with version `env` of `app`'s template.
#[allow(clippy::unwrap_used)] // test helper: a failed patch fails the test
async fn set_template<K>(api: &Api<K>, name: &str, app: &str, env: &str)
where
    K: Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let patch = json!({"spec": {"template": template(app, env)}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// Waits up to [`SETTLE`] until the object `name` satisfies `done`, returning it.
async fn settled<K>(api: &Api<K>, name: &str, done: impl Fn(&Value) -> bool) -> Value
where
    K: Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let done = &done;
    settle(move || async move {
        let v = serde_json::to_value(api.get(name).await.ok()?).ok()?;
        done(&v).then_some(v)
    })
    .await
}

/// Creates `obj` through `api`.
#[allow(clippy::unwrap_used)] // test helper: a failed create fails the test
async fn create<K>(api: &Api<K>, obj: Value)
where
    K: Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let obj = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

/// Waits up to [`SETTLE`] for `check` to give a value.
#[allow(clippy::unwrap_used)] // test helper: a timeout fails the test
async fn settle<T, Fut>(check: impl FnMut() -> Fut) -> T
where
    Fut: std::future::Future<Output = Option<T>>,
{
    eventually("the controllers to reach the expected state", SETTLE, check)
        .await
        .unwrap()
}

/// Waits until `n` pods of `app` are Ready.
async fn ready_pods(pod_api: &Api<Pod>, app: &str, n: usize) {
    settle(|| async {
        let ready = pods(pod_api, app)
            .await
            .ok()?
            .iter()
            .filter(|p| is_ready(p))
            .count();
        (ready == n).then_some(())
    })
    .await;
}

/// Watches every store change during a rollout of `web` to template "2" and checks the
/// bounds at each one: gives the most pods seen at once and the fewest Ready.
fn rollout_bounds(store: Store) -> tokio::task::JoinHandle<(usize, usize)> {
    let mut rx = store.subscribe();
    tokio::spawn(async move {
        let (mut max_total, mut min_ready) = (0, usize::MAX);
        while let Ok(ev) = rx.recv().await {
            if ev.resource != "pods" {
                continue;
            }
            let all = store_pods(&store, "web");
            max_total = max_total.max(all.len());
            min_ready = min_ready.min(all.iter().filter(|p| is_ready(p)).count());
            let done = all.len() == 3
                && all
                    .iter()
                    .all(|p| is_ready(p) && p["spec"]["containers"][0]["env"][0]["value"] == "2");
            if done {
                break;
            }
        }
        (max_total, min_ready)
    })
}

#[tokio::test]
async fn deployment_rolls_to_new_template_within_max_surge_and_max_unavailable() {
    let sim = start().await.unwrap();
    let (deps, pod_api) = (default_ns::<Deployment>(&sim), default_ns::<Pod>(&sim));
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                 "template": template("web", "1")}});
    create(&deps, dep).await;
    settle(|| async {
        let p = pods(&pod_api, "web").await.ok()?;
        (p.len() == 3 && p.iter().all(is_ready)).then_some(())
    })
    .await;

    let checker = rollout_bounds(sim.context().store.clone());
    set_template(&deps, "web", "web", "2").await;
    let (max_total, min_ready) = tokio::time::timeout(Duration::from_secs(15), checker)
        .await
        .unwrap()
        .unwrap();
    assert!(max_total <= 4, "maxSurge 1 allows 4 pods, saw {max_total}");
    assert_eq!(min_ready, 3, "maxUnavailable 0 keeps 3 pods ready");

    let d = settled(&deps, "web", |d| {
        let s = &d["status"];
        s["updatedReplicas"] == 3
            && s["availableReplicas"] == 3
            && s["replicas"] == 3
            && s["observedGeneration"] == d["metadata"]["generation"]
    })
    .await;
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    let conds = d["status"]["conditions"].as_array().unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c["type"] == "Available" && c["status"] == "True")
    );
    assert!(
        eventually(
            "the controllers to reach the expected state",
            SETTLE,
            || async {
                let d = serde_json::to_value(deps.get("web").await.ok()?).ok()?;
                d["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Progressing" && c["reason"] == "NewReplicaSetAvailable")
                    .then_some(())
            }
        )
        .await
        .is_ok()
    );
    let p = pods(&pod_api, "web").await.unwrap();
    let owner = &p[0]["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "ReplicaSet");
    assert_eq!(owner["controller"], true);
    assert!(p[0]["metadata"]["labels"]["pod-template-hash"].is_string());
}

#[tokio::test]
async fn recreate_deployment_removes_old_pods_before_new_ones_start() {
    let sim = start().await.unwrap();
    let (deps, pod_api) = (default_ns::<Deployment>(&sim), default_ns::<Pod>(&sim));
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "rc", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "rc"}}, "strategy": {"type": "Recreate"}, "template": template("rc", "1")}});
    create(&deps, dep).await;
    ready_pods(&pod_api, "rc", 2).await;
    let store = sim.context().store.clone();
    let mut rx = store.subscribe();
    let checker = tokio::spawn(async move {
        let mut mixed = false;
        while let Ok(ev) = rx.recv().await {
            if ev.resource != "pods" {
                continue;
            }
            let all = store_pods(&store, "rc");
            let versions: std::collections::BTreeSet<String> = all
                .iter()
                .map(|p| p["spec"]["containers"][0]["env"][0]["value"].to_string())
                .collect();
            mixed |= versions.len() > 1;
            if all.len() == 2
                && all.iter().all(is_ready)
                && versions.len() == 1
                && versions.contains("\"2\"")
            {
                break;
            }
        }
        mixed
    });
    set_template(&deps, "rc", "rc", "2").await;
    let mixed = tokio::time::timeout(Duration::from_secs(15), checker)
        .await
        .unwrap()
        .unwrap();
    assert!(!mixed, "Recreate never runs old and new pods together");
}

#[tokio::test]
async fn statefulset_on_delete_keeps_old_pods_until_deleted() {
    let sim = start().await.unwrap();
    let (sts_api, pod_api) = (default_ns::<StatefulSet>(&sim), default_ns::<Pod>(&sim));
    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
        "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "updateStrategy": {"type": "OnDelete"}, "template": template("db", "1")}});
    create(&sts_api, sts).await;
    ready_pods(&pod_api, "db", 2).await;
    let names: Vec<String> = pods(&pod_api, "db")
        .await
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(names, ["db-0", "db-1"]);

    set_template(&sts_api, "db", "db", "2").await;
    let s = settled(&sts_api, "db", |s| s["status"]["observedGeneration"] == 2).await;
    assert_ne!(
        s["status"]["currentRevision"],
        s["status"]["updateRevision"]
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    for p in pods(&pod_api, "db").await.unwrap() {
        assert_eq!(
            p["spec"]["containers"][0]["env"][0]["value"], "1",
            "OnDelete leaves running pods alone"
        );
        assert_eq!(
            p["metadata"]["labels"]["controller-revision-hash"],
            s["status"]["currentRevision"]
        );
    }

    pod_api
        .delete("db-1", &DeleteParams::default())
        .await
        .unwrap();
    let p = settled(&pod_api, "db-1", |p| {
        is_ready(p) && p["spec"]["containers"][0]["env"][0]["value"] == "2"
    })
    .await;
    assert_eq!(
        p["metadata"]["labels"]["controller-revision-hash"],
        s["status"]["updateRevision"]
    );
    let db0 = serde_json::to_value(pod_api.get("db-0").await.unwrap()).unwrap();
    assert_eq!(db0["spec"]["containers"][0]["env"][0]["value"], "1");
    let s = eventually(
        "the controllers to reach the expected state",
        SETTLE,
        || async {
            let s = serde_json::to_value(sts_api.get("db").await.ok()?).ok()?;
            (s["status"]["updatedReplicas"] == 1 && s["status"]["currentReplicas"] == 1)
                .then_some(s)
        },
    )
    .await;
    assert!(s.is_ok(), "status counts one updated and one current pod");
}

#[tokio::test]
async fn statefulset_rolling_update_replaces_every_pod() {
    let sim = start().await.unwrap();
    let (sts_api, pod_api) = (default_ns::<StatefulSet>(&sim), default_ns::<Pod>(&sim));
    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "ru", "namespace": "default"},
        "spec": {"replicas": 2, "serviceName": "ru", "selector": {"matchLabels": {"app": "ru"}}, "template": template("ru", "1")}});
    create(&sts_api, sts).await;
    ready_pods(&pod_api, "ru", 2).await;
    set_template(&sts_api, "ru", "ru", "2").await;
    let s = settled(&sts_api, "ru", |s| {
        s["status"]["updatedReplicas"] == 2
            && s["status"]["readyReplicas"] == 2
            && s["status"]["currentRevision"] == s["status"]["updateRevision"]
    })
    .await;
    assert_eq!(s["status"]["currentReplicas"], 2);
}

#[tokio::test]
async fn daemonset_runs_one_pod_per_node_and_pdb_reports_budget() {
    let sim = start().await.unwrap();
    let (ds_api, pod_api) = (default_ns::<DaemonSet>(&sim), default_ns::<Pod>(&sim));
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template("agent", "1")}});
    create(&ds_api, ds).await;
    let ps = settle(|| async {
        let p = pods(&pod_api, "agent").await.ok()?;
        (p.len() == 3 && p.iter().all(is_ready)).then_some(p)
    })
    .await;
    let nodes: std::collections::BTreeSet<&str> = ps
        .iter()
        .filter_map(|p| p["spec"]["nodeName"].as_str())
        .collect();
    assert_eq!(nodes.len(), 3);
    let ds = settled(&ds_api, "agent", |d| d["status"]["numberReady"] == 3).await;
    assert_eq!(ds["status"]["desiredNumberScheduled"], 3);
    assert_eq!(ds["status"]["updatedNumberScheduled"], 3);

    let pdbs = default_ns::<PodDisruptionBudget>(&sim);
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "agent-pdb", "namespace": "default"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "agent"}}}});
    create(&pdbs, pdb).await;
    let pdb = settled(&pdbs, "agent-pdb", |p| p["status"]["expectedPods"] == 3).await;
    assert_eq!(pdb["status"]["currentHealthy"], 3);
    assert_eq!(pdb["status"]["desiredHealthy"], 2);
    assert_eq!(pdb["status"]["disruptionsAllowed"], 1);
}
