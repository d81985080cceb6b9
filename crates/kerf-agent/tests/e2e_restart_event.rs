//! e2e: an agent stopped after writing Applied but before queueing the applied event; the
//! next leader rebuilds its outbox from `status.change.pendingEvents` (design D25). Exact
//! with `--features failpoints` (`before-applied-event=error`); without, the agent is
//! killed once the phase is Applied. Alone in its file: fail points are process-wide.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, policy_spec};
use kerf_api::event::EventType;

// portable
// rule: EV-12, design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_agent_sends_the_pending_applied_event_with_its_recorded_id() -> anyhow::Result<()>
{
    let mut env = Env::start("e2e-restart-event").await?;
    env.deployment("web", 2, "200m", "256Mi").await?;
    env.wait_ready("web", 2).await?;
    env.policy("auto", policy_spec(&env.ns, "auto-patch", "rollout"))
        .await?;
    env.recommend(vec![env.recommendation("web", "150m", "200Mi", "0.9")?]);
    let exact = cfg!(feature = "failpoints");
    kerf_agent::failpoints::configure("before-applied-event=error");
    env.start_agent(&AgentOptions::default()).await?;
    let rsr = env.wait_phase("web", "Applied").await?;
    env.kill_agent().await;
    kerf_agent::failpoints::configure("");
    let recorded = rsr["status"]["change"]["eventIds"]["applied"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if exact {
        let pending = rsr["status"]["change"]["pendingEvents"].as_array().cloned();
        let pending = pending.unwrap_or_default();
        assert_eq!(pending.len(), 1, "{}", rsr["status"]);
        assert_eq!(pending[0]["id"], recorded.as_str());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            env.hub_events("web", EventType::Applied).is_empty(),
            "sent before the restart"
        );
    }

    env.start_agent(&AgentOptions::default()).await?;
    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    assert_eq!(applied[0].id.to_string(), recorded);
    env.wait_rsr(
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
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(env.hub_events("web", EventType::Applied).len(), 1);
    if exact {
        // Without the fail point the first agent may have sent the event before it was
        // killed; the resend with the same id is then a duplicate the hub ignores.
        assert_eq!(env.hub.duplicates(e2e_support::CLUSTER), 0);
    }
    let rsr = env.wait_phase("web", "Applied").await?;
    assert_eq!(
        rsr["status"]["change"]["eventIds"]["applied"],
        recorded.as_str()
    );
    env.stop_agent().await;
    Ok(())
}
