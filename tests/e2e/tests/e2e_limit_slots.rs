//! e2e: a change waiting for a token of the write limit does not hold a reconcile slot.
//! With one actuating write a second (burst 1), 20 changes and 20 workloads without a
//! change, every workload without a change has its phase before the 5th actuating write;
//! each change then goes in from its recorded intent (decided once, resized once).

mod e2e_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e_support::{AgentOptions, Env, eventually, metric_sum, rsr_api};
use kube::api::ListParams;

const EACH: usize = 20;

/// Phases of the rsrs of the namespace by workload name; an rsr whose change is recorded
/// Applied counts as `Applied` whatever its phase moved on to.
async fn phases(env: &Env) -> anyhow::Result<BTreeMap<String, String>> {
    let list = rsr_api(&env.client, &env.ns)
        .list(&ListParams::default())
        .await?;
    Ok(list
        .items
        .iter()
        .filter_map(|r| {
            let v = serde_json::to_value(r).ok()?;
            let name = v["spec"]["workloadRef"]["name"].as_str()?.to_owned();
            let phase = match v["status"]["change"]["state"].as_str() {
                Some("Applied") => "Applied",
                _ => v["status"]["phase"].as_str()?,
            };
            Some((name, phase.to_owned()))
        })
        .collect())
}

/// The actuating writes kerf-sim received up to `until`.
fn actuating_writes(env: &Env, until: Instant) -> anyhow::Result<Vec<String>> {
    let sim = env
        .sim
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("this scenario reads kerf-sim's request log"))?;
    let audit = sim.audit().snapshot();
    Ok(audit
        .records
        .iter()
        .filter(|r| r.received <= until)
        .filter(|r| kerf_agent::apiclient::is_actuating(&r.method, &r.path, Some(&r.query)))
        .map(|r| r.path.clone())
        .collect())
}

// sim: it counts the writes in kerf-sim's request log
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_without_a_change_do_not_wait_behind_changes_waiting_for_tokens()
-> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-limit-slots").await? else {
        return Ok(());
    };
    // "a-" sorts before "b-": the changes come first in a pass over every workload.
    let changes: Vec<String> = (0..EACH).map(|i| format!("a-{i:02}")).collect();
    let idle: Vec<String> = (0..EACH).map(|i| format!("b-{i:02}")).collect();
    let mut recs = Vec::new();
    for name in &changes {
        env.deployment(name, 1, "200m", "256Mi").await?;
        recs.push(env.recommendation(name, "100m", "128Mi", "0.9")?);
    }
    for name in &idle {
        env.deployment(name, 1, "200m", "256Mi").await?;
        recs.push(env.recommendation(name, "200m", "256Mi", "0.9")?);
    }
    for name in changes.iter().chain(&idle) {
        env.wait_ready(name, 1).await?;
    }
    env.policy_of("p", "auto-patch", "in-place").await?;
    env.recommend(recs);
    let mut settings = env.settings(&AgentOptions::default())?;
    settings.reconcile.writes_per_second = 1;
    settings.reconcile.write_burst = 1;
    env.start_agent_with(settings).await;

    let all_phased = eventually(
        "every workload without a change Skipped",
        Duration::from_secs(60),
        || async {
            let p = phases(&env).await.ok()?;
            idle.iter()
                .all(|n| p.get(n).is_some_and(|ph| ph == "Skipped"))
                .then(Instant::now)
        },
    )
    .await?;
    let before = actuating_writes(&env, all_phased)?;
    assert!(
        before.len() < 5,
        "{} actuating writes went out before the last workload without a change had a \
         phase: {before:?}",
        before.len()
    );

    // Every change goes in, each pod resized once and each change decided once.
    eventually("every change Applied", Duration::from_secs(120), || async {
        let p = phases(&env).await.ok()?;
        changes
            .iter()
            .all(|n| p.get(n).is_some_and(|ph| ph == "Applied"))
            .then_some(())
    })
    .await?;
    let resizes = actuating_writes(&env, Instant::now())?;
    assert_eq!(resizes.len(), EACH, "one resize per change: {resizes:?}");
    let metrics = env.agent_metrics()?;
    let applied = metric_sum(
        &metrics,
        "kerf_agent_decisions_total",
        &["type=\"applied\""],
    );
    assert_eq!(applied, EACH as f64, "each change decided once");
    env.stop_agent().await;
    Ok(())
}
