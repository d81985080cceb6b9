//! e2e: an agent stopped right after recording the intent; a new one finishes the change
//! once (design D25). With `--features failpoints` the stop is exact (fail point
//! `after-intent=error`); without, the agent is killed as soon as `status.change` shows.
//! Alone in its file: fail points are process-wide.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, pod_resources, policy_spec};
use kerf_api::event::EventType;
use serde_json::json;

// portable
// rule: EV-12, design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_agent_resumes_the_recorded_change_once() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-restart").await?;
    env.deployment("web", 2, "200m", "256Mi").await?;
    env.wait_ready("web", 2).await?;
    env.policy("auto", policy_spec(&env.ns, "auto-patch", "in-place"))
        .await?;
    env.recommend(vec![env.recommendation("web", "150m", "200Mi", "0.9")?]);
    let exact = cfg!(feature = "failpoints");
    kerf_agent::failpoints::configure("after-intent=error");
    env.start_agent(&AgentOptions::default()).await?;
    let rsr = env
        .wait_rsr(
            "web",
            "an intent in status.change",
            e2e_support::WAIT,
            |r| r["status"]["change"]["id"].is_string(),
        )
        .await?;
    env.kill_agent().await;
    kerf_agent::failpoints::configure("");
    let change = rsr["status"]["change"].clone();
    if exact {
        assert_eq!(change["state"], "Intent", "{change}");
        assert!(env.hub_events("web", EventType::Applied).is_empty());
        for p in env.pods("web").await? {
            assert_eq!(
                pod_resources(&p)["requests"]["cpu"],
                "200m",
                "resized before the restart"
            );
        }
    }

    env.start_agent(&AgentOptions::default()).await?;
    let rsr = env.wait_phase("web", "Applied").await?;
    assert_eq!(
        rsr["status"]["change"]["id"], change["id"],
        "a second change was made"
    );
    let recorded = change["eventIds"]["applied"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        rsr["status"]["change"]["eventIds"]["applied"],
        recorded.as_str()
    );
    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let applied_now = env.hub_events("web", EventType::Applied);
    assert_eq!(applied_now.len(), 1, "{applied_now:#?}");
    assert_eq!(applied[0].id.to_string(), recorded);
    for p in env.wait_ready("web", 2).await? {
        assert_eq!(
            pod_resources(&p)["requests"],
            json!({"cpu": "150m", "memory": "200Mi"})
        );
    }
    let pending = rsr["status"]["change"]["pendingEvents"]
        .as_array()
        .map_or(0, Vec::len);
    let rsr = env
        .wait_rsr(
            "web",
            "pendingEvents emptied once acknowledged",
            e2e_support::WAIT,
            |r| {
                r["status"]["change"]["pendingEvents"]
                    .as_array()
                    .is_none_or(Vec::is_empty)
            },
        )
        .await?;
    assert!(pending <= 1, "{}", rsr["status"]);
    env.stop_agent().await;
    Ok(())
}
