//! Objects tests and benchmarks write into a cluster.

use kerf_api::hub::Recommendation;
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
