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

/// One node of the default size.
fn one_node() -> SimConfig {
    SimConfig {
        nodes: 1,
        ..SimConfig::default()
    }
}

/// One node with `cpu` allocatable.
fn one_node_of(cpu: &str) -> SimConfig {
    SimConfig {
        node_cpu: cpu.into(),
        ..one_node()
    }
}

fn pods(sim: &Sim) -> Api<Pod> {
    Api::namespaced(sim.client(), "default")
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

/// Creates the pod and waits until it is Ready, returning it.
async fn create_ready(
    api: &Api<Pod>,
    name: &str,
    (cpu, memory): (&str, &str),
    extra: Value,
) -> anyhow::Result<Value> {
    api.create(&PostParams::default(), &pod(name, cpu, memory, extra)?)
        .await?;
    wait_pod(api, name, ready).await
}

/// Creates a Ready pod asking `from`, resizes it to `to` and waits for a
/// `PodResizePending` condition, returning the pod.
async fn pending_after_resize(
    api: &Api<Pod>,
    name: &str,
    from: (&str, &str),
    (cpu, memory): (&str, &str),
) -> anyhow::Result<Value> {
    create_ready(api, name, from, json!({})).await?;
    resize(api, name, cpu, memory).await?;
    wait_pod(api, name, |p| resize_pending(p).is_some()).await
}

/// Starts a one-node sim and merges `patch` into node `sim-node-1` (into its status when
/// `status`); the sim and the nodes API.
async fn one_node_patched(patch: Value, status: bool) -> anyhow::Result<(Sim, Api<Node>)> {
    let sim = start(one_node()).await?;
    let nodes: Api<Node> = Api::all(sim.client());
    let (pp, patch) = (PatchParams::default(), Patch::Merge(patch));
    if status {
        nodes.patch_status("sim-node-1", &pp, &patch).await?;
    } else {
        nodes.patch("sim-node-1", &pp, &patch).await?;
    }
    Ok((sim, nodes))
}

/// Polls `f` on node `sim-node-1` until it gives a value (5 s at most).
async fn wait_node<T>(nodes: &Api<Node>, f: impl Fn(&Node) -> Option<T>) -> anyhow::Result<T> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let node = nodes.get("sim-node-1").await?;
        if let Some(t) = f(&node) {
            return Ok(t);
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!(
                "node condition not reached; last node status: {:?}",
                node.status
            );
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
    let api = pods(&sim);
    let p = create_ready(&api, "p", ("100m", "128Mi"), json!({}))
        .await
        .unwrap();
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
    let sim = start(one_node_of("1")).await.unwrap();
    let api = pods(&sim);
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
    let api = pods(&sim);
    create_ready(&api, "r", ("100m", "128Mi"), json!({}))
        .await
        .unwrap();
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
    let sim = start(one_node_of("2")).await.unwrap();
    let api = pods(&sim);
    create_ready(&api, "hog", ("1500m", "128Mi"), json!({}))
        .await
        .unwrap();
    let p = pending_after_resize(&api, "grow", ("300m", "128Mi"), ("800m", "128Mi"))
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
        swap_nodes: vec!["sim-node-1".into()],
        ..one_node()
    };
    let sim = start(config).await.unwrap();
    let api = pods(&sim);
    let p = pending_after_resize(&api, "s", ("100m", "128Mi"), ("100m", "192Mi"))
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
    let label = json!({"metadata": {"labels": {"kerf-sim/swap": "true"}}});
    let (sim, nodes) = one_node_patched(label, false).await.unwrap();
    let capacity = wait_node(&nodes, |node| {
        serde_json::to_value(node)
            .ok()?
            .pointer("/status/nodeInfo/swap/capacity")
            .and_then(Value::as_i64)
    })
    .await
    .expect("no swap capacity reported");
    assert_eq!(capacity, 16 * 1024 * 1024 * 1024);
    let api = pods(&sim);
    let p = pending_after_resize(&api, "h", ("100m", "128Mi"), ("100m", "192Mi"))
        .await
        .unwrap();
    assert_eq!(resize_pending(&p).as_deref(), Some("Infeasible"));
}

#[tokio::test]
async fn a_node_given_swap_capacity_by_hand_gets_the_swap_label() {
    let capacity = json!({"status": {"nodeInfo": {"swap": {"capacity": 1073741824}}}});
    let (_sim, nodes) = one_node_patched(capacity, true).await.unwrap();
    wait_node(&nodes, |node| {
        let labels = node.metadata.labels.as_ref()?;
        (labels.get("kerf-sim/swap").map(String::as_str) == Some("true")).then_some(())
    })
    .await
    .expect("the swap label is set");
}

#[tokio::test]
async fn resize_with_restart_container_policy_restarts_the_container() {
    let sim = start(SimConfig::default()).await.unwrap();
    let api = pods(&sim);
    let policy = json!({"resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                                         {"resourceName": "memory", "restartPolicy": "RestartContainer"}]});
    create_ready(&api, "rc", ("100m", "128Mi"), policy)
        .await
        .unwrap();
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
