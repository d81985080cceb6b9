//! The DaemonSet controller: one pod per schedulable node whose labels match the template's
//! nodeSelector, RollingUpdate with maxUnavailable / maxSurge (both rounded up, like the
//! real controller) or OnDelete, and the DaemonSet status.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Ctx;
use super::common::{
    controlled_by, int_at, map_selector_matches, name, namespace, pod_from_template, pod_ready,
    pod_terminal, random_suffix, scaled_value, template_hash, terminating, uid,
};
use crate::store::gvr;

const REVISION_LABEL: &str = "controller-revision-hash";

/// Reconciles every DaemonSet once.
pub async fn reconcile_all(ctx: &Ctx) {
    let sets = ctx.store.list(&gvr::DAEMONSETS, None).0;
    if sets.is_empty() {
        return;
    }
    let pods = ctx.store.list(&gvr::PODS, None).0;
    let nodes = ctx.store.list(&gvr::NODES, None).0;
    for ds in sets {
        let owned: Vec<&Value> = pods
            .iter()
            .filter(|p| {
                namespace(p) == namespace(&ds)
                    && controlled_by(p, uid(&ds))
                    && !pod_terminal(p)
                    && !terminating(p)
            })
            .collect();
        reconcile(ctx, &ds, &nodes, &owned).await;
    }
}

/// Reconciles the DaemonSet `ns/name` over the live pods it controls, found through the
/// store's owner index; true when it should be looked at again after a while (with
/// `minReadySeconds`, time alone makes pods available).
pub async fn reconcile_key(ctx: &Ctx, ns: &str, set: &str, nodes: &[Value]) -> bool {
    let Some(ds) = ctx.store.get(&gvr::DAEMONSETS, Some(ns), set) else {
        return false;
    };
    let pods = ctx.store.owned(&gvr::PODS, uid(&ds));
    let owned: Vec<&Value> = pods
        .iter()
        .filter(|p| namespace(p) == ns && controlled_by(p, uid(&ds)))
        .filter(|p| !pod_terminal(p) && !terminating(p))
        .collect();
    reconcile(ctx, &ds, nodes, &owned).await;
    int_at(&ds, "/spec/minReadySeconds", 0) > 0
}

/// The nodes a DaemonSet pod belongs on.
fn eligible<'a>(ds: &Value, nodes: &'a [Value]) -> Vec<&'a Value> {
    nodes
        .iter()
        .filter(|n| n.pointer("/spec/unschedulable").and_then(Value::as_bool) != Some(true))
        .filter(|n| {
            map_selector_matches(
                ds.pointer("/spec/template/spec/nodeSelector"),
                n.pointer("/metadata/labels"),
            )
        })
        .collect()
}

/// One node's pods, old and new revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePods {
    /// Pods of an older template: (ready).
    pub old: Vec<bool>,
    /// Pods of the current template: (ready).
    pub new: Vec<bool>,
}

/// What to do on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DsAction {
    /// Create a pod of the current template.
    Create,
    /// Delete the old pod.
    DeleteOld,
}

/// Plans the rollout across nodes: nodes without a pod get one; with `rolling` set to
/// `(max_surge, max_unavailable)`, old pods are replaced, either surging (new pod first, old
/// deleted once the new one is Ready) or by deleting up to the unavailability budget.
pub fn plan(
    nodes: &BTreeMap<String, NodePods>,
    rolling: Option<(i64, i64)>,
) -> Vec<(String, DsAction)> {
    let mut out = Vec::new();
    for (node, pods) in nodes {
        if pods.old.is_empty() && pods.new.is_empty() {
            out.push((node.clone(), DsAction::Create));
        }
    }
    let Some((surge, max_unavailable)) = rolling else {
        return out;
    };
    let unavailable = |p: &NodePods| !p.new.iter().chain(p.old.iter()).any(|r| *r);
    let mut budget_unavailable = max_unavailable
        - i64::try_from(nodes.values().filter(|p| unavailable(p)).count()).unwrap_or(0);
    let mut budget_surge = surge
        - i64::try_from(
            nodes
                .values()
                .filter(|p| !p.old.is_empty() && !p.new.is_empty())
                .count(),
        )
        .unwrap_or(0);
    for (node, pods) in nodes.iter().filter(|(_, p)| !p.old.is_empty()) {
        if pods.new.iter().any(|r| *r) {
            out.push((node.clone(), DsAction::DeleteOld));
        } else if surge > 0 {
            if pods.new.is_empty() && budget_surge > 0 {
                out.push((node.clone(), DsAction::Create));
                budget_surge -= 1;
            }
        } else if !pods.old.iter().any(|r| *r) {
            // An old pod that is not ready anyway costs no availability.
            out.push((node.clone(), DsAction::DeleteOld));
        } else if budget_unavailable > 0 {
            out.push((node.clone(), DsAction::DeleteOld));
            budget_unavailable -= 1;
        }
    }
    out
}

async fn reconcile(ctx: &Ctx, ds: &Value, nodes: &[Value], owned: &[&Value]) {
    let template = ds.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let hash = template_hash(&template);
    let by_node = group_by_node(ctx, ds, nodes, owned, &hash);
    let desired = i64::try_from(by_node.len()).unwrap_or(0);
    for (node, action) in plan(&by_node, rolling_budget(ds, desired)) {
        match action {
            DsAction::Create => create(ctx, ds, &template, &hash, &node).await,
            DsAction::DeleteOld => {
                let old = owned
                    .iter()
                    .filter(|p| pod_node(p) == node && !is_new(p, &hash));
                for p in old {
                    let _ = ctx.store.delete(&gvr::PODS, Some(namespace(p)), name(p));
                }
            }
        }
    }
    write_status(ctx, ds, owned, &by_node);
}

/// The node a pod is bound to ("" while unbound).
fn pod_node(p: &Value) -> String {
    p.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Whether a pod is of the current template (`hash`).
fn is_new(p: &Value, hash: &str) -> bool {
    p.pointer(&format!("/metadata/labels/{REVISION_LABEL}"))
        .and_then(Value::as_str)
        == Some(hash)
}

/// The owned pods of each eligible node, old and new revision; a pod on a node it no
/// longer belongs on is deleted.
fn group_by_node(
    ctx: &Ctx,
    ds: &Value,
    nodes: &[Value],
    owned: &[&Value],
    hash: &str,
) -> BTreeMap<String, NodePods> {
    let mut by_node: BTreeMap<String, NodePods> = eligible(ds, nodes)
        .into_iter()
        .map(|n| (name(n).to_string(), NodePods::default()))
        .collect();
    for p in owned {
        match by_node.get_mut(&pod_node(p)) {
            Some(entry) if is_new(p, hash) => entry.new.push(pod_ready(p)),
            Some(entry) => entry.old.push(pod_ready(p)),
            None => {
                let _ = ctx.store.delete(&gvr::PODS, Some(namespace(p)), name(p));
            }
        }
    }
    by_node
}

/// `(max_surge, max_unavailable)` of a RollingUpdate DaemonSet of `desired` pods (both
/// rounded up; at least one unavailable without surge), `None` for OnDelete.
fn rolling_budget(ds: &Value, desired: i64) -> Option<(i64, i64)> {
    let strategy = ds
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str);
    if strategy == Some("OnDelete") {
        return None;
    }
    let rolling = |field: &str, default: i64| {
        let path = format!("/spec/updateStrategy/rollingUpdate/{field}");
        scaled_value(ds.pointer(&path), desired, true, default)
    };
    let surge = rolling("maxSurge", 0);
    let unavailable = rolling("maxUnavailable", 1);
    Some((
        surge,
        if surge == 0 {
            unavailable.max(1)
        } else {
            unavailable
        },
    ))
}

/// Writes the DaemonSet status from the pods on eligible nodes.
fn write_status(ctx: &Ctx, ds: &Value, owned: &[&Value], by_node: &BTreeMap<String, NodePods>) {
    let desired = i64::try_from(by_node.len()).unwrap_or(0);
    let now = ctx.clock.now();
    let min_ready = int_at(ds, "/spec/minReadySeconds", 0);
    let count = |f: &dyn Fn(&Value) -> bool| {
        owned
            .iter()
            .filter(|p| by_node.contains_key(&pod_node(p)) && f(p))
            .count()
    };
    let ready = count(&|p| pod_ready(p));
    let available = count(&|p| super::pod_available(p, min_ready, now));
    let status = json!({
        "observedGeneration": int_at(ds, "/metadata/generation", 1),
        "desiredNumberScheduled": desired,
        "currentNumberScheduled": by_node.values().filter(|p| !p.old.is_empty() || !p.new.is_empty()).count(),
        "updatedNumberScheduled": by_node.values().filter(|p| !p.new.is_empty()).count(),
        "numberMisscheduled": 0,
        "numberReady": ready,
        "numberAvailable": available,
        "numberUnavailable": (desired - i64::try_from(available).unwrap_or(0)).max(0),
    });
    super::write_status_if_changed(ctx, &gvr::DAEMONSETS, ds, status);
}

async fn create(ctx: &Ctx, ds: &Value, template: &Value, hash: &str, node: &str) {
    let pod_name = format!("{}-{}", name(ds), random_suffix());
    let generation = int_at(ds, "/metadata/generation", 1).to_string();
    let labels = [
        (REVISION_LABEL, hash.to_string()),
        ("pod-template-generation", generation),
    ];
    let mut pod = pod_from_template(template, ds, &pod_name, &labels);
    pod["spec"]["nodeName"] = json!(node);
    super::create_pod(ctx, pod).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(v: &[(&str, &[bool], &[bool])]) -> BTreeMap<String, NodePods> {
        v.iter()
            .map(|(n, old, new)| {
                (
                    n.to_string(),
                    NodePods {
                        old: old.to_vec(),
                        new: new.to_vec(),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn every_node_gets_a_pod() {
        let n = nodes(&[("a", &[], &[]), ("b", &[], &[true])]);
        assert_eq!(
            plan(&n, Some((0, 1))),
            vec![("a".to_string(), DsAction::Create)]
        );
    }

    #[test]
    fn max_unavailable_bounds_deletions() {
        let n = nodes(&[
            ("a", &[true], &[]),
            ("b", &[true], &[]),
            ("c", &[true], &[]),
        ]);
        assert_eq!(
            plan(&n, Some((0, 1))),
            vec![("a".to_string(), DsAction::DeleteOld)]
        );
        let n = nodes(&[
            ("a", &[], &[false]),
            ("b", &[true], &[]),
            ("c", &[true], &[]),
        ]);
        assert_eq!(plan(&n, Some((0, 1))), vec![]);
        assert!(plan(&n, None).is_empty());
    }

    #[test]
    fn surge_creates_new_pod_before_deleting_old() {
        let n = nodes(&[("a", &[true], &[]), ("b", &[true], &[])]);
        assert_eq!(
            plan(&n, Some((1, 0))),
            vec![("a".to_string(), DsAction::Create)]
        );
        let n = nodes(&[("a", &[true], &[true]), ("b", &[true], &[])]);
        assert_eq!(
            plan(&n, Some((1, 0))),
            vec![("a".to_string(), DsAction::DeleteOld)]
        );
    }
}
