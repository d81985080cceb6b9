//! e2e: a PodDisruptionBudget read from the cluster makes a workload of three pods count
//! as single-replica (AP-45): an in-place change whose resize restarts a container is
//! blocked `SingleReplicaUnsafe` while the budget allows no disruption, and goes in once
//! the budget allows one.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, pod_resources};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kerf_api::event::EventType;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

/// Deployment `web`: 3 pods at 200m/256Mi whose CPU resize restarts the container.
async fn restarting_web(env: &Env) -> anyhow::Result<()> {
    let labels = json!({"app": "web"});
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": env.ns, "labels": labels},
        "spec": {"replicas": 3, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                "name": "app", "image": "registry.k8s.io/pause:3.10",
                "resizePolicy": [
                    {"resourceName": "cpu", "restartPolicy": "RestartContainer"},
                    {"resourceName": "memory", "restartPolicy": "NotRequired"}],
                "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}]}}}
    }))?;
    env.deployments().create(&PostParams::default(), &d).await?;
    env.wait_ready("web", 3).await?;
    Ok(())
}

/// PodDisruptionBudget `web` over the pods of `web` with `minAvailable`.
async fn budget(env: &Env, min_available: &str) -> anyhow::Result<()> {
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": env.ns},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}
    }))?;
    let api: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), &env.ns);
    api.patch(
        "web",
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(&pdb),
    )
    .await?;
    Ok(())
}

// portable
// rule: AP-45
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_allowing_no_disruption_blocks_a_restarting_resize_of_three_pods()
-> anyhow::Result<()> {
    let mut env = Env::start("e2e-pdb").await?;
    restarting_web(&env).await?;
    budget(&env, "100%").await?;
    env.policy_of("p", "auto-patch", "in-place").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    let rsr = env
        .wait_rsr(
            "web",
            "blocked SingleReplicaUnsafe",
            e2e_support::WAIT,
            |r| r["status"]["summary"]["reason"] == "SingleReplicaUnsafe",
        )
        .await?;
    assert_eq!(rsr["status"]["phase"], "Blocked", "{}", rsr["status"]);
    // Checks that nothing goes in while the budget stays: a few passes.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for p in env.pods("web").await? {
        assert_eq!(pod_resources(&p)["requests"]["cpu"], "200m");
    }
    assert!(env.hub_events("web", EventType::Applied).is_empty());

    // One disruption allowed: three pods are three replicas again.
    budget(&env, "2").await?;
    env.wait_phase("web", "Applied").await?;
    let pods = env.wait_ready("web", 3).await?;
    for p in &pods {
        assert_eq!(pod_resources(p)["requests"]["cpu"], "150m");
    }
    env.stop_agent().await;
    Ok(())
}
