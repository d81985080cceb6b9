//! Well-known names: event reasons of the events contract (`docs/contracts/events.md`),
//! condition types and condition-only reasons, annotation and label keys, field managers,
//! pod resize conditions and the well-known `details` keys.
//!
//! A reason is spelled the same everywhere: in events, in the reasons of the rsr's
//! conditions and in metric labels. Adding a reason is a contract change: add the constant
//! here and a row to the contract's reason table (a test checks both ways).

use crate::event_type::EventType;

// ---------------------------------------------------------------------------------------
// API group, annotations, labels, field managers
// ---------------------------------------------------------------------------------------

/// API group of Kerf's custom resources.
pub const API_GROUP: &str = "kerf.getkerf.dev";
/// API version of Kerf's custom resources.
pub const API_VERSION: &str = "v1alpha1";
/// `apiVersion` of Kerf's custom resources.
pub const API_GROUP_VERSION: &str = "kerf.getkerf.dev/v1alpha1";

/// Workload annotation: mode for both resources (`off`, `audit`, `auto-patch`). An invalid
/// value counts as `off`.
pub const ANNOTATION_MODE: &str = "kerf.getkerf.dev/mode";
/// Workload annotation: strategy (`in-place`, `rollout`, `deferred`). An invalid value
/// counts as the policy's strategy.
pub const ANNOTATION_STRATEGY: &str = "kerf.getkerf.dev/strategy";
/// Workload annotation: `"true"` allows changes that leave a single-replica workload
/// without a Ready pod.
pub const ANNOTATION_ALLOW_DISRUPTION: &str = "kerf.getkerf.dev/allow-disruption";
/// Workload annotation: pins one RightsizingPolicy by name.
pub const ANNOTATION_POLICY: &str = "kerf.getkerf.dev/policy";
/// Every workload annotation Kerf reads.
pub const ANNOTATIONS: &[&str] = &[
    ANNOTATION_MODE,
    ANNOTATION_STRATEGY,
    ANNOTATION_ALLOW_DISRUPTION,
    ANNOTATION_POLICY,
];

/// rsr label: the workload's kind.
pub const LABEL_WORKLOAD_KIND: &str = "kerf.getkerf.dev/workload-kind";
/// rsr label: the workload's name.
pub const LABEL_WORKLOAD_NAME: &str = "kerf.getkerf.dev/workload-name";

/// Field manager of every server-side apply and resize the agent makes.
pub const FIELD_MANAGER: &str = "kerf";
/// Field manager of the hand-over apply that releases field ownership without deleting the
/// values (see `docs/lifecycle.md`, release). Argo CD's `managedFieldsManagers` must not name it.
pub const FIELD_MANAGER_RELEASED: &str = "kerf-released";
/// Field manager of HPA target patches.
pub const FIELD_MANAGER_HPA: &str = "kerf-hpa";

// ---------------------------------------------------------------------------------------
// Pod resize conditions
// ---------------------------------------------------------------------------------------

/// Pod condition: the kubelet has not started a requested resize.
pub const POD_CONDITION_RESIZE_PENDING: &str = "PodResizePending";
/// Pod condition: the kubelet is carrying out a resize.
pub const POD_CONDITION_RESIZE_IN_PROGRESS: &str = "PodResizeInProgress";
/// `PodResizePending` reason: the node can never fit the resize.
pub const POD_RESIZE_REASON_INFEASIBLE: &str = "Infeasible";
/// `PodResizePending` reason: the node cannot fit the resize now.
pub const POD_RESIZE_REASON_DEFERRED: &str = "Deferred";
/// `PodResizeInProgress` reason: the kubelet failed to carry out the resize.
pub const POD_RESIZE_REASON_ERROR: &str = "Error";
/// The part of a 403 answer to a resize that counts as `Infeasible`.
pub const RESIZE_INFEASIBLE_ADMISSION_MESSAGE: &str = "node didn't have enough allocatable";

// ---------------------------------------------------------------------------------------
// Kubernetes Event types
// ---------------------------------------------------------------------------------------

/// Kubernetes Event type `Normal`.
pub const K8S_EVENT_NORMAL: &str = "Normal";
/// Kubernetes Event type `Warning`.
pub const K8S_EVENT_WARNING: &str = "Warning";

/// The type of the Kubernetes Event the agent records for an event of type `t`: Warning
/// for failed, rolled_back and fallback, Normal for every other type (rule EV-08).
pub fn k8s_event_type(t: EventType) -> &'static str {
    match t {
        EventType::Failed | EventType::RolledBack | EventType::Fallback => K8S_EVENT_WARNING,
        EventType::Applied | EventType::Skipped | EventType::Blocked | EventType::Released => {
            K8S_EVENT_NORMAL
        }
    }
}

// ---------------------------------------------------------------------------------------
// Event reasons (one per row of the contract's reason table)
// ---------------------------------------------------------------------------------------

/// applied: values from the referenced recommendation are live.
pub const REASON_RECOMMENDATION_APPLIED: &str = "RecommendationApplied";
/// applied: live because an operator approved the recommendation once in the hub.
pub const REASON_APPROVED_ONCE: &str = "ApprovedOnce";
/// skipped: the resource's effective mode is `off`.
pub const REASON_MODE_OFF: &str = "ModeOff";
/// skipped: the resource's effective mode is `audit`.
pub const REASON_MODE_AUDIT: &str = "ModeAudit";
/// skipped: the recommended value is within the tolerance of the current value.
pub const REASON_NO_SIGNIFICANT_CHANGE: &str = "NoSignificantChange";
/// skipped: the recommendation's settings differ from the effective policy.
pub const REASON_RECOMMENDATION_STALE: &str = "RecommendationStale";
/// blocked: `dataCoverage.covered` is below `guardrails.learningPeriod`.
pub const REASON_LEARNING_PERIOD: &str = "LearningPeriod";
/// blocked: `confidence` is below `guardrails.minConfidence`.
pub const REASON_LOW_CONFIDENCE: &str = "LowConfidence";
/// blocked: the last change or rollback was less than `guardrails.cooldown` ago.
pub const REASON_COOLDOWN: &str = "Cooldown";
/// blocked: a CPU/memory-utilization HPA that is not coordinated.
pub const REASON_HPA_COUPLED: &str = "HPACoupled";
/// blocked: CPU decrease refused because the container is throttled.
pub const REASON_THROTTLED: &str = "Throttled";
/// blocked: memory decrease refused because the container was OOM-killed.
pub const REASON_OOM_KILLED: &str = "OOMKilled";
/// blocked: inside a freeze window or the cluster-wide freeze.
pub const REASON_FREEZE_WINDOW: &str = "FreezeWindow";
/// blocked: strategy `deferred` and no maintenance window is open; the change is queued.
pub const REASON_OUTSIDE_MAINTENANCE_WINDOW: &str = "OutsideMaintenanceWindow";
/// blocked: in-place refused (node with swap or a static CPU/Memory Manager policy, or a
/// cluster without `pods/resize`).
pub const REASON_UNSUPPORTED_NODE: &str = "UnsupportedNode";
/// blocked: in-place memory change of a JVM/Python container without `RestartContainer`.
pub const REASON_RESTART_POLICY_REQUIRED: &str = "RestartPolicyRequired";
/// blocked: memory change of a JVM container with a fixed maximum heap.
pub const REASON_JVM_FIXED_HEAP: &str = "JVMFixedHeap";
/// blocked: no fresh recommendation because the hub cannot be reached.
pub const REASON_HUB_UNREACHABLE: &str = "HubUnreachable";
/// blocked: automation of the cluster or the fleet is paused in the hub.
pub const REASON_PAUSED: &str = "Paused";
/// blocked: the change would leave a single-replica workload without a Ready pod.
pub const REASON_SINGLE_REPLICA_UNSAFE: &str = "SingleReplicaUnsafe";
/// blocked: a PodDisruptionBudget refused or held the eviction of an outdated pod.
pub const REASON_POD_DISRUPTION_BUDGET: &str = "PodDisruptionBudget";
/// fallback: pod resize status `Infeasible`.
pub const REASON_RESIZE_INFEASIBLE: &str = "ResizeInfeasible";
/// fallback: the resize stayed `Deferred` longer than `apply.fallbackAfter`.
pub const REASON_RESIZE_DEFERRED_TIMEOUT: &str = "ResizeDeferredTimeout";
/// rolled_back: the OOM kill threshold was reached.
pub const REASON_OOM_KILLS: &str = "OOMKills";
/// rolled_back: the restart threshold was reached.
pub const REASON_RESTARTS: &str = "Restarts";
/// rolled_back: the throttling threshold was reached.
pub const REASON_THROTTLING: &str = "Throttling";
/// released: the effective mode changed away from `auto-patch`.
pub const REASON_MODE_CHANGED: &str = "ModeChanged";
/// failed: the template apply failed.
pub const REASON_APPLY_ERROR: &str = "ApplyError";
/// failed: the resize failed.
pub const REASON_RESIZE_ERROR: &str = "ResizeError";
/// failed: the rollback failed.
pub const REASON_ROLLBACK_ERROR: &str = "RollbackError";
/// failed: the release of field ownership failed.
pub const REASON_RELEASE_ERROR: &str = "ReleaseError";

/// Reasons of `applied`.
pub const APPLIED_REASONS: &[&str] = &[REASON_RECOMMENDATION_APPLIED, REASON_APPROVED_ONCE];
/// Reasons of `skipped`.
pub const SKIPPED_REASONS: &[&str] = &[
    REASON_MODE_OFF,
    REASON_MODE_AUDIT,
    REASON_NO_SIGNIFICANT_CHANGE,
    REASON_RECOMMENDATION_STALE,
];
/// Reasons of `blocked`.
pub const BLOCKED_REASONS: &[&str] = &[
    REASON_LEARNING_PERIOD,
    REASON_LOW_CONFIDENCE,
    REASON_COOLDOWN,
    REASON_HPA_COUPLED,
    REASON_THROTTLED,
    REASON_OOM_KILLED,
    REASON_FREEZE_WINDOW,
    REASON_OUTSIDE_MAINTENANCE_WINDOW,
    REASON_UNSUPPORTED_NODE,
    REASON_RESTART_POLICY_REQUIRED,
    REASON_JVM_FIXED_HEAP,
    REASON_HUB_UNREACHABLE,
    REASON_PAUSED,
    REASON_SINGLE_REPLICA_UNSAFE,
    REASON_POD_DISRUPTION_BUDGET,
];
/// Reasons of `fallback`.
pub const FALLBACK_REASONS: &[&str] = &[REASON_RESIZE_INFEASIBLE, REASON_RESIZE_DEFERRED_TIMEOUT];
/// Reasons of `rolled_back`.
pub const ROLLED_BACK_REASONS: &[&str] = &[REASON_OOM_KILLS, REASON_RESTARTS, REASON_THROTTLING];
/// Reasons of `released`.
pub const RELEASED_REASONS: &[&str] = &[REASON_MODE_CHANGED];
/// Reasons of `failed`.
pub const FAILED_REASONS: &[&str] = &[
    REASON_APPLY_ERROR,
    REASON_RESIZE_ERROR,
    REASON_ROLLBACK_ERROR,
    REASON_RELEASE_ERROR,
];

/// Every event reason of the contract, in the order of its reason table.
pub const REASONS: &[&str] = &[
    REASON_RECOMMENDATION_APPLIED,
    REASON_APPROVED_ONCE,
    REASON_MODE_OFF,
    REASON_MODE_AUDIT,
    REASON_NO_SIGNIFICANT_CHANGE,
    REASON_RECOMMENDATION_STALE,
    REASON_LEARNING_PERIOD,
    REASON_LOW_CONFIDENCE,
    REASON_COOLDOWN,
    REASON_HPA_COUPLED,
    REASON_THROTTLED,
    REASON_OOM_KILLED,
    REASON_FREEZE_WINDOW,
    REASON_OUTSIDE_MAINTENANCE_WINDOW,
    REASON_UNSUPPORTED_NODE,
    REASON_RESTART_POLICY_REQUIRED,
    REASON_JVM_FIXED_HEAP,
    REASON_HUB_UNREACHABLE,
    REASON_PAUSED,
    REASON_SINGLE_REPLICA_UNSAFE,
    REASON_POD_DISRUPTION_BUDGET,
    REASON_RESIZE_INFEASIBLE,
    REASON_RESIZE_DEFERRED_TIMEOUT,
    REASON_OOM_KILLS,
    REASON_RESTARTS,
    REASON_THROTTLING,
    REASON_MODE_CHANGED,
    REASON_APPLY_ERROR,
    REASON_RESIZE_ERROR,
    REASON_ROLLBACK_ERROR,
    REASON_RELEASE_ERROR,
];

/// The closed list of reasons an event of type `t` may carry (rules.md reading 12).
pub fn reasons_for(t: EventType) -> &'static [&'static str] {
    match t {
        EventType::Applied => APPLIED_REASONS,
        EventType::Skipped => SKIPPED_REASONS,
        EventType::Blocked => BLOCKED_REASONS,
        EventType::Fallback => FALLBACK_REASONS,
        EventType::RolledBack => ROLLED_BACK_REASONS,
        EventType::Released => RELEASED_REASONS,
        EventType::Failed => FAILED_REASONS,
    }
}

/// Whether `reason` is one of the reasons of type `t`.
pub fn is_reason_of(t: EventType, reason: &str) -> bool {
    reasons_for(t).contains(&reason)
}

/// Whether `s` is a CamelCase name: an ASCII capital letter, then ASCII letters and digits
/// (rule EV-20). Acronyms such as `HPACoupled` count.
pub fn is_camel_case(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_alphanumeric())
        && s.chars().any(|c| c.is_ascii_lowercase())
}

// ---------------------------------------------------------------------------------------
// rsr conditions
// ---------------------------------------------------------------------------------------

/// Condition type: the object is valid; False names every invalid field or annotation.
pub const CONDITION_VALID: &str = "Valid";
/// Condition type: a guardrail blocks the change; the reason is the event reason.
pub const CONDITION_BLOCKED: &str = "Blocked";
/// Condition type: the values of the last change are live.
pub const CONDITION_APPLIED: &str = "Applied";
/// Condition type: the health watch after a change.
pub const CONDITION_HEALTH_WATCH: &str = "HealthWatch";
/// Condition type: a rollout of the workload is in progress.
pub const CONDITION_PROGRESSING: &str = "Progressing";
/// Every condition type of Kerf's resources.
pub const CONDITION_TYPES: &[&str] = &[
    CONDITION_VALID,
    CONDITION_BLOCKED,
    CONDITION_APPLIED,
    CONDITION_HEALTH_WATCH,
    CONDITION_PROGRESSING,
];

/// Valid=True: the object and its annotations are valid.
pub const CONDITION_REASON_VALID: &str = "Valid";
/// Valid=False: a field of the spec is invalid (the message names it).
pub const CONDITION_REASON_INVALID_SPEC: &str = "InvalidSpec";
/// Valid=False: a workload annotation is invalid (the message names it).
pub const CONDITION_REASON_INVALID_ANNOTATION: &str = "InvalidAnnotation";
/// Valid=False: a field of the workload's RightsizingPolicy is invalid (the message names
/// it); the rest of the policy still applies.
pub const CONDITION_REASON_INVALID_POLICY: &str = "InvalidPolicy";
/// Valid=False: a recommended container is missing from the template.
pub const CONDITION_REASON_CONTAINER_NOT_FOUND: &str = "ContainerNotFound";
/// Blocked=False: nothing blocks the workload.
pub const CONDITION_REASON_NOT_BLOCKED: &str = "NotBlocked";
/// Applied=True: the values of the last change are live (a change without an event
/// reason, such as an in-place convergence).
pub const CONDITION_REASON_APPLIED: &str = "Applied";
/// Applied=Unknown: a change is being applied.
pub const CONDITION_REASON_APPLYING: &str = "Applying";
/// Applied=False: no change of the workload is live.
pub const CONDITION_REASON_NOT_APPLIED: &str = "NotApplied";
/// Applied=False: the rollout stopped at `ProgressDeadlineExceeded`.
pub const CONDITION_REASON_PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
/// HealthWatch=Unknown: the watch is running.
pub const CONDITION_REASON_WATCHING: &str = "Watching";
/// HealthWatch=True: the watch ended without a breach.
pub const CONDITION_REASON_HEALTHY: &str = "Healthy";
/// Progressing=True: a rollout of the workload is in progress; in-place waits.
pub const CONDITION_REASON_ROLLOUT_IN_PROGRESS: &str = "RolloutInProgress";
/// Progressing=False: no rollout is in progress.
pub const CONDITION_REASON_ROLLOUT_COMPLETE: &str = "RolloutComplete";

/// Every condition-only reason. Kept out of [`REASONS`] and the event contract test;
/// a condition that reports an event's cause uses the event reason instead.
pub const CONDITION_REASONS: &[&str] = &[
    CONDITION_REASON_VALID,
    CONDITION_REASON_INVALID_SPEC,
    CONDITION_REASON_INVALID_ANNOTATION,
    CONDITION_REASON_INVALID_POLICY,
    CONDITION_REASON_CONTAINER_NOT_FOUND,
    CONDITION_REASON_NOT_BLOCKED,
    CONDITION_REASON_APPLIED,
    CONDITION_REASON_APPLYING,
    CONDITION_REASON_NOT_APPLIED,
    CONDITION_REASON_PROGRESS_DEADLINE_EXCEEDED,
    CONDITION_REASON_WATCHING,
    CONDITION_REASON_HEALTHY,
    CONDITION_REASON_ROLLOUT_IN_PROGRESS,
    CONDITION_REASON_ROLLOUT_COMPLETE,
];

// ---------------------------------------------------------------------------------------
// Well-known `details` keys of the events contract
// ---------------------------------------------------------------------------------------

/// OOM kills counted by the health watch (rolled_back).
pub const DETAIL_OOM_KILLS: &str = "oomKills";
/// Container restarts counted by the health watch (rolled_back).
pub const DETAIL_RESTARTS: &str = "restarts";
/// Share of throttled CFS periods (rolled_back).
pub const DETAIL_THROTTLING_RATIO: &str = "throttlingRatio";
/// Duration of the health watch (rolled_back).
pub const DETAIL_WATCH_DURATION: &str = "watchDuration";
/// The pod resize status behind a fallback.
pub const DETAIL_RESIZE_STATUS: &str = "resizeStatus";
/// Mode before a mode change.
pub const DETAIL_PREVIOUS_MODE: &str = "previousMode";
/// Mode after a mode change.
pub const DETAIL_NEW_MODE: &str = "newMode";
/// An error text.
pub const DETAIL_ERROR: &str = "error";
/// Name of the coordinated HPA (applied).
pub const DETAIL_HPA: &str = "hpa";
/// Resource of the coordinated HPA metric (applied).
pub const DETAIL_HPA_RESOURCE: &str = "hpaResource";
/// HPA target before, in percent (applied).
pub const DETAIL_HPA_TARGET_FROM: &str = "hpaTargetFrom";
/// HPA target after, in percent (applied).
pub const DETAIL_HPA_TARGET_TO: &str = "hpaTargetTo";
/// Approval id (applied ApprovedOnce).
pub const DETAIL_APPROVAL_ID: &str = "approvalId";
/// Who approved (applied ApprovedOnce).
pub const DETAIL_APPROVED_BY: &str = "approvedBy";
/// `cluster` or `fleet` (blocked Paused).
pub const DETAIL_PAUSE_SCOPE: &str = "pauseScope";
/// The reason of a refused fallback (blocked SingleReplicaUnsafe).
pub const DETAIL_FALLBACK_REASON: &str = "fallbackReason";
/// The pod whose eviction was refused (blocked PodDisruptionBudget).
pub const DETAIL_POD: &str = "pod";
/// `"true"` on the `rolled_back` of a breach during a canary (only the canary pods were
/// restored).
pub const DETAIL_CANARY: &str = "canary";
/// The canary pods a canary rollback restored, comma-separated (rolled_back).
pub const DETAIL_PODS: &str = "pods";
/// Every well-known `details` key.
pub const DETAIL_KEYS: &[&str] = &[
    DETAIL_OOM_KILLS,
    DETAIL_RESTARTS,
    DETAIL_THROTTLING_RATIO,
    DETAIL_WATCH_DURATION,
    DETAIL_RESIZE_STATUS,
    DETAIL_PREVIOUS_MODE,
    DETAIL_NEW_MODE,
    DETAIL_ERROR,
    DETAIL_HPA,
    DETAIL_HPA_RESOURCE,
    DETAIL_HPA_TARGET_FROM,
    DETAIL_HPA_TARGET_TO,
    DETAIL_APPROVAL_ID,
    DETAIL_APPROVED_BY,
    DETAIL_PAUSE_SCOPE,
    DETAIL_FALLBACK_REASON,
    DETAIL_POD,
    DETAIL_CANARY,
    DETAIL_PODS,
];
