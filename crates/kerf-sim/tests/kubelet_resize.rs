//! The simulated kubelet, through kube's real Client: pods start Ready, resizes are
//! actuated, Deferred while the node has no room, Infeasible on a swap node, and a
//! RestartContainer resize policy restarts the container.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kerf_sim::sim::{Sim, SimConfig};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

async fn start(config: SimConfig) -> anyhow::Result<Sim> {
    Sim::start(SimConfig {
        kubelet_ready_delay: Duration::from_millis(100),
        ..config
    })
    .await
}

fn pod(name: &str, cpu: &str, memory: &str, extra: Value) -> anyhow::Result<Pod> {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "sim-node-1"},
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory},
                              "limits": {"cpu": "2", "memory": "1Gi"}}}]
        }
    });
    if let (Some(c), Some(e)) = (
        p["spec"]["containers"][0].as_object_mut(),
        extra.as_object(),
    ) {
        c.extend(e.clone());
    }
    Ok(serde_json::from_value(p)?)
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

fn ready(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn resize_pending(p: &Value) -> Option<String> {
    p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodResizePending")
        .map(|c| c["reason"].as_str().unwrap_or("").to_string())
}

async fn resize(api: &Api<Pod>, name: &str, cpu: &str, memory: &str) -> anyhow::Result<()> {
    let patch = json!({"spec": {"containers": [{"name": "app",
        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}});
    api.patch_subresource(
        "resize",
        name,
        &PatchParams::default(),
        &Patch::Strategic(patch),
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn pods_start_running_and_ready_with_kubelet_status() {
    let sim = start(SimConfig::default()).await.unwrap();
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    api.create(
        &PostParams::default(),
        &pod("p", "100m", "128Mi", json!({})).unwrap(),
    )
    .await
    .unwrap();
    let p = wait_pod(&api, "p", ready).await.unwrap();
    let s = &p["status"];
    assert_eq!(s["phase"], "Running");
    assert_eq!(s["qosClass"], "Burstable");
    assert_eq!(p["spec"]["nodeName"], "sim-node-1");
    assert!(
        s["podIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("10.244."))
    );
    let c = &s["containerStatuses"][0];
    assert_eq!(c["ready"], true);
    assert_eq!(c["started"], true);
    assert_eq!(c["restartCount"], 0);
    assert!(c["state"]["running"]["startedAt"].is_string());
    assert_eq!(
        c["allocatedResources"],
        json!({"cpu": "100m", "memory": "128Mi"})
    );
    assert_eq!(
        c["resources"]["limits"],
        json!({"cpu": "2", "memory": "1Gi"})
    );
}

#[tokio::test]
async fn unschedulable_pod_stays_pending_with_pod_scheduled_false() {
    let sim = start(SimConfig {
        nodes: 1,
        node_cpu: "1".into(),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    let mut big = pod("big", "1500m", "128Mi", json!({})).unwrap();
    big.spec.as_mut().unwrap().node_selector = None;
    api.create(&PostParams::default(), &big).await.unwrap();
    let p = wait_pod(&api, "big", |p| {
        p["status"]["conditions"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    })
    .await
    .unwrap();
    assert_eq!(p["status"]["phase"], "Pending");
    let cond = &p["status"]["conditions"][0];
    assert_eq!(cond["type"], "PodScheduled");
    assert_eq!(cond["status"], "False");
    assert_eq!(cond["reason"], "Unschedulable");
    assert_eq!(
        cond["message"],
        "0/1 nodes are available: 1 Insufficient cpu."
    );
    assert!(p["spec"]["nodeName"].is_null());
}

#[tokio::test]
async fn accepted_resize_is_actuated_and_status_resources_follow() {
    let sim = start(SimConfig::default()).await.unwrap();
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    api.create(
        &PostParams::default(),
        &pod("r", "100m", "128Mi", json!({})).unwrap(),
    )
    .await
    .unwrap();
    wait_pod(&api, "r", ready).await.unwrap();
    resize(&api, "r", "150m", "128Mi").await.unwrap();
    let p = wait_pod(&api, "r", |p| {
        p["status"]["observedGeneration"] == 2
            && p["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "150m"
    })
    .await
    .unwrap();
    let c = &p["status"]["containerStatuses"][0];
    assert_eq!(c["allocatedResources"]["cpu"], "150m");
    assert_eq!(c["restartCount"], 0);
    assert!(resize_pending(&p).is_none());
    let conds = p["status"]["conditions"].as_array().unwrap();
    assert!(!conds.iter().any(|c| c["type"] == "PodResizeInProgress"));
}

#[tokio::test]
async fn resize_is_deferred_until_room_frees_then_actuated() {
    let sim = start(SimConfig {
        nodes: 1,
        node_cpu: "2".into(),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    api.create(
        &PostParams::default(),
        &pod("hog", "1500m", "128Mi", json!({})).unwrap(),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &pod("grow", "300m", "128Mi", json!({})).unwrap(),
    )
    .await
    .unwrap();
    wait_pod(&api, "hog", ready).await.unwrap();
    wait_pod(&api, "grow", ready).await.unwrap();
    resize(&api, "grow", "800m", "128Mi").await.unwrap();
    let p = wait_pod(&api, "grow", |p| resize_pending(p).is_some())
        .await
        .unwrap();
    assert_eq!(resize_pending(&p).as_deref(), Some("Deferred"));
    let cond = p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodResizePending")
        .cloned()
        .unwrap();
    assert_eq!(
        cond["message"],
        "Node didn't have enough resource: cpu, requested: 800, used: 1500, capacity: 2000"
    );
    assert_eq!(
        p["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"],
        "300m"
    );

    api.delete("hog", &DeleteParams::default()).await.unwrap();
    let p = wait_pod(&api, "grow", |p| {
        p["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "800m"
    })
    .await
    .unwrap();
    assert!(resize_pending(&p).is_none());
    assert_eq!(p["status"]["observedGeneration"], 2);
}

#[tokio::test]
async fn memory_resize_on_a_swap_node_is_infeasible() {
    let config = SimConfig {
        nodes: 1,
        swap_nodes: vec!["sim-node-1".into()],
        ..SimConfig::default()
    };
    let sim = start(config).await.unwrap();
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    api.create(
        &PostParams::default(),
        &pod("s", "100m", "128Mi", json!({})).unwrap(),
    )
    .await
    .unwrap();
    wait_pod(&api, "s", ready).await.unwrap();
    resize(&api, "s", "100m", "192Mi").await.unwrap();
    let p = wait_pod(&api, "s", |p| resize_pending(p).is_some())
        .await
        .unwrap();
    assert_eq!(resize_pending(&p).as_deref(), Some("Infeasible"));
    assert_eq!(
        p["status"]["containerStatuses"][0]["resources"]["requests"]["memory"],
        "128Mi"
    );
    let node = serde_json::to_value(
        Api::<Node>::all(sim.client())
            .get("sim-node-1")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(node["metadata"]["labels"]["kerf-sim/swap"], "true");
    assert!(
        node["status"]["nodeInfo"]["swap"]["capacity"]
            .as_i64()
            .is_some_and(|c| c > 0)
    );
}

#[tokio::test]
async fn a_node_labelled_swap_by_hand_reports_swap_capacity_and_refuses_memory_resizes() {
    let sim = start(SimConfig {
        nodes: 1,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let nodes: Api<Node> = Api::all(sim.client());
    nodes
        .patch(
            "sim-node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"kerf-sim/swap": "true"}}})),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let capacity = loop {
        let node = serde_json::to_value(nodes.get("sim-node-1").await.unwrap()).unwrap();
        if let Some(c) = node
            .pointer("/status/nodeInfo/swap/capacity")
            .and_then(Value::as_i64)
        {
            break c;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no swap capacity reported: {}",
            node["status"]["nodeInfo"]
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(capacity, 16 * 1024 * 1024 * 1024);
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    api.create(
        &PostParams::default(),
        &pod("h", "100m", "128Mi", json!({})).unwrap(),
    )
    .await
    .unwrap();
    wait_pod(&api, "h", ready).await.unwrap();
    resize(&api, "h", "100m", "192Mi").await.unwrap();
    let p = wait_pod(&api, "h", |p| resize_pending(p).is_some())
        .await
        .unwrap();
    assert_eq!(resize_pending(&p).as_deref(), Some("Infeasible"));
}

#[tokio::test]
async fn a_node_given_swap_capacity_by_hand_gets_the_swap_label() {
    let sim = start(SimConfig {
        nodes: 1,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let nodes: Api<Node> = Api::all(sim.client());
    nodes
        .patch_status(
            "sim-node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"nodeInfo": {"swap": {"capacity": 1073741824}}}})),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let node = nodes.get("sim-node-1").await.unwrap();
        let labels = node.metadata.labels.unwrap_or_default();
        if labels.get("kerf-sim/swap").map(String::as_str) == Some("true") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{labels:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn resize_with_restart_container_policy_restarts_the_container() {
    let sim = start(SimConfig::default()).await.unwrap();
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    let policy = json!({"resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                                         {"resourceName": "memory", "restartPolicy": "RestartContainer"}]});
    api.create(
        &PostParams::default(),
        &pod("rc", "100m", "128Mi", policy).unwrap(),
    )
    .await
    .unwrap();
    wait_pod(&api, "rc", ready).await.unwrap();
    resize(&api, "rc", "100m", "192Mi").await.unwrap();
    let p = wait_pod(&api, "rc", |p| {
        p["status"]["containerStatuses"][0]["restartCount"] == 1
    })
    .await
    .unwrap();
    let c = &p["status"]["containerStatuses"][0];
    assert_eq!(c["resources"]["requests"]["memory"], "192Mi");
    assert_eq!(c["lastState"]["terminated"]["exitCode"], 0);
    assert!(c["state"]["running"].is_object());
}
