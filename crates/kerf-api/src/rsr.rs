//! `RightsizingRecommendation` (rsr): one per workload, the hub's recommendation mirrored
//! next to its workload (spec) and what the agent did with it (status).

use crate::vecmap::VecMap;

use chrono::{DateTime, Utc};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use crate::duration::{GoDuration, UnitDecimal};
use crate::event::Event;
use crate::policy::{Mode, RecommendationSettings, Strategy, WorkloadKind};
use crate::quantity::{Resource, ResourceRequirements, ResourceValues};

/// The hub's recommendation for one workload, and the agent's record of it.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kerf.getkerf.dev",
    version = "v1alpha1",
    kind = "RightsizingRecommendation",
    plural = "rightsizingrecommendations",
    shortname = "rsr",
    doc = "A RightsizingRecommendation (short name rsr) is the Kerf hub's CPU and memory recommendation for one workload, mirrored next to it by the agent (spec), and the agent's record of what it did with it (status: phase, effective mode and strategy, the change in flight, the health watch, the last rollback).",
    namespaced,
    status = "RightsizingRecommendationStatus",
    printcolumn = r#"{"name":"Kind","type":"string","jsonPath":".spec.workloadRef.kind"}"#,
    printcolumn = r#"{"name":"Workload","type":"string","jsonPath":".spec.workloadRef.name"}"#,
    printcolumn = r#"{"name":"Mode","type":"string","jsonPath":".status.summary.mode"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Strategy","type":"string","jsonPath":".status.strategy.effective"}"#,
    printcolumn = r#"{"name":"CPU","type":"string","jsonPath":".status.summary.cpu"}"#,
    printcolumn = r#"{"name":"Memory","type":"string","jsonPath":".status.summary.memory"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.summary.reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Policy","type":"string","priority":1,"jsonPath":".status.summary.policy"}"#,
    printcolumn = r#"{"name":"Confidence","type":"string","priority":1,"jsonPath":".spec.confidence"}"#,
    printcolumn = r#"{"name":"Last Change","type":"date","priority":1,"jsonPath":".status.summary.lastChange"}"#,
    printcolumn = r#"{"name":"Next","type":"string","priority":1,"jsonPath":".status.summary.next"}"#,
    printcolumn = r#"{"name":"Source","type":"string","priority":1,"jsonPath":".spec.source"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RightsizingRecommendationSpec {
    /// The workload this recommendation is for.
    pub workload_ref: WorkloadRef,
    /// The hub's id of the recommendation.
    #[serde(rename = "recommendationID")]
    #[schemars(length(max = 128))]
    pub recommendation_id: String,
    /// When the hub made the recommendation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_at: Option<DateTime<Utc>>,
    /// The workload's confidence: the lowest of its containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<UnitDecimal>,
    /// How much usage data the recommendation rests on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_coverage: Option<DataCoverage>,
    /// The recommender settings the hub used (echoed, compared with the effective policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<RecommendationSettings>,
    /// Recommended values per container.
    #[schemars(length(max = 64))]
    pub containers: Vec<ContainerRecommendation>,
    /// A mirror of a hub approval of this recommendation (never an input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalRef>,
    /// Where the recommendation comes from (the agent's `recommendations.source`); an rsr
    /// without it was written from the hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<RecommendationSource>,
}

impl RightsizingRecommendationSpec {
    /// The source of the recommendation: an rsr written before the field existed came
    /// from the hub.
    pub fn source_or_hub(&self) -> RecommendationSource {
        self.source.unwrap_or(RecommendationSource::Hub)
    }
}

/// Where an agent takes its recommendations from (docs/sources.md). One source per agent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RecommendationSource {
    /// The Kerf hub: recommendations and the cluster configuration are fetched from it.
    #[default]
    Hub,
    /// VerticalPodAutoscaler objects (`autoscaling.k8s.io/v1`) in `Off` or `Initial` mode:
    /// their recommender's `target` values; no hub.
    Vpa,
    /// The cluster's Prometheus: usage percentiles and peaks computed by the agent
    /// (docs/prometheus-source.md); no hub.
    Prometheus,
}

impl RecommendationSource {
    /// Every source, in the order the docs list them.
    pub const ALL: &'static [RecommendationSource] = &[
        RecommendationSource::Hub,
        RecommendationSource::Vpa,
        RecommendationSource::Prometheus,
    ];

    /// The name as written in settings and in the rsr (`hub`, `vpa`).
    pub fn as_str(self) -> &'static str {
        match self {
            RecommendationSource::Hub => "hub",
            RecommendationSource::Vpa => "vpa",
            RecommendationSource::Prometheus => "prometheus",
        }
    }

    /// The source named `s` (exactly as [`RecommendationSource::as_str`] writes it).
    pub fn from_name(s: &str) -> Option<RecommendationSource> {
        Self::ALL.iter().copied().find(|v| v.as_str() == s)
    }

    /// Whether the agent runs without a hub with this source: the cluster configuration
    /// comes from its own settings and events stay in the cluster.
    pub fn is_local(self) -> bool {
        self != RecommendationSource::Hub
    }
}

impl std::fmt::Display for RecommendationSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Reference to the workload.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadRef {
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: WorkloadKind,
    /// Name of the workload.
    #[schemars(length(max = 253))]
    pub name: String,
    /// UID of the workload the rsr was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub uid: Option<String>,
}

/// Usage data behind a recommendation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DataCoverage {
    /// Time covered by usage data.
    pub covered: GoDuration,
    /// The recommender's window.
    pub window: GoDuration,
}

/// Flags the hub sets on a container.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ContainerFlag {
    /// CPU is throttled: no CPU decrease.
    Throttled,
    /// The container was OOM-killed: no memory decrease.
    OomKilled,
    /// A JVM with a fixed maximum heap: memory audit-only.
    JvmFixedHeap,
    /// A JVM.
    Jvm,
    /// A Python interpreter.
    Python,
}

/// Recommended values of one container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecommendation {
    /// Container name.
    #[schemars(length(max = 63))]
    pub name: String,
    /// Recommended requests; an absent key is no recommendation for that resource.
    #[serde(default)]
    pub requests: ResourceValues,
    /// Recommended limits; an absent key keeps the current limit.
    #[serde(default)]
    pub limits: ResourceValues,
    /// Limits to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2))]
    pub remove_limits: Vec<Resource>,
    /// The container's confidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<UnitDecimal>,
    /// Hub flags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 5))]
    pub flags: Vec<ContainerFlag>,
}

/// A hub approval of one recommendation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRef {
    /// The approval's id.
    #[schemars(length(max = 128))]
    pub approval_id: String,
    /// Who approved it.
    #[schemars(length(max = 256))]
    pub approved_by: String,
}

/// The phase of an rsr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// Not decided yet.
    Pending,
    /// Nothing to do (mode, tolerance, stale settings).
    Skipped,
    /// A guardrail holds the change.
    Blocked,
    /// Waiting for a maintenance window.
    Deferred,
    /// A change is going in.
    Applying,
    /// The change's values are live.
    Applied,
    /// The health watch restored the previous values.
    RolledBack,
    /// The workload left auto-patch; field ownership was released.
    Released,
}

/// The effective mode of each resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EffectiveModes {
    /// CPU.
    pub cpu: Mode,
    /// Memory.
    pub memory: Mode,
}

/// The strategy the agent uses for this workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyStatus {
    /// The strategy the policy or annotation configures.
    pub configured: Strategy,
    /// The strategy in use: `rollout` after a fallback, until `configured` changes.
    pub effective: Strategy,
    /// Why the effective strategy differs (ResizeInfeasible, ResizeDeferredTimeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub fallback_reason: Option<String>,
}

/// Short strings for `kubectl get rsr` and `kubectl get rsr -o wide`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The pod's CPU request as its pods are meant to run it now (the live in-place values
    /// where they apply, else the template), `current→recommended` while the hub's
    /// recommendation differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub cpu: Option<String>,
    /// The pod's memory request, like `cpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub memory: Option<String>,
    /// `cpu:<mode>,memory:<mode>`, or one mode when both are equal; followed by
    /// `(annotation)` or `(hub override)` when a layer above the policy set a mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub mode: Option<String>,
    /// Why the rsr is in its phase (an invalid annotation or policy first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub reason: Option<String>,
    /// The RightsizingPolicy that selects the workload (`-o wide`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub policy: Option<String>,
    /// When the last change became live, or started while it goes in (`-o wide`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_change: Option<DateTime<Utc>>,
    /// When the next maintenance window opens or the block ends, RFC 3339 (`-o wide`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub next: Option<String>,
}

/// State of the change in flight (or the last one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ChangeState {
    /// Recorded, no actuating write made yet.
    Intent,
    /// Actuating writes under way.
    Applying,
    /// The values are live; the health watch runs or ran.
    Applied,
    /// A rollback is under way.
    RollingBack,
    /// The previous values are restored.
    RolledBack,
    /// Field ownership was released.
    Released,
}

/// Values of one container before and after a change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ContainerChange {
    /// Container name.
    #[schemars(length(max = 63))]
    pub name: String,
    /// Values before.
    pub from: ResourceRequirements,
    /// Values after.
    pub to: ResourceRequirements,
}

/// When an HPA target is written relative to the template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum HpaOrder {
    /// Before the template patch (a lower target).
    Before,
    /// After the rollout completes (a higher target).
    After,
}

/// A coordinated HPA target change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HpaChange {
    /// HPA name.
    #[schemars(length(max = 253))]
    pub name: String,
    /// The resource the HPA scales on.
    pub resource: Resource,
    /// Target utilization before, percent.
    pub from: i32,
    /// Target utilization after, percent.
    pub to: i32,
    /// Written before the template patch or after the rollout.
    pub order: HpaOrder,
    /// Whether the target has been written.
    #[serde(default)]
    pub written: bool,
}

/// Event ids of a change's lifecycle events, so a resumed action re-emits with the same ids.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventIds {
    /// Id of the `applied` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<String>,
    /// Id of the `fallback` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Id of the `rolled_back` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<String>,
    /// Id of the `released` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<String>,
    /// Id of the `failed` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// Progress of an in-place change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangeProgress {
    /// Pods whose resize the kubelet accepted.
    pub pods_accepted: i32,
    /// Pods targeted.
    pub pods_total: i32,
}

/// The intent record: the change in flight, or the last one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangeRecord {
    /// The change's id.
    #[schemars(length(max = 64))]
    pub id: String,
    /// Where the change is.
    pub state: ChangeState,
    /// The recommendation applied.
    #[serde(rename = "recommendationID")]
    #[schemars(length(max = 128))]
    pub recommendation_id: String,
    /// The hub approval this change carries out (ApprovedOnce only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub approval_id: Option<String>,
    /// The strategy that carries (or carried) the change.
    pub strategy: Strategy,
    /// Resources the change touches.
    #[schemars(length(max = 2))]
    pub resources: Vec<Resource>,
    /// When the intent was recorded.
    pub started_at: DateTime<Utc>,
    /// When the first resize request was sent (in-place; `fallbackAfter` counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_resize_at: Option<DateTime<Utc>>,
    /// When the change became live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_at: Option<DateTime<Utc>>,
    /// Values per container before and after.
    #[schemars(length(max = 64))]
    pub containers: Vec<ContainerChange>,
    /// A coordinated HPA target change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hpa: Option<HpaChange>,
    /// Ids of the change's lifecycle events.
    #[serde(default)]
    pub event_ids: EventIds,
    /// Lifecycle events not yet acknowledged by the hub; each is recorded here before it is sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub pending_events: Vec<Event>,
    /// Progress of an in-place change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ChangeProgress>,
    /// The canary of an in-place change: its pods and where it stands. Recorded before the
    /// first canary resize, so a restarted agent continues the same canary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryRecord>,
    /// The change puts the workload back to its template values (annotation
    /// `kerf.getkerf.dev/revert`): it ends `Released`, with no health watch.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revert: bool,
}

/// Where the canary of an in-place change stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CanaryStage {
    /// The canary pods are being resized.
    Resizing,
    /// The canary pods run the new values and are watched until `watch.end`.
    Watching,
    /// The canary passed: the other pods are resized.
    Passed,
    /// A breach during the canary restored the canary pods.
    RolledBack,
}

impl CanaryStage {
    /// The stage as status and `kubectl get` show it.
    pub fn as_str(self) -> &'static str {
        match self {
            CanaryStage::Resizing => "Resizing",
            CanaryStage::Watching => "Watching",
            CanaryStage::Passed => "Passed",
            CanaryStage::RolledBack => "RolledBack",
        }
    }
}

/// The canary of an in-place change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanaryRecord {
    /// The pods resized first.
    #[schemars(length(max = 256))]
    pub pods: Vec<String>,
    /// Where the canary stands.
    pub stage: CanaryStage,
    /// The watch of the canary pods: it starts once every canary pod runs the new values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchStatus>,
}

/// Live values of one container (in-place changes only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LiveContainer {
    /// Container name.
    #[schemars(length(max = 63))]
    pub name: String,
    /// Full resulting requests.
    #[serde(default)]
    pub requests: ResourceValues,
    /// Full resulting limits.
    #[serde(default)]
    pub limits: ResourceValues,
    /// The template's values at the change; the webhook patches only pods still at base.
    pub base: ResourceRequirements,
}

/// Values the webhook gives new pods.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LiveValues {
    /// Per container.
    #[schemars(length(max = 64))]
    pub containers: Vec<LiveContainer>,
}

/// Counters of one container when the watch started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Baseline {
    /// restartCount at the baseline.
    pub restarts: i32,
    /// OOM kills seen at the baseline.
    pub oom_kills: i32,
}

/// The health watch of the last change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WatchStatus {
    /// When the watch started.
    pub start: DateTime<Utc>,
    /// When it ends (unknown while a rollout is still running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    /// Baselines per pod UID and container.
    #[serde(default, skip_serializing_if = "VecMap::is_empty")]
    pub baselines: VecMap<String, VecMap<String, Baseline>>,
    /// Counters of pods beyond the per-pod cap, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregated: Option<Baseline>,
}

/// The last rollback.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackRecord {
    /// When it happened.
    pub time: DateTime<Utc>,
    /// OOMKills, Restarts or Throttling.
    #[schemars(length(max = 64))]
    pub reason: String,
    /// Resources restored.
    #[schemars(length(max = 2))]
    pub resources: Vec<Resource>,
    /// The change rolled back.
    #[schemars(length(max = 64))]
    pub change_id: String,
}

/// A skip or block already reported (for de-duplication across restarts).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportedKey {
    /// skipped or blocked (or failed).
    #[serde(rename = "type")]
    #[schemars(length(max = 32))]
    pub type_: String,
    /// The reason reported.
    #[schemars(length(max = 64))]
    pub reason: String,
    /// The resource, for per-resource reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<Resource>,
    /// Hash of the hub's recommended values when reported.
    #[schemars(length(max = 64))]
    pub values_hash: String,
    /// Hash of the effective policy's values when reported.
    #[schemars(length(max = 64))]
    pub policy_hash: String,
    /// The recommended values when reported, per `container/resource`, to compare against
    /// the tolerance.
    #[serde(default, skip_serializing_if = "VecMap::is_empty")]
    pub values: VecMap<String, String>,
}

/// What the agent did with the recommendation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RightsizingRecommendationStatus {
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pending, Skipped, Blocked, Deferred, Applying, Applied, RolledBack or Released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Effective mode per resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<EffectiveModes>,
    /// Configured and effective strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<StrategyStatus>,
    /// Short strings for the printer columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// Conditions: Valid, Blocked, Applied, HealthWatch, Progressing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub conditions: Vec<Condition>,
    /// The intent record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<Box<ChangeRecord>>,
    /// Values the webhook hands to new pods (in-place only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveValues>,
    /// The health watch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchStatus>,
    /// The last rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rollback: Option<RollbackRecord>,
    /// When the next maintenance window opens (deferred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window: Option<DateTime<Utc>>,
    /// Skips and blocks already reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub reported: Vec<ReportedKey>,
    /// Approvals already carried out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 128)))]
    pub consumed_approvals: Vec<String>,
}
