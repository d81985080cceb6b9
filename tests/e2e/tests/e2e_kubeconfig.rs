//! The harness's real-cluster mode (`KERF_E2E_CLUSTER=kubeconfig`), run against a second,
//! separately started kerf-sim that the harness knows only through a KUBECONFIG file: the
//! client is loaded from it (with the crypto provider installed), the agent's namespace is
//! made, a portable scenario passes, a sim-only scenario is reported skipped by name, and
//! each scenario's namespace, policies and kept hub state are gone afterwards.
//!
//! The outer test runs this test binary again with that environment, for the two inner
//! scenarios only (they are `#[ignore]`d so that a plain run leaves them out).

mod e2e_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use e2e_support::{AgentOptions, Env};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kerf_sim::sim::{Sim, SimConfig};
use kube::Api;
use kube::api::ListParams;

/// Set for the inner scenarios by the outer test.
const INNER_ENV: &str = "KERF_E2E_KUBECONFIG_INNER";

/// A kerf-sim on a thread and runtime of its own, reached only through its kubeconfig.
struct SeparateSim {
    kubeconfig: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl SeparateSim {
    fn start() -> anyhow::Result<SeparateSim> {
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let path = kubeconfig.clone();
        let thread = std::thread::spawn(move || {
            let rt = match tokio::runtime::Runtime::new() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            rt.block_on(async move {
                let config = SimConfig {
                    kubeconfig_path: Some(path),
                    kubelet_ready_delay: Duration::from_millis(50),
                    ..SimConfig::default()
                };
                match Sim::start(config).await {
                    Ok(sim) => {
                        let _ = ready_tx.send(Ok(()));
                        let _ = stop_rx.await;
                        drop(sim);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                    }
                }
            });
        });
        ready_rx
            .recv_timeout(Duration::from_secs(30))?
            .map_err(|e| anyhow::anyhow!("the separate kerf-sim did not start: {e}"))?;
        Ok(SeparateSim {
            kubeconfig,
            stop: Some(stop_tx),
            thread: Some(thread),
            _dir: dir,
        })
    }
}

impl Drop for SeparateSim {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs the inner scenarios of this binary in real-cluster mode against `kubeconfig`.
fn run_inner(kubeconfig: &Path) -> anyhow::Result<(bool, String, String)> {
    let out = Command::new(std::env::current_exe()?)
        .args(["inner_", "--ignored", "--test-threads=1", "--nocapture"])
        .env("KERF_E2E_CLUSTER", "kubeconfig")
        .env("KUBECONFIG", kubeconfig)
        .env(INNER_ENV, "1")
        .env_remove(e2e_support::WATCH_DELAY_ENV)
        .output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

// portable (the harness itself)
#[test]
fn the_harness_runs_on_a_cluster_named_by_kubeconfig_and_cleans_up() -> anyhow::Result<()> {
    let sim = SeparateSim::start()?;
    let (ok, stdout, stderr) = run_inner(&sim.kubeconfig)?;
    assert!(ok, "inner scenarios failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("test result: ok. 2 passed"),
        "both inner scenarios must run:\n{stdout}"
    );
    assert!(
        stderr.contains("SKIPPED (sim-only): e2e-kc-sim-only"),
        "the sim-only scenario is not reported skipped:\n{stderr}"
    );
    assert!(
        stderr.contains("e2e sim-only summary: 1 skipped [e2e-kc-sim-only]"),
        "no summary line:\n{stderr}"
    );
    let ns = stdout
        .lines()
        .find_map(|l| l.split_once("E2E-NAMESPACE ").map(|(_, ns)| ns.trim()))
        .ok_or_else(|| anyhow::anyhow!("the portable scenario named no namespace:\n{stdout}"))?
        .to_owned();
    assert!(
        ns.starts_with("e2e-kc-audit-"),
        "not a suffixed namespace: {ns}"
    );

    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let client = kerf_sim::sim::client_for(&sim.kubeconfig).await?;
        let nss: Api<Namespace> = Api::all(client.clone());
        assert!(
            nss.get_opt("kerf-system").await?.is_some(),
            "no kerf-system"
        );
        let left = nss.get_opt(&ns).await?;
        assert!(
            left.is_none_or(|n| n.metadata.deletion_timestamp.is_some()),
            "namespace {ns} left behind"
        );
        let policies = e2e_support::policy_api(&client)
            .list(&ListParams::default())
            .await?;
        let names: Vec<_> = policies
            .items
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        assert!(names.is_empty(), "policies left behind: {names:?}");
        let cms: Api<ConfigMap> = Api::namespaced(client, "kerf-system");
        assert!(
            cms.get_opt("kerf-hub-state").await?.is_none(),
            "hub state left behind"
        );
        anyhow::Ok(())
    })
}

fn inner_only() -> anyhow::Result<()> {
    anyhow::ensure!(
        std::env::var(INNER_ENV).is_ok(),
        "run by the_harness_runs_on_a_cluster_named_by_kubeconfig_and_cleans_up, not alone"
    );
    Ok(())
}

#[ignore = "run by the_harness_runs_on_a_cluster_named_by_kubeconfig_and_cleans_up"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inner_portable_scenario() -> anyhow::Result<()> {
    inner_only()?;
    let mut env = Env::start("e2e-kc-audit").await?;
    assert!(env.sim.is_none(), "the harness started its own kerf-sim");
    println!("E2E-NAMESPACE {}", env.ns);
    env.web(1).await?;
    env.policy_of("kc-audit", "audit", "in-place").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;
    let rsr = env.wait_phase("web", "Skipped").await?;
    assert_eq!(
        rsr["status"]["summary"]["reason"], "ModeAudit",
        "{}",
        rsr["status"]
    );
    e2e_support::eventually("the kept hub state", e2e_support::WAIT, || async {
        let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), "kerf-system");
        cms.get_opt("kerf-hub-state").await.ok()?
    })
    .await?;
    Ok(())
}

#[ignore = "run by the_harness_runs_on_a_cluster_named_by_kubeconfig_and_cleans_up"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inner_sim_only_scenario() -> anyhow::Result<()> {
    inner_only()?;
    let env = Env::start("e2e-kc-sim-only").await?;
    if !env.sim_only("e2e-kc-sim-only") {
        return Ok(());
    }
    anyhow::bail!("a sim-only scenario ran on a cluster named by KUBECONFIG")
}
