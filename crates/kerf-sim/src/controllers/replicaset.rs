//! The ReplicaSet controller: keeps `spec.replicas` pods (created through the mutating
//! webhooks, like the real API server does for the controller's POST) and writes the status.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::Ctx;
use super::common::{
    controller_uid, int_at, name, namespace, pod_from_template, pod_ready, pod_terminal,
    random_suffix, terminating, uid,
};
use crate::store::gvr;

/// Reconciles every ReplicaSet once. The live pods are grouped by controller uid once
/// (filtering every pod for every ReplicaSet costs pods x ReplicaSets). Returns the keys
/// of the ReplicaSets to look at again after a while ([`reconcile`]).
pub async fn reconcile_all(ctx: &Ctx) -> Vec<(String, String)> {
    let pods = ctx.store.list(&gvr::PODS, None).0;
    let mut by_owner: HashMap<&str, Vec<&Value>> = HashMap::new();
    for p in pods.iter().filter(|p| !pod_terminal(p) && !terminating(p)) {
        if let Some(owner) = controller_uid(p) {
            by_owner.entry(owner).or_default().push(p);
        }
    }
    let mut again = Vec::new();
    for rs in ctx.store.list(&gvr::REPLICASETS, None).0 {
        let mut owned = by_owner.remove(uid(&rs)).unwrap_or_default();
        owned.retain(|p| namespace(p) == namespace(&rs));
        if reconcile(ctx, &rs, &owned).await {
            again.push((namespace(&rs).to_string(), name(&rs).to_string()));
        }
    }
    again
}

/// Reconciles the ReplicaSet `ns/name` over the live pods it controls, found through the
/// store's owner index; true when it should be looked at again after a while.
pub async fn reconcile_key(ctx: &Ctx, ns: &str, rs_name: &str) -> bool {
    let Some(rs) = ctx.store.get(&gvr::REPLICASETS, Some(ns), rs_name) else {
        return false;
    };
    let pods = ctx.store.owned(&gvr::PODS, uid(&rs));
    let owned: Vec<&Value> = pods
        .iter()
        .filter(|p| !pod_terminal(p) && !terminating(p))
        .filter(|p| controller_uid(p) == Some(uid(&rs)) && namespace(p) == ns)
        .collect();
    reconcile(ctx, &rs, &owned).await
}

/// The order in which surplus pods go: unscheduled, then pending, then not ready, then the
/// newest first.
fn deletion_rank(pod: &Value) -> (u8, u8, u8, std::cmp::Reverse<String>) {
    let scheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some();
    let running = pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running");
    let created = pod
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    (
        u8::from(scheduled),
        u8::from(running),
        u8::from(pod_ready(pod)),
        std::cmp::Reverse(created),
    )
}

/// Creates or deletes pods towards `spec.replicas` and writes the status. True while a
/// ready pod is not yet available (`minReadySeconds`): only time changes that.
async fn reconcile(ctx: &Ctx, rs: &Value, owned: &[&Value]) -> bool {
    let desired = int_at(rs, "/spec/replicas", 1);
    let have = i64::try_from(owned.len()).unwrap_or(i64::MAX);
    if have < desired {
        let template = rs.pointer("/spec/template").cloned().unwrap_or(json!({}));
        for _ in have..desired {
            let pod_name = format!("{}-{}", name(rs), random_suffix());
            let pod = pod_from_template(&template, rs, &pod_name, &[]);
            super::create_pod(ctx, pod).await;
        }
    } else if have > desired {
        let mut victims: Vec<&&Value> = owned.iter().collect();
        victims.sort_by_key(|p| deletion_rank(p));
        let surplus = usize::try_from(have - desired).unwrap_or(0);
        for pod in victims.into_iter().take(surplus) {
            let _ = ctx
                .store
                .delete(&gvr::PODS, Some(namespace(pod)), name(pod));
        }
    }
    let status = status(rs, owned, ctx.clock.now());
    let waiting = int_at(&status, "/readyReplicas", 0) > int_at(&status, "/availableReplicas", 0);
    super::write_status_if_changed(ctx, &gvr::REPLICASETS, rs, status);
    waiting
}

/// The status this controller writes for `rs` at `now`, over the live pods it controls.
pub fn status(rs: &Value, owned: &[&Value], now: DateTime<Utc>) -> Value {
    let min_ready = int_at(rs, "/spec/minReadySeconds", 0);
    let ready = owned.iter().filter(|p| pod_ready(p)).count();
    let available = owned
        .iter()
        .filter(|p| super::pod_available(p, min_ready, now))
        .count();
    json!({
        "replicas": owned.len(),
        "fullyLabeledReplicas": owned.len(),
        "readyReplicas": ready,
        "availableReplicas": available,
        "observedGeneration": int_at(rs, "/metadata/generation", 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surplus_pods_go_unscheduled_first_then_not_ready_then_newest() {
        let ready = |t: &str| {
            json!({"metadata": {"creationTimestamp": t}, "spec": {"nodeName": "n"},
                   "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
        };
        let pending =
            json!({"metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"}, "spec": {}});
        let old = ready("2020-01-01T00:00:00Z");
        let new = ready("2021-01-01T00:00:00Z");
        let mut pods = [&old, &new, &pending];
        pods.sort_by_key(|p| deletion_rank(p));
        assert_eq!(pods, [&pending, &new, &old]);
    }
}
