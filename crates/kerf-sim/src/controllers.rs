//! The simulated kube-controller-manager: Deployment, ReplicaSet, StatefulSet, DaemonSet,
//! PDB and HPA controllers, plus the loop that drives them and the kubelet. Every workload
//! loop runs a full reconcile on start, then reconciles the objects each burst of changes
//! concerns ([`queue`]), with a full resync whose period grows with its cost.

pub mod common;
pub mod daemonset;
pub mod deployment;
pub mod pdb;
pub mod queue;
pub mod replicaset;
pub mod rolling;
pub mod statefulset;

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::store::{Gvr, StoreEvent, gvr};
use queue::{Key, Resync, Routing, Timed, Work};

pub(crate) type Ctx = crate::context::SimContext;

/// The field manager of the controllers' writes.
pub const MANAGER: &str = "kube-controller-manager";

/// One loop of the simulated control plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loop {
    Deployments,
    ReplicaSets,
    StatefulSets,
    DaemonSets,
    Disruption,
}

impl Loop {
    /// The store resources whose changes wake the loop.
    fn resources(self) -> &'static [&'static str] {
        match self {
            Loop::Deployments => &["deployments.apps", "replicasets.apps", "pods"],
            Loop::ReplicaSets => &["replicasets.apps", "pods"],
            Loop::StatefulSets => &["statefulsets.apps", "pods"],
            Loop::DaemonSets => &["daemonsets.apps", "pods", "nodes"],
            Loop::Disruption => &[
                "poddisruptionbudgets.policy",
                "pods",
                "horizontalpodautoscalers.autoscaling",
            ],
        }
    }

    /// How a change maps to the loop's objects (None: every change means a full pass).
    fn routing(self) -> Option<Routing> {
        let routing = |primary, owner_depth| Routing {
            primary,
            owner_depth,
            full_on: &[],
            ignore_modified: &[],
        };
        match self {
            // Pods matter to a Deployment only by existing (Recreate waits for the old ones
            // to go).
            Loop::Deployments => Some(Routing {
                ignore_modified: &["pods"],
                ..routing("deployments.apps", 2)
            }),
            Loop::ReplicaSets => Some(routing("replicasets.apps", 1)),
            Loop::StatefulSets => Some(routing("statefulsets.apps", 1)),
            Loop::DaemonSets => Some(Routing {
                full_on: &["nodes"],
                ..routing("daemonsets.apps", 1)
            }),
            Loop::Disruption => None,
        }
    }

    /// The least time between full resyncs (real time).
    fn resync(self) -> Duration {
        Duration::from_secs(1)
    }

    /// A full pass; returns the keys to look at again after a while.
    async fn run_all(self, ctx: &Ctx) -> Vec<Key> {
        match self {
            Loop::Deployments => deployment::reconcile_all(ctx),
            Loop::ReplicaSets => return replicaset::reconcile_all(ctx).await,
            Loop::StatefulSets => statefulset::reconcile_all(ctx).await,
            Loop::DaemonSets => daemonset::reconcile_all(ctx).await,
            Loop::Disruption => pdb::reconcile_all(ctx),
        }
        Vec::new()
    }

    /// Reconciles `keys`; returns those to look at again after a while.
    async fn run_keys(self, ctx: &Ctx, keys: BTreeSet<Key>) -> Vec<Key> {
        let mut again = Vec::new();
        let nodes = match self {
            Loop::DaemonSets if !keys.is_empty() => ctx.store.list(&gvr::NODES, None).0,
            _ => Vec::new(),
        };
        for (ns, name) in keys {
            let timed = match self {
                Loop::Deployments => {
                    deployment::reconcile_key(ctx, &ns, &name);
                    false
                }
                Loop::ReplicaSets => replicaset::reconcile_key(ctx, &ns, &name).await,
                Loop::StatefulSets => {
                    statefulset::reconcile_key(ctx, &ns, &name).await;
                    false
                }
                Loop::DaemonSets => daemonset::reconcile_key(ctx, &ns, &name, &nodes).await,
                Loop::Disruption => false,
            };
            if timed {
                again.push((ns, name));
            }
        }
        again
    }
}

/// Starts every controller and the kubelet. Each task runs until the store is dropped.
pub fn spawn_all(ctx: &Ctx) -> Vec<JoinHandle<()>> {
    let mut tasks: Vec<JoinHandle<()>> = [
        Loop::Deployments,
        Loop::ReplicaSets,
        Loop::StatefulSets,
        Loop::DaemonSets,
        Loop::Disruption,
    ]
    .into_iter()
    .map(|l| {
        let ctx = ctx.clone();
        let rx = ctx.store.subscribe();
        tokio::spawn(run(l, ctx, rx))
    })
    .collect();
    let rx = ctx.store.subscribe();
    tasks.push(tokio::spawn(crate::kubelet::run(ctx.clone(), rx)));
    tasks
}

async fn run(l: Loop, ctx: Ctx, mut rx: broadcast::Receiver<StoreEvent>) {
    let mut resync = Resync::new(l.resync());
    let mut timed = Timed::default();
    let mut work = Work::All;
    let everything = Routing {
        primary: "",
        owner_depth: 0,
        full_on: l.resources(),
        ignore_modified: &[],
    };
    let routing = l.routing().unwrap_or(everything);
    loop {
        let again = match work {
            Work::All => {
                let started = std::time::Instant::now();
                timed.clear();
                let again = l.run_all(&ctx).await;
                resync.done(started.elapsed());
                again
            }
            Work::Keys(keys) => l.run_keys(&ctx, keys).await,
        };
        timed.add(again, l.resync());
        let next = queue::next_work(&ctx, &routing, l.resources(), &mut rx, &resync, &mut timed);
        match next.await {
            Some(w) => work = w,
            None => return,
        }
    }
}

/// Writes `status` unless it equals the object's current status.
pub(crate) fn write_status_if_changed(ctx: &Ctx, g: &Gvr, obj: &Value, status: Value) {
    if obj.get("status") == Some(&status) {
        return;
    }
    let mut obj = obj.clone();
    obj["status"] = status;
    if let Err(e) = ctx.store.update_status(g, obj, MANAGER) {
        tracing::debug!(resource = g.resource, error = %e.message, "status write");
    }
}

/// Creates a pod through the mutating webhooks, as the API server does for a controller.
pub(crate) async fn create_pod(ctx: &Ctx, pod: Value) {
    let pod = match crate::admission::admit_pod_create(ctx, pod).await {
        Ok(pod) => pod,
        Err(e) => {
            tracing::warn!(error = %e.message, "pod creation refused by admission");
            return;
        }
    };
    if let Err(e) = ctx.store.create(&gvr::PODS, pod, MANAGER) {
        tracing::debug!(error = %e.message, "pod create");
    }
}

/// Whether a pod has been Ready for at least `min_ready_seconds`.
pub(crate) fn pod_available(pod: &Value, min_ready_seconds: i64, now: DateTime<Utc>) -> bool {
    if !common::pod_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        })
        .and_then(|c| c.get("lastTransitionTime").and_then(Value::as_str))
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| {
            now - t.with_timezone(&Utc) >= chrono::Duration::seconds(min_ready_seconds)
        })
}
