//! The event types of the events contract (`docs/contracts/events.md`), below the
//! well-known names that list each type's reasons and the event payload itself.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

impl EventType {
    /// Every type the agent sends, in the contract's order.
    pub const ALL: [EventType; 7] = [
        EventType::Applied,
        EventType::Skipped,
        EventType::Blocked,
        EventType::Fallback,
        EventType::RolledBack,
        EventType::Released,
        EventType::Failed,
    ];

    /// The type as written in the payload.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Applied => "applied",
            EventType::Skipped => "skipped",
            EventType::Blocked => "blocked",
            EventType::Fallback => "fallback",
            EventType::RolledBack => "rolled_back",
            EventType::Released => "released",
            EventType::Failed => "failed",
        }
    }

    /// Reads a type as written in the payload; `config_changed` and unknown names are
    /// `None` (rule EV-62).
    pub fn parse(s: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether events of this type carry `strategy` (rule EV-52).
    pub fn needs_strategy(self) -> bool {
        matches!(
            self,
            EventType::Applied | EventType::Fallback | EventType::RolledBack | EventType::Released
        )
    }

    /// Whether events of this type carry `containers` (rule EV-55).
    pub fn needs_containers(self) -> bool {
        matches!(self, EventType::Applied | EventType::RolledBack)
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
