//! e2e: `kerf-agent run` given a cluster setting the chart cannot refuse at render time (a
//! well-formed but unknown time zone in `freeze.windows`) stays up instead of exiting in a
//! loop, reports itself not ready naming the setting (log, `/readyz`, metric), and changes
//! nothing: no write to the API server, no rsr.

mod e2e_support;

use std::process::Stdio;
use std::time::Duration;

use e2e_support::{CLUSTER, Env};
use kerf_testkit::{AgentBuild, KillOnDrop, agent_binary, agent_run};

/// A freeze window whose time zone the chart's schema accepts (it has the shape of one).
const BAD_WINDOWS: &str =
    r#"[{"schedule":"0 18 * * 5","duration":"62h","timeZone":"Europe/Berln"}]"#;

/// How long the agent is watched once it answers: several hub polls of 1s.
const WATCHED: Duration = Duration::from_secs(5);

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `GET http://127.0.0.1:<port><path>`: status and body.
async fn get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let resp = reqwest::get(format!("http://127.0.0.1:{port}{path}")).await?;
    Ok((resp.status().as_u16(), resp.text().await?))
}

/// `/readyz` once it answers (the server starts with the agent).
async fn readyz(port: u16) -> anyhow::Result<(u16, String)> {
    for _ in 0..100 {
        if let Ok(answer) = get(port, "/readyz").await {
            return Ok(answer);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("the agent's /readyz never answered")
}

// sim
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_freeze_window_holds_the_agent_not_ready_and_changes_nothing() -> anyhow::Result<()> {
    let env = Env::start("e2e-bad-setting").await?;
    if !env.sim_only("e2e-bad-setting") {
        return Ok(());
    }
    let Some(sim) = env.sim.as_ref() else {
        return Ok(());
    };
    env.web(1).await?;
    env.policy_of("held", "auto-patch", "in-place").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    let before = sim.context().audit.snapshot();
    let before_seq = before.records.last().map_or(0, |r| r.seq);

    let port = free_port()?;
    let log = tempfile::NamedTempFile::new()?;
    let bin = agent_binary(AgentBuild::FailPoints)?;
    let mut cmd = agent_run(&bin, CLUSTER, &env.hub.url(), "1s");
    cmd.env("KUBECONFIG", sim.kubeconfig_path())
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .args(["--freeze-windows", BAD_WINDOWS, "--log-format", "json"])
        .stdout(Stdio::from(log.reopen()?))
        .stderr(Stdio::inherit());
    let mut agent = KillOnDrop(cmd.spawn()?);

    let (status, body) = readyz(port).await?;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("invalid setting freeze.windows"), "{body}");
    assert!(body.contains("Europe/Berln"), "{body}");
    // Checks that the held agent keeps running: no condition to wait for.
    tokio::time::sleep(WATCHED).await;
    assert!(
        agent.0.try_wait()?.is_none(),
        "kerf-agent run exited on a bad cluster setting"
    );
    let (status, body) = get(port, "/readyz").await?;
    assert_eq!(status, 503, "still not ready: {body}");
    let (_, metrics) = get(port, "/metrics").await?;
    assert!(
        metrics.contains("kerf_agent_invalid_setting{setting=\"freeze.windows\"} 1"),
        "{metrics}"
    );
    let logged = std::fs::read_to_string(log.path())?;
    let line = logged
        .lines()
        .find(|l| l.contains("invalid cluster setting"))
        .unwrap_or_default();
    assert!(line.contains("\"level\":\"ERROR\""), "{logged}");
    assert!(line.contains("\"setting\":\"freeze.windows\""), "{line}");

    // Nothing written since the agent started: no workload, pod, rsr, Event or Lease.
    let writes: Vec<String> = sim
        .context()
        .audit
        .snapshot()
        .mutating_records()
        .iter()
        .filter(|r| r.seq > before_seq)
        .map(ToString::to_string)
        .collect();
    assert!(writes.is_empty(), "writes by a held agent: {writes:#?}");
    assert!(env.rsr("web").await?.is_none(), "no rsr is mirrored");
    Ok(())
}
