//! The `kerf-agent` binary allocates with jemalloc and the settings `.cargo/config.toml`
//! builds into it, and says so in its start line: one arena, no thread caches, and freed
//! pages given back to the system after a second (docs/benchmarks.md, "jemalloc and a
//! smaller binary").

#![cfg(feature = "jemalloc")]

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kerf_sim::sim::{Sim, SimConfig};
use kerf_testkit::{KillOnDrop, spawn_with_stdout};
use serde_json::Value;

/// The settings `.cargo/config.toml` gives jemalloc's build.
fn configured() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cargo/config.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("JEMALLOC_SYS_WITH_MALLOC_CONF = "))
        .map(|v| v.trim_matches('"').to_owned())
        .unwrap_or_default()
}

/// The agent run against `sim` with `env` added, and its log lines as JSON.
fn run_agent(
    sim: &Sim,
    env: &[(&str, &str)],
) -> anyhow::Result<(KillOnDrop, std::sync::mpsc::Receiver<Value>)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kerf-agent"));
    cmd.env("KUBECONFIG", sim.kubeconfig_path())
        .envs(env.iter().copied())
        .args([
            "run",
            "--cluster-name",
            "alloc",
            "--namespace",
            "kerf-system",
        ])
        .args(["--leader-election=false", "--leader-identity", "alloc"])
        .args(["--log-format", "json"])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--webhook-addr",
            "127.0.0.1:0",
        ])
        .args(["--webhook-cert-file", "/nonexistent/tls.crt"])
        .args(["--webhook-key-file", "/nonexistent/tls.key"])
        .stderr(Stdio::inherit());
    let (child, stdout): (KillOnDrop, _) = spawn_with_stdout(&mut cmd)?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx
                .send(serde_json::from_str(&line).unwrap_or_default())
                .is_err()
            {
                break;
            }
        }
    });
    Ok((child, rx))
}

/// The first line of `rx` with `message`, waiting for it.
fn line_with(rx: &std::sync::mpsc::Receiver<Value>, message: &str) -> anyhow::Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .map_err(|_| anyhow::anyhow!("no line {message:?}"))?;
        if line["message"] == message {
            return Ok(line);
        }
    }
}

/// The fields of the agent's `kerf-agent started` line, run against `sim` with `env` added.
fn started_line(sim: &Sim, env: &[(&str, &str)]) -> anyhow::Result<Value> {
    let (_child, rx) = run_agent(sim, env)?;
    line_with(&rx, "kerf-agent started")
}

/// The body of `GET /metrics` at `addr`.
fn scrape(addr: &str) -> anyhow::Result<String> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP answer: {answer}"))?;
    anyhow::ensure!(head.starts_with("HTTP/1.1 200"), "{head}");
    Ok(body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_allocates_with_jemalloc_and_the_settings_built_into_it() -> anyhow::Result<()> {
    let want = configured();
    assert!(
        want.contains("narenas:1")
            && want.contains("tcache:false")
            && want.contains("background_thread:true"),
        "{want}"
    );
    let sim = Sim::start(SimConfig::default()).await?;
    let line = started_line(&sim, &[])?;
    assert_eq!(line["allocator"], "jemalloc", "{line}");
    // Built in, not given at run time: the image sets no allocator environment.
    assert_eq!(line["allocator_settings"], want.as_str(), "{line}");
    // An operator's `_RJEM_MALLOC_CONF` comes after them, and wins.
    let line = started_line(&sim, &[("_RJEM_MALLOC_CONF", "dirty_decay_ms:5000")])?;
    assert_eq!(
        line["allocator_settings"],
        format!("{want},dirty_decay_ms:5000"),
        "{line}"
    );
    Ok(())
}

/// `kerf_agent_allocator_bytes{state}` reads jemalloc's own figures: what the objects take,
/// the pages they lie in and what is in memory, in that order of size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_report_the_allocators_bytes() -> anyhow::Result<()> {
    let sim = Sim::start(SimConfig::default()).await?;
    let (_child, rx) = run_agent(&sim, &[])?;
    let listening = line_with(&rx, "metrics and health server listening")?;
    let addr = listening["addr"].as_str().unwrap_or_default().to_owned();
    let body = scrape(&addr)?;
    let bytes = |state: &str| -> Option<u64> {
        let prefix = format!("kerf_agent_allocator_bytes{{state=\"{state}\"}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse().ok())
    };
    assert!(
        body.contains("# TYPE kerf_agent_allocator_bytes gauge"),
        "{body}"
    );
    let [allocated, active, resident, metadata] =
        ["allocated", "active", "resident", "metadata"].map(|s| bytes(s).unwrap_or_default());
    assert!(bytes("retained").is_some(), "{body}");
    // The agent holds at least its caches' first objects.
    assert!(allocated > 100_000, "allocated {allocated}");
    assert!(allocated <= active && active <= resident, "{body}");
    assert!(metadata > 0 && metadata < resident, "{body}");
    Ok(())
}
