//! e2e: the canary of an in-place change (`apply.canary`, docs/apply.md). One pod of three
//! is resized first and watched for the canary's duration; the other two follow only then,
//! in the same change with one `applied` event. An OOM kill on the canary pod restores that
//! pod alone. An agent killed during the canary is followed by one that continues the same
//! canary from the intent (design D25).

mod e2e_support;

use std::time::Duration;

use chrono::{DateTime, Utc};
use e2e_support::{AgentOptions, Env, WAIT, pod_resources};
use kerf_api::event::EventType;
use kerf_sim::kubelet::{Fault, inject};
use serde_json::{Value, json};

/// An auto-patch, in-place policy over `ns` with a canary of one pod watched for
/// `canary`, a 2s health watch afterwards and a `cooldown` between changes.
fn policy(ns: &str, canary: &str, cooldown: &str) -> Value {
    let rollback = json!({"watchDuration": "2s"});
    let mut spec = e2e_support::watched_policy_spec(ns, "in-place", cooldown, rollback);
    spec["apply"]["canary"] = json!({"pods": 1, "duration": canary});
    spec
}

/// Deployment `web` with three pods at 200m/256Mi, the canary policy, a recommendation of
/// 150m/200Mi and the agent.
async fn start(scenario: &str, canary: &str, cooldown: &str) -> anyhow::Result<Env> {
    let mut env = Env::start(scenario).await?;
    env.web(3).await?;
    env.policy("canary", policy(&env.ns, canary, cooldown))
        .await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;
    Ok(env)
}

/// Waits until the canary pods run the new values and their watch took its baselines;
/// returns the rsr.
async fn canary_watching(env: &Env) -> anyhow::Result<Value> {
    env.wait_rsr("web", "canary Watching, baselines taken", WAIT, |r| {
        let k = &r["status"]["change"]["canary"];
        k["stage"] == "Watching"
            && k["watch"]["baselines"]
                .as_object()
                .is_some_and(|b| !b.is_empty())
    })
    .await
}

/// The canary pods the intent records.
fn canary_pods(rsr: &Value) -> Vec<String> {
    rsr["status"]["change"]["canary"]["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect()
}

fn time(v: &Value) -> anyhow::Result<DateTime<Utc>> {
    let s = v
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("not a time: {v}"))?;
    Ok(DateTime::parse_from_rfc3339(s)?.with_timezone(&Utc))
}

/// The spec requests of every pod of `web`, by pod name.
async fn requests(env: &Env) -> anyhow::Result<Vec<(String, Value)>> {
    Ok(env
        .wait_ready("web", 3)
        .await?
        .iter()
        .map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            (name, pod_resources(p)["requests"].clone())
        })
        .collect())
}

/// OOM-kills container `app` of `pod`.
fn oom(env: &Env, pod: &str) -> anyhow::Result<()> {
    let Some(sim) = env.sim.as_ref() else {
        anyhow::bail!("fault injection needs kerf-sim");
    };
    inject(
        sim.context(),
        Fault::OomKill {
            namespace: env.ns.clone(),
            pod: pod.to_owned(),
            container: "app".to_owned(),
        },
    )?;
    Ok(())
}

fn series(metrics: &str, action: &str) -> f64 {
    let s = format!("kerf_agent_actions_total{{action=\"{action}\",result=\"ok\"}}");
    e2e_support::metric_sample(metrics, &s)
}

// sim
// design D16, D25 (apply.canary)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_pod_is_resized_alone_and_the_others_only_after_its_duration() -> anyhow::Result<()>
{
    let mut env = start("e2e-canary", "3s", "10m").await?;
    if !env.sim_only("e2e-canary") {
        return Ok(());
    }
    let rsr = canary_watching(&env).await?;
    let canary = canary_pods(&rsr);
    assert_eq!(canary.len(), 1, "{}", rsr["status"]);
    assert_eq!(rsr["status"]["phase"], "Applying");
    assert_eq!(rsr["status"]["summary"]["reason"], "CanaryWatching");
    let watch = &rsr["status"]["change"]["canary"]["watch"];
    let end = time(&watch["end"])?;
    assert_eq!(end - time(&watch["start"])?, chrono::Duration::seconds(3));
    // While the canary is watched only its pod runs the new values; the webhook has none.
    assert!(rsr["status"]["live"].is_null(), "{}", rsr["status"]);
    for (pod, req) in requests(&env).await? {
        let want = if canary.contains(&pod) {
            "150m"
        } else {
            "200m"
        };
        assert_eq!(req["cpu"], want, "pod {pod} during the canary");
    }
    assert!(env.hub_events("web", EventType::Applied).is_empty());

    let rsr = env.wait_phase("web", "Applied").await?;
    let change = &rsr["status"]["change"];
    assert_eq!(change["canary"]["stage"], "Passed", "{change}");
    assert!(
        time(&change["appliedAt"])? >= end,
        "the other pods went in before the canary's end: {change}"
    );
    assert_eq!(
        change["progress"],
        json!({"podsAccepted": 3, "podsTotal": 3})
    );
    for (pod, req) in requests(&env).await? {
        assert_eq!(req, json!({"cpu": "150m", "memory": "200Mi"}), "pod {pod}");
    }
    env.wait_hub_event("web", EventType::Applied).await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(env.hub_events("web", EventType::Applied).len(), 1);
    let metrics = env.agent_metrics()?;
    assert_eq!(series(&metrics, "resize"), 3.0, "{metrics}");
    env.stop_agent().await;
    Ok(())
}

// sim
// rule: RB-05, RB-22, RB-31
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_kill_on_the_canary_restores_it_alone() -> anyhow::Result<()> {
    let mut env = start("e2e-canary-oom", "60s", "1s").await?;
    if !env.sim_only("e2e-canary-oom") {
        return Ok(());
    }
    let rsr = canary_watching(&env).await?;
    let canary = canary_pods(&rsr);
    let id = rsr["status"]["change"]["id"].clone();
    oom(&env, &canary[0])?;

    let rsr = env
        .wait_rsr("web", "change RolledBack", WAIT, |r| {
            r["status"]["change"]["state"] == "RolledBack"
        })
        .await?;
    assert_eq!(rsr["status"]["change"]["canary"]["stage"], "RolledBack");
    assert_eq!(rsr["status"]["lastRollback"]["reason"], "OOMKills");
    assert_eq!(rsr["status"]["phase"], "RolledBack");
    // OOM kills restore memory (RB-05) on the canary pod; the others were never resized.
    for (pod, req) in requests(&env).await? {
        let want = if canary.contains(&pod) {
            json!({"cpu": "150m", "memory": "256Mi"})
        } else {
            json!({"cpu": "200m", "memory": "256Mi"})
        };
        assert_eq!(req, want, "pod {pod}");
    }
    let e = env.wait_hub_event("web", EventType::RolledBack).await?;
    assert_eq!(e[0].reason, "OOMKills");
    assert_eq!(e[0].details.get("canary").map(String::as_str), Some("true"));
    assert_eq!(e[0].details.get("pods"), Some(&canary[0]));
    assert!(env.hub_events("web", EventType::Applied).is_empty());
    let metrics = env.agent_metrics()?;
    assert_eq!(series(&metrics, "resize"), 1.0, "{metrics}");
    assert_eq!(series(&metrics, "rollback"), 1.0, "{metrics}");

    // RB-31: past the 1s cooldown the same values are not applied again.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let rsr = env.rsr("web").await?.unwrap_or_default();
    assert_eq!(rsr["status"]["change"]["id"], id, "{}", rsr["status"]);
    let metrics = env.agent_metrics()?;
    assert_eq!(series(&metrics, "resize"), 1.0, "{metrics}");
    env.stop_agent().await;
    Ok(())
}

// sim
// design D25 (apply.canary)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_during_the_canary_is_followed_by_one_that_continues_it()
-> anyhow::Result<()> {
    let mut env = start("e2e-canary-restart", "4s", "10m").await?;
    if !env.sim_only("e2e-canary-restart") {
        return Ok(());
    }
    let rsr = canary_watching(&env).await?;
    env.kill_agent().await;
    let before = rsr["status"]["change"].clone();

    env.start_agent(&AgentOptions::default()).await?;
    let rsr = env.wait_phase("web", "Applied").await?;
    let change = &rsr["status"]["change"];
    assert_eq!(change["id"], before["id"], "a second change was made");
    assert_eq!(change["canary"]["pods"], before["canary"]["pods"]);
    assert_eq!(
        change["canary"]["watch"]["end"], before["canary"]["watch"]["end"],
        "the canary started again"
    );
    assert!(time(&change["appliedAt"])? >= time(&before["canary"]["watch"]["end"])?);
    for (pod, req) in requests(&env).await? {
        assert_eq!(req, json!({"cpu": "150m", "memory": "200Mi"}), "pod {pod}");
    }
    // The new agent resized only the two pods the canary held back.
    let metrics = env.agent_metrics()?;
    assert_eq!(series(&metrics, "resize"), 2.0, "{metrics}");
    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(env.hub_events("web", EventType::Applied).len(), 1);
    assert_eq!(
        Some(applied[0].id.to_string().as_str()),
        before["eventIds"]["applied"].as_str()
    );
    env.stop_agent().await;
    Ok(())
}
