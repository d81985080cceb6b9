//! e2e: in-place changes that cannot go in fall back to a rollout: at once when the resize
//! is Infeasible (the kubelet's status before 1.36, the 403 at admission on 1.36), after
//! apply.fallbackAfter when it stays Deferred; the workload keeps the rollout strategy.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, pod_resources, policy_spec, template_resources};
use kerf_api::event::{Event, EventType};
use kerf_sim::sim::SimConfig;
use serde_json::{Value, json};

/// A kerf-sim serving Kubernetes 1.`minor` with `nodes` nodes of 4 CPUs.
fn sim(minor: u32, nodes: usize) -> SimConfig {
    SimConfig {
        nodes,
        node_cpu: "4".into(),
        node_memory: "16Gi".into(),
        kubernetes_minor: minor,
        kubelet_ready_delay: Duration::from_millis(50),
        ..SimConfig::default()
    }
}

/// Whether a CPU quantity written as `cores` or millicores equals `milli`.
fn cpu_is(v: &Value, milli: u32) -> bool {
    let Some(s) = v.as_str() else {
        return false;
    };
    let parsed = s
        .strip_suffix('m')
        .map_or_else(|| s.parse::<u32>().map(|c| c * 1000), str::parse::<u32>);
    parsed.is_ok_and(|m| m == milli)
}

/// Checks what every fallback shows: the event with `reason` and strategy rollout, the rsr's
/// effective strategy rollout with the reason, and the template carrying `cpu_milli`.
async fn assert_fell_back(env: &Env, reason: &str, cpu_milli: u32) -> anyhow::Result<Event> {
    let events = env.wait_hub_event("web", EventType::Fallback).await?;
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = events[0].clone();
    assert_eq!(e.reason, reason, "{e:?}");
    assert_eq!(e.strategy.as_deref(), Some("rollout"), "{e:?}");
    let rsr = env
        .wait_rsr(
            "web",
            "effective strategy rollout",
            e2e_support::WAIT,
            |r| r["status"]["strategy"]["effective"] == "rollout",
        )
        .await?;
    let strategy = &rsr["status"]["strategy"];
    assert_eq!(strategy["configured"], "in-place", "{}", rsr["status"]);
    assert_eq!(strategy["fallbackReason"], reason, "{}", rsr["status"]);
    let d = e2e_support::eventually("the template patched", e2e_support::WAIT, || async {
        let d = env.deployment_json("web").await.ok()?;
        cpu_is(&template_resources(&d)["requests"]["cpu"], cpu_milli).then_some(d)
    })
    .await?;
    assert!(
        e2e_support::manager(&d, "kerf").is_some(),
        "{}",
        d["metadata"]
    );
    Ok(e)
}

// sim
// rule: AP-08, AP-10, AP-11, EV-44, EV-53
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infeasible_on_1_35_falls_back_to_a_rollout_at_once() -> anyhow::Result<()> {
    let mut env = Env::start_sim("e2e-infeasible-135", sim(35, 3)).await?;
    env.web(2).await?;
    env.policy_of("auto", "auto-patch", "in-place").await?;
    // More CPU than any node has: the 1.35 kubelet reports Infeasible.
    env.recommend_web("5", "256Mi", "0.9")?;
    let started = chrono::Utc::now();
    env.start_agent(&AgentOptions::default()).await?;

    let e = assert_fell_back(&env, "ResizeInfeasible", 5000).await?;
    let message = e.message.clone().unwrap_or_default();
    assert!(message.contains("Infeasible"), "{message}");
    // fallbackAfter is 5s in the policy: an Infeasible resize does not wait for it.
    assert!(e.time - started < chrono::Duration::seconds(5), "{e:?}");
    env.stop_agent().await;
    Ok(())
}

// sim
// rule: AP-08, AP-10, AP-11, EV-44, EV-53, design D17
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_403_at_admission_on_1_36_falls_back_like_infeasible() -> anyhow::Result<()> {
    let mut env = Env::start_sim("e2e-infeasible-136", sim(36, 3)).await?;
    let before = env.web(2).await?;
    env.policy_of("auto", "auto-patch", "in-place").await?;
    env.recommend_web("5", "256Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    let e = assert_fell_back(&env, "ResizeInfeasible", 5000).await?;
    let message = e.message.clone().unwrap_or_default();
    assert!(
        message.contains("node didn't have enough allocatable"),
        "the server's message: {message}"
    );
    // The refused resize left the running pods as they were.
    let pods = env.pods("web").await?;
    for p in pods
        .iter()
        .filter(|p| before.iter().any(|b| b.metadata.name == p.metadata.name))
    {
        assert_eq!(pod_resources(p)["requests"]["cpu"], "200m");
    }
    env.stop_agent().await;
    Ok(())
}

// sim
// rule: AP-09, AP-10, AP-11, AP-12, AP-13, EV-45, EV-53
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_falls_back_after_fallback_after_and_rollout_stays() -> anyhow::Result<()> {
    let mut env = Env::start_sim("e2e-deferred-timeout", sim(36, 1)).await?;
    // One node of 4 CPUs: 2.5 taken by another pod, 1 by web; web asking 2 fits the node
    // but not now, so the kubelet keeps the resize Deferred.
    env.deployment("filler", 1, "2500m", "64Mi").await?;
    env.wait_ready("filler", 1).await?;
    env.deployment("web", 1, "1", "256Mi").await?;
    env.wait_ready("web", 1).await?;
    let mut spec = policy_spec(&env.ns, "auto-patch", "in-place");
    spec["apply"]["fallbackAfter"] = json!("2s");
    env.policy("auto", spec).await?;
    env.recommend_web("2", "256Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    let rsr = env
        .wait_rsr("web", "a first resize", e2e_support::WAIT, |r| {
            r["status"]["change"]["firstResizeAt"].is_string()
        })
        .await?;
    let first: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(rsr["status"]["change"]["firstResizeAt"].clone())?;
    let e = assert_fell_back(&env, "ResizeDeferredTimeout", 2000).await?;
    assert!(
        e.time - first >= chrono::Duration::seconds(2),
        "fell back {:?} after the first resize",
        e.time - first
    );
    let message = e.message.clone().unwrap_or_default();
    assert!(message.contains("Deferred"), "{message}");

    // Room on the node: the rollout finishes.
    env.deployments()
        .delete("filler", &kube::api::DeleteParams::default())
        .await?;
    env.wait_phase("web", "Applied").await?;
    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    assert_eq!(applied[0].strategy.as_deref(), Some("rollout"));

    // The next change goes in as a rollout too, without trying in-place first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    env.recommend_web("1500m", "256Mi", "0.9")?;
    let second = e2e_support::eventually(
        "a second applied event",
        Duration::from_secs(15),
        || async {
            let all = env.hub_events("web", EventType::Applied);
            (all.len() == 2).then_some(all)
        },
    )
    .await?;
    assert_eq!(
        second[1].strategy.as_deref(),
        Some("rollout"),
        "{second:#?}"
    );
    let rsr = env.wait_phase("web", "Applied").await?;
    assert_eq!(
        rsr["status"]["change"]["strategy"], "rollout",
        "{}",
        rsr["status"]
    );
    assert_eq!(rsr["status"]["strategy"]["effective"], "rollout");
    let d = env.deployment_json("web").await?;
    assert!(cpu_is(&template_resources(&d)["requests"]["cpu"], 1500));
    assert_eq!(env.hub_events("web", EventType::Fallback).len(), 1);
    env.stop_agent().await;
    Ok(())
}
