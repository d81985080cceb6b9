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

/// The fields of the agent's `kerf-agent started` line, run against `sim` with `env` added.
fn started_line(sim: &Sim, env: &[(&str, &str)]) -> anyhow::Result<Value> {
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
    let (_child, stdout): (KillOnDrop, _) = spawn_with_stdout(&mut cmd)?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .map_err(|_| anyhow::anyhow!("no line \"kerf-agent started\""))?;
        let value: Value = serde_json::from_str(&line).unwrap_or_default();
        if value["message"] == "kerf-agent started" {
            return Ok(value);
        }
    }
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
