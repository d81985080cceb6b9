//! The audit event payload of the events contract (`docs/contracts/events.md`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::quantity::{Resource, ResourceRequirements};

/// The event types of the contract. Agents never send `config_changed`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// A change became live.
    Applied,
    /// The agent deliberately did not act and nothing is wrong.
    Skipped,
    /// A guardrail prevented a change the mode would allow.
    Blocked,
    /// An in-place change switched to rollout.
    Fallback,
    /// The health watch restored the previous values.
    RolledBack,
    /// The workload left auto-patch and field ownership was released.
    Released,
    /// An API call needed for an action failed after retries.
    Failed,
}

/// The workload an event is about.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub struct EventWorkload {
    /// Namespace of the workload.
    pub namespace: String,
    /// Kind: Deployment, StatefulSet or DaemonSet.
    pub kind: String,
    /// Name of the workload.
    pub name: String,
}

/// Values of one container before and after, only the resources that changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EventContainer {
    /// Container name.
    pub name: String,
    /// Values before.
    pub from: ResourceRequirements,
    /// Values after.
    pub to: ResourceRequirements,
}

/// One audit event, exactly as the contract's payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Agent-generated UUID; the hub ignores an id it already stored.
    pub id: Uuid,
    /// Event type.
    #[serde(rename = "type")]
    pub type_: EventType,
    /// When it happened in the cluster (not when it was sent).
    pub time: DateTime<Utc>,
    /// The workload.
    pub workload: EventWorkload,
    /// Hub recommendation the event is about, if known.
    #[serde(
        rename = "recommendationID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub recommendation_id: Option<String>,
    /// Strategy used (applied, fallback, rolled_back, released).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Resources concerned; empty means the whole workload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    /// Containers with values before and after (applied, rolled_back).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<EventContainer>,
    /// CamelCase reason from the contract.
    pub reason: String,
    /// Human-readable message, at most 1024 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// String map of details with the contract's well-known keys.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub details: BTreeMap<String, String>,
}
