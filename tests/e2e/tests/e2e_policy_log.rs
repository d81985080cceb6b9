//! e2e: what the agent logs about an invalid policy says what the agent does with it.

mod e2e_support;

use e2e_support::{AgentOptions, Env, capture_logs, condition, eventually, policy_spec};
use kerf_agent::cli::LogFormat;
use serde_json::json;

// portable
// rule: AP-39
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_policy_is_logged_as_taking_part_as_it_does() -> anyhow::Result<()> {
    let logs = capture_logs(LogFormat::Text, "warn,kerf_agent=info")?;
    let mut env = Env::start("e2e-policy-log").await?;
    env.web(2).await?;
    let mut spec = policy_spec(&env.ns, "auto-patch", "in-place");
    spec["apply"]["freezeWindows"] = json!([{"schedule": "0 25 * * *", "duration": "2h"}]);
    env.policy("bad-freeze", spec).await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    // The invalid freeze window counts as open: the policy still takes part.
    let rsr = env.wait_phase("web", "Blocked").await?;
    let blocked = condition(&rsr, "Blocked").cloned().unwrap_or_default();
    assert_eq!(blocked["reason"], "FreezeWindow", "{}", rsr["status"]);
    let line = eventually("the invalid policy logged", e2e_support::WAIT, || async {
        logs.text()
            .lines()
            .find(|l| l.contains("bad-freeze") && l.contains("WARN"))
            .map(str::to_owned)
    })
    .await?;
    assert!(
        line.contains("it still applies to the workloads it selects"),
        "{line}"
    );
    assert!(line.contains("freezeWindows"), "{line}");
    assert!(!line.contains("ignored"), "{line}");
    env.stop_agent().await;
    Ok(())
}
