//! `RightsizingPolicy`: how the agent may change the workloads it selects.
//!
//! Every field except `selector` and `priority` is optional and carries no default in the
//! schema: an absent field means "this layer does not set it". The built-in
//! defaults live in kerf-decide and each field's doc comment states its default.
//!
//! The selector must say what it selects (CEL rules on the CRD, and the same checks in
//! [`crate::validate::selector_problems`] for a policy the API server did not check): at
//! least one of `namespaces`, `namespaceSelector` or `workloadSelector`, each non-empty, or
//! `all: true` alone. A policy whose selector does not is refused at admission and, if
//! stored anyway, selects no workload.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use crate::duration::{GoDuration, UnitDecimal};
use crate::quantity::Quantity;

/// A RightsizingPolicy selects workloads and says how Kerf may change them.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kerf.getkerf.dev",
    version = "v1alpha1",
    kind = "RightsizingPolicy",
    plural = "rightsizingpolicies",
    shortname = "rsp",
    doc = "A RightsizingPolicy (cluster-scoped, short name rsp) selects workloads and says how Kerf may change their CPU and memory: the mode per resource, the recommender settings, the guardrails and health-watch thresholds, the apply strategy with its maintenance and freeze windows, and HPA coordination. An absent field means the policy does not set it; built-in or hub defaults apply.",
    status = "RightsizingPolicyStatus",
    printcolumn = r#"{"name":"Mode","type":"string","jsonPath":".spec.mode"}"#,
    printcolumn = r#"{"name":"Strategy","type":"string","jsonPath":".spec.apply.strategy"}"#,
    printcolumn = r#"{"name":"Priority","type":"integer","jsonPath":".spec.priority"}"#,
    printcolumn = r#"{"name":"Valid","type":"string","jsonPath":".status.conditions[?(@.type==\"Valid\")].status"}"#,
    printcolumn = r#"{"name":"Governed","type":"integer","jsonPath":".status.governedWorkloads"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.selector)", "message": SELECTOR_REQUIRED_MESSAGE}
]))]
pub struct RightsizingPolicySpec {
    /// Higher wins where several policies match a workload; a tie goes to the smallest
    /// name. Default 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Which workloads the policy applies to (required). Every part that is set must match.
    /// It must name namespaces, namespace labels or workload labels, or say `all: true`; a
    /// policy without such a term is refused, and selects nothing if stored anyway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<PolicySelector>,
    /// Mode for both resources: off, audit or auto-patch. Default audit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// Mode per resource; overrides `mode` for that resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceModes>,
    /// Settings the hub's recommender uses; a recommendation made with other settings is
    /// stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<RecommendationSettings>,
    /// Limits on what a change may do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guardrails: Option<Guardrails>,
    /// How and when a change goes in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply: Option<ApplySettings>,
    /// Coordination with HorizontalPodAutoscalers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hpa: Option<HpaSettings>,
}

/// Refused: a policy without `selector`.
pub const SELECTOR_REQUIRED_MESSAGE: &str = "selector is required: write selector.namespaces, selector.namespaceSelector or selector.workloadSelector, or selector.all: true to select every workload";

/// Refused: a selector with no term (`kinds` alone, or a pruned misspelt field).
pub const SELECTOR_NO_TERM_MESSAGE: &str = "selector names no namespaces, namespace labels or workload labels (kinds alone is not a term, and a misspelt field is dropped): write namespaces, namespaceSelector or workloadSelector, or all: true to select every workload";

/// Refused: `namespaces: []`.
pub const SELECTOR_EMPTY_NAMESPACES_MESSAGE: &str = "namespaces is empty: list at least one namespace, or remove it and write all: true to select every workload";

/// Refused: `all: true` beside another term.
pub const SELECTOR_ALL_WITH_TERMS_MESSAGE: &str = "all: true selects every workload and cannot be combined with namespaces, namespaceSelector or workloadSelector: remove all, or remove the other terms (kinds may stay)";

/// Refused: a label selector with no matchLabels entry and no matchExpressions item.
pub const LABEL_SELECTOR_EMPTY_MESSAGE: &str = "label selector is empty (a misspelt field such as matchLabel is dropped): write at least one matchLabels entry or matchExpressions item, or remove this selector";

/// Selects workloads by namespace, labels and kind. A selector must have a term: non-empty
/// `namespaces`, a `namespaceSelector` or `workloadSelector` with at least one
/// requirement, or `all: true` (alone; `kinds` may narrow it). `kinds` is a filter, not a
/// term.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "(has(self.all) && self.all) || has(self.namespaces) || has(self.namespaceSelector) || has(self.workloadSelector)",
        "message": SELECTOR_NO_TERM_MESSAGE
    },
    {
        "rule": "!has(self.namespaces) || size(self.namespaces) > 0",
        "message": SELECTOR_EMPTY_NAMESPACES_MESSAGE
    },
    {
        "rule": "!has(self.all) || !self.all || !(has(self.namespaces) || has(self.namespaceSelector) || has(self.workloadSelector))",
        "message": SELECTOR_ALL_WITH_TERMS_MESSAGE
    }
]))]
pub struct PolicySelector {
    /// Select every workload (of `kinds`) in every namespace. Must be the only term: it
    /// cannot be combined with `namespaces`, `namespaceSelector` or `workloadSelector`.
    /// Default false: the selector must name what it selects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all: Option<bool>,
    /// Namespace names (1 to 256).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256), inner(length(max = 63)))]
    pub namespaces: Option<Vec<String>>,
    /// Labels of the namespace (at least one requirement).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Labels of the workload (at least one requirement).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<LabelSelector>,
    /// Workload kinds; narrows the other terms, is not a term itself. Default: Deployment,
    /// StatefulSet and DaemonSet.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 3))]
    pub kinds: Option<Vec<WorkloadKind>>,
}

/// A label selector, as Kubernetes writes it, with at least one requirement.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",
        "message": LABEL_SELECTOR_EMPTY_MESSAGE
    }
]))]
pub struct LabelSelector {
    /// Labels that must all be equal (values of at most 63 characters, as Kubernetes
    /// allows).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("additionalProperties" = {"type": "string", "maxLength": 63}))]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Requirements that must all hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

/// One label requirement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LabelSelectorRequirement {
    /// Label key.
    #[schemars(length(max = 317))]
    pub key: String,
    /// In, NotIn, Exists or DoesNotExist.
    pub operator: LabelSelectorOperator,
    /// Values for In and NotIn.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(max = 63)))]
    pub values: Option<Vec<String>>,
}

/// Operator of a label requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("maxLength" = 12))]
pub enum LabelSelectorOperator {
    /// The label's value is one of the values.
    In,
    /// The label's value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// A workload kind Kerf manages.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[schemars(extend("maxLength" = 11))]
pub enum WorkloadKind {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
}

impl WorkloadKind {
    /// All kinds, in the order of the documents.
    pub const ALL: [WorkloadKind; 3] = [
        WorkloadKind::Deployment,
        WorkloadKind::StatefulSet,
        WorkloadKind::DaemonSet,
    ];

    /// The kind as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::DaemonSet => "DaemonSet",
        }
    }

    /// Reads a kind as Kubernetes spells it.
    pub fn parse(s: &str) -> Option<WorkloadKind> {
        WorkloadKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the agent may do with a resource: off, audit or auto-patch. Where no layer sets
/// it, the mode is audit.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[schemars(extend("maxLength" = 10))]
pub enum Mode {
    /// Nothing: no change and no report of the recommendation.
    #[serde(rename = "off")]
    Off,
    /// Report what would change; change nothing.
    #[serde(rename = "audit")]
    Audit,
    /// Apply recommendations within the guardrails.
    #[serde(rename = "auto-patch")]
    AutoPatch,
}

impl Mode {
    /// The mode as written in YAML and annotations.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Audit => "audit",
            Mode::AutoPatch => "auto-patch",
        }
    }

    /// Reads a mode as written in YAML and annotations.
    pub fn parse(s: &str) -> Option<Mode> {
        [Mode::Off, Mode::Audit, Mode::AutoPatch]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Per-resource modes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceModes {
    /// CPU requests and limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<ResourceMode>,
    /// Memory requests and limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<ResourceMode>,
}

/// The mode of one resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceMode {
    /// off, audit or auto-patch; overrides the policy's `mode` for this resource. Default:
    /// the policy's `mode`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
}

/// How a recommendation treats limits: Keep (the hub's default), Ratio or Remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("maxLength" = 6))]
pub enum LimitsHandling {
    /// Keep the current limits.
    Keep,
    /// Scale limits with requests, keeping their ratio.
    Ratio,
    /// Remove limits.
    Remove,
}

/// Settings of the hub's recommender. Each recommendation echoes the settings
/// it used; where a layer of the effective policy sets a field and the echo differs, the
/// recommendation is stale.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationSettings {
    /// Usage window the recommender reads (Go duration). Hub default 336h.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<GoDuration>,
    /// CPU usage percentile, 1 to 100. Hub default 90.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub cpu_percentile: Option<u8>,
    /// Memory usage percentile, 1 to 100. Hub default 99.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub memory_percentile: Option<u8>,
    /// Headroom added to the percentile, 0 to 1000 percent. Hub default 15.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
    pub headroom_percent: Option<u16>,
    /// Limit handling: Keep, Ratio or Remove. Hub default Keep.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsHandling>,
}

/// Guardrails: limits on every change, whatever strategy carries it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Guardrails {
    /// Minimum usage data before a workload may be changed. Default 168h.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learning_period: Option<GoDuration>,
    /// Minimum confidence of the recommendation, a quoted decimal from 0 to 1. Default "0.7".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_confidence: Option<UnitDecimal>,
    /// How far one step may lower a value, in percent of the current value, 1 to 100.
    /// Default 50.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub max_change_percent: Option<u8>,
    /// Lowest CPU request the agent sets. Default 10m.
    #[serde(rename = "minCPU", skip_serializing_if = "Option::is_none")]
    pub min_cpu: Option<Quantity>,
    /// Lowest memory request the agent sets. Default 32Mi.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_memory: Option<Quantity>,
    /// Minimum time between two changes, and after a rollback before decreases of the
    /// rolled-back resource. Default 24h.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<GoDuration>,
    /// The health watch after a change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback: Option<RollbackSettings>,
}

/// Thresholds of the health watch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackSettings {
    /// How long the watch lasts after a change. Default 30m.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch_duration: Option<GoDuration>,
    /// OOM kills that roll memory back. Default 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub oom_kills: Option<u32>,
    /// Container restarts that roll back every resource the change touched. Default 3.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub restarts: Option<u32>,
    /// Share of throttled CFS periods that rolls CPU back, a quoted decimal from 0 to 1.
    /// Default "0.25".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttling_ratio: Option<UnitDecimal>,
}

/// How a change is applied: in-place (the default), rollout or deferred.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[schemars(extend("maxLength" = 8))]
pub enum Strategy {
    /// Resize running pods through the resize subresource.
    #[serde(rename = "in-place")]
    InPlace,
    /// Patch the pod template (server-side apply), which rolls the pods.
    #[serde(rename = "rollout")]
    Rollout,
    /// Wait for a maintenance window, then roll out.
    #[serde(rename = "deferred")]
    Deferred,
}

impl Strategy {
    /// The strategy as written in YAML, annotations and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::InPlace => "in-place",
            Strategy::Rollout => "rollout",
            Strategy::Deferred => "deferred",
        }
    }

    /// Reads a strategy as written in YAML and annotations.
    pub fn parse(s: &str) -> Option<Strategy> {
        [Strategy::InPlace, Strategy::Rollout, Strategy::Deferred]
            .into_iter()
            .find(|m| m.as_str() == s)
    }

    /// Whether a change by this strategy lives in the running pods (resized in place)
    /// rather than in the pod template: its values are live on the pods, the running pods
    /// keep them when it is released, and its watch does not wait for a rollout.
    pub fn resizes_pods(self) -> bool {
        match self {
            Strategy::InPlace => true,
            Strategy::Rollout | Strategy::Deferred => false,
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How and when changes go in.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplySettings {
    /// in-place, rollout or deferred. Default in-place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    /// How long a resize may stay Deferred before the change falls back to a rollout.
    /// Default 10m.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_after: Option<GoDuration>,
    /// A deferred change starts only with at least this much of the window left. Default 30m.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_window_remaining: Option<GoDuration>,
    /// Windows in which a deferred change may go in (at most 16). An invalid window counts
    /// as closed. Default none: a deferred change waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub maintenance_windows: Option<Vec<Window>>,
    /// Windows in which nothing is applied or released (at most 16). An invalid window
    /// counts as open. Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub freeze_windows: Option<Vec<Window>>,
    /// Resize a few pods first and watch them before the rest (in-place changes only).
    /// Default none: every pod is resized at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<Canary>,
}

/// The canary of an in-place change: `pods` are resized first and watched for `duration`
/// with the health watch's thresholds; only then are the other pods resized. A breach
/// restores the canary pods alone. Rollout changes are not affected (a Deployment's
/// `maxSurge` and `maxUnavailable` already pace them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.pods) || string(self.pods).matches('^([1-9][0-9]{0,5}|([1-9][0-9]?|100)%)$')",
        "message": "canary pods must be a number of pods of at least 1 or a percentage from 1% to 100%"
    },
    {
        "rule": "duration(self.duration) > duration('0s')",
        "message": "canary duration must be a positive duration such as 10m"
    }
]))]
pub struct Canary {
    /// How many pods the canary resizes first: a number (at least 1) or a percentage of the
    /// targeted pods (`"25%"`, rounded up); a quoted number (`"3"`) is that many pods.
    /// Default 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods: Option<CanaryPods>,
    /// How long the canary pods are watched before the rest are resized (Go duration).
    pub duration: GoDuration,
}

/// A number of pods or a percentage (`"25%"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CanaryPods {
    /// A number of pods.
    Count(i64),
    /// Text: a percentage of the targeted pods (`"N%"`), or a quoted number of pods.
    Text(String),
}

impl JsonSchema for CanaryPods {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CanaryPods".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // No `anyOf` branches (see `Quantity`): the CEL rule on `Canary` checks both forms.
        schemars::json_schema!({
            "x-kubernetes-int-or-string": true,
            "maxLength": 6,
        })
    }
}

/// A window: recurring (`schedule` + `duration`, optional `timeZone`) or one-off
/// (`start` + `end`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "(has(self.schedule) && has(self.duration) && !has(self.start) && !has(self.end)) || (!has(self.schedule) && !has(self.duration) && !has(self.timeZone) && has(self.start) && has(self.end))",
        "message": "a window is either schedule and duration (with an optional timeZone) or start and end"
    },
    {
        "rule": "!has(self.start) || !has(self.end) || self.start < self.end",
        "message": "end must be after start"
    }
]))]
pub struct Window {
    /// A 5-field cron expression (minute hour day-of-month month day-of-week).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub schedule: Option<String>,
    /// How long the window stays open from each time the schedule fires (Go duration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<GoDuration>,
    /// IANA time zone the schedule is read in. Default UTC.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub time_zone: Option<String>,
    /// Start of a one-off window (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), extend("format" = "date-time"))]
    pub start: Option<String>,
    /// End of a one-off window (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), extend("format" = "date-time"))]
    pub end: Option<String>,
}

/// HPA coordination.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.minTargetUtilization) || !has(self.maxTargetUtilization) || self.minTargetUtilization <= self.maxTargetUtilization",
        "message": "minTargetUtilization must not exceed maxTargetUtilization"
    }
]))]
pub struct HpaSettings {
    /// Scale a utilization HPA's target with the requests. Default true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coordination: Option<bool>,
    /// Lowest target utilization a coordinated HPA may get, in percent. Default 50.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub min_target_utilization: Option<i32>,
    /// Highest target utilization a coordinated HPA may get, in percent. Default 90.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub max_target_utilization: Option<i32>,
}

/// What the agent observed about a policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RightsizingPolicyStatus {
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Workloads the policy's selector matches or that pin it by annotation, including
    /// those another policy governs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_workloads: Option<i32>,
    /// Workloads the policy decides for: those it wins by pin or priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governed_workloads: Option<i32>,
    /// Conditions; `Valid` names every invalid field, `Overlap` names the other policies
    /// that match the same workloads and which one governs them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub conditions: Vec<Condition>,
}
