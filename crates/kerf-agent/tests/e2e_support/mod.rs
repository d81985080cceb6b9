//! The e2e harness (design section 12, D29): a cluster, a dev hub and the agent, all in
//! this process, talking only through the Kubernetes API and the hub API.
//!
//! The cluster is an in-process kerf-sim, or, with `KERF_E2E_CLUSTER=kubeconfig`, the
//! cluster `KUBECONFIG` (or the in-cluster config) names; the dev hub and the agent run in
//! this process either way. Scenarios tagged `sim` call [`Env::sim_only`] and are skipped
//! on a real cluster.

#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kerf_agent::cli::{Cli, Command};
use kerf_agent::clock::SystemClock;
use kerf_agent::runtime::Agent;
use kerf_agent::settings::Settings;
use kerf_api::event::{Event, EventType};
use kerf_api::hub::{ClusterConfig, Recommendation};
use kerf_sim::hub::{DevHub, DevHubConfig};
use kerf_sim::sim::{Sim, SimConfig};
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
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
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,kerf_agent=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

impl Env {
    /// Starts a cluster (kerf-sim unless [`CLUSTER_ENV`] says otherwise), applies the CRDs,
    /// makes namespace `<scenario>` (with a random suffix on a real cluster) and starts a
    /// dev hub with an empty recommendation list and config.
    pub async fn start(scenario: &str) -> anyhow::Result<Env> {
        init_logs();
        let real = std::env::var(CLUSTER_ENV).is_ok_and(|v| v == "kubeconfig");
        let (sim, client, ns) = if real {
            let client = Client::try_default().await?;
            let ns = format!("{scenario}-{:04x}", fastrand::u16(..));
            (None, client, ns)
        } else {
            let sim = Sim::start(SimConfig {
                kubelet_ready_delay: Duration::from_millis(50),
                ..SimConfig::default()
            })
            .await?;
            let client = sim.client();
            (Some(sim), client, scenario.to_owned())
        };
        apply_crds(&client).await?;
        let nss: Api<Namespace> = Api::all(client.clone());
        let body = json!({"metadata": {"name": ns, "labels": {"kerf-e2e": "true"}}});
        nss.create(&PostParams::default(), &serde_json::from_value(body)?)
            .await?;
        let hub = kerf_sim::hub::start(DevHubConfig::default()).await?;
        hub.set_recommendations(CLUSTER, Vec::new());
        hub.set_config(CLUSTER, ClusterConfig::default());
        Ok(Env {
            sim,
            client,
            hub,
            ns,
            agent: None,
        })
    }

    /// Whether the scenario runs on kerf-sim. A `sim` scenario returns early otherwise.
    pub fn sim_only(&self, scenario: &str) -> bool {
        if self.sim.is_none() {
            eprintln!("{scenario}: skipped, it needs kerf-sim's fault injection");
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
    /// that need a particular Kubernetes version or node size).
    pub async fn start_sim(scenario: &str, config: SimConfig) -> anyhow::Result<Env> {
        init_logs();
        Env::with_sim(scenario, Sim::start(config).await?).await
    }

    /// Like [`Env::start_sim`], over a kerf-sim already started (on a runtime of its own,
    /// say); the client is made on the caller's runtime.
    pub async fn with_sim(scenario: &str, sim: Sim) -> anyhow::Result<Env> {
        init_logs();
        let client = kerf_sim::sim::client_for(sim.kubeconfig_path()).await?;
        apply_crds(&client).await?;
        let nss: Api<Namespace> = Api::all(client.clone());
        let body = json!({"metadata": {"name": scenario, "labels": {"kerf-e2e": "true"}}});
        nss.create(&PostParams::default(), &serde_json::from_value(body)?)
            .await?;
        let hub = kerf_sim::hub::start(DevHubConfig::default()).await?;
        hub.set_recommendations(CLUSTER, Vec::new());
        hub.set_config(CLUSTER, ClusterConfig::default());
        Ok(Env {
            sim: Some(sim),
            client,
            hub,
            ns: scenario.to_owned(),
            agent: None,
        })
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
