//! e2e: changes the guardrails hold, a hub that went away, and a malformed policy among
//! good ones.

mod e2e_support;

use std::time::Duration;

use e2e_support::{
    AgentOptions, Env, Web, assert_pod_requests, assert_template_requests, condition,
    pod_resources, policy_spec,
};
use kerf_api::event::EventType;
use serde_json::json;

// portable
// rule: GR-38, GR-39, GR-40, EV-14, EV-51
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_confidence_blocks_and_keeps_the_values() -> anyhow::Result<()> {
    let mut env = Env::start_web(
        "e2e-blocked",
        Web::policy("auto", "auto-patch", "in-place").recommend("150m", "200Mi", "0.3"),
    )
    .await?;

    let rsr = env.wait_phase("web", "Blocked").await?;
    let blocked = condition(&rsr, "Blocked").cloned().unwrap_or_default();
    assert_eq!(blocked["status"], "True", "{}", rsr["status"]);
    assert_eq!(blocked["reason"], "LowConfidence");
    let message = blocked["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("0.3") || message.contains("confidence"),
        "{message}"
    );
    let events = env.wait_hub_event("web", EventType::Blocked).await?;
    assert_eq!(events[0].reason, "LowConfidence");
    assert_eq!(
        events[0].recommendation_id.as_deref(),
        rsr["spec"]["recommendationID"].as_str()
    );

    // Passes go on; nothing is written to the workload and the block is reported once.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(env.hub_events("web", EventType::Blocked).len(), 1);
    assert!(env.hub_events("web", EventType::Applied).is_empty());
    for p in env.pods("web").await? {
        assert_pod_requests(&p, "200m", "256Mi");
    }
    let d = env.deployment_json("web").await?;
    assert_template_requests(&d, "200m", "256Mi");
    assert!(e2e_support::manager(&d, "kerf").is_none());
    let rsr = env.wait_phase("web", "Blocked").await?;
    assert!(
        rsr["status"].get("change").is_none_or(|c| c.is_null()),
        "{}",
        rsr["status"]
    );
    env.stop_agent().await;
    Ok(())
}

// portable (the dev hub's down switch; the cluster is only read and written through the API)
// rule: EV-37, EV-49
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_down_longer_than_stale_after_blocks_new_changes() -> anyhow::Result<()> {
    let started = chrono::Utc::now();
    let mut env = Env::start("e2e-hubdown").await?;
    env.web(2).await?;
    env.policy_of("p", "audit", "in-place").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    let opts = AgentOptions {
        stale_after: "2s",
        ..AgentOptions::default()
    };
    env.start_agent(&opts).await?;
    env.wait_phase("web", "Skipped").await?;

    env.hub.set_down(true).await;
    // Time for polls to fail (the poll interval is 1 s): the agent then knows the hub is down.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The workload moves to auto-patch while the hub is unreachable.
    env.policy_of("p", "auto-patch", "in-place").await?;
    let rsr = env
        .wait_rsr("web", "Blocked HubUnreachable", e2e_support::WAIT, |r| {
            condition(r, "Blocked").is_some_and(|c| c["reason"] == "HubUnreachable")
        })
        .await?;
    assert_eq!(rsr["status"]["phase"], "Blocked", "{}", rsr["status"]);
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(1)).await;
    for p in env.pods("web").await? {
        assert_eq!(
            pod_resources(&p)["requests"]["cpu"],
            "200m",
            "changed while the hub was down"
        );
    }

    // Back up: the block is delivered from the outbox, and the change goes in.
    let back_up = chrono::Utc::now();
    env.hub.set_down(false).await;
    let blocked = env.wait_hub_event("web", EventType::Blocked).await?;
    assert!(
        blocked.iter().any(|e| e.reason == "HubUnreachable"),
        "{blocked:#?}"
    );
    // EV-49: the held event keeps the time it happened, not the time it was sent.
    for e in blocked.iter().filter(|e| e.reason == "HubUnreachable") {
        assert!(
            e.time >= started && e.time <= back_up,
            "time {} not within [{started}, {back_up}]",
            e.time
        );
    }
    env.wait_phase("web", "Applied").await?;
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: design D3
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_policy_is_named_invalid_and_the_good_ones_still_apply() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-badpolicy").await?;
    env.web(2).await?;
    env.policy_of("good", "auto-patch", "in-place").await?;
    // Passes the CRD schema (a real API server stores it) but not the agent's checks: the
    // freeze window's cron schedule has no hour 25 and its time zone does not exist.
    let mut bad = policy_spec("elsewhere", "auto-patch", "in-place");
    bad["apply"]["freezeWindows"] =
        json!([{"schedule": "0 25 * * *", "duration": "1h", "timeZone": "Mars/Olympus_Mons"}]);
    env.policy("bad", bad).await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    env.wait_phase("web", "Applied").await?;
    let policies = e2e_support::policy_api(&env.client);
    let bad = e2e_support::eventually("Valid=False on policy bad", e2e_support::WAIT, || async {
        let p = serde_json::to_value(policies.get("bad").await.ok()?).ok()?;
        let valid = condition(&p, "Valid")?.clone();
        (valid["status"] == "False").then_some(valid)
    })
    .await?;
    assert_eq!(bad["reason"], "InvalidSpec");
    let message = bad["message"].as_str().unwrap_or_default();
    for field in ["schedule", "timeZone"] {
        let path = format!("spec.apply.freezeWindows[0].{field}");
        assert!(message.contains(&path), "{path} not named in {message}");
    }
    let good = e2e_support::eventually("Valid=True on policy good", e2e_support::WAIT, || async {
        let p = serde_json::to_value(policies.get("good").await.ok()?).ok()?;
        let valid = condition(&p, "Valid")?.clone();
        (valid["status"] == "True").then_some(p)
    })
    .await?;
    assert_eq!(good["status"]["matchedWorkloads"], 1, "{}", good["status"]);
    env.stop_agent().await;
    Ok(())
}
