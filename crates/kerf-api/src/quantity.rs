//! A Kubernetes quantity as it appears on the wire.
//!
//! The API server accepts quantities as JSON strings (`"250m"`, `"1Gi"`) or plain
//! numbers (`1`, `0.5`). [`Quantity`] keeps the text exactly as written so that a
//! malformed value survives deserialisation and can be named in a message; parsing
//! into millicores and bytes lives in `kerf-decide`.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The pattern of a quantity written as a string, as Kubernetes checks it (`250m`, `1.5`,
/// `512Mi`, `1e3`).
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// The longest quantity accepted as a string.
pub const QUANTITY_MAX_LENGTH: usize = 64;

/// A quantity such as `250m`, `1.5`, `512Mi` or `1e3`, kept as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Quantity(pub String);

impl Quantity {
    /// The quantity exactly as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Quantity {
    fn from(s: &str) -> Self {
        Quantity(s.to_owned())
    }
}

impl From<String> for Quantity {
    fn from(s: String) -> Self {
        Quantity(s)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity as a string or a number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity(v.to_owned()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        // No `anyOf` branches: kube's structural rewriter strips their types, which would
        // leave an `anyOf` that accepts anything. `maxLength` and `pattern` apply to strings
        // only, so integers still pass.
        json_schema!({
            "x-kubernetes-int-or-string": true,
            "maxLength": QUANTITY_MAX_LENGTH,
            "pattern": QUANTITY_PATTERN,
        })
    }
}

/// CPU and memory values of one container: requests or limits. An absent key means
/// "no value" (or, in a recommendation, "no recommendation for this resource").
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ResourceValues {
    /// CPU, for example `250m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    /// Memory, for example `512Mi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
}

impl ResourceValues {
    /// The value of one resource.
    pub fn get(&self, resource: Resource) -> Option<&Quantity> {
        match resource {
            Resource::Cpu => self.cpu.as_ref(),
            Resource::Memory => self.memory.as_ref(),
        }
    }

    /// Sets (or clears) the value of one resource.
    pub fn set(&mut self, resource: Resource, value: Option<Quantity>) {
        match resource {
            Resource::Cpu => self.cpu = value,
            Resource::Memory => self.memory = value,
        }
    }

    /// True when neither resource has a value.
    pub fn is_empty(&self) -> bool {
        self.cpu.is_none() && self.memory.is_none()
    }
}

/// Requests and limits of one container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ResourceRequirements {
    /// Requests.
    #[serde(default, skip_serializing_if = "ResourceValues::is_empty")]
    pub requests: ResourceValues,
    /// Limits.
    #[serde(default, skip_serializing_if = "ResourceValues::is_empty")]
    pub limits: ResourceValues,
}

impl ResourceRequirements {
    /// True when no request and no limit is set.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty() && self.limits.is_empty()
    }
}

/// The two resources Kerf manages.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Resource {
    /// CPU, in cores (millicores internally).
    Cpu,
    /// Memory, in bytes.
    Memory,
}

impl Resource {
    /// Both resources, CPU first.
    pub const ALL: [Resource; 2] = [Resource::Cpu, Resource::Memory];

    /// The resource's name as Kubernetes and the events contract spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantity_reads_strings_and_numbers() {
        let q: Vec<Quantity> = serde_json::from_str(r#"["250m", 2, 0.5, "12Q"]"#).unwrap();
        let texts: Vec<&str> = q.iter().map(Quantity::as_str).collect();
        assert_eq!(texts, ["250m", "2", "0.5", "12Q"]);
    }

    #[test]
    fn quantity_writes_a_string() {
        assert_eq!(
            serde_json::to_string(&Quantity::from("1Gi")).unwrap(),
            r#""1Gi""#
        );
    }

    #[test]
    fn quantity_rejects_other_json_types_naming_the_expectation() {
        let err = serde_json::from_str::<Quantity>("true").unwrap_err();
        assert!(err.to_string().contains("a quantity"), "{err}");
    }
}
