//! The audit event payload of the events contract (`docs/contracts/events.md`).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::policy::{Strategy, WorkloadKind};
use crate::quantity::{Resource, ResourceRequirements};
use crate::wellknown::reasons_for;

pub use crate::event_type::EventType;

/// Longest message an event may carry, in characters (rule EV-57).
pub const MAX_MESSAGE_CHARS: usize = 1024;

/// Fields every event carries (rule EV-48).
pub const REQUIRED_FIELDS: [&str; 5] = ["id", "type", "time", "workload", "reason"];

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
    #[schemars(length(max = 2))]
    pub resources: Vec<Resource>,
    /// Containers with values before and after (applied, rolled_back).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
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

/// Why an event is not valid against the contract. Every variant names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// A field the contract requires is absent or null.
    #[error("{field}: required field is missing")]
    Missing {
        /// The field, for example `reason` or `workload.name`.
        field: String,
    },
    /// `type` is not one of the seven types the agent sends (`config_changed` included).
    #[error("type: {value:?} is not an event type")]
    UnknownType {
        /// The type as received.
        value: String,
    },
    /// A field is present but breaks a rule of the contract.
    #[error("{field}: {problem}")]
    Invalid {
        /// The field, for example `message` or `containers[0].name`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl EventError {
    /// The field the error is about.
    pub fn field(&self) -> &str {
        match self {
            EventError::Missing { field } | EventError::Invalid { field, .. } => field,
            EventError::UnknownType { .. } => "type",
        }
    }

    /// A short, bounded name of the error kind, for metric labels.
    pub fn category(&self) -> &'static str {
        match self {
            EventError::Missing { .. } => "missing_field",
            EventError::UnknownType { .. } => "unknown_type",
            EventError::Invalid { .. } => "invalid_field",
        }
    }

    fn invalid(field: impl Into<String>, problem: impl Into<String>) -> EventError {
        EventError::Invalid {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// `message` cut to at most [`MAX_MESSAGE_CHARS`] characters, on a character boundary.
pub fn cut_message(message: &str) -> &str {
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((end, _)) => &message[..end],
        None => message,
    }
}

impl Event {
    /// An event with the required fields only; the optional ones are empty.
    pub fn new(
        id: Uuid,
        type_: EventType,
        time: DateTime<Utc>,
        workload: EventWorkload,
        reason: &str,
    ) -> Event {
        Event {
            id,
            type_,
            time,
            workload,
            recommendation_id: None,
            strategy: None,
            resources: Vec::new(),
            containers: Vec::new(),
            reason: reason.to_owned(),
            message: None,
            details: BTreeMap::new(),
        }
    }

    /// Sets `message`, cut to [`MAX_MESSAGE_CHARS`] characters.
    pub fn with_message(mut self, message: &str) -> Event {
        self.message = Some(cut_message(message).to_owned());
        self
    }

    /// Checks the event against the contract: workload (EV-50), reason (EV-09), strategy
    /// (EV-52, EV-53), resources (EV-54), containers (EV-55, EV-56) and message (EV-57).
    /// The first problem found is returned, naming its field.
    pub fn validate(&self) -> Result<(), EventError> {
        self.validate_workload()?;
        if !reasons_for(self.type_).contains(&self.reason.as_str()) {
            return Err(EventError::invalid(
                "reason",
                format!("{:?} is not a reason of type {}", self.reason, self.type_),
            ));
        }
        self.validate_strategy()?;
        self.validate_resources()?;
        self.validate_containers()?;
        if let Some(message) = &self.message {
            let n = message.chars().count();
            if n > MAX_MESSAGE_CHARS {
                return Err(EventError::invalid(
                    "message",
                    format!("{n} characters, at most {MAX_MESSAGE_CHARS}"),
                ));
            }
        }
        Ok(())
    }

    fn validate_workload(&self) -> Result<(), EventError> {
        let w = &self.workload;
        for (field, value) in [
            ("workload.namespace", &w.namespace),
            ("workload.kind", &w.kind),
            ("workload.name", &w.name),
        ] {
            if value.is_empty() {
                return Err(EventError::invalid(field, "must not be empty"));
            }
        }
        if WorkloadKind::parse(&w.kind).is_none() {
            return Err(EventError::invalid(
                "workload.kind",
                format!("{:?} is not Deployment, StatefulSet or DaemonSet", w.kind),
            ));
        }
        Ok(())
    }

    fn validate_strategy(&self) -> Result<(), EventError> {
        let Some(s) = &self.strategy else {
            if self.type_.needs_strategy() {
                return Err(EventError::invalid(
                    "strategy",
                    format!("required on type {}", self.type_),
                ));
            }
            return Ok(());
        };
        let Some(strategy) = Strategy::parse(s) else {
            return Err(EventError::invalid(
                "strategy",
                format!("{s:?} is not in-place, rollout or deferred"),
            ));
        };
        if self.type_ == EventType::Fallback && strategy != Strategy::Rollout {
            return Err(EventError::invalid(
                "strategy",
                format!("{s:?} on type fallback, must be the new strategy \"rollout\""),
            ));
        }
        Ok(())
    }

    fn validate_resources(&self) -> Result<(), EventError> {
        let mut seen = BTreeSet::new();
        for r in &self.resources {
            if !seen.insert(*r) {
                return Err(EventError::invalid(
                    "resources",
                    format!("{} is listed twice", r.as_str()),
                ));
            }
        }
        Ok(())
    }

    fn validate_containers(&self) -> Result<(), EventError> {
        if self.type_.needs_containers() && self.containers.is_empty() {
            return Err(EventError::invalid(
                "containers",
                format!("required on type {}", self.type_),
            ));
        }
        let mut names = BTreeSet::new();
        for (i, c) in self.containers.iter().enumerate() {
            if c.name.is_empty() {
                return Err(EventError::invalid(
                    format!("containers[{i}].name"),
                    "must not be empty",
                ));
            }
            if !names.insert(c.name.as_str()) {
                return Err(EventError::invalid(
                    format!("containers[{i}].name"),
                    format!("container {:?} is listed twice", c.name),
                ));
            }
            self.validate_container(i, c)?;
        }
        Ok(())
    }

    /// Each listed resource changed (EV-56) and, when `resources` is set, is one of them.
    fn validate_container(&self, i: usize, c: &EventContainer) -> Result<(), EventError> {
        let listed: Vec<Resource> = Resource::ALL
            .into_iter()
            .filter(|r| mentions(&c.from, *r) || mentions(&c.to, *r))
            .collect();
        if listed.is_empty() {
            return Err(EventError::invalid(
                format!("containers[{i}]"),
                "from and to list no resource",
            ));
        }
        for r in listed {
            if !self.resources.is_empty() && !self.resources.contains(&r) {
                return Err(EventError::invalid(
                    format!("containers[{i}]"),
                    format!("lists {} which resources does not name", r.as_str()),
                ));
            }
            let before = (c.from.requests.get(r), c.from.limits.get(r));
            let after = (c.to.requests.get(r), c.to.limits.get(r));
            if before == after {
                return Err(EventError::invalid(
                    format!("containers[{i}]"),
                    format!("lists {} which did not change", r.as_str()),
                ));
            }
        }
        Ok(())
    }
}

fn mentions(values: &ResourceRequirements, r: Resource) -> bool {
    values.requests.get(r).is_some() || values.limits.get(r).is_some()
}

/// Reads and checks one event as received by the hub: a missing required field (EV-48),
/// an unknown type such as `config_changed` (EV-62) or a field of the wrong shape gives an
/// error naming the field; then [`Event::validate`] runs. Unknown fields are ignored.
pub fn validate_json(v: &Value) -> Result<Event, EventError> {
    let obj = v
        .as_object()
        .ok_or_else(|| EventError::invalid("event", "not a JSON object"))?;
    for field in REQUIRED_FIELDS {
        if is_absent(obj.get(field)) {
            return Err(EventError::Missing {
                field: field.to_owned(),
            });
        }
    }
    let type_ = match &obj["type"] {
        Value::String(s) => {
            EventType::parse(s).ok_or_else(|| EventError::UnknownType { value: s.clone() })?
        }
        other => {
            return Err(EventError::UnknownType {
                value: other.to_string(),
            });
        }
    };
    if let Some(w) = obj["workload"].as_object() {
        for sub in ["namespace", "kind", "name"] {
            if is_absent(w.get(sub)) {
                return Err(EventError::Missing {
                    field: format!("workload.{sub}"),
                });
            }
        }
    }
    let event = Event {
        id: field(obj, "id")?,
        type_,
        time: field(obj, "time")?,
        workload: field(obj, "workload")?,
        recommendation_id: optional(obj, "recommendationID")?,
        strategy: optional(obj, "strategy")?,
        resources: optional(obj, "resources")?,
        containers: optional(obj, "containers")?,
        reason: field(obj, "reason")?,
        message: optional(obj, "message")?,
        details: optional(obj, "details")?,
    };
    event.validate()?;
    Ok(event)
}

fn is_absent(v: Option<&Value>) -> bool {
    v.is_none_or(Value::is_null)
}

fn field<T: DeserializeOwned>(obj: &Map<String, Value>, name: &str) -> Result<T, EventError> {
    let v = obj.get(name).unwrap_or(&Value::Null);
    T::deserialize(v).map_err(|e| EventError::invalid(name, e.to_string()))
}

fn optional<T: DeserializeOwned + Default>(
    obj: &Map<String, Value>,
    name: &str,
) -> Result<T, EventError> {
    if is_absent(obj.get(name)) {
        return Ok(T::default());
    }
    field(obj, name)
}
