//! A policy spec read from YAML as the API server hands it over, and the fields its errors
//! name (shared by `crd_bad_input` and `validate_windows`).

use kerf_api::validate::{FieldError, policy_spec_from_value, validate_policy};
use serde_json::Value;

/// Converts the spec and validates it; the first error either step reports.
pub fn errors_of(spec_yaml: &str) -> Vec<FieldError> {
    let value: Value = serde_yaml::from_str(spec_yaml).unwrap_or(Value::Null);
    match policy_spec_from_value(&value) {
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
