//! Objects tests and benchmarks write into a cluster.

use kerf_api::hub::Recommendation;
use kerf_sim::controllers::common::{owner_ref, pod_from_template, template_hash};
use kerf_sim::controllers::{MANAGER, deployment, replicaset};
use kerf_sim::kubelet;
use kerf_sim::sim::SimContext;
use kerf_sim::store::gvr;
use serde_json::{Value, json};

/// The container of a [`deployment_json`]: its image, requests and limits (cpu, memory).
#[derive(Clone, Copy, Debug)]
pub struct App<'a> {
    /// The image.
    pub image: &'a str,
    /// `requests.cpu` and `requests.memory`.
    pub requests: [&'a str; 2],
    /// `limits.cpu` and `limits.memory`, if any.
    pub limits: Option<[&'a str; 2]>,
}

/// The container of the simulator's benchmarks: 100m / 128Mi requested, 500m / 256Mi limits.
pub const BENCH_APP: App<'static> = App {
    image: "registry.example/app:1.0",
    requests: ["100m", "128Mi"],
    limits: Some(["500m", "256Mi"]),
};

/// A Deployment `ns/name` labelled `app: <name>`, of `replicas` pods that run one
/// container `app`.
pub fn deployment_json(ns: &str, name: &str, replicas: usize, app: App<'_>) -> Value {
    let [cpu, memory] = app.requests;
    let mut resources = json!({"requests": {"cpu": cpu, "memory": memory}});
    if let Some([cpu, memory]) = app.limits {
        resources["limits"] = json!({"cpu": cpu, "memory": memory});
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                {"name": "app", "image": app.image, "resources": resources}]}}}})
}

/// A hub recommendation for container `app` of workload `[namespace, kind, name]`:
/// `requests` (cpu, memory) with `confidence`, id `id`, made now with the default
/// recommender settings on 14 days of data.
pub fn hub_recommendation(
    workload: [&str; 3],
    id: &str,
    requests: [&str; 2],
    confidence: &str,
) -> anyhow::Result<Recommendation> {
    let [ns, kind, name] = workload;
    let [cpu, memory] = requests;
    Ok(serde_json::from_value(json!({
        "workload": {"namespace": ns, "kind": kind, "name": name},
        "recommendationID": id,
        "generatedAt": chrono::Utc::now(),
        "confidence": confidence,
        "dataCoverage": {"covered": "336h", "window": "336h"},
        "settings": {"window": "336h", "cpuPercentile": 90, "memoryPercentile": 99,
            "headroomPercent": 15, "limits": "Keep"},
        "containers": [{"name": "app", "requests": {"cpu": cpu, "memory": memory},
            "confidence": confidence}],
    }))?)
}

/// Writes Deployment `dep` of `replicas` pods into the store as the sim's controllers and
/// scheduler would have left it: with its ReplicaSet (named with the controller's template
/// hash) and `replicas` pods bound round-robin to the nodes, not yet started (the kubelet
/// starts them). `first_pod` places the first pod on node `first_pod % nodes + 1`.
/// Filling a large cluster this way skips the controllers' and the scheduler's creations.
pub fn seed_deployment(
    ctx: &SimContext,
    dep: Value,
    replicas: usize,
    first_pod: usize,
) -> anyhow::Result<()> {
    seed_bound(ctx, dep, replicas, first_pod)?;
    Ok(())
}

/// Writes Deployment `dep` as [`seed_deployment`] does, with its pods already started: each
/// pod gets the status the sim's kubelet gives a pod it starts (`kerf_sim::kubelet::start_now`),
/// and the ReplicaSet and the Deployment (with its revision annotation) get the status their
/// controllers write once every pod is available. The controllers and the kubelet then find
/// nothing to do at start, and a fill of 100,000 pods skips the kubelet's start of each;
/// the kubelet resizes and kills these pods like any other.
pub fn seed_running_deployment(
    ctx: &SimContext,
    mut dep: Value,
    replicas: usize,
    first_pod: usize,
) -> anyhow::Result<()> {
    dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = json!("1");
    let (mut dep, mut rs, pods) = seed_bound(ctx, dep, replicas, first_pod)?;
    let pods = pods
        .iter()
        .map(|p| kubelet::start_now(ctx, p))
        .collect::<Result<Vec<_>, _>>()?;
    let now = ctx.clock.now();
    rs["status"] = replicaset::status(&rs, &pods.iter().collect::<Vec<_>>(), now);
    let rs = ctx.store.update_status(&gvr::REPLICASETS, rs, MANAGER)?;
    dep["status"] = deployment::status(&dep, &rs, &[], now);
    ctx.store.update_status(&gvr::DEPLOYMENTS, dep, MANAGER)?;
    Ok(())
}

/// Writes `dep`, its ReplicaSet and its bound pods (see [`seed_deployment`]); returns them
/// as stored.
fn seed_bound(
    ctx: &SimContext,
    dep: Value,
    replicas: usize,
    first_pod: usize,
) -> anyhow::Result<(Value, Value, Vec<Value>)> {
    let dep = ctx.store.create(&gvr::DEPLOYMENTS, dep, "kubectl")?;
    let rs = ctx
        .store
        .create(&gvr::REPLICASETS, replica_set(&dep, replicas), MANAGER)?;
    let rs_name = rs["metadata"]["name"].as_str().unwrap_or_default();
    let mut pods = Vec::with_capacity(replicas);
    for p in 0..replicas {
        let node = kerf_sim::sim::node_name((first_pod + p) % ctx.config.nodes + 1);
        let mut pod = pod_from_template(
            &rs["spec"]["template"],
            &rs,
            &format!("{rs_name}-{p:05}"),
            &[],
        );
        pod["spec"]["nodeName"] = json!(node);
        pods.push(ctx.store.create(&gvr::PODS, pod, MANAGER)?);
    }
    Ok((dep, rs, pods))
}

/// The ReplicaSet the Deployment controller makes for `dep`'s first revision.
fn replica_set(dep: &Value, replicas: usize) -> Value {
    let mut template = dep["spec"]["template"].clone();
    let hash = template_hash(&template);
    template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
    let mut selector = dep["spec"]["selector"].clone();
    selector["matchLabels"]["pod-template-hash"] = json!(hash);
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": format!("{}-{hash}", dep["metadata"]["name"].as_str().unwrap_or("")),
            "namespace": dep["metadata"]["namespace"],
            "labels": template["metadata"]["labels"],
            "annotations": {"deployment.kubernetes.io/revision": "1",
                "deployment.kubernetes.io/desired-replicas": replicas.to_string()},
            "ownerReferences": [owner_ref(dep)]},
        "spec": {"replicas": replicas, "minReadySeconds": 0, "selector": selector, "template": template}})
}
