//! The snapshot `decide()` reads: plain structs the agent fills from its caches.
//!
//! Nothing here is a `k8s_openapi` type. Quantities of the workload and its pods are
//! already parsed into millicores and bytes (the API server only stores valid ones); the
//! recommendation keeps the hub's text, parsed by the per-resource step, which names a
//! bad value instead of failing.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use kerf_api::hub::{Approval, PauseScope};
use kerf_api::policy::WorkloadKind;
use kerf_api::rsr::{
    ChangeRecord, ChangeState, LiveValues, RecommendationSource, RightsizingRecommendationSpec,
    RollbackRecord, StrategyStatus,
};

use crate::effective::PerResource;
use crate::hpa::HpaInput;
use crate::jvm;
use crate::replicas::ReplicaInput;
use crate::values::ContainerResources;
use crate::window::WindowList;

/// Everything `decide()` needs to know about one workload at one instant.
#[derive(Clone, Debug)]
pub struct Facts {
    /// The workload and its pod template.
    pub workload: WorkloadFacts,
    /// Non-terminating pods of the workload's current revision.
    pub pods: Vec<PodFacts>,
    /// The nodes those pods run on (others may be left out).
    pub nodes: Vec<NodeFacts>,
    /// The HPA that scales the workload, if any.
    pub hpa: Option<HpaInput>,
    /// The hub's recommendation, as mirrored into `rsr.spec`.
    pub recommendation: RightsizingRecommendationSpec,
    /// Reachability and pause of the hub.
    pub hub: HubFacts,
    /// The cluster-wide freeze of the agent chart.
    pub cluster_freeze: ClusterFreeze,
    /// An approve-once from the hub config for this workload (design D27), if any.
    pub approval: Option<Approval>,
    /// Agent settings (chart values).
    pub settings: AgentSettings,
    /// What the rsr status records about earlier changes.
    pub state: RsrState,
}

/// The workload: identity, metadata and pod template.
#[derive(Clone, Debug)]
pub struct WorkloadFacts {
    /// Namespace.
    pub namespace: String,
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: WorkloadKind,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Labels of the workload.
    pub labels: BTreeMap<String, String>,
    /// Annotations of the workload.
    pub annotations: BTreeMap<String, String>,
    /// Replica count, update strategy and PodDisruptionBudgets: the single-replica input.
    pub replicas: ReplicaInput,
    /// Containers of the pod template: `spec.containers` and every init container.
    pub containers: Vec<ContainerFacts>,
}

/// How a resize of one resource treats the container (`resizePolicy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ResizePolicy {
    /// The resize needs no restart (the Kubernetes default).
    #[default]
    NotRequired,
    /// The container restarts to take the new value.
    RestartContainer,
}

/// Requests or limits of one container, parsed: millicores and bytes; `None` = not set.
pub type Values = PerResource<Option<i64>>;

/// One container of the pod template.
#[derive(Clone, Debug, Default)]
pub struct ContainerFacts {
    /// Container name.
    pub name: String,
    /// Where it sits in the template.
    pub role: ContainerRole,
    /// Requests in the template.
    pub requests: Values,
    /// Limits in the template.
    pub limits: Values,
    /// `resizePolicy` per resource.
    pub resize_policy: PerResource<ResizePolicy>,
    /// Image reference.
    pub image: String,
    /// Command.
    pub command: Vec<String>,
    /// Args.
    pub args: Vec<String>,
    /// Environment variables with a literal `value` (never `valueFrom` or `envFrom`).
    pub env: Vec<(String, String)>,
}

/// Where a container sits in the pod template (design D8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ContainerRole {
    /// `spec.containers`.
    #[default]
    Main,
    /// An init container with `restartPolicy: Always` (a sidecar): Kerf may change it.
    RestartableInit,
    /// Any other init container: Kerf never changes it.
    Init,
}

jvm::template_container!(ContainerFacts);

impl ContainerFacts {
    /// Whether Kerf may change this container (design D8).
    pub fn changeable(&self) -> bool {
        self.role != ContainerRole::Init
    }
}

/// Phase of a pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PodPhase {
    /// Not yet running.
    #[default]
    Pending,
    /// Running.
    Running,
    /// All containers ended successfully.
    Succeeded,
    /// All containers ended, one failed.
    Failed,
    /// Unknown.
    Unknown,
}

/// One pod of the workload, as every decision reads it: `decide()`, the in-place state
/// machine, its canary and the OnDelete replacement plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodFacts {
    /// Pod name.
    pub name: String,
    /// Pod UID.
    pub uid: String,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Phase.
    pub phase: PodPhase,
    /// Ready condition.
    pub ready: bool,
    /// When the Ready condition last changed.
    pub ready_since: Option<DateTime<Utc>>,
    /// Current resources per container (`status.containerStatuses[].resources`, else spec).
    pub containers: Vec<PodContainerFacts>,
    /// `spec.containers[].resources` (and restartable init containers'): what was asked.
    pub spec_resources: Vec<ContainerResources>,
    /// `status.containerStatuses[].resources`: what the kubelet applied, for the containers
    /// it reports on.
    pub status_resources: Vec<ContainerResources>,
    /// The pod's resize conditions that are True.
    pub resize_conditions: Vec<ResizeCondition>,
    /// The pod is terminating.
    pub terminating: bool,
    /// The pod belongs to the workload's current revision (only those take an in-place
    /// change).
    pub current_revision: bool,
    /// The `controller-revision-hash` label: the revision of a StatefulSet's pod.
    pub revision_hash: Option<String>,
    /// When this pod's resize completed, as recorded by an earlier pass.
    pub completed_at: Option<DateTime<Utc>>,
}

/// The ordinal of a StatefulSet pod name (`web-3` is 3).
pub fn ordinal_of(name: &str) -> Option<u32> {
    name.rsplit_once('-').and_then(|(_, n)| n.parse().ok())
}

impl PodFacts {
    /// The ordinal of a StatefulSet pod: its name's numeric suffix (`web-3` is 3).
    pub fn ordinal(&self) -> Option<u32> {
        ordinal_of(&self.name)
    }

    /// Whether an in-place change targets this pod: not terminating, of the current
    /// revision.
    pub fn targeted(&self) -> bool {
        !self.terminating && self.current_revision
    }
}

/// A resize condition of a pod (`PodResizePending` or `PodResizeInProgress`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResizeCondition {
    /// `PodResizePending` or `PodResizeInProgress`.
    pub type_: String,
    /// `Deferred`, `Infeasible`, `Error`, or none.
    pub reason: Option<String>,
    /// The kubelet's message.
    pub message: Option<String>,
    /// `lastTransitionTime`.
    pub since: Option<DateTime<Utc>>,
}

/// Current values of one container of a pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodContainerFacts {
    /// Container name.
    pub name: String,
    /// Current requests.
    pub requests: Values,
    /// Current limits.
    pub limits: Values,
}

/// A node a pod runs on.
#[derive(Clone, Debug, Default)]
pub struct NodeFacts {
    /// Node name.
    pub name: String,
    /// Node labels (matched against `unsupportedNodeSelectors`).
    pub labels: BTreeMap<String, String>,
    /// Whether the node has swap enabled (in-place memory changes cannot work there).
    pub swap: bool,
}

/// What the agent knows about the hub (design D26).
#[derive(Clone, Debug)]
pub struct HubFacts {
    /// The last successful fetch of both recommendations and config (200 or 304).
    pub last_success: Option<DateTime<Utc>>,
    /// `hub.staleAfter`: how long the last good state stays usable.
    pub stale_after: Duration,
    /// The pause of Admin → Automation, if any.
    pub pause: Option<PauseScope>,
    /// The agent's recommendation source: staleness blocks `HubUnreachable` for the hub,
    /// `SourceUnavailable` for another source (docs/sources.md).
    pub source: RecommendationSource,
    /// Why the source holds this workload, if it does: a VerticalPodAutoscaler that
    /// updates its pods itself (`VPAActive`), named with its mode.
    pub vpa_active: Option<String>,
}

/// The cluster-wide freeze of the agent chart (`freeze.now`, `freeze.windows`).
#[derive(Clone, Debug, Default)]
pub struct ClusterFreeze {
    /// `freeze.now: true`.
    pub now: bool,
    /// `freeze.windows`, each validated once.
    pub windows: WindowList,
}

/// Agent settings that steer decisions.
#[derive(Clone, Debug)]
pub struct AgentSettings {
    /// `tolerance` in thousandths of a percent (5 % = 5000).
    pub tolerance_milli_percent: u32,
    /// `unsupportedNodeSelectors`: a node whose labels contain every pair of one map
    /// cannot take in-place changes.
    pub unsupported_node_selectors: Vec<BTreeMap<String, String>>,
    /// Whether the API server serves `pods/resize` (design D19).
    pub resize_subresource: bool,
    /// Why the agent's mutating webhook has no usable certificate; `None` while it has one.
    /// In-place changes wait while it has none.
    pub webhook_certificate_problem: Option<String>,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            tolerance_milli_percent: DEFAULT_TOLERANCE_MILLI_PERCENT,
            unsupported_node_selectors: Vec::new(),
            resize_subresource: true,
            webhook_certificate_problem: None,
        }
    }
}

/// The default tolerance: 5 %.
pub const DEFAULT_TOLERANCE_MILLI_PERCENT: u32 = 5000;

/// The health watch of the last change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchFacts {
    /// Whether the watch is still running.
    pub running: bool,
    /// When it ends (unknown while a rollout is still in progress).
    pub end: Option<DateTime<Utc>>,
}

/// What the rsr status records (the agent's memory across restarts).
#[derive(Clone, Debug, Default)]
pub struct RsrState {
    /// The intent record of the last change.
    pub change: Option<ChangeRecord>,
    /// The last rollback.
    pub last_rollback: Option<RollbackRecord>,
    /// Values the webhook gives new pods (an applied in-place change).
    pub live: Option<LiveValues>,
    /// Configured and effective strategy as recorded (sticky rollout after a fallback).
    pub strategy: Option<StrategyStatus>,
    /// The health watch.
    pub watch: Option<WatchFacts>,
    /// Approvals already carried out.
    pub consumed_approvals: Vec<String>,
}

impl RsrState {
    /// Whether the values of an earlier change are still live (design D20: the last
    /// change's state is Applied).
    pub fn values_live(&self) -> bool {
        self.change
            .as_ref()
            .is_some_and(|c| c.state == ChangeState::Applied)
    }

    /// Whether a change is still going in or being rolled back.
    pub fn change_in_flight(&self) -> bool {
        self.change.as_ref().is_some_and(|c| {
            matches!(
                c.state,
                ChangeState::Intent | ChangeState::Applying | ChangeState::RollingBack
            )
        })
    }
}

impl Facts {
    /// The node a pod runs on, if known.
    pub fn node(&self, name: &str) -> Option<&NodeFacts> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// A template container by name.
    pub fn container(&self, name: &str) -> Option<&ContainerFacts> {
        self.workload.containers.iter().find(|c| c.name == name)
    }

    /// The approve-once that applies to this recommendation now (design D27): same
    /// workload and recommendation id, not expired, not carried out yet.
    pub fn pending_approval(&self, now: DateTime<Utc>) -> Option<&Approval> {
        let w = &self.workload;
        self.approval.as_ref().filter(|a| {
            a.workload.namespace == w.namespace
                && a.workload.kind == w.kind.as_str()
                && a.workload.name == w.name
                && a.recommendation_id == self.recommendation.recommendation_id
                && a.expires_at > now
                && !self.state.consumed_approvals.contains(&a.approval_id)
        })
    }
}
