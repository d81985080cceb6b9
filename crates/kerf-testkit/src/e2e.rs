//! The e2e harness (design section 12, D29): a cluster, a dev hub and the agent, all in
//! this process, talking only through the Kubernetes API and the hub API.
//!
//! The cluster is an in-process kerf-sim, or, with `KERF_E2E_CLUSTER=kubeconfig`, the
//! cluster `KUBECONFIG` (or the in-cluster config) names; the dev hub and the agent run in
//! this process either way. On such a cluster the harness makes the agent's namespace
//! `kerf-system` when it is missing, and each scenario deletes what it made when its [`Env`]
//! is dropped (passing or failing): its namespace, its policies, the agent's kept hub state
//! and Lease. Scenarios tagged `sim` start with [`Env::start_sim_only`] (or call
//! [`Env::sim_only`]): on a real cluster they are skipped, with a `SKIPPED (sim-only):
//! <name>` line and a running summary on stderr that the test harness does not capture.
//! `KERF_E2E_WATCH_DELAY` (`50ms..400ms`) makes the in-process kerf-sim deliver watch
//! events late (`SimConfig::watch_delay`).

use std::io::Write;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use kerf_agent::cli::{Cli, Command};
use kerf_agent::clock::SystemClock;
use kerf_agent::runtime::Agent;
use kerf_agent::settings::Settings;
use kerf_api::hub::ClusterConfig;
use kerf_sim::hub::{DevHub, DevHubConfig};
use kerf_sim::kubelet::{Fault, inject};
use kerf_sim::sim::{Sim, SimConfig};
use kube::Client;

mod cleanup;
mod logs;
mod objects;

pub use crate::{CRDS, WAIT, apply_crds};

/// How often the e2e helpers poll.
pub const POLL: Duration = Duration::from_millis(100);

/// Polls `check` every [`POLL`] until it gives a value, for `timeout` at most.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    crate::eventually_every(POLL, what, timeout, check).await
}
pub use cleanup::{clean_up, ensure_namespace};
pub use logs::{LogCapture, capture_logs};
pub use objects::Web;
pub use objects::{
    assert_pod_requests, assert_template_requests, condition, event_cpu_requests, is_ready,
    manager, metric_sample, metric_sum, pod_names, pod_resources, policy_api, policy_spec, rsr_api,
    template_resources, watched_policy_spec,
};

/// The scope the agent's flags `flags` give, read as `kerf-agent run` reads them.
pub fn scope_of(flags: &[&str]) -> anyhow::Result<kerf_agent::scope::Scope> {
    let mut argv = vec!["kerf-agent", "run", "--cluster-name", CLUSTER];
    argv.extend_from_slice(flags);
    let Command::Run(args) = Cli::try_parse_from(argv)?.command else {
        anyhow::bail!("not the run command");
    };
    Ok(Settings::from_args(&args, &|_| None)?.scope)
}

/// The cluster name the agent uses at the dev hub.
pub const CLUSTER: &str = "e2e";
/// The field manager of the workloads' owner, as after `kubectl apply`.
pub const USER_MANAGER: &str = "kubectl-client-side-apply";
/// Environment variable that selects a real cluster (`kubeconfig`).
pub const CLUSTER_ENV: &str = "KERF_E2E_CLUSTER";
/// Environment variable with a watch delay for the in-process kerf-sim (`50ms..400ms`).
pub const WATCH_DELAY_ENV: &str = "KERF_E2E_WATCH_DELAY";
/// The agent's namespace.
pub const AGENT_NAMESPACE: &str = "kerf-system";
/// The agent's Lease (the `--lease-name` default).
pub const AGENT_LEASE: &str = "kerf-agent";

/// Agent settings a scenario may change; the rest are short e2e defaults.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// `--hub-poll-interval`.
    pub poll_interval: &'static str,
    /// `--hub-stale-after`.
    pub stale_after: &'static str,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            poll_interval: "1s",
            stale_after: "30m",
        }
    }
}

/// A cluster, a dev hub and (once started) an agent.
pub struct Env {
    /// The simulated cluster; `None` on a real cluster.
    pub sim: Option<Sim>,
    /// A client of the cluster.
    pub client: Client,
    /// The dev hub.
    pub hub: DevHub,
    /// The namespace of the scenario's workloads.
    pub ns: String,
    agent: Option<Agent>,
    /// The policies [`Env::policy`] made, deleted on a real cluster when the scenario ends.
    policies: Mutex<Vec<String>>,
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,kerf_agent=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// Installs rustls' process-wide crypto provider (ring), which kube's client needs for a
/// cluster reached over TLS; a second call changes nothing.
pub fn init_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Whether [`CLUSTER_ENV`] selects a real cluster.
pub fn real_cluster() -> bool {
    std::env::var(CLUSTER_ENV).is_ok_and(|v| v == "kubeconfig")
}

/// The watch delay [`WATCH_DELAY_ENV`] asks for (none when unset).
pub fn watch_delay_from_env() -> anyhow::Result<Range<Duration>> {
    match std::env::var(WATCH_DELAY_ENV) {
        Ok(v) if !v.trim().is_empty() => kerf_sim::api::watch_delay::parse_range(&v)
            .map_err(|e| anyhow::anyhow!("{WATCH_DELAY_ENV}: {e}")),
        _ => Ok(kerf_sim::api::watch_delay::NONE),
    }
}

/// Sim-only scenarios of this test binary: skipped on a real cluster, and run on an
/// in-process kerf-sim while a real cluster was asked for.
static SIM_ONLY: Mutex<(Vec<String>, Vec<String>)> = Mutex::new((Vec::new(), Vec::new()));

/// Reports a sim-only scenario on stderr, past the test harness's output capture, with a
/// summary of this binary's sim-only scenarios so far.
fn report_sim_only(scenario: &str, skipped: bool) {
    let Ok(mut all) = SIM_ONLY.lock() else {
        return;
    };
    let line = if skipped {
        all.0.push(scenario.to_owned());
        format!("SKIPPED (sim-only): {scenario}")
    } else {
        all.1.push(scenario.to_owned());
        format!("RAN ON KERF-SIM (sim-only): {scenario}")
    };
    let summary = format!(
        "e2e sim-only summary: {} skipped [{}], {} ran on kerf-sim [{}]",
        all.0.len(),
        all.0.join(", "),
        all.1.len(),
        all.1.join(", ")
    );
    let _ = std::io::stderr().write_all(format!("{line}\n{summary}\n").as_bytes());
}

impl Env {
    /// Starts a cluster (kerf-sim unless [`CLUSTER_ENV`] says otherwise), applies the CRDs,
    /// makes the agent's namespace if missing and namespace `<scenario>` (with a random
    /// suffix on a real cluster), and starts a dev hub with an empty recommendation list
    /// and config.
    pub async fn start(scenario: &str) -> anyhow::Result<Env> {
        init_logs();
        init_crypto();
        if real_cluster() {
            let client = Client::try_default().await.map_err(|e| {
                anyhow::anyhow!("{CLUSTER_ENV}=kubeconfig: no client from KUBECONFIG: {e}")
            })?;
            let ns = format!("{scenario}-{:04x}", fastrand::u16(..));
            return Env::on_cluster(None, client, ns).await;
        }
        let sim = Sim::start(SimConfig {
            watch_delay: watch_delay_from_env()?,
            ..crate::sim_config()
        })
        .await?;
        let client = sim.client();
        Env::on_cluster(Some(sim), client, scenario.to_owned()).await
    }

    /// The CRDs, the agent's namespace, the scenario's namespace and a dev hub.
    async fn on_cluster(sim: Option<Sim>, client: Client, ns: String) -> anyhow::Result<Env> {
        apply_crds(&client).await?;
        ensure_namespace(&client, AGENT_NAMESPACE, false).await?;
        let hub = kerf_sim::hub::start(DevHubConfig::default()).await?;
        hub.set_recommendations(CLUSTER, Vec::new());
        hub.set_config(CLUSTER, ClusterConfig::default());
        let env = Env {
            sim,
            client,
            hub,
            ns,
            agent: None,
            policies: Mutex::new(Vec::new()),
        };
        // Made last: from here on, dropping the Env cleans up.
        ensure_namespace(&env.client, &env.ns, true).await?;
        Ok(env)
    }

    /// OOM-kills container `app` of pod `pod` of the scenario's namespace (kerf-sim's
    /// fault injection).
    pub fn oom_kill(&self, pod: &str) -> anyhow::Result<()> {
        self.fault(pod, |namespace, pod, container| Fault::OomKill {
            namespace,
            pod,
            container,
        })
    }

    /// Restarts container `app` of pod `pod` of the scenario's namespace (kerf-sim's fault
    /// injection).
    pub fn restart_container(&self, pod: &str) -> anyhow::Result<()> {
        self.fault(pod, |namespace, pod, container| Fault::Restart {
            namespace,
            pod,
            container,
        })
    }

    fn fault(&self, pod: &str, make: fn(String, String, String) -> Fault) -> anyhow::Result<()> {
        let Some(sim) = self.sim.as_ref() else {
            anyhow::bail!("fault injection needs kerf-sim");
        };
        let fault = make(self.ns.clone(), pod.to_owned(), "app".to_owned());
        inject(sim.context(), fault)?;
        Ok(())
    }

    /// The kubeconfig that reaches the scenario's cluster, for tools such as kubectl:
    /// kerf-sim's, or on a real cluster `KUBECONFIG` (else `~/.kube/config`).
    pub fn kubeconfig_path(&self) -> std::path::PathBuf {
        match &self.sim {
            Some(sim) => sim.kubeconfig_path().to_path_buf(),
            None => std::env::var_os("KUBECONFIG")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| {
                    let home = std::env::var_os("HOME").unwrap_or_default();
                    std::path::PathBuf::from(home).join(".kube/config")
                }),
        }
    }

    /// Starts `scenario` (see [`Env::start`]) when it runs on kerf-sim; on a real cluster
    /// a `sim` scenario is reported as skipped (see [`Env::sim_only`]) and `None` comes
    /// back, for the scenario to return early.
    pub async fn start_sim_only(scenario: &str) -> anyhow::Result<Option<Env>> {
        let env = Env::start(scenario).await?;
        Ok(env.sim_only(scenario).then_some(env))
    }

    /// Whether the scenario runs on kerf-sim. A `sim` scenario returns early otherwise,
    /// and is reported as skipped (see [`report_sim_only`]).
    pub fn sim_only(&self, scenario: &str) -> bool {
        if self.sim.is_none() {
            report_sim_only(scenario, true);
        }
        self.sim.is_some()
    }

    /// The agent's settings: leader election off, metrics on a free port, hub at the dev
    /// hub, short durations.
    pub fn settings(&self, opts: &AgentOptions) -> anyhow::Result<Settings> {
        let url = self.hub.url();
        let (cert, key) = crate::webhook_cert_files()?;
        let (cert, key) = (cert.display().to_string(), key.display().to_string());
        let argv = [
            "kerf-agent",
            "run",
            "--cluster-name",
            CLUSTER,
            "--namespace",
            "kerf-system",
            "--hub-url",
            &url,
            "--hub-poll-interval",
            opts.poll_interval,
            "--hub-stale-after",
            opts.stale_after,
            "--leader-election=false",
            "--metrics-addr",
            "127.0.0.1:0",
            "--webhook-addr",
            "127.0.0.1:0",
            "--webhook-cert-file",
            &cert,
            "--webhook-key-file",
            &key,
            "--leader-identity",
            "e2e",
        ];
        let cli = Cli::try_parse_from(argv)?;
        let Command::Run(args) = cli.command else {
            anyhow::bail!("not the run command");
        };
        Ok(Settings::from_args(&args, &|_| None)?)
    }

    /// A client of the sim whose requests carry `user_agent`, so that the request log tells
    /// them from the test's own; an error on a real cluster (no request log to read).
    pub async fn client_as(&self, user_agent: &'static str) -> anyhow::Result<Client> {
        use http::{HeaderName, HeaderValue};
        let Some(sim) = self.sim.as_ref() else {
            anyhow::bail!("the request log needs kerf-sim");
        };
        let kc = kube::config::Kubeconfig::read_from(sim.kubeconfig_path())?;
        let opts = kube::config::KubeConfigOptions::default();
        let mut config = kube::Config::from_custom_kubeconfig(kc, &opts).await?;
        config.headers.push((
            HeaderName::from_static("user-agent"),
            HeaderValue::from_static(user_agent),
        ));
        Ok(Client::try_from(config)?)
    }

    /// Starts an agent in this process (stopping a running one first).
    pub async fn start_agent(&mut self, opts: &AgentOptions) -> anyhow::Result<()> {
        let settings = self.settings(opts)?;
        self.start_agent_with(settings).await;
        Ok(())
    }

    /// The running agent's metrics in the Prometheus text format (what `/metrics` serves).
    pub fn agent_metrics(&self) -> anyhow::Result<String> {
        let agent = self
            .agent
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no agent running"))?;
        Ok(agent.context().metrics.encode()?)
    }

    /// Stops the running agent gracefully.
    pub async fn stop_agent(&mut self) {
        if let Some(a) = self.agent.take() {
            a.stop().await;
        }
    }

    /// Kills the running agent: every task stops where it is.
    pub async fn kill_agent(&mut self) {
        if let Some(a) = self.agent.take() {
            a.abort().await;
        }
    }
}
impl Env {
    /// Like [`Env::start`], always on a kerf-sim built from `config` (for `sim` scenarios
    /// that need a particular Kubernetes version or node size). [`WATCH_DELAY_ENV`] applies
    /// when `config` sets no watch delay.
    pub async fn start_sim(scenario: &str, mut config: SimConfig) -> anyhow::Result<Env> {
        init_logs();
        if config.watch_delay == kerf_sim::api::watch_delay::NONE {
            config.watch_delay = watch_delay_from_env()?;
        }
        Env::with_sim(scenario, Sim::start(config).await?).await
    }

    /// Like [`Env::start_sim`], over a kerf-sim already started (on a runtime of its own,
    /// say); the client is made on the caller's runtime.
    pub async fn with_sim(scenario: &str, sim: Sim) -> anyhow::Result<Env> {
        init_logs();
        if real_cluster() {
            report_sim_only(scenario, false);
        }
        let client = kerf_sim::sim::client_for(sim.kubeconfig_path()).await?;
        Env::on_cluster(Some(sim), client, scenario.to_owned()).await
    }

    /// Starts an agent with `settings` as given (stopping a running one first).
    pub async fn start_agent_with(&mut self, settings: Settings) {
        self.stop_agent().await;
        self.agent = Some(self.spawn_agent(settings).await);
    }

    /// Starts an agent the scenario holds itself (several may run side by side). Panics
    /// when an address of `settings` cannot be bound (the harness binds port 0).
    #[allow(clippy::panic)] // test helper: an agent that cannot start fails the test
    pub async fn spawn_agent(&self, settings: Settings) -> Agent {
        match Agent::start(self.client.clone(), settings, Arc::new(SystemClock)).await {
            Ok(agent) => agent,
            Err(e) => panic!("the agent did not start: {e}"),
        }
    }
}
