//! The simulated kube-controller-manager: Deployment, ReplicaSet, StatefulSet, DaemonSet,
//! PDB and HPA controllers, plus the loop that drives them and the kubelet. Every loop runs a
//! full reconcile on start, after each relevant store change and on a periodic resync.

pub mod common;
pub mod daemonset;
pub mod deployment;
pub mod pdb;
pub mod replicaset;
pub mod rolling;
pub mod statefulset;

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};
use tokio::task::JoinHandle;

use crate::store::{Gvr, StoreEvent, gvr};

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
    Kubelet,
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
            Loop::Kubelet => &["pods", "nodes"],
        }
    }

    /// The periodic resync (real time). The kubelet resyncs often: its work is driven by the
    /// sim clock (ready delay, resize actuation, counters).
    fn resync(self) -> Duration {
        match self {
            Loop::Kubelet => Duration::from_millis(100),
            _ => Duration::from_secs(1),
        }
    }

    async fn run_once(self, ctx: &Ctx) {
        match self {
            Loop::Deployments => deployment::reconcile_all(ctx),
            Loop::ReplicaSets => replicaset::reconcile_all(ctx).await,
            Loop::StatefulSets => statefulset::reconcile_all(ctx).await,
            Loop::DaemonSets => daemonset::reconcile_all(ctx).await,
            Loop::Disruption => pdb::reconcile_all(ctx),
            Loop::Kubelet => crate::kubelet::reconcile(ctx),
        }
    }
}

/// Starts every controller and the kubelet. Each task runs until the store is dropped.
pub fn spawn_all(ctx: &Ctx) -> Vec<JoinHandle<()>> {
    [
        Loop::Deployments,
        Loop::ReplicaSets,
        Loop::StatefulSets,
        Loop::DaemonSets,
        Loop::Disruption,
        Loop::Kubelet,
    ]
    .into_iter()
    .map(|l| {
        let ctx = ctx.clone();
        let rx = ctx.store.subscribe();
        tokio::spawn(run(l, ctx, rx))
    })
    .collect()
}

async fn run(l: Loop, ctx: Ctx, mut rx: broadcast::Receiver<StoreEvent>) {
    loop {
        l.run_once(&ctx).await;
        let woke = tokio::select! {
            w = wait_relevant(&mut rx, l.resources()) => w,
            () = tokio::time::sleep(l.resync()) => true,
        };
        if !woke {
            return;
        }
        // Coalesce a burst of changes into one reconcile.
        loop {
            match rx.try_recv() {
                Ok(_) | Err(TryRecvError::Lagged(_)) => {}
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => return,
            }
        }
    }
}

/// Waits for a change of one of `resources`; false once the store is gone.
async fn wait_relevant(rx: &mut broadcast::Receiver<StoreEvent>, resources: &[&str]) -> bool {
    loop {
        match rx.recv().await {
            Ok(ev) if resources.contains(&ev.resource.as_str()) => return true,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return true,
            Err(RecvError::Closed) => return false,
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
