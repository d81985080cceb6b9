//! Group/version/resource: the type of a kind, and the built-in kinds.

use std::collections::HashSet;
use std::sync::Mutex;

/// A group/version/resource with its kind and scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gvr {
    /// API group, "" for the core group.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource name.
    pub resource: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl Gvr {
    /// The resource key used in events and errors: `pods`, `deployments.apps`.
    pub fn key(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether objects of this kind carry `metadata.generation`.
    pub fn has_generation(&self) -> bool {
        !matches!(
            self.resource,
            "configmaps" | "secrets" | "namespaces" | "nodes" | "events" | "leases"
        )
    }

    /// A Gvr for a kind defined at run time (a CRD); the strings are interned.
    pub fn dynamic(
        group: &str,
        version: &str,
        resource: &str,
        kind: &str,
        namespaced: bool,
    ) -> Gvr {
        Gvr {
            group: intern(group),
            version: intern(version),
            resource: intern(resource),
            kind: intern(kind),
            namespaced,
        }
    }
}

fn intern(s: &str) -> &'static str {
    static POOL: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = pool.get_or_insert_with(HashSet::new);
    if let Some(v) = pool.get(s) {
        return v;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    pool.insert(leaked);
    leaked
}

const fn g(
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Gvr {
    Gvr {
        group,
        version,
        resource,
        kind,
        namespaced,
    }
}
/// v1 Pod.
pub const PODS: Gvr = g("", "v1", "pods", "Pod", true);
/// v1 Node.
pub const NODES: Gvr = g("", "v1", "nodes", "Node", false);
/// v1 Namespace.
pub const NAMESPACES: Gvr = g("", "v1", "namespaces", "Namespace", false);
/// v1 Event.
pub const EVENTS: Gvr = g("", "v1", "events", "Event", true);
/// v1 ConfigMap.
pub const CONFIGMAPS: Gvr = g("", "v1", "configmaps", "ConfigMap", true);
/// v1 Secret.
pub const SECRETS: Gvr = g("", "v1", "secrets", "Secret", true);
/// apps/v1 Deployment.
pub const DEPLOYMENTS: Gvr = g("apps", "v1", "deployments", "Deployment", true);
/// apps/v1 ReplicaSet.
pub const REPLICASETS: Gvr = g("apps", "v1", "replicasets", "ReplicaSet", true);
/// apps/v1 StatefulSet.
pub const STATEFULSETS: Gvr = g("apps", "v1", "statefulsets", "StatefulSet", true);
/// apps/v1 DaemonSet.
pub const DAEMONSETS: Gvr = g("apps", "v1", "daemonsets", "DaemonSet", true);
/// autoscaling/v2 HorizontalPodAutoscaler.
pub const HPAS: Gvr = g(
    "autoscaling",
    "v2",
    "horizontalpodautoscalers",
    "HorizontalPodAutoscaler",
    true,
);
/// policy/v1 PodDisruptionBudget.
pub const PDBS: Gvr = g(
    "policy",
    "v1",
    "poddisruptionbudgets",
    "PodDisruptionBudget",
    true,
);
/// coordination.k8s.io/v1 Lease.
pub const LEASES: Gvr = g("coordination.k8s.io", "v1", "leases", "Lease", true);
/// apiextensions.k8s.io/v1 CustomResourceDefinition.
pub const CRDS: Gvr = g(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    false,
);
/// admissionregistration.k8s.io/v1 MutatingWebhookConfiguration.
pub const MUTATING_WEBHOOK_CONFIGURATIONS: Gvr = g(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    false,
);
/// Every built-in kind.
pub const ALL: &[Gvr] = &[
    PODS,
    NODES,
    NAMESPACES,
    EVENTS,
    CONFIGMAPS,
    SECRETS,
    DEPLOYMENTS,
    REPLICASETS,
    STATEFULSETS,
    DAEMONSETS,
    HPAS,
    PDBS,
    LEASES,
    CRDS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
];
