//! e2e: what the agent logs about an invalid policy says what the agent does with it.

mod e2e_support;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use e2e_support::{AgentOptions, Env, condition, eventually, policy_spec};
use serde_json::json;

/// Every log line of this test binary (the subscriber is process-wide).
fn captured() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(Default::default)
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut logs) = self.0.lock() {
            logs.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    let logs = captured().clone();
    let installed = tracing_subscriber::fmt()
        .with_env_filter("warn,kerf_agent=info")
        .with_ansi(false)
        .with_writer(move || Capture(logs.clone()))
        .try_init();
    assert!(installed.is_ok(), "another subscriber was installed first");
}

fn logs() -> String {
    let logs = captured().lock().map(|l| l.clone()).unwrap_or_default();
    String::from_utf8_lossy(&logs).into_owned()
}

// portable
// rule: AP-39
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_policy_is_logged_as_taking_part_as_it_does() -> anyhow::Result<()> {
    capture_logs();
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
        logs()
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
