//! The hub wire types, described in `docs/contracts/hub-api.yaml`. The agent
//! and the dev hub both use them.
//!
//! Every type ignores unknown fields on read, so an older agent keeps working against a
//! newer hub.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::duration::UnitDecimal;
use crate::event::{Event, EventWorkload, validate_json};
use crate::policy::{
    ApplySettings, Guardrails, HpaSettings, Mode, RecommendationSettings, ResourceModes,
    RightsizingPolicySpec, Strategy,
};
use crate::quantity::ResourceValues;
use crate::rsr::{ContainerRecommendation, DataCoverage, EffectiveModes};

/// `HubError.code` of a rejected events batch (400): one item is invalid.
pub const ERROR_CODE_INVALID_ITEM: &str = "invalid_item";
/// `HubError.code` of a body that cannot be read at all (400).
pub const ERROR_CODE_INVALID_BODY: &str = "invalid_body";
/// `HubError.code` of a missing or invalid bearer token (401).
pub const ERROR_CODE_UNAUTHORIZED: &str = "unauthorized";
/// `HubError.code` of a token that may not act on the cluster (403).
pub const ERROR_CODE_FORBIDDEN: &str = "forbidden";
/// `HubError.code` of a body over the hub's size limit (413).
pub const ERROR_CODE_TOO_LARGE: &str = "too_large";
/// `HubError.code` of a request over the rate limit (429, with `Retry-After`).
pub const ERROR_CODE_RATE_LIMITED: &str = "rate_limited";

/// The workload a hub object is about: namespace, kind, name (the same shape as an
/// event's workload).
pub type HubWorkload = EventWorkload;

/// One recommendation of `GET /v1/clusters/{cluster}/recommendations`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Recommendation {
    /// The workload the recommendation is for.
    pub workload: HubWorkload,
    /// The hub's id of the recommendation.
    #[serde(rename = "recommendationID")]
    pub recommendation_id: String,
    /// When the hub made the recommendation.
    pub generated_at: DateTime<Utc>,
    /// The workload's confidence: the lowest of its containers, a decimal from 0 to 1.
    pub confidence: UnitDecimal,
    /// How much usage data the recommendation rests on.
    pub data_coverage: DataCoverage,
    /// The complete recommender settings the hub used.
    pub settings: RecommendationSettings,
    /// Recommended values per container.
    pub containers: Vec<ContainerRecommendation>,
}

/// The body of `GET /v1/clusters/{cluster}/recommendations`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationList {
    /// The cluster's current recommendations, at most one per workload.
    #[serde(default)]
    pub recommendations: Vec<Recommendation>,
    /// When the hub produced the list.
    pub generated_at: DateTime<Utc>,
}

/// What a pause covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PauseScope {
    /// This cluster is paused.
    Cluster,
    /// The whole fleet is paused.
    Fleet,
}

impl PauseScope {
    /// The scope as written on the wire and in `details.pauseScope`.
    pub fn as_str(self) -> &'static str {
        match self {
            PauseScope::Cluster => "cluster",
            PauseScope::Fleet => "fleet",
        }
    }
}

/// Flags of the cluster's configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterFlags {
    /// Automation is paused: no change and no release; health-watch rollbacks still run.
    #[serde(default)]
    pub paused: bool,
    /// What the pause covers; set when `paused`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_scope: Option<PauseScope>,
}

/// The layerable part of a policy spec: what hub defaults and workload overrides may set.
/// Every field is optional; an absent field means "this layer does not set it".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyDefaults {
    /// Mode for both resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// Mode per resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceModes>,
    /// Recommender settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<RecommendationSettings>,
    /// Guardrails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardrails: Option<Guardrails>,
    /// How and when changes go in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply: Option<ApplySettings>,
    /// HPA coordination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hpa: Option<HpaSettings>,
}

impl From<&RightsizingPolicySpec> for PolicyDefaults {
    fn from(spec: &RightsizingPolicySpec) -> PolicyDefaults {
        PolicyDefaults {
            mode: spec.mode,
            resources: spec.resources.clone(),
            recommendation: spec.recommendation.clone(),
            guardrails: spec.guardrails.clone(),
            apply: spec.apply.clone(),
            hpa: spec.hpa.clone(),
        }
    }
}

/// The hub's default layers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigDefaults {
    /// Fleet defaults: the layer above the built-in defaults.
    #[serde(default)]
    pub fleet: PolicyDefaults,
    /// Cluster defaults: the layer above the fleet defaults.
    #[serde(default)]
    pub cluster: PolicyDefaults,
}

/// An operator's one-time approval of a recommendation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// The approval's id; the intent records it so it applies at most once.
    pub approval_id: String,
    /// The workload.
    pub workload: HubWorkload,
    /// The approved recommendation; the approval lapses when it changes.
    #[serde(rename = "recommendationID")]
    pub recommendation_id: String,
    /// Who approved it.
    pub approved_by: String,
    /// When the approval lapses if it was not applied.
    pub expires_at: DateTime<Utc>,
}

/// A hub override for one workload: the top layer of its effective policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadOverride {
    /// The workload.
    pub workload: HubWorkload,
    /// The fields the override sets.
    pub spec: PolicyDefaults,
}

/// The body of `GET /v1/clusters/{cluster}/config`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConfig {
    /// Pause flags.
    #[serde(default)]
    pub flags: ClusterFlags,
    /// Fleet and cluster default layers.
    #[serde(default)]
    pub defaults: ConfigDefaults,
    /// Pending one-time approvals.
    #[serde(default)]
    pub approvals: Vec<Approval>,
    /// Per-workload overrides.
    #[serde(default)]
    pub overrides: Vec<WorkloadOverride>,
}

/// The body of `POST /v1/clusters/{cluster}/events`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventBatch {
    /// The events, each valid against the events contract.
    pub events: Vec<Event>,
}

/// The answer (200) to an accepted events batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventBatchResponse {
    /// Events stored now.
    pub accepted: u32,
    /// Events whose id was already stored (ignored).
    pub duplicates: u32,
}

/// An error answer of the hub. A rejected events batch (400 `invalid_item`) names the item
/// by `index` and `id` and stores nothing; the agent resends without that item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HubError {
    /// Machine-readable code, for example `invalid_item`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// Index of the rejected item in the batch (`invalid_item`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// Id of the rejected item, when it has one (`invalid_item`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl HubError {
    /// An error with a code and a message only.
    pub fn new(code: &str, message: impl Into<String>) -> HubError {
        HubError {
            code: code.to_owned(),
            message: message.into(),
            index: None,
            id: None,
        }
    }
}

/// Reads an events batch as the hub receives it: every item is checked against the
/// contract, and the first invalid one gives a 400 `invalid_item` naming its index, its id
/// (when it is a string) and the bad field.
pub fn validate_batch_json(body: &Value) -> Result<EventBatch, HubError> {
    let items = body
        .get("events")
        .and_then(Value::as_array)
        .ok_or_else(|| HubError::new(ERROR_CODE_INVALID_BODY, "events: expected an array"))?;
    let mut events = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match validate_json(item) {
            Ok(event) => events.push(event),
            Err(e) => {
                return Err(HubError {
                    code: ERROR_CODE_INVALID_ITEM.to_owned(),
                    message: e.to_string(),
                    index: Some(index),
                    id: item.get("id").and_then(Value::as_str).map(str::to_owned),
                });
            }
        }
    }
    Ok(EventBatch { events })
}

/// The body of `PUT /v1/clusters/{cluster}/inventory`: the workloads the agent sees.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    /// Every workload the agent manages or could manage.
    #[serde(default)]
    pub workloads: Vec<InventoryWorkload>,
}

/// One workload of the inventory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryWorkload {
    /// Namespace.
    pub namespace: String,
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: String,
    /// Name.
    pub name: String,
    /// UID of the workload object.
    pub uid: String,
    /// Current values of the pod template's containers.
    #[serde(default)]
    pub containers: Vec<InventoryContainer>,
    /// Effective mode per resource.
    pub mode: EffectiveModes,
    /// Effective strategy.
    pub strategy: Strategy,
    /// Effective recommender settings, so the hub recommends with them.
    pub settings: RecommendationSettings,
}

/// Current values of one container.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryContainer {
    /// Container name.
    pub name: String,
    /// Current requests.
    #[serde(default)]
    pub requests: ResourceValues,
    /// Current limits.
    #[serde(default)]
    pub limits: ResourceValues,
}
