//! PodDisruptionBudget status (what `pods/eviction` reads) and a minimal HPA status.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::Ctx;
use super::common::{
    conditions_of, int_at, namespace, pod_ready, pod_terminal, rfc3339, scaled_value,
    selector_matches, set_condition, terminating,
};
use crate::store::gvr;

/// The numbers of a PDB status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PdbNumbers {
    /// Pods the budget counts.
    pub expected_pods: i64,
    /// Ready pods.
    pub current_healthy: i64,
    /// Ready pods the budget requires.
    pub desired_healthy: i64,
    /// How many pods may be evicted now.
    pub disruptions_allowed: i64,
}

/// Computes the PDB numbers like the disruption controller: `minAvailable` (an int, or a
/// percentage of the expected pods rounded up) or `maxUnavailable` (expected minus it, the
/// percentage rounded up).
pub fn pdb_numbers(spec: &Value, expected: i64, healthy: i64) -> PdbNumbers {
    let desired = if let Some(min) = spec.get("minAvailable") {
        scaled_value(Some(min), expected, true, 0)
    } else if let Some(max) = spec.get("maxUnavailable") {
        (expected - scaled_value(Some(max), expected, true, 0)).max(0)
    } else {
        expected
    };
    PdbNumbers {
        expected_pods: expected,
        current_healthy: healthy,
        desired_healthy: desired,
        disruptions_allowed: (healthy - desired).max(0),
    }
}

/// Reconciles every PDB and HPA once.
/// The pods are listed once per namespace that has a budget.
pub fn reconcile_all(ctx: &Ctx) {
    let now = rfc3339(ctx.clock.now());
    let mut pods_of: HashMap<String, Vec<Value>> = HashMap::new();
    for pdb in ctx.store.list(&gvr::PDBS, None).0 {
        let pods = pods_of
            .entry(namespace(&pdb).to_string())
            .or_insert_with(|| ctx.store.list(&gvr::PODS, Some(namespace(&pdb))).0);
        let selected: Vec<&Value> = pods
            .iter()
            .filter(|p| namespace(p) == namespace(&pdb) && !pod_terminal(p) && !terminating(p))
            .filter(|p| {
                selector_matches(pdb.pointer("/spec/selector"), p.pointer("/metadata/labels"))
            })
            .collect();
        let healthy = selected.iter().filter(|p| pod_ready(p)).count();
        let n = pdb_numbers(
            pdb.get("spec").unwrap_or(&Value::Null),
            i64::try_from(selected.len()).unwrap_or(0),
            i64::try_from(healthy).unwrap_or(0),
        );
        let mut conditions = conditions_of(&pdb);
        let allowed = n.disruptions_allowed > 0;
        set_condition(
            &mut conditions,
            json!({
                "type": "DisruptionAllowed",
                "status": if allowed { "True" } else { "False" },
                "reason": if allowed { "SufficientPods" } else { "InsufficientPods" },
                "message": "",
                "observedGeneration": int_at(&pdb, "/metadata/generation", 1),
            }),
            &now,
        );
        let status = json!({
            "observedGeneration": int_at(&pdb, "/metadata/generation", 1),
            "disruptionsAllowed": n.disruptions_allowed,
            "currentHealthy": n.current_healthy,
            "desiredHealthy": n.desired_healthy,
            "expectedPods": n.expected_pods,
            "conditions": conditions,
        });
        super::write_status_if_changed(ctx, &gvr::PDBS, &pdb, status);
    }
    for hpa in ctx.store.list(&gvr::HPAS, None).0 {
        reconcile_hpa(ctx, &hpa);
    }
}

/// Writes `currentReplicas` / `desiredReplicas` from the target's replica count.
fn reconcile_hpa(ctx: &Ctx, hpa: &Value) {
    let kind = hpa
        .pointer("/spec/scaleTargetRef/kind")
        .and_then(Value::as_str);
    let target_name = hpa
        .pointer("/spec/scaleTargetRef/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let target_gvr = match kind {
        Some("Deployment") => gvr::DEPLOYMENTS,
        Some("StatefulSet") => gvr::STATEFULSETS,
        Some("ReplicaSet") => gvr::REPLICASETS,
        _ => return,
    };
    let Some(target) = ctx
        .store
        .get(&target_gvr, Some(namespace(hpa)), target_name)
    else {
        return;
    };
    let replicas = int_at(&target, "/status/replicas", 0);
    let status = json!({
        "observedGeneration": int_at(hpa, "/metadata/generation", 1),
        "currentReplicas": replicas,
        "desiredReplicas": int_at(&target, "/spec/replicas", replicas),
    });
    super::write_status_if_changed(ctx, &gvr::HPAS, hpa, status);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_available_int_and_percent() {
        let n = pdb_numbers(&json!({"minAvailable": 2}), 2, 2);
        assert_eq!((n.desired_healthy, n.disruptions_allowed), (2, 0));
        let n = pdb_numbers(&json!({"minAvailable": 1}), 2, 2);
        assert_eq!(n.disruptions_allowed, 1);
        let n = pdb_numbers(&json!({"minAvailable": "50%"}), 3, 3);
        assert_eq!((n.desired_healthy, n.disruptions_allowed), (2, 1));
    }

    #[test]
    fn max_unavailable_rounds_up() {
        let n = pdb_numbers(&json!({"maxUnavailable": "34%"}), 3, 3);
        assert_eq!((n.desired_healthy, n.disruptions_allowed), (1, 2));
        let n = pdb_numbers(&json!({"maxUnavailable": 1}), 3, 2);
        assert_eq!((n.desired_healthy, n.disruptions_allowed), (2, 0));
    }
}
