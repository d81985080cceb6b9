//! e2e: two agents with leader election against one cluster: one holds the Lease and acts,
//! the other waits; a leader that stops gracefully releases the Lease and the other takes
//! over.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, pod_resources};
use k8s_openapi::api::coordination::v1::Lease;
use kerf_agent::runtime::Agent;
use kerf_agent::settings::Settings;
use kerf_api::event::EventType;
use kube::Api;
use serde_json::json;

/// The Lease the agents compete for, in the scenario's namespace.
const LEASE: &str = "kerf-agent-e2e";

/// Settings of replica `identity`: leader election on, short Lease timings.
fn replica(env: &Env, identity: &str) -> anyhow::Result<Settings> {
    let mut s = env.settings(&AgentOptions::default())?;
    let le = &mut s.leader_election;
    le.enabled = true;
    le.identity = identity.to_owned();
    le.namespace = env.ns.clone();
    le.lease_name = LEASE.to_owned();
    le.lease_duration = Duration::from_secs(6);
    le.renew_deadline = Duration::from_secs(4);
    le.retry_period = Duration::from_millis(300);
    Ok(s)
}

/// The holder written in the Lease, if any.
async fn holder(env: &Env) -> anyhow::Result<Option<String>> {
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.ns);
    Ok(leases
        .get_opt(LEASE)
        .await?
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity))
}

// portable
// rule: design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_acts_and_the_standby_takes_over_when_it_stops() -> anyhow::Result<()> {
    let env = Env::start("e2e-leader").await?;
    env.web(2).await?;
    env.policy_of("auto", "auto-patch", "in-place").await?;
    let mut agents: Vec<(String, Agent)> = Vec::new();
    for id in ["replica-a", "replica-b"] {
        agents.push((id.to_owned(), env.spawn_agent(replica(&env, id)?).await));
    }
    let leader = e2e_support::eventually("a Lease holder", e2e_support::WAIT, || async {
        holder(&env).await.ok().flatten()
    })
    .await?;
    // Checks that the lease stays with the first leader: no condition to wait for.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(holder(&env).await?.as_deref(), Some(leader.as_str()));
    let leading: Vec<&str> = agents
        .iter()
        .filter(|(_, a)| a.context().may_write())
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(leading, [leader.as_str()], "exactly the holder may write");

    // One change, made once.
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.wait_phase("web", "Applied").await?;
    env.wait_hub_event("web", EventType::Applied).await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(env.hub_events("web", EventType::Applied).len(), 1);
    assert_eq!(holder(&env).await?.as_deref(), Some(leader.as_str()));

    // The leader stops gracefully: the Lease is released and the standby takes it at once,
    // well before the 6s Lease would have run out.
    let at = agents
        .iter()
        .position(|(id, _)| *id == leader)
        .ok_or_else(|| anyhow::anyhow!("holder {leader} is no replica"))?;
    let (_, stopped) = agents.remove(at);
    let (standby_id, standby) = agents.remove(0);
    let t0 = tokio::time::Instant::now();
    stopped.stop().await;
    let taken = e2e_support::eventually(
        "the standby to take the Lease",
        Duration::from_secs(5),
        || async {
            (holder(&env).await.ok().flatten().as_deref() == Some(standby_id.as_str()))
                .then_some(())
        },
    )
    .await;
    taken?;
    e2e_support::eventually("the standby to lead", Duration::from_secs(3), || async {
        standby.context().may_write().then_some(())
    })
    .await?;
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());

    // The standby continues: the next change goes in (cooldown in the policy is 1s).
    the_next_change_goes_in(&env).await?;
    standby.stop().await;
    Ok(())
}

/// A second recommendation is applied and the pods resized to it.
async fn the_next_change_goes_in(env: &Env) -> anyhow::Result<()> {
    env.recommend_web("120m", "180Mi", "0.9")?;
    let applied = e2e_support::eventually("a second applied event", e2e_support::WAIT, || async {
        let all = env.hub_events("web", EventType::Applied);
        (all.len() == 2).then_some(all)
    })
    .await?;
    assert_eq!(applied[1].reason, "RecommendationApplied");
    let want = json!({"cpu": "120m", "memory": "180Mi"});
    e2e_support::eventually(
        "the pods resized by the new leader",
        e2e_support::WAIT,
        || async {
            let pods = env.pods("web").await.ok()?;
            pods.iter()
                .all(|p| pod_resources(p)["requests"] == want)
                .then_some(())
        },
    )
    .await?;
    Ok(())
}
