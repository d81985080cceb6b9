//! Processes a test starts: the `kerf-agent` binary, a guard that kills a child when the
//! test ends, and a free loopback port to hand it.

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

/// Kills the process when dropped (the test ended, whatever the outcome) and reaps it.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` with its stdout piped: the child, killed when dropped, and its stdout.
pub fn spawn_with_stdout(cmd: &mut Command) -> anyhow::Result<(KillOnDrop, ChildStdout)> {
    let mut child = cmd.stdout(Stdio::piped()).spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    Ok((KillOnDrop(child), stdout))
}

/// A loopback port free at the time of the call.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Which `kerf-agent` binary [`agent_binary`] builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentBuild {
    /// With the crash-test fail points (feature `failpoints`), as the agent's own tests
    /// build it.
    FailPoints,
    /// Without them, as it is released.
    Plain,
    /// Without them and with the system allocator instead of jemalloc
    /// (`--no-default-features`), whose `malloc` a heap profiler such as heaptrack sees.
    SystemAllocator,
}

/// The `kerf-agent` binary in the target directory of the running test or example
/// (`target/<profile>/kerf-agent`), built first by cargo so it matches the source: a test
/// outside the agent's package has no `CARGO_BIN_EXE_kerf-agent`.
pub fn agent_binary(build: AgentBuild) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // The test or example runs from target/<profile>/{deps,examples}/.
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| anyhow::anyhow!("no target directory above {}", exe.display()))?;
    let target_dir = profile_dir
        .parent()
        .ok_or_else(|| anyhow::anyhow!("no target directory above {}", exe.display()))?;
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let manifest = crate::chart::repo_root().join("Cargo.toml");
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "-q", "-p", "kerf-agent", "--bin", "kerf-agent"])
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--target-dir")
        .arg(target_dir);
    match build {
        AgentBuild::FailPoints => {
            cmd.args(["--features", "failpoints"]);
        }
        AgentBuild::SystemAllocator => {
            cmd.arg("--no-default-features");
        }
        AgentBuild::Plain => {}
    }
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let status = cmd.status()?;
    anyhow::ensure!(status.success(), "building kerf-agent failed: {status}");
    Ok(profile_dir.join("kerf-agent"))
}

/// `kerf-agent run` of the binary `bin` as tests start it: cluster `cluster`, namespace
/// `kerf-system`, the hub at `hub_url` polled every `poll`, leader election off, the
/// webhook on a free loopback port with the test certificate. The caller adds the rest.
pub fn agent_run(bin: &Path, cluster: &str, hub_url: &str, poll: &str) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args([
        "run",
        "--cluster-name",
        cluster,
        "--namespace",
        "kerf-system",
    ])
    .args(["--hub-url", hub_url, "--hub-poll-interval", poll])
    .args(["--leader-election=false", "--webhook-addr", "127.0.0.1:0"]);
    if let Ok((cert, key)) = crate::webhook_cert_files() {
        cmd.arg("--webhook-cert-file").arg(cert);
        cmd.arg("--webhook-key-file").arg(key);
    }
    cmd
}

/// The settings `kerf-agent run --print-settings` printed, run as `cmd`; an error with the
/// agent's standard error when it failed.
pub fn printed_settings(cmd: &mut Command) -> anyhow::Result<serde_json::Value> {
    let out = cmd.output()?;
    anyhow::ensure!(
        out.status.success(),
        "kerf-agent run --print-settings failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}
