//! Kerf's resources as tests write them (YAML and JSON), what validation says of a policy,
//! and a walk over a CRD schema: set-up for the tests of kerf-api and of every crate above
//! it. Needs kerf-api alone, so kerf-api's own tests use it (with no default features).

use std::collections::BTreeMap;

use kerf_api::hub::PolicyDefaults;
use kerf_api::policy::{PolicySelector, RightsizingPolicy, RightsizingPolicySpec};
use kerf_api::validate::{FieldError, policy_spec_from_value, validate_policy};
use kerf_api::{ResourceRequirements, ResourceValues};
use serde_json::{Value, json};

/// Policy `name` with the spec `spec_yaml`, as written; an unreadable spec is a test bug.
#[allow(clippy::unwrap_used)]
pub fn policy(name: &str, spec_yaml: &str) -> RightsizingPolicy {
    RightsizingPolicy::new(name, serde_yaml::from_str(spec_yaml).unwrap())
}

/// Policy `name` with the spec `spec_yaml`; one without a selector selects every workload
/// (`all: true`).
#[allow(clippy::unwrap_used)]
pub fn policy_for_all(name: &str, spec_yaml: &str) -> RightsizingPolicy {
    let mut spec: RightsizingPolicySpec = serde_yaml::from_str(spec_yaml).unwrap();
    spec.selector.get_or_insert_with(|| PolicySelector {
        all: Some(true),
        ..PolicySelector::default()
    });
    RightsizingPolicy::new(name, spec)
}

/// Policy defaults (a hub layer or the chart's `clusterDefaults`) from YAML.
#[allow(clippy::unwrap_used)]
pub fn defaults(yaml: &str) -> PolicyDefaults {
    serde_yaml::from_str(yaml).unwrap()
}

/// A label map from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The hub's recommendation for Deployment `namespace/name` as JSON: id
/// `0b9b5c1e-4f7c-4a52-9a43-1f1d3f6b7c10`, made 2026-11-04T10:00:00Z with confidence 0.83
/// on 240h of a 336h window with the default recommender settings; container `app` to
/// 250m / 512Mi. Tests add to it what they are about.
pub fn recommendation_json(namespace: &str, name: &str) -> Value {
    json!({
        "workload": {"namespace": namespace, "kind": "Deployment", "name": name},
        "recommendationID": "0b9b5c1e-4f7c-4a52-9a43-1f1d3f6b7c10",
        "generatedAt": "2026-11-04T10:00:00Z",
        "confidence": "0.83",
        "dataCoverage": {"covered": "240h", "window": "336h"},
        "settings": {"window": "336h", "cpuPercentile": 90, "memoryPercentile": 99,
                     "headroomPercent": 15, "limits": "Keep"},
        "containers": [{"name": "app", "requests": {"cpu": "250m", "memory": "512Mi"}}]
    })
}

/// The errors of a policy spec read from YAML as the API server hands it over: converted,
/// then validated; the first step that fails says why. A spec without `selector` gets
/// `selector: {all: true}`, so that each test names only the fields it is about (the
/// selector's own errors are [`selector_errors_of`]).
pub fn errors_of(spec_yaml: &str) -> Vec<FieldError> {
    let mut value: Value = serde_yaml::from_str(spec_yaml).unwrap_or(Value::Null);
    if let Some(spec) = value.as_object_mut() {
        spec.entry("selector")
            .or_insert_with(|| json!({"all": true}));
    }
    validated(&value)
}

/// Converts the spec and validates it as written.
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

/// Visits every schema node under `node` (properties, items, additionalProperties and the
/// branches of anyOf/allOf/oneOf) of an OpenAPI schema with its path.
pub fn walk_schema<'a>(node: &'a Value, path: &str, f: &mut dyn FnMut(&str, &'a Value)) {
    f(path, node);
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            walk_schema(v, &format!("{path}.{k}"), f);
        }
    }
    if let Some(items) = node.get("items") {
        walk_schema(items, &format!("{path}[]"), f);
    }
    if let Some(add) = node.get("additionalProperties").filter(|a| a.is_object()) {
        walk_schema(add, &format!("{path}{{}}"), f);
    }
    for junctor in ["anyOf", "allOf", "oneOf"] {
        for (i, b) in node
            .get(junctor)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            walk_schema(b, &format!("{path}.{junctor}[{i}]"), f);
        }
    }
}

/// An AdmissionReview (`admission.k8s.io/v1`) of request `uid`: `operation` by `user` on
/// `object` (and `old`, or null) of `resource`, given as `[group, version, kind, plural]`.
/// A test adds the request's `namespace` or `name` where it needs them.
pub fn admission_review(
    uid: &str,
    operation: &str,
    resource: [&str; 4],
    user: &str,
    [object, old]: [Value; 2],
) -> Value {
    let [group, version, kind, plural] = resource;
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural},
            "operation": operation,
            "userInfo": {"username": user},
            "object": object, "oldObject": old, "dryRun": false,
        }
    })
}

/// A container's resources with these CPU and memory requests and no limits.
pub fn requests(cpu: &str, memory: &str) -> ResourceRequirements {
    ResourceRequirements {
        requests: ResourceValues {
            cpu: Some(cpu.into()),
            memory: Some(memory.into()),
        },
        limits: ResourceValues::default(),
    }
}
