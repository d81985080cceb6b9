//! e2e: rollbacks that must go in whatever else holds: a pause of automation in the hub, and
//! a restore the API server refuses at first (retried until it goes in).

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, CLUSTER, Env, WAIT, condition, pod_resources};
use kerf_api::event::EventType;
use kerf_api::hub::PauseScope;
use kerf_sim::api::resize::faults::ADMIN_USER;
use serde_json::{Value, json};

/// A policy selecting `ns` in auto-patch, in-place, with a 1s learning period, a long
/// cooldown (nothing new goes in after the rollback) and a 60s watch.
fn policy(ns: &str) -> Value {
    e2e_support::watched_policy_spec(ns, "in-place", "10m", json!({"watchDuration": "60s"}))
}

/// Starts the agent on `web` (2 pods at 200m/256Mi, recommended 150m/200Mi) and waits
/// until the in-place change is Applied and its watch took the baselines. Returns the pods.
async fn applied_and_watching(env: &mut Env) -> anyhow::Result<Vec<String>> {
    env.web(2).await?;
    env.policy("auto", policy(&env.ns)).await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;
    // An automatic change starts a health watch (RB-01): HealthWatch reads Watching.
    env.wait_rsr("web", "Applied, watching, baselines taken", WAIT, |r| {
        r["status"]["change"]["state"] == "Applied"
            && condition(r, "HealthWatch").is_some_and(|c| c["reason"] == "Watching")
            && r["status"]["watch"]["baselines"]
                .as_object()
                .is_some_and(|b| !b.is_empty())
    })
    .await?;
    let pods = env.wait_ready("web", 2).await?;
    Ok(pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect())
}

// sim
// rule: RB-01, RB-29
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_of_automation_does_not_block_a_rollback() -> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-rollback-pause").await? else {
        return Ok(());
    };
    let pods = applied_and_watching(&mut env).await?;

    // Automation paused for the whole cluster; the agent has taken the pause in.
    env.hub.pause(CLUSTER, Some(PauseScope::Cluster));
    env.api_blocked("Paused").await?;

    env.oom_kill(&pods[0])?;
    let rsr = env
        .wait_rsr("web", "change RolledBack", WAIT, |r| {
            r["status"]["change"]["state"] == "RolledBack"
        })
        .await?;
    assert_eq!(rsr["status"]["lastRollback"]["reason"], "OOMKills");
    for p in env.wait_ready("web", 2).await? {
        assert_eq!(
            pod_resources(&p)["requests"]["memory"],
            "256Mi",
            "memory restored during the pause"
        );
    }
    let e = env.wait_hub_event("web", EventType::RolledBack).await?;
    assert_eq!(e[0].reason, "OOMKills");
    // The pause still holds for new changes.
    let api = env.rsr("api").await?.unwrap_or_default();
    assert_eq!(api["status"]["phase"], "Blocked", "{}", api["status"]);
    env.stop_agent().await;
    Ok(())
}

// sim
// rule: RB-36, RB-37, design D17
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_restore_is_retried_until_it_goes_in() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-rollback-retry").await?;
    let Some(faults) = env.sim.as_ref().map(|s| s.context().state.resize.clone()) else {
        env.sim_only("e2e-rollback-retry");
        return Ok(());
    };
    let pods = applied_and_watching(&mut env).await?;

    // RBAC now refuses pods/resize to the agent's user: the restore fails with 403.
    faults.deny_user(ADMIN_USER);
    let breached = std::time::Instant::now();
    env.oom_kill(&pods[0])?;
    env.wait_rsr("web", "a breach recorded", WAIT, |r| {
        r["status"]["lastRollback"]["reason"] == "OOMKills"
    })
    .await?;
    // After three refused attempts the change records `failed RollbackError` (RB-37).
    let failed = env.wait_hub_event("web", EventType::Failed).await?;
    assert_eq!(failed[0].reason, "RollbackError", "{failed:#?}");
    // Retried with backoff (1s, then 2s), not on every status update.
    assert!(
        breached.elapsed() >= Duration::from_millis(2500),
        "three attempts within {:?}",
        breached.elapsed()
    );
    // The RBAC denial raises a metric and the refused calls are counted (design D17).
    let metrics = env.agent_metrics()?;
    let denied = e2e_support::metric_sample(
        &metrics,
        "kerf_agent_permission_denied_total{resource=\"pods/resize\"}",
    );
    assert!(denied >= 3.0, "{denied} RBAC denials counted:\n{metrics}");
    let refused = e2e_support::metric_sample(
        &metrics,
        "kerf_agent_actions_total{action=\"rollback\",result=\"forbidden\"}",
    );
    assert_eq!(refused, denied, "{metrics}");
    assert_eq!(
        e2e_support::metric_sample(&metrics, "kerf_agent_rollbacks_total{reason=\"OOMKills\"}"),
        1.0,
        "{metrics}"
    );
    let rsr = env.rsr("web").await?.unwrap_or_default();
    assert_ne!(
        rsr["status"]["change"]["state"], "RolledBack",
        "the restore cannot have gone in yet: {}",
        rsr["status"]
    );
    for p in env.wait_ready("web", 2).await? {
        assert_eq!(pod_resources(&p)["requests"]["memory"], "200Mi");
    }

    // Allowed again: a later attempt restores memory on every pod.
    faults.allow_user(ADMIN_USER);
    env.wait_rsr("web", "change RolledBack", Duration::from_secs(60), |r| {
        r["status"]["change"]["state"] == "RolledBack"
    })
    .await?;
    for p in env.wait_ready("web", 2).await? {
        assert_eq!(pod_resources(&p)["requests"]["memory"], "256Mi");
    }
    let e = env.wait_hub_event("web", EventType::RolledBack).await?;
    assert_eq!(e.len(), 1, "{e:#?}");
    let metrics = env.agent_metrics()?;
    assert!(
        e2e_support::metric_sample(
            &metrics,
            "kerf_agent_actions_total{action=\"rollback\",result=\"ok\"}"
        ) >= 1.0,
        "{metrics}"
    );
    env.stop_agent().await;
    Ok(())
}
