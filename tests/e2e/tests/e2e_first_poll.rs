//! e2e: a new leader's first pass waits for the first hub poll, so a restart does not
//! block a pending change `HubUnreachable` (and send that event) before it asked the hub.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, Web, template_resources};
use kerf_api::event::EventType;

// portable
// rule: EV-37
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_decides_after_its_first_hub_poll() -> anyhow::Result<()> {
    let mut env = Env::start_web("e2e-first-poll", Web::policy("p", "audit", "rollout")).await?;
    env.wait_phase("web", "Skipped").await?;
    env.stop_agent().await;

    // The rsr exists when the next agent starts: its first pass must not run on an empty
    // hub state.
    env.policy_of("p", "auto-patch", "rollout").await?;
    env.start_agent(&AgentOptions::default()).await?;
    env.wait_phase("web", "Applied").await?;
    env.wait_hub_event("web", EventType::Applied).await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let unreachable: Vec<_> = env
        .hub_events("web", EventType::Blocked)
        .into_iter()
        .filter(|e| e.reason == "HubUnreachable")
        .collect();
    assert!(unreachable.is_empty(), "{unreachable:#?}");
    let d = env.deployment_json("web").await?;
    assert_eq!(template_resources(&d)["requests"]["cpu"], "150m");
    env.stop_agent().await;
    Ok(())
}
