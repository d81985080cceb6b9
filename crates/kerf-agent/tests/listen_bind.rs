//! The `kerf-agent run` binary and its listen addresses: an address that cannot be bound
//! stops the agent at start with one line naming the setting and the address, and the
//! log names the address bound (with port 0, the port the kernel chose).

use std::io::{BufRead as _, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kerf_sim::sim::{Sim, SimConfig};
use kerf_testkit::{KillOnDrop, spawn_with_stdout};
use serde_json::Value;

/// How long the agent gets to stop or to log its listeners.
const LIMIT: Duration = Duration::from_secs(30);

/// `kerf-agent run` against `sim`, logging JSON, with `args` added.
fn agent(sim: &Sim, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kerf-agent"));
    cmd.env("KUBECONFIG", sim.kubeconfig_path())
        .args([
            "run",
            "--cluster-name",
            "bind",
            "--namespace",
            "kerf-system",
        ])
        .args(["--leader-election=false", "--leader-identity", "bind"])
        .args(["--log-format", "json"])
        .args(["--webhook-cert-file", "/nonexistent/tls.crt"])
        .args(["--webhook-key-file", "/nonexistent/tls.key"])
        .args(args)
        .stderr(Stdio::inherit());
    cmd
}

/// The log lines of `stdout`, one JSON object each, sent as they are written.
fn lines(stdout: impl std::io::Read + Send + 'static) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
            if tx.send(value).is_err() {
                break;
            }
        }
    });
    rx
}

/// Runs the agent with `flag` set to an address another socket holds; returns its exit
/// status and its log lines.
async fn run_with_taken(flag: &str) -> anyhow::Result<(std::process::ExitStatus, Vec<Value>)> {
    let sim = Sim::start(SimConfig::default()).await?;
    let taken = TcpListener::bind("127.0.0.1:0")?;
    let addr = taken.local_addr()?.to_string();
    let free = "127.0.0.1:0";
    let (metrics, webhook) = match flag {
        "--metrics-addr" => (addr.as_str(), free),
        _ => (free, addr.as_str()),
    };
    let mut cmd = agent(
        &sim,
        &["--metrics-addr", metrics, "--webhook-addr", webhook],
    );
    let (mut child, stdout) = spawn_with_stdout(&mut cmd)?;
    let rx = lines(stdout);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait()? {
            break status;
        }
        anyhow::ensure!(
            start.elapsed() < LIMIT,
            "the agent kept running with {flag} taken"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    Ok((status, rx.try_iter().collect()))
}

/// The one error line the agent stopped with.
fn error_lines(logs: &[Value]) -> Vec<String> {
    logs.iter()
        .filter(|l| l["level"] == "ERROR")
        .map(|l| l["error"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_metrics_address_stops_the_agent_naming_the_setting() -> anyhow::Result<()> {
    let (status, logs) = run_with_taken("--metrics-addr").await?;
    assert!(!status.success(), "{status}");
    let errors = error_lines(&logs);
    assert_eq!(errors.len(), 1, "{logs:#?}");
    assert!(
        errors[0].starts_with("cannot listen on --metrics-addr 127.0.0.1:")
            && errors[0].contains("in use"),
        "{}",
        errors[0]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_webhook_address_stops_the_agent_naming_the_setting() -> anyhow::Result<()> {
    let (status, logs) = run_with_taken("--webhook-addr").await?;
    assert!(!status.success(), "{status}");
    let errors = error_lines(&logs);
    assert_eq!(errors.len(), 1, "{logs:#?}");
    assert!(
        errors[0].starts_with("cannot listen on --webhook-addr 127.0.0.1:")
            && errors[0].contains("in use"),
        "{}",
        errors[0]
    );
    Ok(())
}

/// The port of the `addr` field of the first line with `message`, waiting for it.
fn logged_port(rx: &mpsc::Receiver<Value>, message: &str) -> anyhow::Result<u16> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .map_err(|_| anyhow::anyhow!("no log line {message:?}"))?;
        if line["message"] == message {
            let addr: std::net::SocketAddr = line["addr"].as_str().unwrap_or_default().parse()?;
            return Ok(addr.port());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_zero_logs_the_port_bound() -> anyhow::Result<()> {
    let sim = Sim::start(SimConfig::default()).await?;
    let free = "127.0.0.1:0";
    let mut cmd = agent(&sim, &["--metrics-addr", free, "--webhook-addr", free]);
    let (_child, stdout): (KillOnDrop, _) = spawn_with_stdout(&mut cmd)?;
    let rx = lines(stdout);
    let metrics = logged_port(&rx, "metrics and health server listening")?;
    assert_ne!(metrics, 0);
    let webhook = logged_port(&rx, "webhook listening")?;
    assert_ne!(webhook, 0);
    assert_ne!(metrics, webhook);
    Ok(())
}
