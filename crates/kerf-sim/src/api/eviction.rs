//! The `pods/eviction` subresource (policy/v1 Eviction): honours the PodDisruptionBudget
//! that selects the pod, computed from its spec and the currently healthy (Ready) pods.

use serde_json::{Value, json};

use super::Req;
use super::selectors::LabelSelector;
use super::target::{Target, existing};
use crate::context::SimContext;
use crate::store::{ApiError, format_time, gvr};

/// Whether a pod is Ready.
pub fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        && pod.pointer("/metadata/deletionTimestamp").is_none()
}

fn terminal(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

/// Resolves an int-or-percent against `total`, rounding up as the disruption controller does.
fn scaled(v: &Value, total: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: f64 = s.strip_suffix('%')?.parse().ok()?;
            Some((pct * total as f64 / 100.0).ceil() as i64)
        }
        _ => None,
    }
}

/// `(desiredHealthy, currentHealthy, expectedPods)` of a PDB.
pub fn budget(ctx: &SimContext, pdb: &Value) -> (i64, i64, i64) {
    let ns = pdb["metadata"]["namespace"].as_str();
    let sel = LabelSelector::from_object(&pdb["spec"]["selector"]);
    let (pods, _) = ctx.store.list(&gvr::PODS, ns);
    let pods: Vec<&Value> = pods
        .iter()
        .filter(|p| sel.matches_object(p) && !terminal(p))
        .collect();
    let expected = pods.len() as i64;
    let healthy = pods.iter().filter(|p| pod_ready(p)).count() as i64;
    let desired = if let Some(min) = pdb.pointer("/spec/minAvailable") {
        scaled(min, expected).unwrap_or(0)
    } else if let Some(max) = pdb.pointer("/spec/maxUnavailable") {
        (expected - scaled(max, expected).unwrap_or(0)).max(0)
    } else {
        expected
    };
    (desired, healthy, expected)
}

/// Serves POST pods/{name}/eviction.
pub fn evict(ctx: &SimContext, _req: &Req, t: &Target) -> Result<(u16, Value), ApiError> {
    if t.gvr != gvr::PODS {
        return Err(super::path_not_found());
    }
    let name = t.name.clone().unwrap_or_default();
    let pod = existing(ctx, t, &name)?;
    let (pdbs, _) = ctx.store.list(&gvr::PDBS, t.namespace.as_deref());
    let matching: Vec<Value> = pdbs
        .into_iter()
        .filter(|p| {
            p.pointer("/spec/selector").is_some()
                && LabelSelector::from_object(&p["spec"]["selector"]).matches_object(&pod)
        })
        .collect();
    if matching.len() > 1 {
        return Err(ApiError::new(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            None,
        ));
    }
    if let Some(pdb) = matching.first()
        && pod_ready(&pod)
        && !terminal(&pod)
    {
        let (desired, healthy, _) = budget(ctx, pdb);
        if healthy - 1 < desired {
            let pdb_name = pdb["metadata"]["name"].as_str().unwrap_or_default();
            return Err(ApiError::new(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                Some(
                    json!({"causes": [{"reason": "DisruptionBudget", "message": format!("The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} currently")}]}),
                ),
            ));
        }
        record_disruption(ctx, pdb, &name);
    }
    ctx.store
        .delete(&gvr::PODS, t.namespace.as_deref(), &name)?;
    Ok((
        201,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

/// Decrements `status.disruptionsAllowed` and records the pod in `status.disruptedPods`.
fn record_disruption(ctx: &SimContext, pdb: &Value, pod: &str) {
    let mut pdb = pdb.clone();
    let allowed = pdb
        .pointer("/status/disruptionsAllowed")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if !pdb["status"].is_object() {
        pdb["status"] = json!({});
    }
    pdb["status"]["disruptionsAllowed"] = json!((allowed - 1).max(0));
    pdb["status"]["disruptedPods"][pod] = json!(format_time(ctx.store.now()));
    let _ = ctx.store.update_status(&gvr::PDBS, pdb, "kube-apiserver");
}
