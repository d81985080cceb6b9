//! The simulated scheduler and kubelets of every node: binds pods to nodes with room, starts
//! them after `kubelet_ready_delay` of sim time, actuates in-place resizes (or reports them
//! Deferred / Infeasible), takes injected faults and keeps the cAdvisor CFS counters.
//!
//! Resize actuation takes two steps: the new requests are allocated and `PodResizeInProgress`
//! shows for half the ready delay, then the reported resources follow the spec and
//! `status.observedGeneration` is the pod's generation. Nodes named in
//! `SimConfig::swap_nodes`, labelled `kerf-sim/swap: "true"` by hand or given a swap
//! capacity by hand are swap nodes ([`is_swap_node`]): they carry the label and a
//! `status.nodeInfo.swap.capacity`, and a memory resize of a pod there is `Infeasible`.

pub mod actuation;
pub mod cadvisor;
pub mod control_client;
pub mod faults;
pub mod resources;
pub mod scheduler;
pub mod state;
pub mod tracker;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

use crate::context::SimContext;
use crate::controllers::common::{int_at, name, namespace, pod_terminal, terminating, uid};
use crate::store::{ApiError, StoreEvent, StoreEventType, gvr};
use actuation::ResizeDecision;
use resources::{Amount, pod_allocated, pod_spec_requests};
use scheduler::{NodeView, pick_node};
use tracker::{Tracker, pod_key};

pub use control_client::{ControlError, send_fault};
pub use faults::{Fault, FaultError, inject, serve_control};

/// The field manager of the kubelet's and the scheduler's writes.
pub const MANAGER: &str = "kubelet";

/// The label the kubelet puts on nodes with swap.
pub const SWAP_LABEL: &str = "kerf-sim/swap";

/// The cAdvisor counters of one node (or all) in Prometheus text format, advanced to now.
/// Served on the control listener at `/metrics/cadvisor` and on the API server's node proxy
/// path `/api/v1/nodes/{node}/proxy/metrics/cadvisor`.
pub fn render_cadvisor(ctx: &SimContext, node: Option<&str>) -> String {
    let pods = ctx.store.list(&gvr::PODS, None).0;
    let now = ctx.clock.now();
    ctx.state.kubelet.with(|s| {
        s.counters.advance(&pods, now);
        s.counters.render(node)
    })
}

/// How often the kubelet looks at the pods waiting on time or room (real time).
const TICK: Duration = Duration::from_millis(100);

/// The scheduler and every node's kubelet, until the store is gone. Each change of a pod
/// marks it to be looked at; a pass looks at the marked pods only and lets go of those that
/// reached a state only their own change moves them from ([`Tracker`]). A change of a node
/// marks every pod.
pub async fn run(ctx: SimContext, mut rx: broadcast::Receiver<StoreEvent>) {
    let mut t = Tracker::default();
    let mut nodes = Nodes::default();
    rebuild(&ctx, &mut t);
    loop {
        if !t.is_idle() {
            pass(&ctx, &mut t, &mut nodes, &mut rx);
        }
        let first = tokio::select! {
            r = rx.recv() => Some(r),
            () = tokio::time::sleep(TICK) => None,
        };
        match first {
            None => {}
            Some(Ok(ev)) => take(&ctx, &mut t, &ev),
            Some(Err(RecvError::Lagged(_))) => rebuild(&ctx, &mut t),
            Some(Err(RecvError::Closed)) => return,
        }
        if !drain(&ctx, &mut t, &mut rx) {
            return;
        }
    }
}

/// Takes every change waiting in `rx`; false once the store is gone.
fn drain(ctx: &SimContext, t: &mut Tracker, rx: &mut broadcast::Receiver<StoreEvent>) -> bool {
    loop {
        match rx.try_recv() {
            Ok(ev) => take(ctx, t, &ev),
            Err(TryRecvError::Lagged(_)) => rebuild(ctx, t),
            Err(TryRecvError::Empty) => return true,
            Err(TryRecvError::Closed) => return false,
        }
    }
}

/// Takes one change: a pod's into the tracker and the CFS counters, a node's as a reason to
/// look at every pod.
fn take(ctx: &SimContext, t: &mut Tracker, ev: &StoreEvent) {
    match ev.resource.as_str() {
        "nodes" => t.node_changed(),
        "pods" => {
            let o = &ev.object;
            let (ns, pod_name) = (o.namespace().unwrap_or_default(), o.name());
            let key = pod_key(ns, pod_name);
            if ev.event_type == StoreEventType::Deleted {
                t.observe(&key, None);
                ctx.state.kubelet.with(|s| {
                    s.bound_at.remove(o.uid());
                    s.resizing.remove(o.uid());
                    s.counters.forget(ns, pod_name);
                });
                return;
            }
            let pod = o.value();
            t.observe(&key, Some(&pod));
            let now = ctx.clock.now();
            ctx.state.kubelet.with(|s| s.counters.observe(&pod, now));
        }
        _ => {}
    }
}

/// Forgets what the tracker knew and takes every pod from a full list.
fn rebuild(ctx: &SimContext, t: &mut Tracker) {
    t.clear();
    let pods = ctx.store.list(&gvr::PODS, None).0;
    for pod in &pods {
        t.observe(&pod_key(namespace(pod), name(pod)), Some(pod));
    }
    let alive: HashSet<&str> = pods.iter().map(uid).collect();
    let now = ctx.clock.now();
    ctx.state.kubelet.with(|s| {
        s.bound_at.retain(|u, _| alive.contains(u.as_str()));
        s.resizing.retain(|u, _| alive.contains(u.as_str()));
        s.counters.advance(&pods, now);
    });
}

/// The pod of a tracker key, as stored now.
fn get_pod(ctx: &SimContext, key: &str) -> Option<Value> {
    let (ns, pod_name) = key.split_once('/')?;
    ctx.store.get(&gvr::PODS, Some(ns), pod_name)
}

/// The nodes as of their last change, read again only when a node changed (a pass at
/// 10,000 pods would otherwise decode every node each time), with their views without
/// usage and which of them have swap.
#[derive(Default)]
struct Nodes {
    list: Vec<Value>,
    views: HashMap<String, NodeView>,
    swap: HashSet<String>,
}

impl Nodes {
    fn read(ctx: &SimContext) -> Nodes {
        let list = sync_swap_nodes(ctx);
        let views = list
            .iter()
            .map(|n| {
                (
                    name(n).to_string(),
                    NodeView::with_usage(n, Amount::default(), 0),
                )
            })
            .collect();
        let swap = list
            .iter()
            .filter(|n| is_swap_node(&ctx.config, n))
            .map(|n| name(n).to_string())
            .collect();
        Nodes { list, views, swap }
    }

    /// The view of `node` with what the tracker says its pods hold.
    fn view(&self, t: &Tracker, node: &str) -> Option<NodeView> {
        let base = self.views.get(node)?;
        let u = t.usage(node);
        Some(NodeView {
            used: u.used,
            pods: u.pods,
            ..base.clone()
        })
    }

    /// Every node's view, in the order the API lists them.
    fn all_views(&self, t: &Tracker) -> Vec<NodeView> {
        self.list
            .iter()
            .filter_map(|n| self.view(t, name(n)))
            .collect()
    }
}

/// One pass of the scheduler and every node's kubelet over the pods to look at.
fn pass(
    ctx: &SimContext,
    t: &mut Tracker,
    nodes: &mut Nodes,
    rx: &mut broadcast::Receiver<StoreEvent>,
) {
    let now = ctx.clock.now();
    if t.nodes_changed() {
        *nodes = Nodes::read(ctx);
        t.nodes_seen();
    }
    let nodes = &*nodes;
    let pending: Vec<Value> = t
        .active()
        .iter()
        .filter_map(|k| get_pod(ctx, k))
        .filter(|p| {
            p.pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_none()
        })
        .collect();
    if !pending.is_empty() {
        schedule(ctx, nodes.all_views(t), &pending);
        drain(ctx, t, rx);
    }
    for key in t.active() {
        let Some(pod) = get_pod(ctx, &key).filter(|p| !pod_terminal(p) && !terminating(p)) else {
            t.settle(&key);
            continue;
        };
        let Some(node) = pod.pointer("/spec/nodeName").and_then(Value::as_str) else {
            continue;
        };
        let Some(view) = nodes.view(t, node) else {
            t.settle(&key);
            continue;
        };
        if pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running") {
            if resize(ctx, &pod, &view, nodes.swap.contains(node), now) {
                t.settle(&key);
            }
        } else {
            start(ctx, &pod, &nodes.list, now);
        }
    }
}

/// Whether a node has swap: named in `SimConfig::swap_nodes`, labelled
/// `kerf-sim/swap: "true"` (by hand or by the kubelet) or reporting a positive
/// `status.nodeInfo.swap.capacity`. The one place that decides it: the kubelet's resize
/// decisions, the label and the reported capacity all follow it.
pub fn is_swap_node(config: &crate::context::SimConfig, node: &Value) -> bool {
    config.swap_nodes.iter().any(|n| n == name(node))
        || node
            .pointer("/metadata/labels")
            .and_then(|l| l.get(SWAP_LABEL))
            .and_then(Value::as_str)
            == Some("true")
        || node
            .pointer("/status/nodeInfo/swap/capacity")
            .and_then(Value::as_i64)
            .is_some_and(|c| c > 0)
}

/// Gives every swap node ([`is_swap_node`]) the swap label and a
/// `status.nodeInfo.swap.capacity` (its memory capacity) where one is missing; returns the
/// nodes.
fn sync_swap_nodes(ctx: &SimContext) -> Vec<Value> {
    for node in ctx.store.list(&gvr::NODES, None).0 {
        if !is_swap_node(&ctx.config, &node) {
            continue;
        }
        if node
            .pointer("/metadata/labels")
            .and_then(|l| l.get(SWAP_LABEL))
            .is_none()
        {
            let mut n = node.clone();
            if !n["metadata"]["labels"].is_object() {
                n["metadata"]["labels"] = json!({});
            }
            n["metadata"]["labels"][SWAP_LABEL] = json!("true");
            let _ = ctx.store.update(&gvr::NODES, n, MANAGER);
        }
        if node.pointer("/status/nodeInfo/swap/capacity").is_none()
            && let Some(mut n) = ctx.store.get(&gvr::NODES, None, name(&node))
        {
            let memory = n
                .pointer("/status/capacity/memory")
                .and_then(resources::bytes)
                .unwrap_or(0);
            n["status"]["nodeInfo"]["swap"] = json!({"capacity": memory});
            let _ = ctx.store.update_status(&gvr::NODES, n, MANAGER);
        }
    }
    ctx.store.list(&gvr::NODES, None).0
}

/// Binds pending pods to nodes with room, oldest first; the rest get PodScheduled=False.
fn schedule(ctx: &SimContext, mut views: Vec<NodeView>, pods: &[Value]) {
    let mut pending: Vec<&Value> = pods
        .iter()
        .filter(|p| {
            p.pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_none()
        })
        .filter(|p| !pod_terminal(p) && !terminating(p))
        .collect();
    pending.sort_by_key(|p| {
        p.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .unwrap_or("")
    });
    let now = crate::controllers::common::rfc3339(ctx.clock.now());
    for pod in pending {
        let request = pod_spec_requests(pod);
        match pick_node(request, pod.pointer("/spec/nodeSelector"), &views) {
            Ok(i) => {
                let mut bound = pod.clone();
                bound["spec"]["nodeName"] = json!(views[i].name);
                let Ok(bound) = ctx.store.write(&gvr::PODS, bound, MANAGER, Some("binding")) else {
                    continue;
                };
                views[i].used = views[i].used.plus(pod_allocated(&bound));
                views[i].pods += 1;
                let mut status = bound.get("status").cloned().unwrap_or_else(|| json!({}));
                actuation::set_pod_condition(&mut status, "PodScheduled", true, json!({}), 1, &now);
                write_status(ctx, &bound, status);
            }
            Err(message) => {
                let mut status = pod.get("status").cloned().unwrap_or_else(|| json!({}));
                status["phase"] = json!("Pending");
                let extra = json!({"reason": "Unschedulable", "message": message});
                actuation::set_pod_condition(&mut status, "PodScheduled", false, extra, 1, &now);
                write_status(ctx, pod, status);
            }
        }
    }
}

fn write_status(ctx: &SimContext, pod: &Value, status: Value) {
    if pod.get("status") == Some(&status) {
        return;
    }
    let mut pod = pod.clone();
    pod["status"] = status;
    if let Err(e) = ctx.store.update_status(&gvr::PODS, pod, MANAGER) {
        tracing::debug!(error = %e.message, "pod status write");
    }
}

/// Starts a bound pod once `kubelet_ready_delay` of sim time has passed since it was bound.
fn start(ctx: &SimContext, pod: &Value, nodes: &[Value], now: DateTime<Utc>) {
    let bound_at = ctx
        .state
        .kubelet
        .with(|s| *s.bound_at.entry(uid(pod).to_string()).or_insert(now));
    let delay = chrono::Duration::from_std(ctx.config.kubelet_ready_delay).unwrap_or_default();
    if now < bound_at + delay {
        return;
    }
    let node = nodes.iter().find(|n| name(n) == pod_node(pod));
    write_status(ctx, pod, started_status(ctx, pod, &host_ip(node), now));
}

/// Starts a stored, bound pod at once, as this kubelet does after its ready delay: writes
/// the status it gives a started pod, with the address of the pod's node. For objects
/// written into the store before the kubelet runs (`Sim::start_filled`): the kubelet then
/// finds the pod running, and resizes, kills and reports it like a pod it started itself.
pub fn start_now(ctx: &SimContext, pod: &Value) -> Result<Value, ApiError> {
    let node = ctx.store.get(&gvr::NODES, None, pod_node(pod));
    let status = started_status(ctx, pod, &host_ip(node.as_ref()), ctx.clock.now());
    let mut pod = pod.clone();
    pod["status"] = status;
    ctx.store.update_status(&gvr::PODS, pod, MANAGER)
}

/// The status the kubelet gives `pod` when it starts it at `now` on the node at `host_ip`:
/// [`actuation::running_status`] with the next pod IP.
fn started_status(ctx: &SimContext, pod: &Value, host_ip: &str, now: DateTime<Utc>) -> Value {
    let ip = ctx.state.kubelet.with(|s| {
        s.next_ip += 1;
        format!("10.244.{}.{}", s.next_ip / 250, s.next_ip % 250 + 2)
    });
    actuation::running_status(pod, host_ip, &ip, now)
}

/// The node a pod is bound to ("" when none).
fn pod_node(pod: &Value) -> &str {
    pod.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The InternalIP of `node` (127.0.0.1 without one).
fn host_ip(node: Option<&Value>) -> String {
    node.and_then(|n| {
        n.pointer("/status/addresses")?
            .as_array()?
            .iter()
            .find(|a| a["type"] == "InternalIP")?
            .get("address")?
            .as_str()
            .map(str::to_string)
    })
    .unwrap_or_else(|| "127.0.0.1".to_string())
}

/// Decides and advances a running pod's resize; true when the pod is in sync (nothing left
/// to do until it changes).
fn resize(ctx: &SimContext, pod: &Value, view: &NodeView, swap: bool, now: DateTime<Utc>) -> bool {
    let mut node = view.clone();
    node.used = node.used.minus(pod_allocated(pod));
    let generation = int_at(pod, "/metadata/generation", 1);
    let pod_uid = uid(pod).to_string();
    let decision = actuation::resize_decision(pod, &node, swap);
    match deferred(ctx, pod, decision, &node, now) {
        ResizeDecision::InSync => {
            ctx.state.kubelet.with(|s| {
                s.resizing.remove(&pod_uid);
                s.deferred.remove(&pod_uid);
            });
            let mut status = pod.get("status").cloned().unwrap_or_else(|| json!({}));
            status["observedGeneration"] = json!(generation);
            actuation::remove_pod_condition(&mut status, "PodResizePending");
            actuation::remove_pod_condition(&mut status, "PodResizeInProgress");
            write_status(ctx, pod, status);
            return true;
        }
        ResizeDecision::Infeasible(m) => write_status(
            ctx,
            pod,
            actuation::pending_status(pod, "Infeasible", &m, now),
        ),
        ResizeDecision::Deferred(m) => write_status(
            ctx,
            pod,
            actuation::pending_status(pod, "Deferred", &m, now),
        ),
        ResizeDecision::Actuate => {
            let started = ctx
                .state
                .kubelet
                .with(|s| s.resizing.get(&pod_uid).copied());
            let delay =
                chrono::Duration::from_std(ctx.config.kubelet_ready_delay / 2).unwrap_or_default();
            match started {
                Some((g, at)) if g == generation => {
                    if now >= at + delay {
                        write_status(ctx, pod, actuation::finished_status(pod, now));
                        ctx.state.kubelet.with(|s| s.resizing.remove(&pod_uid));
                    }
                }
                _ => {
                    ctx.state
                        .kubelet
                        .with(|s| s.resizing.insert(pod_uid.clone(), (generation, now)));
                    write_status(ctx, pod, actuation::in_progress_status(pod, now));
                }
            }
        }
    }
    false
}

/// A resize the kubelet could actuate, deferred for `SimConfig::resize_defer` from when it
/// first saw it (a resize already actuating is not deferred again).
fn deferred(
    ctx: &SimContext,
    pod: &Value,
    decision: ResizeDecision,
    node: &NodeView,
    now: DateTime<Utc>,
) -> ResizeDecision {
    let defer = ctx.config.resize_defer;
    if decision != ResizeDecision::Actuate || defer.is_zero() {
        return decision;
    }
    let generation = int_at(pod, "/metadata/generation", 1);
    let pod_uid = uid(pod).to_string();
    let since = ctx.state.kubelet.with(|s| {
        if s.resizing
            .get(&pod_uid)
            .is_some_and(|(g, _)| *g == generation)
        {
            return None;
        }
        let entry = s.deferred.entry(pod_uid).or_insert((generation, now));
        if entry.0 != generation {
            *entry = (generation, now);
        }
        Some(entry.1)
    });
    match since {
        Some(since) if actuation::still_deferred(since, defer, now) => {
            ResizeDecision::Deferred(actuation::deferred_message(pod, node))
        }
        _ => decision,
    }
}
