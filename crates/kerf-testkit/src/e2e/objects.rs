//! What a scenario makes and reads: policies, Deployments, pods, recommendations, rsrs
//! and the events the dev hub stored.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event as K8sEvent, Pod};
use kerf_api::RightsizingPolicy;
use kerf_api::event::{Event, EventType};
use kerf_api::hub::Recommendation;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{AgentOptions, CLUSTER, Env, POLL, USER_MANAGER, WAIT, eventually};

/// The one workload most scenarios start with: Deployment `web` (see [`Env::web`]) under
/// policy `policy` (see [`Env::policy_of`]), with a recommendation (see
/// [`Env::recommend_web`]).
#[derive(Clone, Debug)]
pub struct Web {
    /// Pods of `web`; 2 unless set.
    pub replicas: i32,
    /// The policy's name, mode and strategy.
    pub policy: (&'static str, &'static str, &'static str),
    /// The recommendation's cpu, memory and confidence; 150m, 200Mi, 0.9 unless set.
    pub recommendation: (&'static str, &'static str, &'static str),
}

impl Web {
    /// Two pods under policy `name` with `mode` and `strategy`, recommended 150m/200Mi at
    /// confidence 0.9.
    pub fn policy(name: &'static str, mode: &'static str, strategy: &'static str) -> Web {
        Web {
            replicas: 2,
            policy: (name, mode, strategy),
            recommendation: ("150m", "200Mi", "0.9"),
        }
    }

    /// The same with `replicas` pods.
    pub fn replicas(self, replicas: i32) -> Web {
        Web { replicas, ..self }
    }

    /// The same with a recommendation of `cpu`/`memory` at `confidence`.
    pub fn recommend(
        self,
        cpu: &'static str,
        memory: &'static str,
        confidence: &'static str,
    ) -> Web {
        Web {
            recommendation: (cpu, memory, confidence),
            ..self
        }
    }
}

impl Env {
    /// Starts scenario `scenario` (see [`Env::start`]) with the workload, policy and
    /// recommendation of `web`, and an agent of default options.
    pub async fn start_web(scenario: &str, web: Web) -> anyhow::Result<Env> {
        let env = Env::start(scenario).await?;
        env.with_web(web).await
    }

    /// Starts scenario `scenario` with one pod of `web` under policy `p` in auto-patch,
    /// recommended its own requests, and waits until it is at rest: skipped
    /// (NoSignificantChange), the skip reported, and the passes that decision triggered
    /// ended.
    pub async fn start_at_rest(scenario: &str) -> anyhow::Result<Env> {
        let web = Web::policy("p", "auto-patch", "rollout")
            .replicas(1)
            .recommend("200m", "256Mi", "0.9");
        let env = Env::start_web(scenario, web).await?;
        env.wait_phase("web", "Skipped").await?;
        eventually("the skip reported", Duration::from_secs(20), || async {
            let rsr = env.rsr("web").await.ok()??;
            let reported = rsr["status"]["reported"].as_array()?;
            (!reported.is_empty()).then_some(())
        })
        .await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(env)
    }

    /// How many times the dev hub has been asked for the recommendations.
    pub fn recommendation_polls(&self) -> usize {
        self.hub
            .requests_to(kerf_sim::hub::Endpoint::Recommendations)
            .len()
    }

    /// Deployment `api` of one pod recommended 150m/200Mi next to `web`, until its rsr is
    /// Blocked with `reason`; answers the rsr.
    pub async fn api_blocked(&self, reason: &str) -> anyhow::Result<Value> {
        self.deployment("api", 1, "200m", "256Mi").await?;
        self.wait_ready("api", 1).await?;
        self.recommend(vec![
            self.recommendation("web", "150m", "200Mi", "0.9")?,
            self.recommendation("api", "150m", "200Mi", "0.9")?,
        ]);
        self.wait_rsr("api", &format!("Blocked {reason}"), WAIT, |r| {
            condition(r, "Blocked").is_some_and(|c| c["reason"] == reason)
        })
        .await
    }

    /// Like [`Env::start_web`], on a kerf-sim built from `config` (see [`Env::start_sim`]).
    pub async fn start_web_sim(
        scenario: &str,
        web: Web,
        config: kerf_sim::sim::SimConfig,
    ) -> anyhow::Result<Env> {
        let env = Env::start_sim(scenario, config).await?;
        env.with_web(web).await
    }

    /// The workload, policy and recommendation of `web`, and an agent of default options.
    async fn with_web(mut self, web: Web) -> anyhow::Result<Env> {
        let env = &mut self;
        env.web(web.replicas).await?;
        let (name, mode, strategy) = web.policy;
        env.policy_of(name, mode, strategy).await?;
        let (cpu, memory, confidence) = web.recommendation;
        env.recommend_web(cpu, memory, confidence)?;
        env.start_agent(&AgentOptions::default()).await?;
        Ok(self)
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

    /// Deployment `web` of `replicas` pods requesting 200m/256Mi (see [`Env::deployment`]),
    /// once its pods are Ready.
    pub async fn web(&self, replicas: i32) -> anyhow::Result<Vec<Pod>> {
        self.deployment("web", replicas, "200m", "256Mi").await?;
        self.wait_ready("web", usize::try_from(replicas)?).await
    }

    /// Policy `name`: [`policy_spec`] of the namespace with `mode` and `strategy`.
    pub async fn policy_of(&self, name: &str, mode: &str, strategy: &str) -> anyhow::Result<()> {
        self.policy(name, policy_spec(&self.ns, mode, strategy))
            .await
    }

    /// Publishes one recommendation: `web` to `cpu`/`memory` with `confidence` (see
    /// [`Env::recommendation`]).
    pub fn recommend_web(&self, cpu: &str, memory: &str, confidence: &str) -> anyhow::Result<()> {
        self.recommend(vec![self.recommendation("web", cpu, memory, confidence)?]);
        Ok(())
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
        crate::hub_recommendation(
            [&self.ns, "Deployment", name],
            &format!("rec-{name}-{cpu}-{memory}"),
            [cpu, memory],
            confidence,
        )
    }

    /// Asserts that every pod of `name` still requests `cpu`.
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

    /// The Kubernetes Events of the namespace with `reason`; only those whose involved
    /// object is rsr `rsr`, when given.
    pub async fn k8s_events(
        &self,
        rsr: Option<&str>,
        reason: Option<&str>,
    ) -> anyhow::Result<Vec<K8sEvent>> {
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &self.ns);
        let all = api.list(&ListParams::default()).await?.items;
        let on_rsr = |e: &K8sEvent| {
            rsr.is_none_or(|name| {
                e.involved_object.kind.as_deref() == Some("RightsizingRecommendation")
                    && e.involved_object.name.as_deref() == Some(name)
            })
        };
        Ok(all
            .into_iter()
            .filter(|e| on_rsr(e) && reason.is_none_or(|r| e.reason.as_deref() == Some(r)))
            .collect())
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

    /// Polls rsr `name` every [`POLL`] until `pred` holds; fails after `timeout` with the
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

/// RightsizingPolicies as dynamic objects.
pub fn policy_api(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::erase::<RightsizingPolicy>(&()),
    )
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

/// [`policy_spec`] of `ns` in auto-patch with `strategy`, a cooldown of `cooldown` and the
/// rollback settings `rollback` (`{"watchDuration": "60s"}`).
pub fn watched_policy_spec(ns: &str, strategy: &str, cooldown: &str, rollback: Value) -> Value {
    let mut spec = policy_spec(ns, "auto-patch", strategy);
    spec["guardrails"]["cooldown"] = json!(cooldown);
    spec["guardrails"]["rollback"] = rollback;
    spec
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

/// Asserts that container `app` of the Deployment's template requests `cpu` and
/// `memory`, and nothing else; the object's metadata is shown when it does not.
#[track_caller]
pub fn assert_template_requests(obj: &Value, cpu: &str, memory: &str) {
    assert_eq!(
        template_resources(obj)["requests"],
        serde_json::json!({"cpu": cpu, "memory": memory}),
        "{}",
        obj["metadata"]
    );
}

/// Asserts that container `app` of pod `p` requests `cpu` and `memory`, and nothing
/// else.
#[track_caller]
pub fn assert_pod_requests(p: &Pod, cpu: &str, memory: &str) {
    assert_eq!(
        pod_resources(p)["requests"],
        serde_json::json!({"cpu": cpu, "memory": memory}),
        "pod {:?}",
        p.metadata.name
    );
}

/// The spec resources of container `app` of a pod.
pub fn pod_resources(p: &Pod) -> Value {
    serde_json::to_value(p)
        .map(|v| v["spec"]["containers"][0]["resources"].clone())
        .unwrap_or_default()
}

/// The value of the sample `series` (name and labels as encoded) in the Prometheus text
/// `metrics`; 0 when absent.
pub fn metric_sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The sum of the samples of `family` (a counter as encoded, `kerf_agent_decisions_total`)
/// in the Prometheus text `metrics` whose labels contain each of `labels`
/// (`type="applied"`); 0 when there are none.
pub fn metric_sum(metrics: &str, family: &str, labels: &[&str]) -> f64 {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix(family)?.strip_prefix('{'))
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The CPU request of the first container of event `e` before and after the change:
/// `(from, to)`.
pub fn event_cpu_requests(e: &Event) -> (Option<&str>, Option<&str>) {
    let Some(c) = e.containers.first() else {
        return (None, None);
    };
    (cpu_request(&c.from), cpu_request(&c.to))
}

fn cpu_request(r: &kerf_api::ResourceRequirements) -> Option<&str> {
    r.requests.cpu.as_ref().map(|q| q.0.as_str())
}

/// The names of `pods`, sorted.
pub fn pod_names(pods: &[Pod]) -> Vec<String> {
    let mut names: Vec<_> = pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    names
}
