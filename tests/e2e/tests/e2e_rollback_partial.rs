//! e2e: after a partial rollback (an OOM kill restores memory only), the resource the
//! rollback kept is not applied again with the same values, not even after the cooldown
//! (RB-31, RB-35; docs/health.md). It keeps its new value where the rollback left it; a
//! recommendation whose values differ goes in after the cooldown, and the restored
//! resource stays where the rollback put it.

mod e2e_support;

use std::time::Duration;

use e2e_support::{
    AgentOptions, Env, WAIT, assert_pod_requests, assert_template_requests, event_cpu_requests,
    manager, template_resources,
};
use kerf_api::Resource;
use kerf_api::event::EventType;
use serde_json::{Value, json};

/// auto-patch with `strategy`, a 2s cooldown and a 30s watch.
fn policy(ns: &str, strategy: &str) -> Value {
    e2e_support::watched_policy_spec(ns, strategy, "2s", json!({"watchDuration": "30s"}))
}

/// OOM-kills container `app` of the first pod of `web`.
async fn oom(env: &Env) -> anyhow::Result<()> {
    let pods = env.wait_ready("web", 2).await?;
    env.oom_kill(pods[0].metadata.name.as_deref().unwrap_or_default())
}

/// Applies 150m/200Mi to `web` (200m/256Mi) with `strategy`, OOM-kills a pod once the
/// watch took its baselines and waits until memory is restored.
async fn partially_rolled_back(env: &mut Env, strategy: &str) -> anyhow::Result<Value> {
    env.web(2).await?;
    env.policy("partial", policy(&env.ns, strategy)).await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;
    env.wait_rsr("web", "Applied, watching with baselines", WAIT, |r| {
        let w = &r["status"]["watch"];
        r["status"]["change"]["state"] == "Applied"
            && w["end"].is_string()
            && w["baselines"].as_object().is_some_and(|b| b.len() >= 2)
    })
    .await?;
    oom(env).await?;
    let rsr = env
        .wait_rsr("web", "change RolledBack", WAIT, |r| {
            r["status"]["change"]["state"] == "RolledBack"
        })
        .await?;
    assert_eq!(
        rsr["status"]["lastRollback"]["resources"],
        json!(["memory"])
    );
    Ok(rsr)
}

/// After the cooldown has long passed, nothing new went in: one applied event.
async fn nothing_reapplied(env: &Env) -> anyhow::Result<()> {
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let applied = env.hub_events("web", EventType::Applied);
    assert_eq!(applied.len(), 1, "applied again: {applied:#?}");
    let rsr = env.rsr("web").await?.unwrap_or_default();
    assert_eq!(
        rsr["status"]["change"]["state"], "RolledBack",
        "{}",
        rsr["status"]
    );
    assert_eq!(rsr["status"]["phase"], "RolledBack", "{}", rsr["status"]);
    Ok(())
}

/// `kerf-agent report` after the in-place partial rollback counts what the pods run: cpu
/// 200m -> 150m on 2 pods applied, memory (back at 256Mi) not.
async fn report_counts_what_runs(env: &Env) -> anyhow::Result<()> {
    use kerf_agent::report::source::{Output, report_with};
    let text = report_with(env.client.clone(), Output::Json, chrono::Utc::now()).await?;
    let report: Value = serde_json::from_str(&text)?;
    let t = report["namespaces"]
        .as_array()
        .and_then(|list| list.iter().find(|n| n["namespace"] == env.ns.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(t["cpu"]["requested"], 2 * 150, "{t:#}");
    assert_eq!(t["cpu"]["applied"]["decrease"], 2 * 50, "{t:#}");
    assert_eq!(t["cpu"]["savings"]["decrease"], 0, "{t:#}");
    assert_eq!(t["memory"]["requested"], 2 * 256 * (1 << 20), "{t:#}");
    assert_eq!(t["memory"]["applied"]["decrease"], 0, "{t:#}");
    assert_eq!(
        t["memory"]["savings"]["decrease"],
        2 * 56 * (1 << 20),
        "{t:#}"
    );
    Ok(())
}

/// A recommendation with another cpu value and the memory value the rollback removed goes
/// in after the cooldown: cpu only.
async fn new_cpu_goes_in(env: &Env, from_cpu: &str) -> anyhow::Result<()> {
    env.recommend_web("120m", "200Mi", "0.9")?;
    let applied = e2e_support::eventually("a second applied event", WAIT, || {
        let found = env.hub_events("web", EventType::Applied);
        async move { (found.len() == 2).then_some(found) }
    })
    .await?;
    let second = applied
        .iter()
        .find(|e| e.recommendation_id.as_deref() == Some("rec-web-120m-200Mi"))
        .cloned()
        .ok_or_else(|| {
            anyhow::anyhow!("no applied event of the new recommendation: {applied:#?}")
        })?;
    assert_eq!(second.resources, vec![Resource::Cpu], "{second:#?}");
    assert_eq!(second.containers.len(), 1);
    let c = &second.containers[0];
    assert_eq!(event_cpu_requests(&second), (Some(from_cpu), Some("120m")));
    assert!(
        c.to.requests.memory.is_none(),
        "memory applied again: {c:?}"
    );
    Ok(())
}

// sim
// rule: RB-05, RB-23, RB-31, RB-35, GR-21
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_rollout_rollback_of_memory_cpu_keeps_its_value_and_is_not_reapplied()
-> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-partial-rollout").await? else {
        return Ok(());
    };
    partially_rolled_back(&mut env, "rollout").await?;
    // The template: memory restored, cpu keeps the change's value (RB-35), still kerf's.
    let d = env.deployment_json("web").await?;
    assert_template_requests(&d, "150m", "256Mi");
    assert!(manager(&d, "kerf").is_some());

    nothing_reapplied(&env).await?;
    let d = env.deployment_json("web").await?;
    assert_template_requests(&d, "150m", "256Mi");

    new_cpu_goes_in(&env, "150m").await?;
    env.wait_rsr("web", "the new change Applied", WAIT, |r| {
        r["status"]["change"]["state"] == "Applied"
    })
    .await?;
    let d = env.deployment_json("web").await?;
    assert_eq!(
        template_resources(&d)["requests"],
        json!({"cpu": "120m", "memory": "256Mi"}),
        "memory keeps the restored value"
    );
    env.stop_agent().await;
    Ok(())
}

// sim
// rule: RB-05, RB-21, RB-22, RB-31, RB-35, GR-21
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_in_place_rollback_of_memory_cpu_is_not_reapplied_with_the_same_value()
-> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-partial-inplace").await? else {
        return Ok(());
    };
    let rsr = partially_rolled_back(&mut env, "in-place").await?;
    assert!(rsr["status"]["live"].is_null(), "{}", rsr["status"]);
    // The running pods keep the cpu of the change; memory is resized back.
    let pods = env.wait_ready("web", 2).await?;
    for p in &pods {
        assert_pod_requests(p, "150m", "256Mi");
    }

    nothing_reapplied(&env).await?;
    for p in env.wait_ready("web", 2).await? {
        assert_pod_requests(&p, "150m", "256Mi");
    }
    report_counts_what_runs(&env).await?;
    let rsr = env.rsr("web").await?.unwrap_or_default();
    assert!(rsr["status"]["live"].is_null(), "{}", rsr["status"]);

    // In place, the new change starts from the template's cpu (what new pods get).
    new_cpu_goes_in(&env, "200m").await?;
    let rsr = env
        .wait_rsr("web", "the new change Applied", WAIT, |r| {
            r["status"]["change"]["state"] == "Applied"
        })
        .await?;
    let live = &rsr["status"]["live"]["containers"][0]["requests"];
    assert_eq!(live, &json!({"cpu": "120m", "memory": "256Mi"}), "{live}");
    env.stop_agent().await;
    Ok(())
}
