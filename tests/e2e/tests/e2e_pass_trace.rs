//! e2e: one change can be followed through the agent's JSON log by its id, and the passes
//! that carried it are timed by step (docs/operations.md, "Following one change through
//! the logs").

mod e2e_support;

use e2e_support::{AgentOptions, Env, WAIT, capture_logs, eventually, metric_sample};
use kerf_agent::cli::LogFormat;
use serde_json::Value;

/// The JSON log lines written inside a span whose `field` is `value`.
fn lines_in_span(logs: &str, field: &str, value: &str) -> Vec<Value> {
    logs.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v["spans"]
                .as_array()
                .is_some_and(|spans| spans.iter().any(|s| s[field] == value))
        })
        .collect()
}

// portable
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_followed_by_its_id_and_its_passes_are_timed_by_step() -> anyhow::Result<()> {
    let logs = capture_logs(LogFormat::Json, "warn,kerf_agent=info")?;
    let mut env = Env::start("e2e-pass-trace").await?;
    env.web(2).await?;
    env.policy_of("trace", "auto-patch", "in-place").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    let rsr = env.wait_phase("web", "Applied").await?;
    let change = rsr["status"]["change"]["id"].as_str().unwrap_or_default();
    assert!(!change.is_empty(), "{}", rsr["status"]);
    let workload = format!("{}/Deployment/web", env.ns);
    // The applied event's line names the pass's workload and change.
    let applied = eventually("the applied line of the change", WAIT, || async {
        lines_in_span(&logs.text(), "change_id", change)
            .into_iter()
            .find(|v| {
                v["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("applied"))
            })
    })
    .await?;
    assert_eq!(applied["span"]["name"], "pass", "{applied}");
    assert_eq!(applied["span"]["workload"], workload.as_str(), "{applied}");
    assert_eq!(applied["span"]["change_id"], change, "{applied}");
    assert!(applied["span"]["step"].is_string(), "{applied}");
    // Every line of the change is the workload's.
    for line in lines_in_span(&logs.text(), "change_id", change) {
        assert_eq!(line["span"]["workload"], workload.as_str(), "{line}");
    }

    // The pass that started the change is timed under its step once it has ended (the
    // change may be Applied before the pass that applied it ends).
    let metrics = eventually("the start pass timed", WAIT, || async {
        let metrics = env.agent_metrics().ok()?;
        let started = metric_sample(
            &metrics,
            "kerf_agent_pass_duration_seconds_count{step=\"start\"}",
        );
        (started >= 1.0).then_some(metrics)
    })
    .await?;
    assert!(
        metrics.lines().any(
            |l| l.starts_with("kerf_agent_pass_duration_seconds_bucket{")
                && l.contains("step=\"start\"")
        ),
        "{metrics}"
    );
    env.stop_agent().await;
    Ok(())
}
