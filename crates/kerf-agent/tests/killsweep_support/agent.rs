//! The `kerf-agent run` process under test: started against the sweep's cluster and hub,
//! killed with SIGKILL, or ended by a fail point (`KERF_FAILPOINTS=<point>=exit`).

use std::fs::File;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::cluster::{AGENT_NAMESPACE, CLUSTER};

/// The fail points of the agent (crates/kerf-agent/src/failpoints.rs).
pub const FAIL_POINTS: [&str; 4] = [
    "after-intent",
    "after-resize",
    "after-apply",
    "before-applied-event",
];

/// How an agent process ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Killed by the sweep (SIGKILL).
    Killed,
    /// A fail point ended it (exit code [`kerf_agent::failpoints::EXIT_CODE`]).
    FailPoint,
    /// It ended on its own some other way (a crash).
    Exited(String),
}

/// The log line that shows the agent's controllers running (caches synced, leading).
const READY_LINE: &str = "leading: controllers start";

/// A running agent process.
pub struct AgentProcess {
    child: Child,
    ready: tokio::sync::watch::Receiver<bool>,
}

/// How to start the agent.
pub struct Launch {
    /// The `kerf-agent` binary.
    pub binary: PathBuf,
    /// The cluster's kubeconfig.
    pub kubeconfig: PathBuf,
    /// The dev hub's URL.
    pub hub_url: String,
    /// Where the agent's log goes (appended).
    pub log: PathBuf,
}

impl Launch {
    /// Starts `kerf-agent run`, with fail point `fail_point` set to `exit` when given.
    pub fn start(&self, fail_point: Option<&str>) -> anyhow::Result<AgentProcess> {
        let log = Arc::new(Mutex::new(
            File::options().create(true).append(true).open(&self.log)?,
        ));
        let (cert, key) = kerf_testkit::webhook_cert_files()?;
        let mut cmd = Command::new(&self.binary);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env_remove(kerf_agent::failpoints::ENV)
            .args(["run", "--cluster-name", CLUSTER])
            .args(["--namespace", AGENT_NAMESPACE])
            .args(["--hub-url", &self.hub_url, "--hub-poll-interval", "1s"])
            .args(["--leader-election=false", "--metrics-addr", "127.0.0.1:0"])
            .args(["--webhook-addr", "127.0.0.1:0", "--on-delete-settle", "1s"])
            .arg("--webhook-cert-file")
            .arg(&cert)
            .arg("--webhook-key-file")
            .arg(&key)
            .args(["--log-format", "text"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(point) = fail_point {
            cmd.env(kerf_agent::failpoints::ENV, format!("{point}=exit"));
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting {}: {e}", self.binary.display()))?;
        let (tx, ready) = tokio::sync::watch::channel(false);
        let tx = Arc::new(tx);
        if let Some(out) = child.stdout.take() {
            tokio::spawn(copy_lines(out, log.clone(), tx.clone()));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(copy_lines(err, log, tx));
        }
        Ok(AgentProcess { child, ready })
    }
}

/// Appends the agent's output to the log, noting when [`READY_LINE`] shows.
async fn copy_lines(
    from: impl tokio::io::AsyncRead + Unpin,
    log: Arc<Mutex<File>>,
    ready: Arc<tokio::sync::watch::Sender<bool>>,
) {
    let mut lines = BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.contains(READY_LINE) {
            ready.send_replace(true);
        }
        if let Ok(mut f) = log.lock() {
            let _ = writeln!(f, "{line}");
        }
    }
}

impl AgentProcess {
    /// Waits until the agent's controllers run, for `limit` at most; whether they do.
    pub async fn wait_ready(&mut self, limit: std::time::Duration) -> bool {
        let wait = self.ready.wait_for(|r| *r);
        matches!(tokio::time::timeout(limit, wait).await, Ok(Ok(_)))
    }

    /// How the process ended, if it has.
    pub fn ended(&mut self) -> anyhow::Result<Option<Ended>> {
        Ok(self.child.try_wait()?.map(|status| match status.code() {
            Some(kerf_agent::failpoints::EXIT_CODE) => Ended::FailPoint,
            _ => Ended::Exited(status.to_string()),
        }))
    }

    /// Sends SIGKILL and reaps the process; how it ended (it may have ended before).
    pub async fn kill(mut self) -> anyhow::Result<Ended> {
        if let Some(ended) = self.ended()? {
            return Ok(ended);
        }
        self.child.start_kill()?;
        self.child.wait().await?;
        Ok(Ended::Killed)
    }
}

/// The agent binary next to the running example (`target/<profile>/kerf-agent`), built
/// with the fail points first.
pub fn build_beside_example() -> anyhow::Result<PathBuf> {
    kerf_testkit::agent_binary(kerf_testkit::AgentBuild::FailPoints)
}
