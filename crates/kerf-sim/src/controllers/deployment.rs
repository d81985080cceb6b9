//! The Deployment controller: one ReplicaSet per pod template (named and labelled with the
//! `pod-template-hash`), RollingUpdate and Recreate rollouts, revision annotations and the
//! Deployment status.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::common::{
    conditions_of, controlled_by, controller_uid, int_at, name, namespace, rfc3339, set_condition,
    template_hash, uid,
};
use super::rolling::{RsCount, resolve_surge_unavailable, rolling_step};
use super::{Ctx, MANAGER};
use crate::store::gvr;

const REVISION: &str = "deployment.kubernetes.io/revision";
const HASH_LABEL: &str = "pod-template-hash";

/// Reconciles every Deployment once. The ReplicaSets are listed once and handed to each
/// Deployment by controller uid (a list per Deployment would cost every ReplicaSet of the
/// namespace per Deployment).
pub fn reconcile_all(ctx: &Ctx) {
    let mut by_owner: HashMap<String, Vec<Value>> = HashMap::new();
    for rs in ctx.store.list(&gvr::REPLICASETS, None).0 {
        if let Some(owner) = controller_uid(&rs) {
            by_owner.entry(owner.to_owned()).or_default().push(rs);
        }
    }
    for dep in ctx.store.list(&gvr::DEPLOYMENTS, None).0 {
        let mut rss = by_owner.remove(uid(&dep)).unwrap_or_default();
        rss.retain(|rs| namespace(rs) == namespace(&dep));
        reconcile(ctx, &dep, rss);
    }
}

/// Reconciles the Deployment `ns/name` (gone: nothing to do; its ReplicaSets are garbage)
/// over the ReplicaSets it controls, found through the store's owner index.
pub fn reconcile_key(ctx: &Ctx, ns: &str, name: &str) {
    let Some(dep) = ctx.store.get(&gvr::DEPLOYMENTS, Some(ns), name) else {
        return;
    };
    let rss = ctx
        .store
        .owned(&gvr::REPLICASETS, uid(&dep))
        .into_iter()
        .filter(|rs| controller_uid(rs) == Some(uid(&dep)) && namespace(rs) == ns)
        .collect();
    reconcile(ctx, &dep, rss);
}

fn revision(obj: &Value) -> i64 {
    obj.pointer(&format!(
        "/metadata/annotations/{}",
        REVISION.replace('/', "~1")
    ))
    .and_then(Value::as_str)
    .and_then(|s| s.parse().ok())
    .unwrap_or(0)
}

/// Reconciles one Deployment over `rss`, the ReplicaSets it controls.
fn reconcile(ctx: &Ctx, dep: &Value, mut rss: Vec<Value>) {
    rss.sort_by_key(revision);
    let template = dep.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let hash = template_hash(&template);
    let is_new = |rs: &Value| {
        rs.pointer(&format!("/metadata/labels/{HASH_LABEL}"))
            .and_then(Value::as_str)
            == Some(hash.as_str())
    };
    let max_old_revision = rss
        .iter()
        .filter(|r| !is_new(r))
        .map(revision)
        .max()
        .unwrap_or(0);
    let new_rs = match rss.iter().find(|r| is_new(r)).cloned() {
        Some(rs) if revision(&rs) > max_old_revision => rs,
        Some(mut rs) => {
            rs["metadata"]["annotations"][REVISION] = json!((max_old_revision + 1).to_string());
            match ctx.store.update(&gvr::REPLICASETS, rs, MANAGER) {
                Ok(rs) => rs,
                Err(_) => return,
            }
        }
        None => match create_rs(ctx, dep, &template, &hash, max_old_revision + 1) {
            Some(rs) => rs,
            None => return,
        },
    };
    let old: Vec<Value> = rss.into_iter().filter(|r| !is_new(r)).collect();
    let paused = dep.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);
    if !paused {
        scale(ctx, dep, &new_rs, &old);
        cleanup_history(ctx, dep, &old);
    }
    sync_revision_annotation(ctx, dep, &new_rs);
    write_status(ctx, dep, &new_rs, &old);
}

fn create_rs(ctx: &Ctx, dep: &Value, template: &Value, hash: &str, rev: i64) -> Option<Value> {
    let mut template = template.clone();
    template["metadata"]["labels"][HASH_LABEL] = json!(hash);
    let mut selector = dep.pointer("/spec/selector").cloned().unwrap_or(json!({}));
    selector["matchLabels"][HASH_LABEL] = json!(hash);
    let labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    let rs = json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": format!("{}-{hash}", name(dep)),
            "namespace": namespace(dep),
            "labels": labels,
            "annotations": {
                REVISION: rev.to_string(),
                "deployment.kubernetes.io/desired-replicas": int_at(dep, "/spec/replicas", 1).to_string(),
            },
            "ownerReferences": [super::common::owner_ref(dep)],
        },
        "spec": {
            "replicas": 0,
            "minReadySeconds": int_at(dep, "/spec/minReadySeconds", 0),
            "selector": selector,
            "template": template,
        },
    });
    ctx.store
        .create(&gvr::REPLICASETS, rs, MANAGER)
        .map_err(|e| tracing::debug!(error = %e.message, "creating ReplicaSet"))
        .ok()
}

fn count(rs: &Value) -> RsCount {
    let replicas = int_at(rs, "/spec/replicas", 0);
    RsCount {
        replicas,
        available: int_at(rs, "/status/availableReplicas", 0).min(replicas),
    }
}

fn set_replicas(ctx: &Ctx, rs: &Value, replicas: i64) {
    if int_at(rs, "/spec/replicas", 0) == replicas {
        return;
    }
    let mut rs = rs.clone();
    rs["spec"]["replicas"] = json!(replicas);
    if let Err(e) = ctx.store.update(&gvr::REPLICASETS, rs, MANAGER) {
        tracing::debug!(error = %e.message, "scaling ReplicaSet");
    }
}

fn scale(ctx: &Ctx, dep: &Value, new_rs: &Value, old: &[Value]) {
    let desired = int_at(dep, "/spec/replicas", 1);
    let strategy = dep.pointer("/spec/strategy/type").and_then(Value::as_str);
    if strategy == Some("Recreate") {
        for rs in old {
            set_replicas(ctx, rs, 0);
        }
        let old_pods_left = old.iter().any(|rs| {
            ctx.store
                .owned(&gvr::PODS, uid(rs))
                .iter()
                .any(|p| namespace(p) == namespace(dep) && controlled_by(p, uid(rs)))
        });
        if !old_pods_left {
            set_replicas(ctx, new_rs, desired);
        }
        return;
    }
    let (surge, unavailable) = resolve_surge_unavailable(
        dep.pointer("/spec/strategy/rollingUpdate/maxSurge"),
        dep.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
        desired,
    );
    let old_counts: Vec<RsCount> = old.iter().map(count).collect();
    let (n, o) = rolling_step(desired, surge, unavailable, count(new_rs), &old_counts);
    set_replicas(ctx, new_rs, n);
    for (rs, r) in old.iter().zip(o) {
        set_replicas(ctx, rs, r);
    }
}

/// Deletes empty old ReplicaSets beyond `revisionHistoryLimit` (default 10), oldest first.
fn cleanup_history(ctx: &Ctx, dep: &Value, old: &[Value]) {
    let limit = usize::try_from(int_at(dep, "/spec/revisionHistoryLimit", 10)).unwrap_or(0);
    let empty: Vec<&Value> = old
        .iter()
        .filter(|rs| int_at(rs, "/spec/replicas", 0) == 0 && int_at(rs, "/status/replicas", 0) == 0)
        .collect();
    for rs in empty.iter().take(empty.len().saturating_sub(limit)) {
        let _ = ctx
            .store
            .delete(&gvr::REPLICASETS, Some(namespace(rs)), name(rs));
    }
}

fn sync_revision_annotation(ctx: &Ctx, dep: &Value, new_rs: &Value) {
    let rev = revision(new_rs).to_string();
    if dep
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(REVISION))
        .and_then(Value::as_str)
        == Some(rev.as_str())
    {
        return;
    }
    let mut dep = dep.clone();
    if !dep["metadata"]["annotations"].is_object() {
        dep["metadata"]["annotations"] = json!({});
    }
    dep["metadata"]["annotations"][REVISION] = json!(rev);
    if let Err(e) = ctx.store.update(&gvr::DEPLOYMENTS, dep, MANAGER) {
        tracing::debug!(error = %e.message, "annotating Deployment");
    }
}

fn write_status(ctx: &Ctx, dep: &Value, new_rs: &Value, old: &[Value]) {
    // Re-read: the annotation update may have moved the resourceVersion.
    let Some(dep) = ctx
        .store
        .get(&gvr::DEPLOYMENTS, Some(namespace(dep)), name(dep))
    else {
        return;
    };
    let status = status(&dep, new_rs, old, ctx.clock.now());
    super::write_status_if_changed(ctx, &gvr::DEPLOYMENTS, &dep, status);
}

/// The status this controller writes for `dep` at `now` from its ReplicaSets' status: the
/// new one (`new_rs`) and the `old` ones. Conditions that did not change keep their times.
pub fn status(dep: &Value, new_rs: &Value, old: &[Value], now: DateTime<Utc>) -> Value {
    let desired = int_at(dep, "/spec/replicas", 1);
    let all: Vec<&Value> = std::iter::once(new_rs).chain(old.iter()).collect();
    let sum = |p: &str| all.iter().map(|rs| int_at(rs, p, 0)).sum::<i64>();
    let available = sum("/status/availableReplicas");
    let updated = int_at(new_rs, "/status/replicas", 0);
    let replicas = sum("/status/replicas");
    let (_, max_unavailable) = resolve_surge_unavailable(
        dep.pointer("/spec/strategy/rollingUpdate/maxSurge"),
        dep.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
        desired,
    );
    let now = rfc3339(now);
    let mut conditions = conditions_of(dep);
    let min_ok = available >= desired - max_unavailable;
    set_condition(
        &mut conditions,
        json!({
            "type": "Available",
            "status": if min_ok { "True" } else { "False" },
            "reason": if min_ok { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" },
            "message": if min_ok { "Deployment has minimum availability." } else { "Deployment does not have minimum availability." },
            "lastUpdateTime": now,
        }),
        &now,
    );
    let complete = updated == desired && replicas == desired && available == desired;
    let rs_name = name(new_rs);
    set_condition(
        &mut conditions,
        json!({
            "type": "Progressing",
            "status": "True",
            "reason": if complete { "NewReplicaSetAvailable" } else { "ReplicaSetUpdated" },
            "message": if complete {
                format!("ReplicaSet \"{rs_name}\" has successfully progressed.")
            } else {
                format!("ReplicaSet \"{rs_name}\" is progressing.")
            },
            "lastUpdateTime": now,
        }),
        &now,
    );
    let mut status = json!({
        "observedGeneration": int_at(dep, "/metadata/generation", 1),
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": sum("/status/readyReplicas"),
        "availableReplicas": available,
        "conditions": conditions,
    });
    let unavailable = (desired - available).max(0);
    if unavailable > 0 {
        status["unavailableReplicas"] = json!(unavailable);
    }
    status
}
