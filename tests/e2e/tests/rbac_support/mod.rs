//! The RBAC scenarios of e2e_rbac and e2e_rbac_scoped: the agent on kerf-sim through an
//! in-place change and its rollback, a rollout coupled to an HPA and its release, an
//! OnDelete StatefulSet (evictions), a DaemonSet rollout, leader election and the hub state
//! ConfigMap (created, then updated); every request it made, read back from kerf-sim's
//! request log as the RBAC permission it needs; and the ClusterRole and Roles that
//! `helm template` renders, as permissions.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::e2e_support::{self, Env, WAIT, eventually, rsr_api};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kerf_agent::clock::SystemClock;
use kerf_agent::runtime::Agent;
use kerf_agent::scope::Scope;
use kerf_agent::settings::Settings;
use kerf_api::hub::{PauseScope, Recommendation};
use kerf_sim::api::audit::AuditRecord;
use kerf_sim::kubelet::{Fault, inject};
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::{Value, json};

/// The User-Agent of the agent's client: its requests are told from the test's by it.
pub const AGENT_UA: &str = "kerf-rbac-probe/0";
/// The release namespace: the Lease and the hub state ConfigMap live there.
pub const RELEASE_NS: &str = "kerf-system";
/// The namespaces of the scenarios besides the harness's own (in-place and rollback).
pub const HPA_NS: &str = "rbac-hpa";
pub const STS_NS: &str = "rbac-sts";
pub const DS_NS: &str = "rbac-ds";

/// One permission: API group (`core` for ""), resource (with `/subresource`), verb, and
/// the object name when the grant names one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Perm {
    pub group: String,
    pub resource: String,
    pub verb: String,
    pub name: Option<String>,
    /// Namespace the grant is limited to (a Role's).
    pub namespace: Option<String>,
}

impl Perm {
    pub fn key(&self) -> String {
        format!("{} {} {}", self.group, self.resource, self.verb)
    }
}

/// A request of the agent: the permission it needs and the object's namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Call {
    pub group: String,
    pub resource: String,
    pub verb: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Call {
    pub fn key(&self) -> String {
        format!("{} {} {}", self.group, self.resource, self.verb)
    }
}

pub fn covers(p: &Perm, c: &Call) -> bool {
    p.key() == c.key()
        && p.namespace
            .as_ref()
            .is_none_or(|ns| c.namespace.as_ref() == Some(ns))
        && p.name.as_ref().is_none_or(|n| c.name.as_ref() == Some(n))
}

/// The API calls (RBAC verbs) of one request; empty for discovery (non-resource) paths.
fn calls_of(r: &AuditRecord) -> Vec<Call> {
    let segs: Vec<&str> = r.path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _v, rest @ ..] => ("core", rest),
        ["apis", g, _v, rest @ ..] => (*g, rest),
        _ => return Vec::new(),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let Some((resource, rest)) = rest.split_first() else {
        return Vec::new();
    };
    let name = rest.first().map(|s| s.to_string());
    let resource = match rest.get(1) {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    };
    let watch = r
        .query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verbs: &[&str] = match (r.method.as_str(), &name) {
        ("GET", Some(_)) => &["get"],
        ("GET", None) if watch => &["watch"],
        ("GET", None) => &["list"],
        ("POST", _) => &["create"],
        ("PUT", _) => &["update"],
        // Server-side apply that creates the object needs create as well.
        ("PATCH", _) if r.status == 201 => &["patch", "create"],
        ("PATCH", _) => &["patch"],
        ("DELETE", Some(_)) => &["delete"],
        ("DELETE", None) => &["deletecollection"],
        _ => &["unknown"],
    };
    verbs
        .iter()
        .map(|v| Call {
            group: group.to_owned(),
            resource: resource.clone(),
            verb: (*v).to_owned(),
            namespace: namespace.clone(),
            name: name.clone(),
        })
        .collect()
}

/// Every rule of the rendered ClusterRole (cluster-wide) and Roles (in their namespace),
/// expanded to one permission per group, resource, verb and name; `values` are more
/// arguments of `helm template` (`--set-json scope.namespaces=[...]`).
pub fn rendered_perms(values: &[&str]) -> anyhow::Result<Vec<Perm>> {
    let out = Command::new(kerf_testkit::helm())
        .args(["template", "kerf-agent"])
        .arg(kerf_testkit::chart_dir())
        .args(["-n", RELEASE_NS, "--set", "clusterName=prod"])
        .args(values)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout)?;
    let mut perms = Vec::new();
    for de in serde_yaml::Deserializer::from_str(&text) {
        let doc = Value::deserialize(de)?;
        let namespace = match doc["kind"].as_str() {
            Some("ClusterRole") => None,
            Some("Role") => Some(
                doc["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            ),
            _ => continue,
        };
        for rule in doc["rules"].as_array().into_iter().flatten() {
            perms.extend(expand(rule, namespace.as_ref()));
        }
    }
    Ok(perms)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

fn expand(rule: &Value, namespace: Option<&String>) -> Vec<Perm> {
    let names = strings(&rule["resourceNames"]);
    let names: Vec<Option<String>> = if names.is_empty() {
        vec![None]
    } else {
        names.into_iter().map(Some).collect()
    };
    let mut out = Vec::new();
    for g in strings(&rule["apiGroups"]) {
        let group = if g.is_empty() { "core".to_owned() } else { g };
        for resource in strings(&rule["resources"]) {
            for verb in strings(&rule["verbs"]) {
                for name in &names {
                    out.push(Perm {
                        group: group.clone(),
                        resource: resource.clone(),
                        verb: verb.clone(),
                        name: name.clone(),
                        namespace: namespace.cloned(),
                    });
                }
            }
        }
    }
    out
}

/// A client of the sim whose requests carry [`AGENT_UA`].
pub async fn agent_client(env: &Env) -> anyhow::Result<Client> {
    env.client_as(AGENT_UA).await
}

/// Creates `obj` (any kind) as `kubectl apply` would.
pub async fn create(client: &Client, obj: Value) -> anyhow::Result<()> {
    let (group, version) = match obj["apiVersion"].as_str().unwrap_or("v1").split_once('/') {
        Some((g, v)) => (g.to_owned(), v.to_owned()),
        None => (String::new(), "v1".to_owned()),
    };
    let kind = obj["kind"].as_str().unwrap_or_default().to_owned();
    let gvk = kube::api::GroupVersionKind::gvk(&group, &version, &kind);
    let plural = format!("{}s", kind.to_lowercase());
    let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let pp = PostParams {
        field_manager: Some(e2e_support::USER_MANAGER.into()),
        ..PostParams::default()
    };
    api.create(&pp, &serde_json::from_value(obj)?).await?;
    Ok(())
}

pub fn pod_template(name: &str) -> Value {
    json!({"metadata": {"labels": {"app": name}}, "spec": {"containers": [{
        "name": "app", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}]}})
}

/// The workloads of the HPA, OnDelete and DaemonSet scenarios.
async fn workloads(client: &Client) -> anyhow::Result<()> {
    let sel = |n: &str| json!({"matchLabels": {"app": n}});
    create(
        client,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": HPA_NS},
        "spec": {"replicas": 2, "selector": sel("web"), "template": pod_template("web")}}),
    )
    .await?;
    create(
        client,
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": HPA_NS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 2,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}]}}),
    )
    .await?;
    create(
        client,
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": STS_NS},
        "spec": {"replicas": 2, "serviceName": "db", "selector": sel("db"),
            "updateStrategy": {"type": "OnDelete"}, "template": pod_template("db")}}),
    )
    .await?;
    create(
        client,
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "node", "namespace": DS_NS},
        "spec": {"selector": sel("node"), "template": pod_template("node")}}),
    )
    .await
}

/// A policy over `ns`: `mode`, `strategy`, a 1s learning period, a 10m cooldown (one
/// change per workload) and a 60s health watch.
pub fn policy(ns: &str, mode: &str, strategy: &str) -> Value {
    json!({
        "priority": 10, "selector": {"namespaces": [ns]}, "mode": mode,
        "guardrails": {"learningPeriod": "1s", "minConfidence": "0.5", "cooldown": "10m",
            "rollback": {"watchDuration": "60s"}},
        "apply": {"strategy": strategy, "fallbackAfter": "5s", "minWindowRemaining": "1s"},
    })
}

pub fn recommendation(ns: &str, kind: &str, name: &str) -> anyhow::Result<Recommendation> {
    kerf_testkit::hub_recommendation(
        [ns, kind, name],
        &format!("rec-{ns}-{name}"),
        ["150m", "200Mi"],
        "0.9",
    )
}

/// Waits until rsr `ns/name` satisfies `pred`.
async fn wait_rsr(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let api = rsr_api(client, ns);
    let timeout = Duration::from_secs(60);
    eventually(&format!("rsr {ns}/{name}: {what}"), timeout, || async {
        let r = serde_json::to_value(api.get_opt(name).await.ok()??).ok()?;
        pred(&r).then_some(r)
    })
    .await
}

/// The agent's settings: leader election on (the chart's Lease name), its namespace the
/// release namespace, OnDelete pods replaced once Ready for 1s, and `scope`.
fn settings(env: &Env, scope: Scope) -> anyhow::Result<Settings> {
    let mut s = env.settings(&e2e_support::AgentOptions::default())?;
    s.namespace = RELEASE_NS.to_owned();
    s.scope = scope;
    s.on_delete.settle = Duration::from_secs(1);
    let le = &mut s.leader_election;
    le.enabled = true;
    le.namespace = RELEASE_NS.to_owned();
    le.lease_name = "kerf-agent".to_owned();
    le.identity = "rbac".to_owned();
    le.lease_duration = Duration::from_secs(6);
    le.renew_deadline = Duration::from_secs(4);
    le.retry_period = Duration::from_millis(300);
    Ok(s)
}

/// Creates the scenarios' namespaces and workloads, their policies and recommendations.
pub async fn set_up(env: &mut Env) -> anyhow::Result<()> {
    set_up_with(env, Vec::new()).await
}

/// [`set_up`], with `more` recommendations published beside the scenarios' own.
pub async fn set_up_with(env: &mut Env, more: Vec<Recommendation>) -> anyhow::Result<()> {
    let nss: Api<Namespace> = Api::all(env.client.clone());
    for ns in [RELEASE_NS, HPA_NS, STS_NS, DS_NS] {
        // The harness makes the agent's namespace itself.
        if nss.get_opt(ns).await?.is_some() {
            continue;
        }
        let body = json!({"metadata": {"name": ns}});
        nss.create(&PostParams::default(), &serde_json::from_value(body)?)
            .await?;
    }
    env.deployment("web", 2, "200m", "256Mi").await?;
    workloads(&env.client).await?;
    env.wait_ready("web", 2).await?;
    env.policy("inplace", policy(&env.ns, "auto-patch", "in-place"))
        .await?;
    env.policy("hpa", policy(HPA_NS, "auto-patch", "in-place"))
        .await?;
    env.policy("sts", policy(STS_NS, "auto-patch", "rollout"))
        .await?;
    env.policy("ds", policy(DS_NS, "auto-patch", "rollout"))
        .await?;
    let mut recs = vec![
        recommendation(&env.ns, "Deployment", "web")?,
        recommendation(HPA_NS, "Deployment", "web")?,
        recommendation(STS_NS, "StatefulSet", "db")?,
        recommendation(DS_NS, "DaemonSet", "node")?,
    ];
    recs.extend(more);
    env.recommend(recs);
    Ok(())
}

/// Runs every scenario to its end with the agent on `client`, its scope `scope`.
pub async fn scenarios(env: &mut Env, client: Client, scope: Scope) -> anyhow::Result<()> {
    let agent = Agent::start(client, settings(env, scope)?, Arc::new(SystemClock)).await?;
    let c = env.client.clone();
    // In place, then a breach: the rollback.
    let ns = env.ns.clone();
    wait_rsr(&c, &ns, "web", "Applied and watching", |r| {
        r["status"]["change"]["state"] == "Applied"
            && r["status"]["watch"]["baselines"]
                .as_object()
                .is_some_and(|b| !b.is_empty())
    })
    .await?;
    let pod = env.wait_ready("web", 2).await?[0].metadata.name.clone();
    let sim = env.sim.as_ref().ok_or_else(|| anyhow::anyhow!("no sim"))?;
    let oom = Fault::OomKill {
        namespace: ns.clone(),
        pod: pod.unwrap_or_default(),
        container: "app".to_owned(),
    };
    inject(sim.context(), oom)?;
    wait_rsr(&c, &ns, "web", "RolledBack", |r| {
        r["status"]["change"]["state"] == "RolledBack"
    })
    .await?;
    // A rollout coupled to an HPA, then its release.
    wait_rsr(&c, HPA_NS, "web", "HPA target written", |r| {
        r["status"]["change"]["hpa"]["written"] == true
    })
    .await?;
    env.policy("hpa", policy(HPA_NS, "audit", "in-place"))
        .await?;
    wait_rsr(&c, HPA_NS, "web", "Released", |r| {
        r["status"]["phase"] == "Released"
    })
    .await?;
    // OnDelete: every pod evicted and replaced at the new requests.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.clone(), STS_NS);
    eventually("both db pods at 150m", Duration::from_secs(90), || async {
        let list = pods.list(&Default::default()).await.ok()?.items;
        let done = list.len() == 2
            && list.iter().all(|p| {
                e2e_support::pod_resources(p)["requests"]["cpu"] == "150m"
                    && e2e_support::is_ready(p)
            });
        done.then_some(())
    })
    .await?;
    wait_rsr(&c, DS_NS, "node", "Applied", |r| {
        r["status"]["change"]["state"] == "Applied"
    })
    .await?;
    // The hub's configuration changes: the hub state ConfigMap is written again.
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), RELEASE_NS);
    let before = cms.get("kerf-hub-state").await?.metadata.resource_version;
    env.hub
        .pause(e2e_support::CLUSTER, Some(PauseScope::Cluster));
    eventually("kerf-hub-state rewritten", WAIT, || async {
        let now = cms
            .get("kerf-hub-state")
            .await
            .ok()?
            .metadata
            .resource_version;
        (now != before).then_some(())
    })
    .await?;
    // A graceful stop gives the Lease up.
    agent.stop().await;
    Ok(())
}

/// Every API call the agent made, and the discovery paths it read.
pub fn agent_calls(env: &Env) -> anyhow::Result<(BTreeSet<Call>, BTreeSet<String>)> {
    let sim = env.sim.as_ref().ok_or_else(|| anyhow::anyhow!("no sim"))?;
    let log = sim.audit().snapshot();
    anyhow::ensure!(log.dropped == 0, "the request log dropped {}", log.dropped);
    let mut calls = BTreeSet::new();
    let mut discovery = BTreeSet::new();
    for r in log.records.iter().filter(|r| r.user_agent == AGENT_UA) {
        let found = calls_of(r);
        if found.is_empty() {
            discovery.insert(format!("{} {}", r.method, r.path));
        }
        calls.extend(found);
    }
    Ok((calls, discovery))
}

/// Asserts that every request that is no API call (see [`calls_of`]) is discovery, which
/// every authenticated user may read (system:discovery).
#[track_caller]
pub fn assert_discovery_only(discovery: &BTreeSet<String>) {
    for d in discovery {
        let path = d.trim_start_matches("GET ");
        let segs = path.trim_matches('/').split('/').count();
        let is_discovery =
            d.starts_with("GET ") && (path.starts_with("/api") && segs <= 3 || path == "/version");
        assert!(is_discovery, "a non-resource request beyond discovery: {d}");
    }
}

/// The calls no permission of `perms` covers, as text.
pub fn missing(calls: &BTreeSet<Call>, perms: &[Perm]) -> BTreeSet<String> {
    calls
        .iter()
        .filter(|c| !perms.iter().any(|p| covers(p, c)))
        .map(|c| format!("{} ns={:?} name={:?}", c.key(), c.namespace, c.name))
        .collect()
}
