//! e2e: an agent stopped in the middle of a change; the next one finishes it once and sends
//! its applied event once, with the recorded id (design D25). With `--features failpoints`
//! the stop is exact (a fail point); without, the agent is killed as soon as the rsr shows
//! it got there. Fail points are process-wide: the scenarios of this file take turns.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, Web, assert_pod_requests, pod_resources};
use kerf_api::event::EventType;
use serde_json::Value;
use tokio::sync::{Mutex, MutexGuard};

/// Held by the scenario that sets fail points.
static FAIL_POINTS: Mutex<()> = Mutex::const_new(());

/// A scenario's Deployment `web` (two pods of 200m/256Mi) under an auto-patch policy with
/// `strategy`, a recommendation of 150m/200Mi, and an agent running with `fail_point` on;
/// with the turn to set fail points.
async fn agent_to_stop(
    scenario: &str,
    strategy: &'static str,
    fail_point: &str,
) -> anyhow::Result<(Env, MutexGuard<'static, ()>)> {
    let turn = FAIL_POINTS.lock().await;
    kerf_agent::failpoints::configure(fail_point);
    let env = Env::start_web(scenario, Web::policy("auto", "auto-patch", strategy)).await?;
    Ok((env, turn))
}

/// Kills the agent and clears the fail points.
async fn kill(env: &mut Env) {
    env.kill_agent().await;
    kerf_agent::failpoints::configure("");
}

/// Waits until rsr `web` has no pending events left: the hub acknowledged them.
async fn wait_pending_sent(env: &Env) -> anyhow::Result<Value> {
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
    .await
}

// portable
// rule: EV-12, design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_agent_resumes_the_recorded_change_once() -> anyhow::Result<()> {
    let (mut env, _turn) = agent_to_stop("e2e-restart", "in-place", "after-intent=error").await?;
    let exact = cfg!(feature = "failpoints");
    let rsr = env
        .wait_rsr(
            "web",
            "an intent in status.change",
            e2e_support::WAIT,
            |r| r["status"]["change"]["id"].is_string(),
        )
        .await?;
    kill(&mut env).await;
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
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let applied_now = env.hub_events("web", EventType::Applied);
    assert_eq!(applied_now.len(), 1, "{applied_now:#?}");
    assert_eq!(applied[0].id.to_string(), recorded);
    for p in env.wait_ready("web", 2).await? {
        assert_pod_requests(&p, "150m", "200Mi");
    }
    let pending = rsr["status"]["change"]["pendingEvents"]
        .as_array()
        .map_or(0, Vec::len);
    let rsr = wait_pending_sent(&env).await?;
    assert!(pending <= 1, "{}", rsr["status"]);
    env.stop_agent().await;
    Ok(())
}

// The agent stops after writing Applied but before queueing the applied event; the next
// leader rebuilds its outbox from `status.change.pendingEvents`.
// portable
// rule: EV-12, design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_agent_sends_the_pending_applied_event_with_its_recorded_id() -> anyhow::Result<()>
{
    let (mut env, _turn) =
        agent_to_stop("e2e-restart-event", "rollout", "before-applied-event=error").await?;
    let exact = cfg!(feature = "failpoints");
    let rsr = env.wait_phase("web", "Applied").await?;
    kill(&mut env).await;
    let recorded = rsr["status"]["change"]["eventIds"]["applied"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if exact {
        let pending = rsr["status"]["change"]["pendingEvents"].as_array().cloned();
        let pending = pending.unwrap_or_default();
        assert_eq!(pending.len(), 1, "{}", rsr["status"]);
        assert_eq!(pending[0]["id"], recorded.as_str());
        // Checks that nothing more happens in the next passes (a negative check: there is no
        // condition to wait for).
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            env.hub_events("web", EventType::Applied).is_empty(),
            "sent before the restart"
        );
    }

    env.start_agent(&AgentOptions::default()).await?;
    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    assert_eq!(applied[0].id.to_string(), recorded);
    wait_pending_sent(&env).await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
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
