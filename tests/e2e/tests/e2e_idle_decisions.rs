//! e2e: at rest, updates that change nothing a decision reads (pod and node status
//! heartbeats, new resourceVersions) and hub polls that bring nothing new run no decision
//! again; an update that does change a fact (the replica count) is decided.

mod e2e_support;

use std::time::Duration;

use e2e_support::{Env, eventually, metric_sum};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// The sum of `kerf_agent_decisions_total` over every type and reason.
fn decisions(metrics: &str) -> f64 {
    metric_sum(metrics, "kerf_agent_decisions_total", &[])
}

/// A status update that changes no field the agent keeps: the object's conditions with one
/// of a type it does not read, at a new heartbeat time (a merge patch replaces the whole
/// list, so the others are sent as they are).
fn heartbeat(object: &serde_json::Value, i: u32) -> serde_json::Value {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let beat = json!({"type": "example.com/Heartbeat", "status": "True",
        "reason": format!("Beat{i}"), "lastProbeTime": now, "lastHeartbeatTime": now,
        "lastTransitionTime": now});
    let mut conditions: Vec<serde_json::Value> = object["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conditions.retain(|c| c["type"] != "example.com/Heartbeat");
    conditions.push(beat);
    json!({"status": {"conditions": conditions}})
}

// portable
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_and_idle_polls_decide_nothing_again() -> anyhow::Result<()> {
    let mut env = Env::start_at_rest("e2e-idle-decisions").await?;
    let before = decisions(&env.agent_metrics()?);
    assert!(before >= 1.0, "the first pass decided: {before}");

    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let pod = env.pods("web").await?.remove(0);
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let pod_rv = pod.metadata.resource_version.clone();
    let nodes: Api<Node> = Api::all(env.client.clone());
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .ok_or_else(|| anyhow::anyhow!("pod {pod_name} is on no node"))?;
    let pp = PatchParams::default();
    let polls_before = env.recommendation_polls();
    for i in 0..10 {
        let pod = serde_json::to_value(pods.get(&pod_name).await?)?;
        pods.patch_status(&pod_name, &pp, &Patch::Merge(heartbeat(&pod, i)))
            .await?;
        let node = serde_json::to_value(nodes.get(&node_name).await?)?;
        nodes
            .patch_status(&node_name, &pp, &Patch::Merge(heartbeat(&node, i)))
            .await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let polls = env.recommendation_polls() - polls_before;
    assert!(polls >= 4, "the hub was polled meanwhile: {polls} polls");
    let now_rv = pods.get(&pod_name).await?.metadata.resource_version;
    assert_ne!(now_rv, pod_rv, "the heartbeats updated the pod");
    let after = decisions(&env.agent_metrics()?);
    assert_eq!(
        after,
        before,
        "10 pod and 10 node heartbeats and {polls} idle polls ran {} decisions",
        after - before
    );

    // A fact that changes (the Deployment's replica count) is decided again.
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &env.ns);
    let scale = json!({"spec": {"replicas": 2}});
    deployments.patch("web", &pp, &Patch::Merge(scale)).await?;
    eventually(
        "a decision after the replica count changed",
        Duration::from_secs(20),
        || async {
            let now = decisions(&env.agent_metrics().ok()?);
            (now > after).then_some(())
        },
    )
    .await?;
    env.stop_agent().await;
    Ok(())
}
