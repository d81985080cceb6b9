//! e2e: the health watch after a change and the rollback of a breached one, driven by
//! kerf-sim's injected container faults (OOM kills, restarts).

mod e2e_support;

use std::sync::Arc;
use std::time::Duration;

use e2e_support::{
    AgentOptions, Env, WAIT, assert_pod_requests, condition, pod_resources, template_resources,
};
use kerf_agent::clock::SystemClock;
use kerf_agent::runtime::Agent;
use kerf_api::event::EventType;
use serde_json::{Value, json};

/// A policy spec selecting `ns` in auto-patch with `strategy`, a 1s learning period,
/// `cooldown` and the given rollback settings. The rollback scenarios use a long cooldown, so
/// nothing new goes in while they look at the rolled-back change.
fn policy(ns: &str, strategy: &str, cooldown: &str, rollback: Value) -> Value {
    e2e_support::watched_policy_spec(ns, strategy, cooldown, rollback)
}

/// Injects `fault` (`oom` or `restart`) into container `app` of `pod`.
fn fault(env: &Env, kind: &str, pod: &str) -> anyhow::Result<()> {
    match kind {
        "oom" => env.oom_kill(pod),
        _ => env.restart_container(pod),
    }
}

/// Waits until `name` is Applied and its watch took the baselines (so a fault injected now
/// counts against them); with `ended`, also until the watch has an end (a rollout done).
async fn wait_watching(env: &Env, name: &str, ended: bool) -> anyhow::Result<Value> {
    env.wait_rsr(name, "Applied, baselines taken", WAIT, |r| {
        let w = &r["status"]["watch"];
        r["status"]["change"]["state"] == "Applied"
            && w["baselines"].as_object().is_some_and(|b| !b.is_empty())
            && (!ended || w["end"].is_string())
    })
    .await
}

/// `web` (2 pods) under an in-place auto-patch policy with a 10m cooldown and a health watch
/// of `watch`, recommended 150m/200Mi, the agent started with `opts`, until the change is
/// Applied and its watch took the baselines. Returns the pods from before the change.
async fn in_place_watched(
    env: &mut Env,
    watch: &str,
    opts: &AgentOptions,
) -> anyhow::Result<Vec<k8s_openapi::api::core::v1::Pod>> {
    let before = env.web(2).await?;
    let rollback = json!({"watchDuration": watch});
    env.policy("auto", policy(&env.ns, "in-place", "10m", rollback))
        .await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(opts).await?;
    wait_watching(env, "web", false).await?;
    Ok(before)
}

/// Waits until the change of `name` is RolledBack (restored, not only marked).
async fn wait_rolled_back(env: &Env, name: &str) -> anyhow::Result<Value> {
    env.wait_rsr(name, "change RolledBack", WAIT, |r| {
        r["status"]["change"]["state"] == "RolledBack"
    })
    .await
}

// sim
// rule: RB-05, RB-11, RB-20, RB-22, RB-25, RB-27, RB-40, EV-08, EV-59
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_kill_after_an_in_place_memory_change_resizes_memory_back() -> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-health-oom").await? else {
        return Ok(());
    };
    let before = in_place_watched(&mut env, "30s", &AgentOptions::default()).await?;
    env.wait_hub_event("web", EventType::Applied).await?;

    let victim = before[0].metadata.name.clone().unwrap_or_default();
    fault(&env, "oom", &victim)?;

    let rsr = wait_rolled_back(&env, "web").await?;
    let st = &rsr["status"];
    assert_eq!(st["phase"], "RolledBack", "{st}");
    assert!(st.get("live").is_none_or(Value::is_null), "{st}");
    assert_eq!(st["lastRollback"]["reason"], "OOMKills", "{st}");
    assert_eq!(st["lastRollback"]["resources"], json!(["memory"]), "{st}");
    let hw = condition(&rsr, "HealthWatch").cloned().unwrap_or_default();
    assert_eq!(hw["status"], "False", "{hw}");
    assert_eq!(hw["reason"], "OOMKills", "{hw}");

    // The same pods, memory resized back; CPU keeps the change (memory only, RB-05).
    let pods = env.wait_ready("web", 2).await?;
    for p in &pods {
        assert_eq!(
            pod_resources(p)["requests"],
            json!({"cpu": "150m", "memory": "256Mi"}),
            "pod {:?}",
            p.metadata.name
        );
    }

    let events = env.wait_hub_event("web", EventType::RolledBack).await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = env.hub_events("web", EventType::RolledBack);
    assert_eq!(again.len(), 1, "{again:#?}");
    let e = &events[0];
    assert_eq!(e.reason, "OOMKills");
    assert_eq!(e.strategy.as_deref(), Some("in-place"));
    assert_eq!(e.details.get("oomKills").map(String::as_str), Some("1"));
    assert_eq!(
        e.details.get("watchDuration").map(String::as_str),
        Some("30s")
    );
    assert_eq!(e.containers.len(), 1, "{e:#?}");
    let restored = e.containers[0].to.requests.memory.as_ref();
    assert_eq!(restored.map(|q| q.0.as_str()), Some("256Mi"), "{e:#?}");
    assert_eq!(
        st["change"]["eventIds"]["rolledBack"],
        e.id.to_string(),
        "the event carries the id the intent recorded"
    );

    let k8s = env.k8s_events(None, Some("OOMKills")).await?;
    assert_eq!(k8s.len(), 1, "{k8s:#?}");
    assert_eq!(k8s[0].type_.as_deref(), Some("Warning"));
    env.stop_agent().await;
    Ok(())
}

// sim
// rule: RB-07, RB-23, RB-25, EV-59
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_after_a_rollout_roll_the_template_back() -> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-health-restarts").await? else {
        return Ok(());
    };
    env.web(2).await?;
    let rollback = json!({"watchDuration": "30s", "restarts": 2});
    env.policy("auto", policy(&env.ns, "rollout", "10m", rollback))
        .await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;
    // The watch of a rollout gets its end once the rollout completed (design D23).
    wait_watching(&env, "web", true).await?;
    let pods = env.wait_ready("web", 2).await?;
    for p in &pods {
        assert_eq!(pod_resources(p)["requests"]["memory"], "200Mi");
    }

    let name = |i: usize| pods[i].metadata.name.clone().unwrap_or_default();
    fault(&env, "restart", &name(0))?;
    fault(&env, "restart", &name(1))?;

    let rsr = wait_rolled_back(&env, "web").await?;
    let st = &rsr["status"];
    assert_eq!(st["phase"], "RolledBack", "{st}");
    assert_eq!(st["lastRollback"]["reason"], "Restarts", "{st}");
    assert_eq!(
        st["lastRollback"]["resources"],
        json!(["cpu", "memory"]),
        "every touched resource goes back (RB-07)"
    );
    let hw = condition(&rsr, "HealthWatch").cloned().unwrap_or_default();
    assert_eq!(hw["reason"], "Restarts", "{hw}");
    let d = env.deployment_json("web").await?;
    assert_eq!(
        template_resources(&d)["requests"],
        json!({"cpu": "200m", "memory": "256Mi"}),
        "the template is patched back"
    );
    let e = env.wait_hub_event("web", EventType::RolledBack).await?;
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].reason, "Restarts");
    assert_eq!(e[0].strategy.as_deref(), Some("rollout"));
    assert_eq!(e[0].details.get("restarts").map(String::as_str), Some("2"));
    assert_eq!(
        e[0].details.get("watchDuration").map(String::as_str),
        Some("30s")
    );
    env.stop_agent().await;
    Ok(())
}

// sim
// rule: RB-19, EV-18
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_without_a_signal_ends_healthy_and_the_next_change_goes_in() -> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-health-healthy").await? else {
        return Ok(());
    };
    env.web(2).await?;
    let rollback = json!({"watchDuration": "2s"});
    env.policy("auto", policy(&env.ns, "in-place", "1s", rollback))
        .await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;
    let first = env.wait_phase("web", "Applied").await?;
    let first_id = first["status"]["change"]["id"].clone();

    // A restart below the threshold (3) is no breach.
    let pods = env.wait_ready("web", 2).await?;
    wait_watching(&env, "web", false).await?;
    fault(
        &env,
        "restart",
        pods[0].metadata.name.as_deref().unwrap_or(""),
    )?;

    let rsr = env
        .wait_rsr("web", "HealthWatch True/Healthy", WAIT, |r| {
            condition(r, "HealthWatch").is_some_and(|c| c["status"] == "True")
        })
        .await?;
    let hw = condition(&rsr, "HealthWatch").cloned().unwrap_or_default();
    assert_eq!(hw["reason"], "Healthy", "{hw}");
    assert_eq!(rsr["status"]["change"]["state"], "Applied");
    assert!(env.hub_events("web", EventType::RolledBack).is_empty());

    // A later recommendation goes in once the cooldown passed (design D11).
    env.recommend_web("120m", "180Mi", "0.9")?;
    let rsr = env
        .wait_rsr("web", "a second change Applied", WAIT, |r| {
            r["status"]["change"]["id"] != first_id && r["status"]["phase"] == "Applied"
        })
        .await?;
    assert_eq!(
        rsr["status"]["change"]["recommendationID"], "rec-web-120m-180Mi",
        "{}",
        rsr["status"]
    );
    for p in env.wait_ready("web", 2).await? {
        assert_pod_requests(&p, "120m", "180Mi");
    }
    env.stop_agent().await;
    Ok(())
}

// sim
// rule: RB-02, RB-28, RB-30
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_runs_while_the_cluster_is_frozen_and_the_hub_is_down() -> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-health-frozen").await? else {
        return Ok(());
    };
    let opts = AgentOptions {
        stale_after: "2s",
        ..AgentOptions::default()
    };
    let pods = in_place_watched(&mut env, "60s", &opts).await?;
    env.wait_hub_event("web", EventType::Applied).await?;
    env.stop_agent().await;

    // The cluster frozen (--freeze-now): a new change of another workload is blocked.
    let mut settings = env.settings(&opts)?;
    settings.freeze.now = true;
    let agent = Agent::start(env.client.clone(), settings, Arc::new(SystemClock)).await?;
    env.api_blocked("FreezeWindow").await?;
    // And the hub unreachable for longer than staleAfter.
    env.hub.set_down(true).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    fault(&env, "oom", pods[0].metadata.name.as_deref().unwrap_or(""))?;
    let rsr = wait_rolled_back(&env, "web").await?;
    assert_eq!(rsr["status"]["phase"], "RolledBack", "{}", rsr["status"]);
    let api = env.rsr("api").await?.unwrap_or_default();
    assert_eq!(api["status"]["phase"], "Blocked", "{}", api["status"]);
    for p in env.wait_ready("web", 2).await? {
        assert_eq!(pod_resources(&p)["requests"]["memory"], "256Mi");
    }
    let pending = rsr["status"]["change"]["pendingEvents"].as_array().cloned();
    assert!(
        pending.is_some_and(|p| p.iter().any(|e| e["type"] == "rolled_back")),
        "the event waits in pendingEvents: {}",
        rsr["status"]
    );
    assert!(env.hub_events("web", EventType::RolledBack).is_empty());

    // The hub back: the buffered event is delivered, once.
    env.hub.set_down(false).await;
    let e = env.wait_hub_event("web", EventType::RolledBack).await?;
    assert_eq!(e[0].reason, "OOMKills");
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(env.hub_events("web", EventType::RolledBack).len(), 1);
    env.wait_rsr("web", "pendingEvents emptied", WAIT, |r| {
        r["status"]["change"]["pendingEvents"]
            .as_array()
            .is_none_or(Vec::is_empty)
    })
    .await?;
    agent.stop().await;
    Ok(())
}

// sim
// rule: RB-11
// The hub is polled once an hour and the watch runs 30 s, so no poll, resync (60 s) or
// watch end comes within the 5 s the rollback is given: only the pod update that shows the
// OOM kill can start it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_kill_is_acted_on_at_the_pod_update_that_shows_it() -> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-health-at-update").await? else {
        return Ok(());
    };
    let opts = AgentOptions {
        poll_interval: "1h",
        ..AgentOptions::default()
    };
    let before = in_place_watched(&mut env, "30s", &opts).await?;

    let victim = before[0].metadata.name.clone().unwrap_or_default();
    fault(&env, "oom", &victim)?;
    let rsr = env
        .wait_rsr(
            "web",
            "RolledBack within 5 s",
            Duration::from_secs(5),
            |r| r["status"]["change"]["state"] == "RolledBack",
        )
        .await?;
    assert_eq!(rsr["status"]["lastRollback"]["reason"], "OOMKills");
    env.stop_agent().await;
    Ok(())
}
