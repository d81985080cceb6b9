//! Durations and decimals as they are written in Kerf's resources.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// The pattern of a Go duration (`168h`, `30m`, `1h30m`, `90s`, `1.5h`).
pub const GO_DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";

/// The pattern of a decimal between 0 and 1 written as a string (`"0.7"`, `"1"`).
pub const UNIT_DECIMAL_PATTERN: &str = r"^(0(\.[0-9]+)?|1(\.0+)?)$";

/// A string newtype kept exactly as written, whose CRD schema is an inline string of at most
/// `max_length` characters matching `pattern`.
macro_rules! written_string {
    ($(#[$doc:meta])* $name:ident, what: $what:literal, max_length: $max:expr, pattern: $pattern:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            #[doc = concat!("The ", $what, " exactly as written.")]
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.to_owned())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({
                    "type": "string",
                    "maxLength": $max,
                    "pattern": $pattern,
                })
            }
        }
    };
}

written_string! {
    /// A duration in Go syntax (`168h`, `30m`, `1h30m`), kept as written. Parsing lives in
    /// kerf-decide; the CRD schema checks the syntax.
    GoDuration, what: "duration", max_length: 32, pattern: GO_DURATION_PATTERN
}

written_string! {
    /// A decimal from 0 to 1 written as a string (`"0.7"`), kept as written.
    UnitDecimal, what: "decimal", max_length: 16, pattern: UNIT_DECIMAL_PATTERN
}
