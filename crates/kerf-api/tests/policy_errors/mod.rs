//! A policy spec read from YAML as the API server hands it over, and the fields its errors
//! name (shared by `crd_bad_input` and `validate_windows`).

use kerf_api::validate::{FieldError, policy_spec_from_value, validate_policy};
use serde_json::Value;

/// Converts the spec and validates it; the first error either step reports. A spec without
/// `selector` gets `selector: {all: true}`, so that each test names only the fields it is
/// about (the selector's own errors are [`selector_errors_of`]).
pub fn errors_of(spec_yaml: &str) -> Vec<FieldError> {
    let mut value: Value = serde_yaml::from_str(spec_yaml).unwrap_or(Value::Null);
    if let Some(spec) = value.as_object_mut() {
        spec.entry("selector")
            .or_insert_with(|| serde_json::json!({"all": true}));
    }
    validated(&value)
}

/// Converts the spec and validates it as written.
#[allow(dead_code)] // not every test binary that includes this module reads selectors
pub fn selector_errors_of(spec_yaml: &str) -> Vec<FieldError> {
    validated(&serde_yaml::from_str(spec_yaml).unwrap_or(Value::Null))
}

fn validated(value: &Value) -> Vec<FieldError> {
    match policy_spec_from_value(value) {
        Ok(spec) => validate_policy(&spec),
        Err(e) => vec![e],
    }
}

/// The path each error names.
pub fn paths(errors: &[FieldError]) -> Vec<&str> {
    errors.iter().map(|e| e.path.as_str()).collect()
}

/// The only error of `spec_yaml`, which must name `path`.
pub fn only_error(spec_yaml: &str, path: &str) -> FieldError {
    let errs = errors_of(spec_yaml);
    assert_eq!(paths(&errs), [path]);
    errs[0].clone()
}
