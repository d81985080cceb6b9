//! Refusals of `pods/resize` other than node room, switched on by tests: an RBAC denial for
//! a user and a ResourceQuota per namespace. Both answer 403 Forbidden with the message and
//! details the real kube-apiserver renders (`apierrors.NewForbidden`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};

use crate::quantity::quantity;
use crate::store::ApiError;

/// The user of a request without an `Impersonate-User` header (the kubeconfig's token).
pub const ADMIN_USER: &str = "kerf-sim-admin";

/// The resources a quota can limit for a resize.
const QUOTA_RESOURCES: [&str; 4] = [
    "limits.cpu",
    "limits.memory",
    "requests.cpu",
    "requests.memory",
];

/// A ResourceQuota of one namespace: its name and hard limits (`requests.cpu` -> `2`).
#[derive(Debug, Clone)]
struct Quota {
    name: String,
    hard: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct Inner {
    denied_users: HashSet<String>,
    quotas: HashMap<String, Quota>,
}

/// The switches, shared through [`crate::context::SimState`].
#[derive(Debug, Clone, Default)]
pub struct ResizeFaults {
    inner: Arc<Mutex<Inner>>,
}

impl ResizeFaults {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// RBAC refuses `pods/resize` to `user` (the `Impersonate-User` of a request, or
    /// [`ADMIN_USER`]) from now on.
    pub fn deny_user(&self, user: &str) {
        self.lock().denied_users.insert(user.to_string());
    }

    /// RBAC allows `pods/resize` to `user` again.
    pub fn allow_user(&self, user: &str) {
        self.lock().denied_users.remove(user);
    }

    /// Sets the ResourceQuota `name` of `namespace` with hard limits such as
    /// `("requests.cpu", "2")`; only `requests.*` and `limits.*` of cpu and memory count.
    pub fn set_quota(&self, namespace: &str, name: &str, hard: &[(&str, &str)]) {
        let hard = hard
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let quota = Quota {
            name: name.to_string(),
            hard,
        };
        self.lock().quotas.insert(namespace.to_string(), quota);
    }

    /// Removes the quota of `namespace`.
    pub fn clear_quota(&self, namespace: &str) {
        self.lock().quotas.remove(namespace);
    }

    /// The RBAC check: 403 when `user` is denied.
    pub fn authorize(
        &self,
        user: &str,
        verb: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        if !self.lock().denied_users.contains(user) {
            return Ok(());
        }
        let reason = format!(
            "User \"{user}\" cannot {verb} resource \"pods/resize\" in API group \"\" in the namespace \"{namespace}\""
        );
        Err(forbidden(name, &reason))
    }

    /// Whether a ResourceQuota is set for `namespace`.
    pub fn has_quota(&self, namespace: &str) -> bool {
        self.lock().quotas.contains_key(namespace)
    }

    /// The ResourceQuota admission of a resize from `old` to `new`, `pods` being every pod
    /// of the namespace as stored (`old` among them).
    pub fn admit_quota(
        &self,
        namespace: &str,
        name: &str,
        old: &Value,
        new: &Value,
        pods: &[Value],
    ) -> Result<(), ApiError> {
        let Some(quota) = self.lock().quotas.get(namespace).cloned() else {
            return Ok(());
        };
        let mut requested = BTreeMap::new();
        let mut used = BTreeMap::new();
        let mut hard = BTreeMap::new();
        for res in QUOTA_RESOURCES {
            let Some(limit) = quota.hard.get(res).and_then(|h| quantity(&json!(h))) else {
                continue;
            };
            let delta = (usage(new, res) - usage(old, res)).max(0.0);
            let in_use: f64 = pods
                .iter()
                .filter(|p| counts(p))
                .map(|p| usage(p, res))
                .sum();
            if delta > 0.0 && in_use + delta > limit + 1e-9 {
                requested.insert(res, format_quantity(res, delta));
                used.insert(res, format_quantity(res, in_use));
                hard.insert(res, quota.hard[res].clone());
            }
        }
        if requested.is_empty() {
            return Ok(());
        }
        let reason = format!(
            "exceeded quota: {}, requested: {}, used: {}, limited: {}",
            quota.name,
            pretty(&requested),
            pretty(&used),
            pretty(&hard)
        );
        Err(forbidden(name, &reason))
    }
}

/// `pods "<name>" is forbidden: <reason>` with details {name, kind: pods}.
fn forbidden(name: &str, reason: &str) -> ApiError {
    ApiError::new(
        403,
        "Forbidden",
        format!("pods \"{name}\" is forbidden: {reason}"),
        Some(json!({"name": name, "kind": "pods"})),
    )
}

/// Whether a pod counts against a quota (not terminal).
fn counts(pod: &Value) -> bool {
    !matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

/// A pod's usage of `requests.cpu` (cores) or `limits.memory` (bytes) etc.; a missing
/// request takes the limit, as the API defaults it.
fn usage(pod: &Value, res: &str) -> f64 {
    let Some((kind, r)) = res.split_once('.') else {
        return 0.0;
    };
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let get = |k: &str| c["resources"][k].get(r).and_then(quantity);
            match kind {
                "requests" => get("requests").or_else(|| get("limits")),
                _ => get("limits"),
            }
            .unwrap_or(0.0)
        })
        .sum()
}

/// A quantity in the canonical form the API server prints: cpu in cores or millicores,
/// memory with the largest exact binary suffix.
pub fn format_quantity(res: &str, v: f64) -> String {
    if res.ends_with("cpu") {
        let milli = (v * 1000.0).round() as i64;
        return if milli % 1000 == 0 {
            (milli / 1000).to_string()
        } else {
            format!("{milli}m")
        };
    }
    let bytes = v.round() as i64;
    for (suffix, unit) in [
        ("Ti", 1i64 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if bytes != 0 && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// `a=1,b=2`, keys sorted (the quota admission's prettyPrint).
fn pretty(m: &BTreeMap<&str, String>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_print_in_canonical_form() {
        assert_eq!(format_quantity("requests.cpu", 1.5), "1500m");
        assert_eq!(format_quantity("limits.cpu", 2.0), "2");
        assert_eq!(
            format_quantity("requests.memory", 512.0 * 1024.0 * 1024.0),
            "512Mi"
        );
        assert_eq!(format_quantity("requests.memory", 1000.0), "1000");
    }
}
