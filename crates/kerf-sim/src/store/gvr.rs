//! The built-in kinds.

use super::Gvr;

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
