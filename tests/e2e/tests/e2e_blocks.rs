//! e2e: the checks that hold a change back (freeze windows, the cluster-wide freeze,
//! cooldown, learning period) and the ones that skip it (tolerance, stale settings); none
//! of them touches the pods or the template.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, condition, pod_resources, policy_spec, template_resources};
use kerf_api::event::EventType;
use kerf_api::hub::Recommendation;
use serde_json::{Value, json};

/// The requests `web` starts with.
fn start_values() -> Value {
    json!({"cpu": "200m", "memory": "256Mi"})
}

/// Starts `web` (2 pods at 200m/256Mi), the policy `spec`, the recommendation `rec` and an
/// agent with `freeze_now`.
async fn scenario(
    ns: &str,
    spec: impl FnOnce(&str) -> Value,
    rec: impl FnOnce(&Env) -> anyhow::Result<Recommendation>,
    freeze_now: bool,
) -> anyhow::Result<Env> {
    let mut env = Env::start(ns).await?;
    env.web(2).await?;
    env.policy("p", spec(&env.ns)).await?;
    env.recommend(vec![rec(&env)?]);
    let mut settings = env.settings(&AgentOptions::default())?;
    settings.freeze.now = freeze_now;
    env.start_agent_with(settings).await;
    Ok(env)
}

/// GR-38: after a few more passes, the pods and the template still hold `requests`, the
/// template has no kerf field manager and nothing was applied.
async fn assert_unchanged(env: &Env, requests: &Value) -> anyhow::Result<()> {
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods = env.pods("web").await?;
    assert_eq!(pods.len(), 2);
    for p in &pods {
        assert_eq!(
            &pod_resources(p)["requests"],
            requests,
            "{:?}",
            p.metadata.name
        );
    }
    let d = env.deployment_json("web").await?;
    assert_eq!(&template_resources(&d)["requests"], requests);
    assert!(
        e2e_support::manager(&d, "kerf").is_none(),
        "{}",
        d["metadata"]
    );
    assert!(env.hub_events("web", EventType::Applied).is_empty());
    assert!(env.hub_events("web", EventType::Fallback).is_empty());
    Ok(())
}

/// Waits for phase Blocked with `reason` on the condition and the hub event, once.
async fn assert_blocked(env: &Env, reason: &str) -> anyhow::Result<()> {
    let rsr = env.wait_phase("web", "Blocked").await?;
    let blocked = condition(&rsr, "Blocked").cloned().unwrap_or_default();
    assert_eq!(blocked["status"], "True", "{}", rsr["status"]);
    assert_eq!(blocked["reason"], reason, "{}", rsr["status"]);
    let events = env.wait_hub_event("web", EventType::Blocked).await?;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].reason, reason);
    Ok(())
}

/// Waits for phase Skipped with `reason` at the hub, and no blocked event.
async fn assert_skipped(env: &Env, reason: &str) -> anyhow::Result<()> {
    env.wait_phase("web", "Skipped").await?;
    let events = env.wait_hub_event("web", EventType::Skipped).await?;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].reason, reason, "{:?}", events[0]);
    assert!(env.hub_events("web", EventType::Blocked).is_empty());
    Ok(())
}

/// A one-off window from an hour ago to an hour from now.
fn open_window() -> Value {
    let now = chrono::Utc::now();
    let fmt =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    json!({"start": fmt(now - chrono::Duration::hours(1)),
        "end": fmt(now + chrono::Duration::hours(1))})
}

// portable
// rule: AP-34, GR-38, GR-41
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_policy_freeze_window_blocks_with_freeze_window() -> anyhow::Result<()> {
    let spec = |ns: &str| {
        let mut s = policy_spec(ns, "auto-patch", "in-place");
        s["apply"]["freezeWindows"] = json!([open_window()]);
        s
    };
    let rec = |env: &Env| env.recommendation("web", "150m", "200Mi", "0.9");
    let mut env = scenario("e2e-freeze-policy", spec, rec, false).await?;
    assert_blocked(&env, "FreezeWindow").await?;
    assert_unchanged(&env, &start_values()).await?;
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: AP-40, AP-42, GR-38
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_freeze_blocks_and_no_policy_lifts_it() -> anyhow::Result<()> {
    // The policy opens a maintenance window now and sets no freeze window of its own.
    let spec = |ns: &str| {
        let mut s = policy_spec(ns, "auto-patch", "rollout");
        s["apply"]["maintenanceWindows"] = json!([open_window()]);
        s["apply"]["freezeWindows"] = json!([]);
        s
    };
    let rec = |env: &Env| env.recommendation("web", "150m", "200Mi", "0.9");
    let mut env = scenario("e2e-freeze-now", spec, rec, true).await?;
    assert_blocked(&env, "FreezeWindow").await?;
    assert_unchanged(&env, &start_values()).await?;
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: GR-21, GR-38, GR-40
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_blocks_a_second_change() -> anyhow::Result<()> {
    let spec = |ns: &str| {
        let mut s = policy_spec(ns, "auto-patch", "in-place");
        s["guardrails"]["cooldown"] = json!("1h");
        s
    };
    let rec = |env: &Env| env.recommendation("web", "150m", "200Mi", "0.9");
    let mut env = scenario("e2e-cooldown", spec, rec, false).await?;
    env.wait_phase("web", "Applied").await?;
    env.wait_hub_event("web", EventType::Applied).await?;
    let applied = json!({"cpu": "150m", "memory": "200Mi"});

    env.recommend_web("120m", "160Mi", "0.9")?;
    let rsr = env
        .wait_rsr("web", "Blocked Cooldown", e2e_support::WAIT, |r| {
            condition(r, "Blocked").is_some_and(|c| c["reason"] == "Cooldown")
        })
        .await?;
    // The first change's values are live: the phase stays Applied (GR-40).
    assert_eq!(rsr["status"]["phase"], "Applied", "{}", rsr["status"]);
    let blocked = env.wait_hub_event("web", EventType::Blocked).await?;
    assert_eq!(blocked[0].reason, "Cooldown");
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(env.hub_events("web", EventType::Applied).len(), 1);
    for p in env.pods("web").await? {
        assert_eq!(pod_resources(&p)["requests"], applied);
    }
    let d = env.deployment_json("web").await?;
    assert_eq!(template_resources(&d)["requests"], start_values());
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: GR-11, GR-38
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learning_period_longer_than_the_coverage_blocks() -> anyhow::Result<()> {
    // The recommendation covers 336h.
    let spec = |ns: &str| {
        let mut s = policy_spec(ns, "auto-patch", "in-place");
        s["guardrails"]["learningPeriod"] = json!("337h");
        s
    };
    let rec = |env: &Env| env.recommendation("web", "150m", "200Mi", "0.9");
    let mut env = scenario("e2e-learning", spec, rec, false).await?;
    assert_blocked(&env, "LearningPeriod").await?;
    assert_unchanged(&env, &start_values()).await?;
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: GR-23, GR-24, GR-38
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_within_the_tolerance_are_skipped() -> anyhow::Result<()> {
    // 2.5 % and 2.3 % away from 200m and 256Mi: within the default 5 %.
    let rec = |env: &Env| env.recommendation("web", "195m", "250Mi", "0.9");
    let spec = |ns: &str| policy_spec(ns, "auto-patch", "in-place");
    let mut env = scenario("e2e-tolerance", spec, rec, false).await?;
    assert_skipped(&env, "NoSignificantChange").await?;
    assert_unchanged(&env, &start_values()).await?;

    // CPU still within the tolerance, memory well beyond it: only memory moves.
    env.recommend_web("195m", "200Mi", "0.9")?;
    env.wait_phase("web", "Applied").await?;
    let want = json!({"cpu": "200m", "memory": "200Mi"});
    let pods = env.wait_ready("web", 2).await?;
    for p in &pods {
        assert_eq!(pod_resources(p)["requests"], want);
    }
    assert!(env.hub_events("web", EventType::Blocked).is_empty());
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: EV-29, GR-38
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recommendation_made_with_other_settings_is_skipped_as_stale() -> anyhow::Result<()> {
    // The policy asks for 25 % headroom; the hub's recommendation was made with 15 %.
    let spec = |ns: &str| {
        let mut s = policy_spec(ns, "auto-patch", "in-place");
        s["recommendation"] = json!({"headroomPercent": 25});
        s
    };
    let rec = |env: &Env| env.recommendation("web", "150m", "200Mi", "0.9");
    let mut env = scenario("e2e-stale", spec, rec, false).await?;
    assert_skipped(&env, "RecommendationStale").await?;
    assert_unchanged(&env, &start_values()).await?;

    // A later hub run made with the policy's settings replaces it and goes in.
    let mut fresh = serde_json::to_value(env.recommendation("web", "150m", "200Mi", "0.9")?)?;
    fresh["settings"]["headroomPercent"] = json!(25);
    fresh["recommendationID"] = json!("rec-web-fresh");
    env.recommend(vec![serde_json::from_value(fresh)?]);
    env.wait_phase("web", "Applied").await?;
    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    assert_eq!(
        applied[0].recommendation_id.as_deref(),
        Some("rec-web-fresh")
    );
    env.stop_agent().await;
    Ok(())
}

/// `env.recommendation("web", "150m", "200Mi", "0.9")` under id `id`, with `edit` applied
/// to its container.
fn rec_of(env: &Env, id: &str, edit: impl FnOnce(&mut Value)) -> anyhow::Result<Recommendation> {
    let mut rec = serde_json::to_value(env.recommendation("web", "150m", "200Mi", "0.9")?)?;
    rec["recommendationID"] = json!(id);
    edit(&mut rec["containers"][0]);
    Ok(serde_json::from_value(rec)?)
}

/// Publishes `rec` and waits until the rsr carries its id.
async fn publish(env: &Env, rec: Recommendation) -> anyhow::Result<()> {
    let id = rec.recommendation_id.clone();
    env.recommend(vec![rec]);
    env.wait_rsr("web", "the rsr shows the new id", e2e_support::WAIT, |r| {
        r["spec"]["recommendationID"] == id.as_str()
    })
    .await?;
    Ok(())
}

/// Waits until the hub holds `n` blocked events of `web`, then a little longer to be sure
/// no more follow; returns how many it holds.
async fn blocked_events_settle(env: &Env, n: usize) -> anyhow::Result<usize> {
    e2e_support::eventually("blocked events at the hub", e2e_support::WAIT, || async {
        (env.hub_events("web", EventType::Blocked).len() >= n).then_some(())
    })
    .await?;
    // Checks that no more blocked events come once `n` are there: a few passes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    Ok(env.hub_events("web", EventType::Blocked).len())
}

// portable
// rule: EV-14, EV-15, EV-16
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_is_reported_again_only_when_a_recommended_value_moves() -> anyhow::Result<()> {
    let spec = |ns: &str| {
        let mut s = policy_spec(ns, "auto-patch", "in-place");
        s["guardrails"]["learningPeriod"] = json!("337h");
        s
    };
    let rec = |env: &Env| rec_of(env, "rec-1", |_| {});
    let mut env = scenario("e2e-block-dedup", spec, rec, false).await?;
    assert_blocked(&env, "LearningPeriod").await?;
    env.wait_rsr(
        "web",
        "the block recorded as reported",
        e2e_support::WAIT,
        |r| {
            r["status"]["reported"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        },
    )
    .await?;

    // EV-16: a new recommendation id with the same values is quiet.
    publish(&env, rec_of(&env, "rec-2", |_| {})?).await?;
    assert_eq!(blocked_events_settle(&env, 1).await?, 1);

    // Only a limit appears: the values moved, the block is reported again.
    let limited = |c: &mut Value| c["limits"] = json!({"memory": "400Mi"});
    publish(&env, rec_of(&env, "rec-3", limited)?).await?;
    assert_eq!(blocked_events_settle(&env, 2).await?, 2);

    // Only removeLimits changes: reported again.
    let removed = |c: &mut Value| {
        c["limits"] = json!({"memory": "400Mi"});
        c["removeLimits"] = json!(["cpu"]);
    };
    publish(&env, rec_of(&env, "rec-4", removed)?).await?;
    assert_eq!(blocked_events_settle(&env, 3).await?, 3);
    assert_unchanged(&env, &start_values()).await?;
    env.stop_agent().await;
    Ok(())
}
