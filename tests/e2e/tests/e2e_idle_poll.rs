//! e2e: a hub poll that brings nothing new (a 304 on the recommendations, the same
//! configuration) marks no workload dirty: no decision runs again for it.

mod e2e_support;

use std::time::Duration;

use e2e_support::{Env, Web, eventually};

/// The sum of `kerf_agent_decisions_total` over every type and reason.
fn decisions(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("kerf_agent_decisions_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

// portable
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_hub_polls_decide_nothing_again() -> anyhow::Result<()> {
    // Equal to the requests: skipped NoSignificantChange, reported once.
    let mut env = Env::start_web(
        "e2e-idle-poll",
        Web::policy("p", "auto-patch", "rollout")
            .replicas(1)
            .recommend("200m", "256Mi", "0.9"),
    )
    .await?;
    env.wait_phase("web", "Skipped").await?;
    eventually("the skip reported", Duration::from_secs(20), || async {
        let rsr = env.rsr("web").await.ok()??;
        let reported = rsr["status"]["reported"].as_array()?;
        (!reported.is_empty()).then_some(())
    })
    .await?;
    // Lets the passes the first decision triggered end before the count is taken.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = decisions(&env.agent_metrics()?);
    assert!(before >= 1.0, "the first pass decided: {before}");
    let polls_before = env
        .hub
        .requests_to(kerf_sim::hub::Endpoint::Recommendations)
        .len();
    // The measured window: five polls of 1 s with nothing new.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let polls = env
        .hub
        .requests_to(kerf_sim::hub::Endpoint::Recommendations)
        .len()
        - polls_before;
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
