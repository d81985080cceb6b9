//! Durations and decimals as they are written in Kerf's resources.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// The pattern of a Go duration (`168h`, `30m`, `1h30m`, `90s`, `1.5h`).
pub const GO_DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";

/// The pattern of a decimal between 0 and 1 written as a string (`"0.7"`, `"1"`).
pub const UNIT_DECIMAL_PATTERN: &str = r"^(0(\.[0-9]+)?|1(\.0+)?)$";

/// A duration in Go syntax (`168h`, `30m`, `1h30m`), kept as written. Parsing lives in
/// kerf-decide; the CRD schema checks the syntax.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GoDuration(pub String);

impl GoDuration {
    /// The duration exactly as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for GoDuration {
    fn from(s: &str) -> Self {
        GoDuration(s.to_owned())
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl JsonSchema for GoDuration {
    fn schema_name() -> Cow<'static, str> {
        "GoDuration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "maxLength": 32,
            "pattern": GO_DURATION_PATTERN,
        })
    }
}

/// A decimal from 0 to 1 written as a string (`"0.7"`), kept as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UnitDecimal(pub String);

impl UnitDecimal {
    /// The decimal exactly as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for UnitDecimal {
    fn from(s: &str) -> Self {
        UnitDecimal(s.to_owned())
    }
}

impl fmt::Display for UnitDecimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl JsonSchema for UnitDecimal {
    fn schema_name() -> Cow<'static, str> {
        "UnitDecimal".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "maxLength": 16,
            "pattern": UNIT_DECIMAL_PATTERN,
        })
    }
}
