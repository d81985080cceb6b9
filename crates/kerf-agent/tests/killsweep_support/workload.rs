//! The sweep's workloads, one per kind of change, each in a namespace of its own with a
//! policy of its own, and the driver that walks each through a stream of changes: it
//! publishes a recommendation, waits until the change is done on the cluster (injecting the
//! OOM kill of a breach, switching a policy to audit for a release, freeing room for a
//! fallback's rollout), and publishes the next one. It notes every change id and event id
//! the rsr shows for each recommendation, for the checks at the end.

use std::collections::{BTreeMap, BTreeSet};

use kerf_api::hub::Recommendation;
use serde_json::{Value, json};

use super::cluster::{self, Cluster, PINNED_NODE, Values};

/// The CPU (millicores) of the fallback's node ([`PINNED_NODE`]).
const NODE_CPU: u64 = 4000;
/// The fallback workload's CPU before any change.
const FALLBACK_ORIGINAL_CPU: u64 = 1000;
/// The CPU of the fallback workload's first change, which the kubelet keeps Deferred.
const FALLBACK_FIRST_CPU: u64 = 1800;
/// The CPU of the filler that keeps the fallback's node full until the sweep deletes it.
const FILLER_CPU: u64 = 2500;

// The filler and the pod fit at first; the resize does not fit beside the filler (Deferred,
// not Infeasible). Once the filler is gone the kubelet carries out the Deferred resize,
// since the fallback does not take it back, so the old pod may hold the new values when
// the rollout's surge pod is scheduled: both must fit on the node, or the rollout stalls
// with two pods for one replica, a set-up that no cluster with room for a rollout has.
const _: () = assert!(FILLER_CPU + FALLBACK_ORIGINAL_CPU <= NODE_CPU);
const _: () = assert!(FILLER_CPU + FALLBACK_FIRST_CPU > NODE_CPU);
const _: () = assert!(FALLBACK_FIRST_CPU < NODE_CPU);
const _: () = assert!(2 * FALLBACK_FIRST_CPU <= NODE_CPU);

/// The kinds of change the sweep drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// In-place resize of a Deployment's pods.
    InPlace,
    /// Template patch and rollout of a Deployment.
    Rollout,
    /// Deferred until a maintenance window opens, then rolled out.
    Deferred,
    /// In-place, Deferred by the kubelet past `fallbackAfter`, then rolled out; the later
    /// changes go in as rollouts.
    Fallback,
    /// In-place, then an OOM kill during the health watch rolls it back.
    Breach,
    /// Rolled out, then the policy leaves auto-patch and the fields are released.
    Release,
    /// A StatefulSet with the OnDelete strategy: template patched, pods replaced by the agent.
    OnDelete,
    /// In-place with a canary: one pod of three resized and watched first, then the others.
    Canary,
}

impl Kind {
    /// Every kind, in the order the workloads are made.
    pub const ALL: [Kind; 8] = [
        Kind::Fallback,
        Kind::InPlace,
        Kind::Rollout,
        Kind::Deferred,
        Kind::Breach,
        Kind::Release,
        Kind::OnDelete,
        Kind::Canary,
    ];

    fn label(self) -> &'static str {
        match self {
            Kind::InPlace => "inplace",
            Kind::Rollout => "rollout",
            Kind::Deferred => "deferred",
            Kind::Fallback => "fallback",
            Kind::Breach => "breach",
            Kind::Release => "release",
            Kind::OnDelete => "ondelete",
            Kind::Canary => "canary",
        }
    }

    /// Whether the change resizes pods in place (the template keeps its values).
    pub fn in_place(self) -> bool {
        matches!(self, Kind::InPlace | Kind::Breach | Kind::Canary)
    }

    /// The node its pods run on. The fallback's node is its own: once the sweep frees it,
    /// the room must stay for the fallback's rollout, and the scheduler would otherwise put
    /// the other workloads' new pods on the emptiest node.
    fn node(self) -> &'static str {
        match self {
            Kind::Fallback => PINNED_NODE,
            Kind::InPlace | Kind::Breach | Kind::Canary => "sim-node-1",
            Kind::Rollout | Kind::Release => "sim-node-2",
            Kind::Deferred | Kind::OnDelete => "sim-node-3",
        }
    }

    fn workload_kind(self) -> &'static str {
        match self {
            Kind::OnDelete => "StatefulSet",
            _ => "Deployment",
        }
    }

    fn replicas(self) -> usize {
        match self {
            Kind::Deferred | Kind::Fallback | Kind::Release => 1,
            Kind::Canary => 3,
            _ => 2,
        }
    }

    fn original(self) -> Values {
        match self {
            Kind::Fallback => Values {
                cpu: FALLBACK_ORIGINAL_CPU,
                mem: 256,
            },
            _ => Values { cpu: 200, mem: 256 },
        }
    }

    /// The values of the `k`-th recommendation: each differs from the one before by more
    /// than the tolerance, and (for a breach, rolled back each time) from the original.
    fn values(self, k: usize) -> Values {
        const CYCLE: [(u64, u64); 3] = [(150, 200), (120, 170), (180, 230)];
        match self {
            // Deferred by the kubelet: more than the node has free beside the filler.
            Kind::Fallback if k == 0 => Values {
                cpu: FALLBACK_FIRST_CPU,
                mem: 256,
            },
            Kind::Fallback => Values {
                cpu: if k % 2 == 1 { 1000 } else { 1300 },
                mem: 256,
            },
            _ => {
                let (cpu, mem) = CYCLE[k % CYCLE.len()];
                Values { cpu, mem }
            }
        }
    }

    /// The stored lifecycle events the `k`-th recommendation must leave, by the key of
    /// `status.change.eventIds`.
    fn expected_events(self, k: usize) -> &'static [&'static str] {
        match self {
            Kind::Breach => &["applied", "rolledBack"],
            Kind::Release => &["applied", "released"],
            Kind::Fallback if k == 0 => &["fallback", "applied"],
            _ => &["applied"],
        }
    }
}

/// One published recommendation and what the sweep saw of it.
#[derive(Debug, Default)]
pub struct Rec {
    /// Its id.
    pub id: String,
    /// The values it asks for.
    pub values: Values,
    /// The values the pods ran before its change.
    pub from: Values,
    /// The change ids the rsr showed for it.
    pub changes: BTreeSet<String>,
    /// The event ids its intent recorded (`status.change.eventIds`), by key.
    pub event_ids: BTreeMap<String, String>,
    /// It waited in phase Deferred.
    pub deferred: bool,
    /// The sweep OOM-killed a pod during its health watch.
    pub oom: bool,
    /// It reached its outcome on the cluster.
    pub done: bool,
    /// What the sweep saw go wrong while it ran.
    pub problems: Vec<String>,
}

/// A workload and the stream of changes driven through it.
pub struct Workload {
    /// What kind of change it gets.
    pub kind: Kind,
    /// Its namespace (`ks-<kind>`).
    pub ns: String,
    /// Its name (and its rsr's).
    pub name: String,
    /// The recommendations published so far; the last is the current one.
    pub recs: Vec<Rec>,
    /// Lifecycle events the rsr still holds for the hub.
    pub pending: usize,
    releasing: bool,
    filler: bool,
    /// No next recommendation before this time: the hold a rollback puts on decreases of
    /// the restored resource (rule RB-32, the cooldown since the rollback).
    hold_until: Option<chrono::DateTime<chrono::Utc>>,
}

/// How long after a rollback the breach workload's next recommendation waits: the
/// policy's cooldown (1s) that holds decreases of the restored resource, and a margin.
const ROLLBACK_HOLD: chrono::Duration = chrono::Duration::seconds(3);

/// The policy of a workload: auto-patch (or `mode`), 1s learning, cooldown and watch (20s
/// for the breach, so the OOM kill lands in it), no step limit; the canary's first pod is
/// watched 1s.
fn policy_spec(kind: Kind, ns: &str, mode: &str) -> Value {
    let strategy = match kind {
        Kind::InPlace | Kind::Breach | Kind::Fallback | Kind::Canary => "in-place",
        Kind::Deferred => "deferred",
        Kind::Rollout | Kind::Release | Kind::OnDelete => "rollout",
    };
    let watch = if kind == Kind::Breach { "20s" } else { "1s" };
    let mut spec = json!({
        "priority": 10,
        "selector": {"namespaces": [ns]},
        "mode": mode,
        "guardrails": {"learningPeriod": "1s", "minConfidence": "0.5", "cooldown": "1s",
            "maxChangePercent": 100, "rollback": {"watchDuration": watch}},
        "apply": {"strategy": strategy, "fallbackAfter": "1s", "minWindowRemaining": "1s"},
    });
    if kind == Kind::Canary {
        // One pod first, watched a second before the other two follow.
        spec["apply"]["canary"] = json!({"pods": 1, "duration": "1s"});
    }
    if kind == Kind::Deferred {
        // Open the first 30 seconds of every minute.
        spec["apply"]["maintenanceWindows"] = json!([{"schedule": "* * * * *", "duration": "30s"}]);
    }
    spec
}

/// A Deployment or an OnDelete StatefulSet `name` with container `app` at `values`,
/// optionally pinned to a node.
fn workload_object(
    kind: &str,
    ns: &str,
    name: &str,
    replicas: usize,
    values: Values,
    node: Option<&str>,
) -> Value {
    let labels = json!({"app": name});
    let mut pod_spec = json!({"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": values.requests()}}]});
    if let Some(node) = node {
        pod_spec["nodeSelector"] = json!({"kubernetes.io/hostname": node});
    }
    let mut spec = json!({"replicas": replicas, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": pod_spec}});
    if kind == "StatefulSet" {
        spec["serviceName"] = json!(name);
        spec["updateStrategy"] = json!({"type": "OnDelete"});
    } else {
        spec["strategy"] = json!({"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    }
    json!({"apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec})
}

impl Workload {
    /// Makes the namespace, the policy and the workload of `kind` (with the filler that
    /// keeps the fallback's node full) and waits until its pods are Ready.
    pub async fn create(c: &Cluster, kind: Kind) -> anyhow::Result<Workload> {
        let ns = format!("ks-{}", kind.label());
        c.namespace(&ns).await?;
        c.policy(&ns, &policy_spec(kind, &ns, "auto-patch")).await?;
        let pinned = Some(kind.node());
        if kind == Kind::Fallback {
            let filler = Values {
                cpu: FILLER_CPU,
                mem: 64,
            };
            let obj = workload_object("Deployment", &ns, "filler", 1, filler, pinned);
            c.create(&ns, "Deployment", &obj).await?;
        }
        let obj = workload_object(
            kind.workload_kind(),
            &ns,
            "web",
            kind.replicas(),
            kind.original(),
            pinned,
        );
        c.create(&ns, kind.workload_kind(), &obj).await?;
        let w = Workload {
            kind,
            ns,
            name: "web".into(),
            recs: Vec::new(),
            pending: 0,
            releasing: false,
            filler: kind == Kind::Fallback,
            hold_until: None,
        };
        let what = format!("{} Ready pods of {}/web", kind.replicas(), w.ns);
        kerf_testkit::eventually(&what, std::time::Duration::from_secs(30), || async {
            let pods = c.pods(&w.ns, &w.name).await.ok()?;
            cluster::pods_wrong(&pods, kind.replicas(), kind.original())
                .is_none()
                .then_some(())
        })
        .await?;
        Ok(w)
    }

    /// `namespace/name` of the workload.
    pub fn id(&self) -> String {
        format!("{}/{}", self.ns, self.name)
    }

    /// The number of replicas it runs.
    pub fn replicas(&self) -> usize {
        self.kind.replicas()
    }

    /// The values before any change.
    pub fn original(&self) -> Values {
        self.kind.original()
    }

    /// The stored lifecycle events the `k`-th recommendation must leave.
    pub fn expected_events(&self, k: usize) -> &'static [&'static str] {
        self.kind.expected_events(k)
    }

    /// The workload's kind as the API names it.
    pub fn workload_kind(&self) -> &'static str {
        self.kind.workload_kind()
    }

    /// The values the pods run once `rec` reached its outcome: a breach's OOM kill rolls
    /// back memory only (rule RB-05), so CPU keeps the recommended value.
    pub fn live(&self, rec: &Rec) -> Values {
        match self.kind {
            Kind::Breach => Values {
                cpu: rec.values.cpu,
                mem: rec.from.mem,
            },
            _ => rec.values,
        }
    }

    /// Whether the current recommendation reached its outcome.
    pub fn settled(&self) -> bool {
        self.recs.last().is_some_and(|r| r.done)
    }

    /// Whether the next recommendation may be published: the current one reached its
    /// outcome and, after a rollback, its hold on decreases has passed. A recommendation
    /// published inside the hold goes in as two changes by design (the other resources at
    /// once, the held decrease once the hold ends, rules GR-22, RB-32).
    pub fn ready_for_next(&self) -> bool {
        self.settled() && self.hold_until.is_none_or(|t| chrono::Utc::now() >= t)
    }

    /// Publishes the next recommendation (kept in `self.recs`).
    pub fn next_rec(&mut self) -> anyhow::Result<Recommendation> {
        let k = self.recs.len();
        let values = self.kind.values(k);
        let from = self.recs.last().map_or(self.original(), |r| self.live(r));
        let id = format!("rec-{}-{k}", self.kind.label());
        self.recs.push(Rec {
            id: id.clone(),
            values,
            from,
            ..Rec::default()
        });
        self.recommendation()
    }

    /// The current recommendation as the hub serves it.
    pub fn recommendation(&self) -> anyhow::Result<Recommendation> {
        let rec = self
            .recs
            .last()
            .ok_or_else(|| anyhow::anyhow!("no recommendation yet"))?;
        Ok(serde_json::from_value(json!({
            "workload": {"namespace": self.ns, "kind": self.workload_kind(), "name": self.name},
            "recommendationID": rec.id,
            "generatedAt": chrono::Utc::now(),
            "confidence": "0.9",
            "dataCoverage": {"covered": "336h", "window": "336h"},
            "settings": {"window": "336h", "cpuPercentile": 90, "memoryPercentile": 99,
                "headroomPercent": 15, "limits": "Keep"},
            "containers": [{"name": "app", "requests": rec.values.requests(), "confidence": "0.9"}],
        }))?)
    }

    /// What the cluster shows when the current recommendation reached its outcome, or why
    /// it has not (pods and, for a template change, the template).
    pub async fn cluster_wrong(&self, c: &Cluster, want: Values) -> anyhow::Result<Option<String>> {
        let pods = c.pods(&self.ns, &self.name).await?;
        if let Some(wrong) = cluster::pods_wrong(&pods, self.replicas(), want) {
            return Ok(Some(wrong));
        }
        let w = c
            .workload(&self.ns, self.workload_kind(), &self.name)
            .await?;
        let template = cluster::spec_values(&w["spec"]["template"]["spec"]);
        let want_template = if self.kind.in_place() {
            self.original()
        } else {
            want
        };
        Ok((template != Some(want_template)).then(|| {
            let has = template.map_or("unreadable".into(), |v| v.to_string());
            format!("template requests {has}, want {want_template}")
        }))
    }

    /// One look at the workload: notes what its rsr shows and moves its stream on.
    pub async fn tick(&mut self, c: &Cluster) -> anyhow::Result<()> {
        let rsr = c.rsr(&self.ns, &self.name).await?;
        self.observe(&rsr);
        let pending = rsr["status"]["change"]["pendingEvents"].as_array();
        self.pending = pending.map_or(0, Vec::len);
        let Some(rec) = self.recs.last() else {
            return Ok(());
        };
        if rec.done {
            return Ok(());
        }
        let change = &rsr["status"]["change"];
        let state = change["state"].as_str().unwrap_or_default().to_owned();
        if change["recommendationID"] != rec.id.as_str() {
            return Ok(());
        }
        match self.kind {
            Kind::Breach => self.tick_breach(c, &rsr, &state).await,
            Kind::Release => self.tick_release(c, &state).await,
            Kind::Fallback => self.tick_fallback(c, &rsr, &state).await,
            _ => self.finish_if(c, &state, "Applied").await,
        }
    }

    /// Marks the current recommendation done once its change is in `want` and the cluster
    /// runs what it leaves ([`Workload::live`]).
    async fn finish_if(&mut self, c: &Cluster, state: &str, want: &str) -> anyhow::Result<()> {
        let Some(rec) = self.recs.last() else {
            return Ok(());
        };
        let values = self.live(rec);
        if state == want
            && self.cluster_wrong(c, values).await?.is_none()
            && let Some(rec) = self.recs.last_mut()
        {
            rec.done = true;
        }
        Ok(())
    }

    async fn tick_breach(&mut self, c: &Cluster, rsr: &Value, state: &str) -> anyhow::Result<()> {
        let oom = self.recs.last().is_some_and(|r| r.oom);
        if oom {
            self.finish_if(c, state, "RolledBack").await?;
            if self.settled() {
                let time = rsr["status"]["lastRollback"]["time"].as_str();
                let at = time.and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok());
                self.hold_until = Some(at.unwrap_or_else(chrono::Utc::now) + ROLLBACK_HOLD);
            }
            return Ok(());
        }
        let values = self.recs.last().map(|r| r.values).unwrap_or_default();
        // Within the watch the status records (baselines taken, end ahead), whichever agent
        // runs it: the kill lands where the watch must see it (rule RB-03).
        let watch = &rsr["status"]["watch"];
        let end = watch["end"]
            .as_str()
            .and_then(|e| e.parse::<chrono::DateTime<chrono::Utc>>().ok());
        let watching = end.is_some_and(|e| chrono::Utc::now() + chrono::Duration::seconds(5) < e)
            && watch["baselines"]
                .as_object()
                .is_some_and(|b| !b.is_empty());
        if state != "Applied" || !watching || self.cluster_wrong(c, values).await?.is_some() {
            return Ok(());
        }
        let pods = c.pods(&self.ns, &self.name).await?;
        if let Some(pod) = pods.first() {
            c.oom_kill(&self.ns, cluster::name(pod))?;
            if let Some(rec) = self.recs.last_mut() {
                rec.oom = true;
            }
        }
        Ok(())
    }

    async fn tick_release(&mut self, c: &Cluster, state: &str) -> anyhow::Result<()> {
        if !self.releasing {
            let values = self.recs.last().map(|r| r.values).unwrap_or_default();
            if state == "Applied" && self.cluster_wrong(c, values).await?.is_none() {
                c.policy(&self.ns, &policy_spec(self.kind, &self.ns, "audit"))
                    .await?;
                self.releasing = true;
            }
            return Ok(());
        }
        self.finish_if(c, state, "Released").await?;
        if self.settled() {
            c.policy(&self.ns, &policy_spec(self.kind, &self.ns, "auto-patch"))
                .await?;
            self.releasing = false;
        }
        Ok(())
    }

    async fn tick_fallback(&mut self, c: &Cluster, rsr: &Value, state: &str) -> anyhow::Result<()> {
        let values = self.recs.last().map(|r| r.values).unwrap_or_default();
        let w = c.workload(&self.ns, "Deployment", &self.name).await?;
        let patched = cluster::spec_values(&w["spec"]["template"]["spec"]) == Some(values);
        if self.filler && (patched || rsr["status"]["strategy"]["effective"] == "rollout") {
            c.delete_deployment(&self.ns, "filler").await?;
            self.filler = false;
        }
        self.finish_if(c, state, "Applied").await
    }

    /// Notes the change id, the event ids, a deferral or a fallback the rsr shows for the
    /// recommendation it names.
    fn observe(&mut self, rsr: &Value) {
        let status = &rsr["status"];
        // A change waiting for its window has no `status.change` of its own yet: the rsr's
        // spec names the recommendation it waits with.
        if status["phase"] == "Deferred" {
            let waiting = rsr["spec"]["recommendationID"].as_str();
            if let Some(rec) = self
                .recs
                .last_mut()
                .filter(|r| Some(r.id.as_str()) == waiting)
            {
                rec.deferred = true;
            }
        }
        let change = &status["change"];
        let Some(rec_id) = change["recommendationID"].as_str() else {
            return;
        };
        let Some(rec) = self.recs.iter_mut().find(|r| r.id == rec_id) else {
            return;
        };
        if let Some(id) = change["id"].as_str() {
            rec.changes.insert(id.to_owned());
        }
        for (key, id) in change["eventIds"].as_object().into_iter().flatten() {
            let Some(id) = id.as_str() else { continue };
            let known = rec
                .event_ids
                .entry(key.clone())
                .or_insert_with(|| id.to_owned());
            if known != id {
                let p = format!("the {key} event id of {rec_id} changed from {known} to {id}");
                rec.problems.push(p);
            }
        }
    }
}
