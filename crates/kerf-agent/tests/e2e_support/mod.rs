//! The e2e harness (design section 12, D29): a cluster, a dev hub and the agent, all in
//! this process, talking only through the Kubernetes API and the hub API.
//!
//! The cluster is an in-process kerf-sim, or, with `KERF_E2E_CLUSTER=kubeconfig`, the
//! cluster `KUBECONFIG` (or the in-cluster config) names; the dev hub and the agent run in
//! this process either way. On such a cluster the harness makes the agent's namespace
//! `kerf-system` when it is missing, and each scenario deletes what it made when its [`Env`]
//! is dropped (passing or failing): its namespace, its policies, the agent's kept hub state
//! and Lease. Scenarios tagged `sim` call [`Env::sim_only`]: on a real cluster they are
//! skipped, with a `SKIPPED (sim-only): <name>` line and a running summary on stderr that
//! the test harness does not capture. `KERF_E2E_WATCH_DELAY` (`50ms..400ms`) makes the
//! in-process kerf-sim deliver watch events late (`SimConfig::watch_delay`).

#![allow(dead_code)]

use std::future::Future;
use std::io::Write;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kerf_agent::cli::{Cli, Command};
use kerf_agent::clock::SystemClock;
use kerf_agent::runtime::Agent;
use kerf_agent::settings::Settings;
use kerf_api::event::{Event, EventType};
use kerf_api::hub::{ClusterConfig, Recommendation};
use kerf_sim::hub::{DevHub, DevHubConfig};
use kerf_sim::sim::{Sim, SimConfig};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::{Value, json};

/// The CRDs, as the chart installs them.
pub const CRDS: &str = include_str!("../../../../config/crds/kerf.getkerf.dev.yaml");
/// The cluster name the agent uses at the dev hub.
pub const CLUSTER: &str = "e2e";
/// Default wait of the helpers.
pub const WAIT: Duration = Duration::from_secs(15);
/// How often the helpers poll.
pub const POLL: Duration = Duration::from_millis(100);
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
            kubelet_ready_delay: Duration::from_millis(50),
            watch_delay: watch_delay_from_env()?,
            ..SimConfig::default()
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
            "--leader-identity",
            "e2e",
        ];
        let cli = Cli::try_parse_from(argv)?;
        let Command::Run(args) = cli.command else {
            anyhow::bail!("not the run command");
        };
        Ok(Settings::from_args(&args, &|_| None)?)
    }

    /// Starts an agent in this process (stopping a running one first).
    pub async fn start_agent(&mut self, opts: &AgentOptions) -> anyhow::Result<()> {
        self.stop_agent().await;
        let settings = self.settings(opts)?;
        let agent = Agent::start(self.client.clone(), settings, Arc::new(SystemClock)).await;
        self.agent = Some(agent);
        Ok(())
    }

    /// The running agent's metrics in the Prometheus text format (what `/metrics` serves).
    #[allow(dead_code)]
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

    /// Creates (or replaces the spec of) RightsizingPolicy `name`.
    pub async fn policy(&self, name: &str, spec: Value) -> anyhow::Result<()> {
        let body = json!({
            "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingPolicy",
            "metadata": {"name": name}, "spec": spec,
        });
        if let Ok(mut made) = self.policies.lock()
            && !made.iter().any(|p| p == name)
        {
            made.push(name.to_owned());
        }
        let pp = PatchParams::apply(USER_MANAGER).force();
        policy_api(&self.client)
            .patch(name, &pp, &Patch::Apply(&body))
            .await?;
        Ok(())
    }

    /// A Deployment `name` with `replicas` pods and one container `app` requesting `cpu`
    /// and `memory`, created as `kubectl apply` does.
    pub async fn deployment(
        &self,
        name: &str,
        replicas: i32,
        cpu: &str,
        memory: &str,
    ) -> anyhow::Result<String> {
        let labels = json!({"app": name});
        let d: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": self.ns, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                    "name": "app", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}
        }))?;
        let pp = PostParams {
            field_manager: Some(USER_MANAGER.into()),
            ..PostParams::default()
        };
        let made = self.deployments().create(&pp, &d).await?;
        Ok(made.metadata.uid.unwrap_or_default())
    }

    /// The Deployments of the namespace.
    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// The Deployment `name` as JSON.
    pub async fn deployment_json(&self, name: &str) -> anyhow::Result<Value> {
        Ok(serde_json::to_value(self.deployments().get(name).await?)?)
    }

    /// The running pods of Deployment `name` (label `app=<name>`), not terminating.
    pub async fn pods(&self, name: &str) -> anyhow::Result<Vec<Pod>> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let lp = ListParams::default().labels(&format!("app={name}"));
        let pods = api.list(&lp).await?.items;
        Ok(pods
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect())
    }

    /// Waits until Deployment `name` has `n` Ready pods.
    pub async fn wait_ready(&self, name: &str, n: usize) -> anyhow::Result<Vec<Pod>> {
        eventually(&format!("{n} Ready pods of {name}"), WAIT, || async {
            let pods = self.pods(name).await.ok()?;
            let ready = pods.iter().filter(|p| is_ready(p)).count();
            (ready == n && pods.len() == n).then_some(pods)
        })
        .await
    }

    /// Publishes `recs` as the cluster's recommendations.
    pub fn recommend(&self, recs: Vec<Recommendation>) {
        self.hub.set_recommendations(CLUSTER, recs);
    }

    /// A recommendation for Deployment `name` in the scenario's namespace: container `app`
    /// to `cpu`/`memory`, with `confidence`, 14 days of data.
    pub fn recommendation(
        &self,
        name: &str,
        cpu: &str,
        memory: &str,
        confidence: &str,
    ) -> anyhow::Result<Recommendation> {
        Ok(serde_json::from_value(json!({
            "workload": {"namespace": self.ns, "kind": "Deployment", "name": name},
            "recommendationID": format!("rec-{name}-{cpu}-{memory}"),
            "generatedAt": chrono::Utc::now(),
            "confidence": confidence,
            "dataCoverage": {"covered": "336h", "window": "336h"},
            "settings": {"window": "336h", "cpuPercentile": 90, "memoryPercentile": 99,
                "headroomPercent": 15, "limits": "Keep"},
            "containers": [{"name": "app", "requests": {"cpu": cpu, "memory": memory},
                "confidence": confidence}],
        }))?)
    }

    /// Asserts that every pod of `name` still requests `cpu`.
    #[allow(dead_code)]
    pub async fn assert_cpu_unchanged(&self, name: &str, cpu: &str) -> anyhow::Result<()> {
        for p in self.pods(name).await? {
            assert_eq!(
                pod_resources(&p)["requests"]["cpu"],
                cpu,
                "{name} changed while it had to stay"
            );
        }
        Ok(())
    }

    /// The rsr `name` of the namespace as JSON, if it exists.
    pub async fn rsr(&self, name: &str) -> anyhow::Result<Option<Value>> {
        let api = rsr_api(&self.client, &self.ns);
        Ok(api
            .get_opt(name)
            .await?
            .map(serde_json::to_value)
            .transpose()?)
    }

    /// Polls rsr `name` every 100 ms until `pred` holds; fails after `timeout` with the
    /// last status seen.
    pub async fn wait_rsr(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last = None;
        loop {
            if let Some(r) = self.rsr(name).await? {
                if pred(&r) {
                    return Ok(r);
                }
                last = Some(r);
            }
            if tokio::time::Instant::now() > deadline {
                let shown = last.as_ref().map_or_else(
                    || "rsr does not exist".to_owned(),
                    |r| serde_json::to_string_pretty(&r["status"]).unwrap_or_default(),
                );
                anyhow::bail!(
                    "timed out after {timeout:?} waiting for rsr {name}: {what}\nlast status: {shown}"
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until rsr `name` is in `phase`.
    pub async fn wait_phase(&self, name: &str, phase: &str) -> anyhow::Result<Value> {
        self.wait_rsr(name, &format!("phase {phase}"), WAIT, |r| {
            r["status"]["phase"] == phase
        })
        .await
    }

    /// The events the dev hub stored for workload `name`, of type `t`.
    pub fn hub_events(&self, name: &str, t: EventType) -> Vec<Event> {
        self.hub
            .events(CLUSTER)
            .into_iter()
            .filter(|e| e.workload.name == name && e.workload.namespace == self.ns)
            .filter(|e| e.type_ == t)
            .collect()
    }

    /// Waits until the dev hub stored at least one event of type `t` for `name`.
    pub async fn wait_hub_event(&self, name: &str, t: EventType) -> anyhow::Result<Vec<Event>> {
        let what = format!("a {} event for {name} at the hub", t.as_str());
        let stored = eventually(&what, WAIT, || async {
            let found = self.hub_events(name, t);
            (!found.is_empty()).then_some(found)
        })
        .await;
        stored.map_err(|e| {
            let all: Vec<String> = self
                .hub
                .events(CLUSTER)
                .iter()
                .map(|e| format!("{} {} {}", e.workload.name, e.type_.as_str(), e.reason))
                .collect();
            anyhow::anyhow!("{e}; stored: {all:?}")
        })
    }
}

/// Whether a pod is Ready.
pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Polls `check` every 100 ms until it gives a value, for `timeout` at most.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Applies `config/crds/kerf.getkerf.dev.yaml` (an existing CRD is kept) and waits until
/// the policies are served.
pub async fn apply_crds(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for doc in serde_yaml::Deserializer::from_str(CRDS) {
        let crd = CustomResourceDefinition::deserialize(doc)?;
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let policies = policy_api(client);
    eventually("the RightsizingPolicy CRD to be served", WAIT, || async {
        policies.list(&ListParams::default()).await.ok().map(|_| ())
    })
    .await
}

/// RightsizingPolicies as dynamic objects.
pub fn policy_api(client: &Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "kerf.getkerf.dev".into(),
        version: "v1alpha1".into(),
        api_version: "kerf.getkerf.dev/v1alpha1".into(),
        kind: "RightsizingPolicy".into(),
        plural: "rightsizingpolicies".into(),
    };
    Api::all_with(client.clone(), &ar)
}

/// RightsizingRecommendations of a namespace as dynamic objects.
pub fn rsr_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    kerf_agent::rsr_sync::rsr_api(client.clone(), ns)
}

/// A policy spec selecting `ns` with 1s durations, mode `mode` and strategy `strategy`.
pub fn policy_spec(ns: &str, mode: &str, strategy: &str) -> Value {
    json!({
        "priority": 10,
        "selector": {"namespaces": [ns]},
        "mode": mode,
        "guardrails": {"learningPeriod": "1s", "minConfidence": "0.5", "cooldown": "1s",
            "rollback": {"watchDuration": "1s"}},
        "apply": {"strategy": strategy, "fallbackAfter": "5s", "minWindowRemaining": "1s"},
    })
}

/// The condition `type_` of an rsr.
pub fn condition<'a>(rsr: &'a Value, type_: &str) -> Option<&'a Value> {
    rsr["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The managedFields entry of `manager`.
pub fn manager<'a>(obj: &'a Value, name: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|m| m["manager"] == name)
}

/// The resources of container `app` of the Deployment's template.
pub fn template_resources(obj: &Value) -> &Value {
    &obj["spec"]["template"]["spec"]["containers"][0]["resources"]
}

/// The spec resources of container `app` of a pod.
pub fn pod_resources(p: &Pod) -> Value {
    serde_json::to_value(p)
        .map(|v| v["spec"]["containers"][0]["resources"].clone())
        .unwrap_or_default()
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
        let agent = Agent::start(self.client.clone(), settings, Arc::new(SystemClock)).await;
        self.agent = Some(agent);
    }

    /// Starts an agent the scenario holds itself (several may run side by side).
    pub async fn spawn_agent(&self, settings: Settings) -> Agent {
        Agent::start(self.client.clone(), settings, Arc::new(SystemClock)).await
    }
}

/// The value of the sample `series` (name and labels as encoded) in the Prometheus text
/// `metrics`; 0 when absent.
#[allow(dead_code)]
pub fn metric_sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Creates namespace `name` (labelled `kerf-e2e=true` when `scenario`); an existing one is
/// kept.
pub async fn ensure_namespace(client: &Client, name: &str, scenario: bool) -> anyhow::Result<()> {
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut body = json!({"metadata": {"name": name}});
    if scenario {
        body["metadata"]["labels"] = json!({"kerf-e2e": "true"});
    }
    match nss
        .create(&PostParams::default(), &serde_json::from_value(body)?)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 && !scenario => Ok(()),
        Err(e) => Err(anyhow::anyhow!("creating namespace {name}: {e}")),
    }
}

/// What a scenario leaves on a real cluster: its namespace (with its workloads and rsrs),
/// the policies it made or that select its namespace, and the agent's kept hub state and
/// Lease in [`AGENT_NAMESPACE`].
pub async fn clean_up(client: &Client, ns: &str, policies: &[String]) -> anyhow::Result<()> {
    let dp = DeleteParams::background();
    let gone = |r: Result<_, kube::Error>| match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    };
    let api = policy_api(client);
    let mut names = policies.to_vec();
    for p in api.list(&ListParams::default()).await?.items {
        let selects = p.data["spec"]["selector"]["namespaces"]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n == ns));
        if let Some(name) = p.metadata.name.filter(|_| selects) {
            names.push(name);
        }
    }
    names.sort();
    names.dedup();
    for name in &names {
        gone(api.delete(name, &dp).await.map(|_| ()))?;
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), AGENT_NAMESPACE);
    gone(
        cms.delete(kerf_agent::hub::persist::CONFIG_MAP_NAME, &dp)
            .await
            .map(|_| ()),
    )?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), AGENT_NAMESPACE);
    gone(leases.delete(AGENT_LEASE, &dp).await.map(|_| ()))?;
    let nss: Api<Namespace> = Api::all(client.clone());
    gone(nss.delete(ns, &dp).await.map(|_| ()))?;
    Ok(())
}

impl Drop for Env {
    /// On a real cluster: stops the agent and deletes what the scenario made (see
    /// [`clean_up`]), from a thread of its own with a client of its own, since the
    /// scenario's runtime cannot be blocked on. A failed cleanup is reported on stderr.
    fn drop(&mut self) {
        drop(self.agent.take());
        if self.sim.is_some() {
            return;
        }
        let ns = self.ns.clone();
        let policies = self.policies.lock().map(|p| p.clone()).unwrap_or_default();
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let client = Client::try_default().await?;
                clean_up(&client, &ns, &policies).await
            })
        });
        let outcome = match cleanup.join() {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "the cleanup thread panicked".to_owned(),
        };
        let _ = std::io::stderr()
            .write_all(format!("e2e cleanup of {} failed: {outcome}\n", self.ns).as_bytes());
    }
}
