//! e2e (kerf-sim only): an API server outage with changes pending. kerf-sim refuses
//! connections, then answers 503, then leaves requests hanging (a third of the outage
//! each; `KERF_E2E_OUTAGE`, default 15s, sets the whole). The agent runs as its own
//! process with a write limit of one actuating write a second. Checked: no actuating
//! write reaches the server during the outage; the agent keeps running, with bounded CPU
//! and log lines; `/readyz` reports the outage and recovers; the changes go in after the
//! server's return, the first within 30 s, at no more than the limit.

mod e2e_support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use e2e_support::{CLUSTER, Env, eventually, policy_spec};
use kerf_sim::api::outage::OutagePlan;
use kerf_sim::sim::Sim;
use kerf_testkit::{AgentBuild, KillOnDrop, agent_binary, agent_run, free_port, spawn_with_stdout};

const WORKLOADS: usize = 6;

/// The outage length: `KERF_E2E_OUTAGE_SECS`, 15 s when unset.
fn outage_length() -> anyhow::Result<Duration> {
    match std::env::var("KERF_E2E_OUTAGE_SECS") {
        Ok(v) => v
            .trim()
            .parse()
            .map(Duration::from_secs)
            .map_err(|e| anyhow::anyhow!("KERF_E2E_OUTAGE_SECS={v:?}: {e}")),
        Err(_) => Ok(Duration::from_secs(15)),
    }
}

/// User plus system CPU seconds of process `pid` (clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow::anyhow!("bad /proc/{pid}/stat"))?;
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    Ok(ticks / 100.0)
}

async fn readyz(port: u16) -> Option<(u16, String)> {
    let url = format!("http://127.0.0.1:{port}/readyz");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    let r = client.get(url).send().await.ok()?;
    let code = r.status().as_u16();
    Some((code, r.text().await.unwrap_or_default()))
}

/// Starts `kerf-agent run` against the sim; its stdout lines are counted.
fn start_agent(env: &Env, metrics_port: u16, lines: Arc<AtomicU64>) -> anyhow::Result<KillOnDrop> {
    let sim = env.sim.as_ref().ok_or_else(|| anyhow::anyhow!("no sim"))?;
    let bin = agent_binary(AgentBuild::FailPoints)?;
    let (child, out) = spawn_with_stdout(
        agent_run(&bin, CLUSTER, &env.hub.url(), "1s")
            .env("KUBECONFIG", sim.kubeconfig_path())
            .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
            .args(["--max-writes-per-second", "1", "--write-burst", "1"])
            .args(["--log-format", "json"])
            .stderr(Stdio::inherit()),
    )?;
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            lines.fetch_add(1, Ordering::Relaxed);
            if std::env::var_os("KERF_E2E_OUTAGE_LOG").is_some() {
                eprintln!("agent: {line}");
            }
        }
    });
    Ok(child)
}

async fn set_up(env: &Env) -> anyhow::Result<()> {
    env.policy("outage", policy_spec(&env.ns, "auto-patch", "rollout"))
        .await?;
    for i in 0..WORKLOADS {
        env.deployment(&format!("web-{i}"), 1, "200m", "256Mi")
            .await?;
    }
    for i in 0..WORKLOADS {
        env.wait_ready(&format!("web-{i}"), 1).await?;
    }
    Ok(())
}

// rule: design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_outage_holds_every_write_and_the_changes_go_in_at_the_limit_after()
-> anyhow::Result<()> {
    let env = Env::start("e2e-outage").await?;
    if !env.sim_only("e2e-outage") {
        return Ok(());
    }
    let total = outage_length()?;
    set_up(&env).await?;
    let port = free_port()?;
    let lines = Arc::new(AtomicU64::new(0));
    let mut agent = start_agent(&env, port, lines.clone())?;
    let pid = agent.0.id();
    eventually("agent ready", Duration::from_secs(60), || async {
        readyz(port).await.filter(|(c, _)| *c == 200)
    })
    .await?;
    let sim = env.sim.as_ref().ok_or_else(|| anyhow::anyhow!("no sim"))?;
    let outage = sim.context().state.outage.clone();
    let run = tokio::spawn({
        let outage = outage.clone();
        async move { outage.run(OutagePlan::even(total)).await }
    });
    let started = Instant::now();
    let (cpu0, lines0) = (cpu_seconds(pid)?, lines.load(Ordering::Relaxed));
    // Changes become pending while the server is away.
    let recs = (0..WORKLOADS)
        .map(|i| env.recommendation(&format!("web-{i}"), "100m", "128Mi", "0.9"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    env.recommend(recs);

    let mut answers = Vec::new();
    while !run.is_finished() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        answers.push(readyz(port).await);
    }
    let ended = Instant::now();
    let (cpu1, lines1) = (cpu_seconds(pid)?, lines.load(Ordering::Relaxed));
    assert!(
        agent.0.try_wait()?.is_none(),
        "the agent exited during the outage"
    );

    assert_eq!(
        actuating_writes(sim, started, ended),
        Vec::<Instant>::new(),
        "actuating writes during the outage"
    );
    let unready = answers
        .iter()
        .flatten()
        .filter(|(c, body)| *c == 503 && body.contains("API server"))
        .count();
    assert!(
        unready * 2 >= answers.len(),
        "readiness did not report the outage: {answers:?}"
    );
    let secs = total.as_secs_f64();
    let cpu = cpu1 - cpu0;
    assert!(
        cpu <= 0.05 * secs + 0.5,
        "agent CPU {cpu:.2}s during a {secs}s outage"
    );
    let logged = lines1 - lines0;
    // Each watch retries at most every 10 s (plus jitter) and logs once per failure.
    assert!(
        (logged as f64) <= 40.0 + 5.0 * secs,
        "{logged} log lines during a {secs}s outage"
    );

    // After the return: ready again, the changes go in, the first within 30 s.
    changes_go_in_at_the_limit(&env, sim, port, ended).await?;
    Ok(())
}

/// When the actuating writes that `sim`'s API server received between `from` and `to`
/// came.
fn actuating_writes(sim: &Sim, from: Instant, to: Instant) -> Vec<Instant> {
    let audit = sim.audit().snapshot();
    audit
        .records
        .iter()
        .filter(|r| r.received >= from && r.received <= to)
        .filter(|r| kerf_agent::apiclient::is_actuating(&r.method, &r.path, Some(&r.query)))
        .map(|r| r.received)
        .collect()
}

/// After the outage `ended`: the agent on `port` is ready again and the changes go in, the
/// first within 30 s, at most one write a second.
async fn changes_go_in_at_the_limit(
    env: &Env,
    sim: &Sim,
    port: u16,
    ended: Instant,
) -> anyhow::Result<()> {
    // After the return: ready again, the changes go in, the first within 30 s.
    eventually(
        "ready after the outage",
        Duration::from_secs(30),
        || async { readyz(port).await.filter(|(c, _)| *c == 200) },
    )
    .await?;
    eventually("every change Applied", Duration::from_secs(90), || async {
        for i in 0..WORKLOADS {
            let rsr = env.rsr(&format!("web-{i}")).await.ok()??;
            if rsr["status"]["phase"] != "Applied" {
                return None;
            }
        }
        Some(())
    })
    .await?;
    let sent = actuating_writes(sim, ended, Instant::now());
    assert!(
        sent.len() >= WORKLOADS,
        "{} actuating writes after the outage",
        sent.len()
    );
    let first = sent.first().map(|t| *t - ended).unwrap_or_default();
    assert!(
        first <= Duration::from_secs(30),
        "first write {first:?} after the return"
    );
    // One write a second, burst 1: two writes never within 0.8 s of each other.
    for pair in sent.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(800),
            "writes {gap:?} apart: {sent:?}"
        );
    }
    Ok(())
}
