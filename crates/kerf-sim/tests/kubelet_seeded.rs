//! Pods written into the store already running (`kerf_testkit::seed_running_deployment`,
//! through `kerf_sim::kubelet::start_now`): they carry the status the kubelet gives a pod it
//! starts, the kubelet and the controllers leave them and their owners as written, and the
//! kubelet resizes and kills them like any pod it started itself.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kerf_sim::kubelet::{Fault, inject};
use kerf_sim::sim::{Sim, SimConfig, SimContext};
use kerf_sim::store::gvr;
use kerf_testkit::{App, deployment_json, seed_running_deployment};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const APP: App<'static> = App {
    image: "registry.k8s.io/pause:3.10",
    requests: ["100m", "128Mi"],
    limits: Some(["500m", "256Mi"]),
};

/// One node, so that every pod lands on `sim-node-1`.
fn config() -> SimConfig {
    SimConfig {
        nodes: 1,
        kubelet_ready_delay: Duration::from_millis(100),
        ..SimConfig::default()
    }
}

/// Starts a sim filled with Deployment `default/web` of `replicas` running pods; returns it
/// with the resource versions the fill left ([`versions`]).
async fn seeded(replicas: usize) -> anyhow::Result<(Sim, Vec<(String, String)>)> {
    let mut written = Vec::new();
    let sim = Sim::start_filled(config(), |ctx| {
        let dep = deployment_json("default", "web", replicas, APP);
        seed_running_deployment(ctx, dep, replicas, 0)?;
        written = versions(ctx);
        Ok(())
    })
    .await?;
    Ok((sim, written))
}

/// `kind/name` and resource version of every pod, ReplicaSet and Deployment.
fn versions(ctx: &SimContext) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for g in [&gvr::PODS, &gvr::REPLICASETS, &gvr::DEPLOYMENTS] {
        for o in ctx.store.list(g, None).0 {
            let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
            let rv = o["metadata"]["resourceVersion"].as_str().unwrap_or("");
            out.push((format!("{}/{name}", g.resource), rv.to_string()));
        }
    }
    out
}

/// Names of the pods in `default`, sorted.
fn pod_names(ctx: &SimContext) -> Vec<String> {
    let mut names: Vec<String> = ctx
        .store
        .list(&gvr::PODS, Some("default"))
        .0
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// Polls `f` on the pod until it holds (5 s at most), returning the last pod seen.
async fn wait_pod(api: &Api<Pod>, name: &str, f: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let p = serde_json::to_value(api.get(name).await?)?;
        if f(&p) {
            return Ok(p);
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("condition not reached; last pod status: {}", p["status"]);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A pod's status with what differs from one start to the next (times, addresses,
/// container ids) blanked out.
fn shape(status: &Value) -> Value {
    let mut s = status.clone();
    for key in ["podIP", "podIPs", "startTime"] {
        s[key] = json!("_");
    }
    for c in s["conditions"].as_array_mut().into_iter().flatten() {
        c["lastTransitionTime"] = json!("_");
    }
    for c in s["containerStatuses"].as_array_mut().into_iter().flatten() {
        c["containerID"] = json!("_");
        c["state"]["running"]["startedAt"] = json!("_");
    }
    s
}

#[tokio::test]
async fn seeded_pod_has_the_status_the_kubelet_gives_a_pod_it_starts() {
    let (sim, _) = seeded(1).await.unwrap();
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    let seeded_name = pod_names(sim.context()).remove(0);
    let mut started = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "started", "namespace": "default"},
        "spec": deployment_json("default", "web", 1, APP)["spec"]["template"]["spec"]});
    started["spec"]["nodeName"] = json!("sim-node-1");
    api.create(
        &PostParams::default(),
        &serde_json::from_value(started).unwrap(),
    )
    .await
    .unwrap();
    let started = wait_pod(&api, "started", |p| p["status"]["phase"] == "Running")
        .await
        .unwrap();
    let seeded = serde_json::to_value(api.get(&seeded_name).await.unwrap()).unwrap();
    assert_eq!(shape(&seeded["status"]), shape(&started["status"]));
    assert_ne!(seeded["status"]["podIP"], started["status"]["podIP"]);
}

#[tokio::test]
async fn seeded_pods_and_their_owners_are_left_as_written() {
    let (sim, written) = seeded(3).await.unwrap();
    let dep = sim
        .context()
        .store
        .get(&gvr::DEPLOYMENTS, Some("default"), "web")
        .unwrap();
    assert_eq!(dep["status"]["availableReplicas"], 3);
    assert_eq!(dep["status"]["readyReplicas"], 3);
    // The kubelet's first passes and the controllers' first reconcile.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(versions(sim.context()), written);
}

#[tokio::test]
async fn seeded_pod_is_resized_in_place_and_oom_killed() {
    let (sim, _) = seeded(1).await.unwrap();
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    let name = pod_names(sim.context()).remove(0);
    let patch = json!({"spec": {"containers": [{"name": "app",
        "resources": {"requests": {"cpu": "150m", "memory": "128Mi"}}}]}});
    let pp = PatchParams::default();
    api.patch_subresource("resize", &name, &pp, &Patch::Strategic(patch))
        .await
        .unwrap();
    let p = wait_pod(&api, &name, |p| {
        p["status"]["observedGeneration"] == 2
            && p["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "150m"
    })
    .await
    .unwrap();
    assert_eq!(
        p["status"]["containerStatuses"][0]["allocatedResources"]["cpu"],
        "150m"
    );
    let oom = Fault::OomKill {
        namespace: "default".into(),
        pod: name.clone(),
        container: "app".into(),
    };
    inject(sim.context(), oom).unwrap();
    let p = serde_json::to_value(api.get(&name).await.unwrap()).unwrap();
    let c = &p["status"]["containerStatuses"][0];
    assert_eq!(c["restartCount"], 1);
    assert_eq!(c["lastState"]["terminated"]["reason"], "OOMKilled");
}
