//! A real Prometheus process for tests (Debian's `prometheus` package, which .ci/run
//! installs, brings both `prometheus` and `promtool`).

#![allow(dead_code)] // each test binary uses the part it needs

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

/// Backfills the OpenMetrics `text` with `promtool tsdb create-blocks-from openmetrics`
/// and starts Prometheus on it with `args` (a 1m scrape interval, nothing scraped). Fails
/// with an install message when `prometheus` or `promtool` is not on PATH.
pub async fn with_series(text: &str, args: &[&str]) -> anyhow::Result<Prometheus> {
    let (Some(prometheus), Some(promtool)) = (binary("prometheus"), binary("promtool")) else {
        anyhow::bail!(
            "prometheus and promtool are needed on PATH for tests against a real Prometheus: \
             install them (`apt-get install prometheus`, as .ci/run does)"
        );
    };
    let dir = tempfile::tempdir()?;
    let input = dir.path().join("series.om");
    std::fs::write(&input, text)?;
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data)?;
    let out = Command::new(promtool)
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&input)
        .arg(&data)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "promtool failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    start(&prometheus, "global:\n  scrape_interval: 1m\n", args, dir).await
}
