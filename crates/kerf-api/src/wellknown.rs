//! Well-known names: event reasons of the events contract (`docs/contracts/events.md`),
//! condition types and condition-only reasons, annotation and label keys, field managers,
//! pod resize conditions and the well-known `details` keys.
//!
//! A reason is spelled the same everywhere: in events, in the reasons of the rsr's
//! conditions and in metric labels. Adding a reason is a contract change: add the constant
//! here and a row to the contract's reason table (a test checks both ways).

use crate::event_type::EventType;

/// Declares a documented `&str` constant for each name and `$list`, every name in order.
macro_rules! name_list {
    ($(#[$list_doc:meta])* $list:ident = [$($(#[$doc:meta])* $name:ident = $value:literal,)*]) => {
        $($(#[$doc])* pub const $name: &str = $value;)*
        $(#[$list_doc])* pub const $list: &[&str] = &[$($name),*];
    };
}

/// The number of names in `lists`.
const fn total_len(lists: &[&[&str]]) -> usize {
    let (mut total, mut i) = (0, 0);
    while i < lists.len() {
        total += lists[i].len();
        i += 1;
    }
    total
}

/// The names of `lists` one after the other; `N` is their [`total_len`].
const fn concat_lists<const N: usize>(lists: &[&[&'static str]]) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut k, mut i) = (0, 0);
    while i < lists.len() {
        let mut j = 0;
        while j < lists[i].len() {
            out[k] = lists[i][j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    out
}

// ---------------------------------------------------------------------------------------
// API group, annotations, labels, field managers
// ---------------------------------------------------------------------------------------

/// API group of Kerf's custom resources.
pub const API_GROUP: &str = "kerf.getkerf.dev";
/// API version of Kerf's custom resources.
pub const API_VERSION: &str = "v1alpha1";
/// `apiVersion` of Kerf's custom resources.
pub const API_GROUP_VERSION: &str = "kerf.getkerf.dev/v1alpha1";

name_list! {
    /// Every workload annotation Kerf reads.
    ANNOTATIONS = [
        /// Workload annotation: mode for both resources (`off`, `audit`, `auto-patch`). An invalid
        /// value counts as `off`.
        ANNOTATION_MODE = "kerf.getkerf.dev/mode",
        /// Workload annotation: strategy (`in-place`, `rollout`, `deferred`). An invalid value
        /// counts as the policy's strategy.
        ANNOTATION_STRATEGY = "kerf.getkerf.dev/strategy",
        /// Workload annotation: `"true"` allows changes that leave a single-replica workload
        /// without a Ready pod.
        ANNOTATION_ALLOW_DISRUPTION = "kerf.getkerf.dev/allow-disruption",
        /// Workload annotation: pins one RightsizingPolicy by name.
        ANNOTATION_POLICY = "kerf.getkerf.dev/policy",
        /// Workload annotation: `"true"` puts the workload back to its template values and
        /// holds every new change until it is removed (or set to `"false"`). An invalid value
        /// reverts nothing and counts as mode `off`.
        ANNOTATION_REVERT = "kerf.getkerf.dev/revert",
        /// Workload annotation: the `recommendationID` of the rsr approved once, as a hub
        /// approval would (design D27): in mode `audit` that recommendation goes in once.
        /// Works with every recommendation source.
        ANNOTATION_APPROVE = "kerf.getkerf.dev/approve",
    ]
}

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

name_list! {
    /// Reasons of `applied`.
    APPLIED_REASONS = [
        /// applied: values from the referenced recommendation are live.
        REASON_RECOMMENDATION_APPLIED = "RecommendationApplied",
        /// applied: live because an operator approved the recommendation once in the hub.
        REASON_APPROVED_ONCE = "ApprovedOnce",
    ]
}

name_list! {
    /// Reasons of `skipped`.
    SKIPPED_REASONS = [
        /// skipped: the resource's effective mode is `off`.
        REASON_MODE_OFF = "ModeOff",
        /// skipped: the resource's effective mode is `audit`.
        REASON_MODE_AUDIT = "ModeAudit",
        /// skipped: the recommended value is within the tolerance of the current value.
        REASON_NO_SIGNIFICANT_CHANGE = "NoSignificantChange",
        /// skipped: the recommendation's settings differ from the effective policy.
        REASON_RECOMMENDATION_STALE = "RecommendationStale",
        /// skipped: the annotation `kerf.getkerf.dev/revert` holds the workload at its template
        /// values.
        REASON_REVERT_REQUESTED = "RevertRequested",
        /// skipped: the workload is outside the agent's scope (`scope.namespaces`,
        /// `scope.namespaceSelector`, `scope.workloadSelector`); no rsr is made and nothing
        /// is changed.
        REASON_OUT_OF_SCOPE = "OutOfScope",
    ]
}

name_list! {
    /// Reasons of `blocked`.
    BLOCKED_REASONS = [
        /// blocked: `dataCoverage.covered` is below `guardrails.learningPeriod`.
        REASON_LEARNING_PERIOD = "LearningPeriod",
        /// blocked: `confidence` is below `guardrails.minConfidence`.
        REASON_LOW_CONFIDENCE = "LowConfidence",
        /// blocked: the last change or rollback was less than `guardrails.cooldown` ago.
        REASON_COOLDOWN = "Cooldown",
        /// blocked: a CPU/memory-utilization HPA that is not coordinated.
        REASON_HPA_COUPLED = "HPACoupled",
        /// blocked: CPU decrease refused because the container is throttled.
        REASON_THROTTLED = "Throttled",
        /// blocked: memory decrease refused because the container was OOM-killed.
        REASON_OOM_KILLED = "OOMKilled",
        /// blocked: inside a freeze window or the cluster-wide freeze.
        REASON_FREEZE_WINDOW = "FreezeWindow",
        /// blocked: strategy `deferred` and no maintenance window is open; the change is queued.
        REASON_OUTSIDE_MAINTENANCE_WINDOW = "OutsideMaintenanceWindow",
        /// blocked: in-place refused (node with swap or a static CPU/Memory Manager policy, or a
        /// cluster without `pods/resize`).
        REASON_UNSUPPORTED_NODE = "UnsupportedNode",
        /// blocked: in-place memory change of a JVM/Python container without `RestartContainer`.
        REASON_RESTART_POLICY_REQUIRED = "RestartPolicyRequired",
        /// blocked: memory change of a JVM container with a fixed maximum heap.
        REASON_JVM_FIXED_HEAP = "JVMFixedHeap",
        /// blocked: no fresh recommendation because the hub cannot be reached.
        REASON_HUB_UNREACHABLE = "HubUnreachable",
        /// blocked: automation of the cluster or the fleet is paused in the hub.
        REASON_PAUSED = "Paused",
        /// blocked: the change would leave a single-replica workload without a Ready pod.
        REASON_SINGLE_REPLICA_UNSAFE = "SingleReplicaUnsafe",
        /// blocked: a PodDisruptionBudget refused or held the eviction of an outdated pod.
        REASON_POD_DISRUPTION_BUDGET = "PodDisruptionBudget",
        /// blocked: in-place change held while the agent's mutating webhook has no usable
        /// certificate (missing, unreadable, expired or not matching its key): new pods
        /// would start with the template's values.
        REASON_WEBHOOK_CERTIFICATE_UNUSABLE = "WebhookCertificateUnusable",
        /// blocked: the agent's recommendation source other than the hub (`vpa`) has not
        /// been read successfully for `hub.staleAfter`; the last recommendations stay.
        REASON_SOURCE_UNAVAILABLE = "SourceUnavailable",
        /// blocked: a VerticalPodAutoscaler that updates pods itself (`updateMode`
        /// `Recreate`, `Auto`, `InPlaceOrRecreate` or `InPlace`) targets the workload.
        REASON_VPA_ACTIVE = "VPAActive",
    ]
}

name_list! {
    /// Reasons of `fallback`.
    FALLBACK_REASONS = [
        /// fallback: pod resize status `Infeasible`.
        REASON_RESIZE_INFEASIBLE = "ResizeInfeasible",
        /// fallback: the resize stayed `Deferred` longer than `apply.fallbackAfter`.
        REASON_RESIZE_DEFERRED_TIMEOUT = "ResizeDeferredTimeout",
    ]
}

name_list! {
    /// Reasons of `rolled_back`.
    ROLLED_BACK_REASONS = [
        /// rolled_back: the OOM kill threshold was reached.
        REASON_OOM_KILLS = "OOMKills",
        /// rolled_back: the restart threshold was reached.
        REASON_RESTARTS = "Restarts",
        /// rolled_back: the throttling threshold was reached.
        REASON_THROTTLING = "Throttling",
    ]
}

name_list! {
    /// Reasons of `released`.
    RELEASED_REASONS = [
        /// released: the effective mode changed away from `auto-patch`.
        REASON_MODE_CHANGED = "ModeChanged",
        /// released: the workload is back at its template values and Kerf owns none of its
        /// fields (annotation `kerf.getkerf.dev/revert`).
        REASON_REVERTED = "Reverted",
    ]
}

name_list! {
    /// Reasons of `failed`.
    FAILED_REASONS = [
        /// failed: the template apply failed.
        REASON_APPLY_ERROR = "ApplyError",
        /// failed: the resize failed.
        REASON_RESIZE_ERROR = "ResizeError",
        /// failed: the rollback failed.
        REASON_ROLLBACK_ERROR = "RollbackError",
        /// failed: the release of field ownership failed.
        REASON_RELEASE_ERROR = "ReleaseError",
    ]
}

/// The reason lists of the event types, in the order of the contract's reason table.
const REASON_LISTS: &[&[&str]] = &[
    APPLIED_REASONS,
    SKIPPED_REASONS,
    BLOCKED_REASONS,
    FALLBACK_REASONS,
    ROLLED_BACK_REASONS,
    RELEASED_REASONS,
    FAILED_REASONS,
];

/// Every event reason of the contract, in the order of its reason table.
pub const REASONS: &[&str] = &concat_lists::<{ total_len(REASON_LISTS) }>(REASON_LISTS);

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

name_list! {
    /// Every condition type of Kerf's resources.
    CONDITION_TYPES = [
        /// Condition type: the object is valid; False names every invalid field or annotation.
        CONDITION_VALID = "Valid",
        /// Condition type: a guardrail blocks the change; the reason is the event reason.
        CONDITION_BLOCKED = "Blocked",
        /// Condition type: the values of the last change are live.
        CONDITION_APPLIED = "Applied",
        /// Condition type: the health watch after a change.
        CONDITION_HEALTH_WATCH = "HealthWatch",
        /// Condition type: a rollout of the workload is in progress.
        CONDITION_PROGRESSING = "Progressing",
        /// Condition type (policies): other policies match some of the same workloads; the
        /// message names them and which one governs the shared workloads.
        CONDITION_OVERLAP = "Overlap",
    ]
}

name_list! {
    /// Every condition-only reason. Kept out of [`REASONS`] and the event contract test;
    /// a condition that reports an event's cause uses the event reason instead.
    CONDITION_REASONS = [
        /// Valid=True: the object and its annotations are valid.
        CONDITION_REASON_VALID = "Valid",
        /// Valid=False: a field of the spec is invalid (the message names it).
        CONDITION_REASON_INVALID_SPEC = "InvalidSpec",
        /// Valid=False: a workload annotation is invalid (the message names it).
        CONDITION_REASON_INVALID_ANNOTATION = "InvalidAnnotation",
        /// Valid=False: a field of the workload's RightsizingPolicy is invalid (the message names
        /// it); the rest of the policy still applies.
        CONDITION_REASON_INVALID_POLICY = "InvalidPolicy",
        /// Valid=False: a recommended container is missing from the template.
        CONDITION_REASON_CONTAINER_NOT_FOUND = "ContainerNotFound",
        /// Blocked=False: nothing blocks the workload.
        CONDITION_REASON_NOT_BLOCKED = "NotBlocked",
        /// Applied=True: the values of the last change are live (a change without an event
        /// reason, such as an in-place convergence).
        CONDITION_REASON_APPLIED = "Applied",
        /// Applied=Unknown: a change is being applied.
        CONDITION_REASON_APPLYING = "Applying",
        /// Applied=False: no change of the workload is live.
        CONDITION_REASON_NOT_APPLIED = "NotApplied",
        /// Applied=False: the rollout stopped at `ProgressDeadlineExceeded`.
        CONDITION_REASON_PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded",
        /// HealthWatch=Unknown: the watch is running.
        CONDITION_REASON_WATCHING = "Watching",
        /// HealthWatch=True: the watch ended without a breach.
        CONDITION_REASON_HEALTHY = "Healthy",
        /// Progressing=True: a rollout of the workload is in progress; in-place waits.
        CONDITION_REASON_ROLLOUT_IN_PROGRESS = "RolloutInProgress",
        /// Progressing=False: no rollout is in progress.
        CONDITION_REASON_ROLLOUT_COMPLETE = "RolloutComplete",
        /// Overlap=True: another policy matches some of the same workloads.
        CONDITION_REASON_OVERLAPPING = "Overlapping",
        /// Overlap=False: no other policy matches any workload this one matches.
        CONDITION_REASON_NO_OVERLAP = "NoOverlap",
        /// Valid=False: a workload annotation key under `kerf.getkerf.dev/` that Kerf does not
        /// read (the message names it and the nearest known key); it changes nothing.
        CONDITION_REASON_UNKNOWN_ANNOTATION = "UnknownAnnotation",
    ]
}

// ---------------------------------------------------------------------------------------
// Well-known `details` keys of the events contract
// ---------------------------------------------------------------------------------------

name_list! {
    /// Every well-known `details` key.
    DETAIL_KEYS = [
        /// OOM kills counted by the health watch (rolled_back).
        DETAIL_OOM_KILLS = "oomKills",
        /// Container restarts counted by the health watch (rolled_back).
        DETAIL_RESTARTS = "restarts",
        /// Share of throttled CFS periods (rolled_back).
        DETAIL_THROTTLING_RATIO = "throttlingRatio",
        /// Duration of the health watch (rolled_back).
        DETAIL_WATCH_DURATION = "watchDuration",
        /// The pod resize status behind a fallback.
        DETAIL_RESIZE_STATUS = "resizeStatus",
        /// Mode before a mode change.
        DETAIL_PREVIOUS_MODE = "previousMode",
        /// Mode after a mode change.
        DETAIL_NEW_MODE = "newMode",
        /// An error text.
        DETAIL_ERROR = "error",
        /// Name of the coordinated HPA (applied).
        DETAIL_HPA = "hpa",
        /// Resource of the coordinated HPA metric (applied).
        DETAIL_HPA_RESOURCE = "hpaResource",
        /// HPA target before, in percent (applied).
        DETAIL_HPA_TARGET_FROM = "hpaTargetFrom",
        /// HPA target after, in percent (applied).
        DETAIL_HPA_TARGET_TO = "hpaTargetTo",
        /// Approval id (applied ApprovedOnce).
        DETAIL_APPROVAL_ID = "approvalId",
        /// Who approved (applied ApprovedOnce).
        DETAIL_APPROVED_BY = "approvedBy",
        /// `cluster` or `fleet` (blocked Paused).
        DETAIL_PAUSE_SCOPE = "pauseScope",
        /// The reason of a refused fallback (blocked SingleReplicaUnsafe).
        DETAIL_FALLBACK_REASON = "fallbackReason",
        /// The pod whose eviction was refused (blocked PodDisruptionBudget).
        DETAIL_POD = "pod",
        /// `"true"` on the `rolled_back` of a breach during a canary (only the canary pods were
        /// restored).
        DETAIL_CANARY = "canary",
        /// The canary pods a canary rollback restored, comma-separated (rolled_back).
        DETAIL_PODS = "pods",
    ]
}
