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

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::context::SimContext;
use crate::controllers::common::{int_at, name, pod_terminal, terminating, uid};
use crate::store::gvr;
use actuation::ResizeDecision;
use resources::{pod_allocated, pod_spec_requests};
use scheduler::{NodeView, pick_node};

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

/// One pass of the scheduler and every node's kubelet.
pub fn reconcile(ctx: &SimContext) {
    let now = ctx.clock.now();
    let nodes = sync_swap_nodes(ctx);
    let pods = ctx.store.list(&gvr::PODS, None).0;
    schedule(ctx, &nodes, &pods);
    let pods = ctx.store.list(&gvr::PODS, None).0;
    let views: HashMap<String, NodeView> = nodes
        .iter()
        .map(|n| (name(n).to_string(), NodeView::build(n, &pods)))
        .collect();
    for pod in pods.iter().filter(|p| !pod_terminal(p) && !terminating(p)) {
        let Some(node) = pod.pointer("/spec/nodeName").and_then(Value::as_str) else {
            continue;
        };
        let Some(view) = views.get(node) else {
            continue;
        };
        if pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running") {
            resize(ctx, pod, view, is_swap(ctx, &nodes, node), now);
        } else {
            start(ctx, pod, &nodes, now);
        }
    }
    let alive: HashSet<&str> = pods.iter().map(uid).collect();
    ctx.state.kubelet.with(|s| {
        s.bound_at.retain(|u, _| alive.contains(u.as_str()));
        s.resizing.retain(|u, _| alive.contains(u.as_str()));
        s.counters.advance(&pods, now);
    });
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

fn is_swap(ctx: &SimContext, nodes: &[Value], node: &str) -> bool {
    nodes
        .iter()
        .any(|n| name(n) == node && is_swap_node(&ctx.config, n))
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
fn schedule(ctx: &SimContext, nodes: &[Value], pods: &[Value]) {
    let mut views: Vec<NodeView> = nodes.iter().map(|n| NodeView::build(n, pods)).collect();
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
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let host_ip = nodes
        .iter()
        .find(|n| name(n) == node)
        .and_then(|n| {
            n.pointer("/status/addresses")?
                .as_array()?
                .iter()
                .find(|a| a["type"] == "InternalIP")?
                .get("address")?
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_else(|| "127.0.0.1".to_string());
    let ip = ctx.state.kubelet.with(|s| {
        s.next_ip += 1;
        format!("10.244.{}.{}", s.next_ip / 250, s.next_ip % 250 + 2)
    });
    write_status(ctx, pod, actuation::running_status(pod, &host_ip, &ip, now));
}

/// Decides and advances a running pod's resize.
fn resize(ctx: &SimContext, pod: &Value, view: &NodeView, swap: bool, now: DateTime<Utc>) {
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
