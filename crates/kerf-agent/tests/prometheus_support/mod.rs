//! A real Prometheus process for tests (Debian's `prometheus` package, which .ci/run
//! installs, brings both `prometheus` and `promtool`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration as StdDuration;

/// A Prometheus process, killed when dropped.
pub struct Prometheus {
    child: Child,
    _dir: tempfile::TempDir,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on at the moment.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `name` on PATH.
pub fn binary(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Starts Prometheus with `config` (YAML) and `args` on the TSDB under `dir/data`, and waits
/// until it is ready. `dir` is removed when the process is dropped.
pub async fn start(
    bin: &Path,
    config: &str,
    args: &[&str],
    dir: tempfile::TempDir,
) -> anyhow::Result<Prometheus> {
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(&cfg, config)?;
    let port = free_port()?;
    let child = Command::new(bin)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let prom = Prometheus {
        child,
        _dir: dir,
        url: format!("http://127.0.0.1:{port}"),
    };
    let http = reqwest::Client::new();
    for _ in 0..300 {
        if let Ok(r) = http.get(format!("{}/-/ready", prom.url)).send().await
            && r.status().is_success()
        {
            return Ok(prom);
        }
        tokio::time::sleep(StdDuration::from_millis(100)).await;
    }
    anyhow::bail!("prometheus never became ready")
}
