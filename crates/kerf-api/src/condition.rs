//! A status condition in the shape of `metav1.Condition`.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The pattern of a condition reason, as `metav1.Condition` declares it. Every event
/// reason of the events contract matches it, so a condition that reports an event's cause
/// carries the event's reason spelled the same (EV-22).
pub const CONDITION_REASON_PATTERN: &str = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$";

/// Status of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known yet.
    Unknown,
}

/// One condition of a Kerf resource's status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, for example `Blocked` or `HealthWatch`.
    #[serde(rename = "type")]
    #[schemars(length(max = 64))]
    pub type_: String,
    /// True, False or Unknown.
    pub status: ConditionStatus,
    /// CamelCase reason; a condition that reports an event's cause uses the event reason.
    #[schemars(length(max = 64), pattern(CONDITION_REASON_PATTERN))]
    pub reason: String,
    /// Human-readable message.
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub message: String,
    /// When the status last changed.
    pub last_transition_time: DateTime<Utc>,
    /// The generation the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
