//! e2e: a change that takes time on the cluster (resizes the kubelet defers, watches that
//! deliver late, a fallback to a rollout) is followed to its end: the agent reports its
//! progress, takes no new decision about the recommendation it applies (no block, no skip
//! but the one of the applied values), and sends each write once.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, pod_resources, policy_spec};
use k8s_openapi::api::core::v1::Event as K8sEvent;
use kerf_api::event::EventType;
use kerf_sim::api::watch_delay::NONE;
use kerf_sim::sim::SimConfig;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;

/// A kerf-sim with one node of 4 CPUs whose kubelet defers every resize for `defer`, and
/// watches late by `watch_delay` (by `KERF_E2E_WATCH_DELAY` when that is [`NONE`]).
fn sim(defer: Duration, watch_delay: std::ops::Range<Duration>) -> SimConfig {
    SimConfig {
        nodes: 1,
        kubelet_ready_delay: Duration::from_millis(50),
        resize_defer: defer,
        watch_delay,
        ..SimConfig::default()
    }
}

/// Starts `web` (2 pods at 200m/256Mi), an in-place auto-patch policy with `fallback_after`
/// and an agent, with the recommendation 150m/200Mi.
async fn scenario(env: &mut Env, fallback_after: &str) -> anyhow::Result<()> {
    env.deployment("web", 2, "200m", "256Mi").await?;
    env.wait_ready("web", 2).await?;
    let mut spec = policy_spec(&env.ns, "auto-patch", "in-place");
    spec["apply"]["fallbackAfter"] = json!(fallback_after);
    env.policy("p", spec).await?;
    env.recommend(vec![env.recommendation("web", "150m", "200Mi", "0.9")?]);
    env.start_agent(&AgentOptions::default()).await
}

/// The hub's events of `web` after the change settled: one applied, no block, no skip
/// other than the applied values' NoSignificantChange, and `fallbacks` fallbacks; the
/// Kubernetes Events on the rsr report no block either. On kerf-sim, the agent sent
/// `writes` (resizes, template applies).
async fn assert_reported_once(
    env: &Env,
    fallbacks: usize,
    writes: (usize, usize),
) -> anyhow::Result<()> {
    // Longer than the policy's watch and cooldown: a spurious block would be out by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let applied = env.hub_events("web", EventType::Applied);
    assert_eq!(applied.len(), 1, "{applied:#?}");
    let blocked = env.hub_events("web", EventType::Blocked);
    assert!(blocked.is_empty(), "{blocked:#?}");
    let skipped = env.hub_events("web", EventType::Skipped);
    assert!(
        skipped.iter().all(|e| e.reason == "NoSignificantChange") && skipped.len() <= 1,
        "{skipped:#?}"
    );
    let fallback = env.hub_events("web", EventType::Fallback);
    assert_eq!(fallback.len(), fallbacks, "{fallback:#?}");
    let api: Api<K8sEvent> = Api::namespaced(env.client.clone(), &env.ns);
    let reasons: Vec<String> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|k| k.involved_object.kind.as_deref() == Some("RightsizingRecommendation"))
        .filter_map(|k| k.reason)
        .collect();
    for blocked in ["Cooldown", "FreezeWindow", "SingleReplicaUnsafe"] {
        assert!(!reasons.iter().any(|r| r == blocked), "{reasons:?}");
    }
    if env.sim.is_some() {
        assert_eq!(kerf_writes(env), writes, "(resizes, template applies)");
    }
    Ok(())
}

/// The writes the agent (field manager `kerf`) sent to the sim: resizes of `web`'s pods and
/// applies of its template.
fn kerf_writes(env: &Env) -> (usize, usize) {
    let Some(sim) = &env.sim else {
        return (0, 0);
    };
    let audit = sim.audit().snapshot();
    let writes = audit.writes_except_leases();
    let kerf = writes.iter().filter(|r| r.manager == "kerf");
    let resizes = kerf
        .clone()
        .filter(|r| r.path.contains("/pods/web-") && r.path.ends_with("/resize"))
        .count();
    let applies = kerf
        .filter(|r| r.path.ends_with("/deployments/web"))
        .count();
    (resizes, applies)
}

/// Waits until a pod of `web` shows its resize Deferred by the kubelet.
async fn wait_deferred(env: &Env) -> anyhow::Result<()> {
    e2e_support::eventually("a resize Deferred", e2e_support::WAIT, || async {
        let pods = env.pods("web").await.ok()?;
        pods.iter()
            .flat_map(|p| p.status.iter().flat_map(|s| s.conditions.iter().flatten()))
            .any(|c| c.type_ == "PodResizePending" && c.reason.as_deref() == Some("Deferred"))
            .then_some(())
    })
    .await
}

// portable
// rule: GR-38, design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_place_change_is_applied_and_reported_once() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-in-flight").await?;
    scenario(&mut env, "5s").await?;
    env.wait_phase("web", "Applied").await?;
    let want = json!({"cpu": "150m", "memory": "200Mi"});
    e2e_support::eventually("both pods resized", e2e_support::WAIT, || async {
        let pods = env.pods("web").await.ok()?;
        (pods.len() == 2 && pods.iter().all(|p| pod_resources(p)["requests"] == want)).then_some(())
    })
    .await?;
    assert_reported_once(&env, 0, (2, 0)).await?;
    env.stop_agent().await;
    Ok(())
}

// sim
// rule: AP-10, design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_watches_bring_no_second_resize_and_no_block() -> anyhow::Result<()> {
    let delay = Duration::from_millis(200)..Duration::from_millis(900);
    let mut env = Env::start_sim("e2e-late-watch", sim(Duration::ZERO, delay)).await?;
    scenario(&mut env, "5s").await?;
    env.wait_phase("web", "Applied").await?;
    assert_reported_once(&env, 0, (2, 0)).await?;
    env.stop_agent().await;
    Ok(())
}

// sim
// rule: AP-10, design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_the_kubelet_defers_for_a_while_is_followed_without_a_new_decision()
-> anyhow::Result<()> {
    let defer = Duration::from_secs(3);
    let mut env = Env::start_sim("e2e-deferred-while", sim(defer, NONE)).await?;
    scenario(&mut env, "20s").await?;
    wait_deferred(&env).await?;
    let rsr = env.wait_phase("web", "Applying").await?;
    assert!(
        e2e_support::condition(&rsr, "Blocked").is_none_or(|c| c["status"] != "True"),
        "{}",
        rsr["status"]
    );
    env.wait_phase("web", "Applied").await?;
    assert_reported_once(&env, 0, (2, 0)).await?;
    env.stop_agent().await;
    Ok(())
}

// sim
// rule: AP-10, AP-11, design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_deferred_past_fallback_after_falls_back_once_without_a_block()
-> anyhow::Result<()> {
    let defer = Duration::from_secs(120);
    let mut env = Env::start_sim("e2e-deferred-fallback", sim(defer, NONE)).await?;
    scenario(&mut env, "2s").await?;
    wait_deferred(&env).await?;
    let fallback = env.wait_hub_event("web", EventType::Fallback).await?;
    assert_eq!(fallback[0].reason, "ResizeDeferredTimeout", "{fallback:#?}");
    env.wait_phase("web", "Applied").await?;
    env.wait_ready("web", 2).await?;
    assert_reported_once(&env, 1, (2, 1)).await?;
    env.stop_agent().await;
    Ok(())
}
