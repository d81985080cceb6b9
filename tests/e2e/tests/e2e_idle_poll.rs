//! e2e: a hub poll that brings nothing new (a 304 on the recommendations, the same
//! configuration) marks no workload dirty: no decision runs again for it.

mod e2e_support;

use std::time::Duration;

use e2e_support::{Env, metric_sum};

/// The sum of `kerf_agent_decisions_total` over every type and reason.
fn decisions(metrics: &str) -> f64 {
    metric_sum(metrics, "kerf_agent_decisions_total", &[])
}

// portable
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_hub_polls_decide_nothing_again() -> anyhow::Result<()> {
    // Equal to the requests: skipped NoSignificantChange, reported once.
    let mut env = Env::start_at_rest("e2e-idle-poll").await?;
    let before = decisions(&env.agent_metrics()?);
    assert!(before >= 1.0, "the first pass decided: {before}");
    let polls_before = env.recommendation_polls();
    // The measured window: five polls of 1 s with nothing new.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let polls = env.recommendation_polls() - polls_before;
    assert!(polls >= 4, "the hub was polled meanwhile: {polls} polls");
    let after = decisions(&env.agent_metrics()?);
    assert_eq!(
        after,
        before,
        "{polls} idle polls ran {} decisions",
        after - before
    );

    // A poll that does bring something new is decided.
    env.recommend_web("150m", "256Mi", "0.9")?;
    env.wait_phase("web", "Applied").await?;
    assert!(decisions(&env.agent_metrics()?) > after);
    env.stop_agent().await;
    Ok(())
}
