//! `docs/contracts/hub-api.yaml` describes the hub endpoints and the Rust wire types.

use std::collections::BTreeSet;

use kerf_api::EventType;
use kerf_api::event::REQUIRED_FIELDS;
use serde_json::Value;

const SPEC: &str = include_str!("../../../docs/contracts/hub-api.yaml");

#[allow(clippy::unwrap_used)]
fn spec() -> Value {
    serde_yaml::from_str(SPEC).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

// rule: EV-01
#[test]
fn ev_01_the_four_agent_endpoints_exist_with_their_methods() {
    let spec = spec();
    assert!(spec["openapi"].as_str().unwrap().starts_with("3.0"));
    let paths = spec["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/clusters/{cluster}/recommendations", "get"),
        ("/v1/clusters/{cluster}/config", "get"),
        ("/v1/clusters/{cluster}/events", "post"),
        ("/v1/clusters/{cluster}/inventory", "put"),
    ] {
        let op = &paths[path][method];
        assert!(op.is_object(), "{method} {path} missing");
        for code in ["401", "403"] {
            assert!(
                op["responses"][code].is_object(),
                "{method} {path}: no {code}"
            );
        }
    }
    assert_eq!(paths.len(), 4);
}

#[test]
fn responses_of_recommendations_and_events() {
    let spec = spec();
    let recs = &spec["paths"]["/v1/clusters/{cluster}/recommendations"]["get"];
    assert!(recs["responses"]["304"].is_object());
    assert!(recs["responses"]["200"]["headers"]["ETag"].is_object());
    let params = recs["parameters"].as_array().unwrap();
    assert!(params.iter().any(|p| p["name"] == "If-None-Match"));
    let events = &spec["paths"]["/v1/clusters/{cluster}/events"]["post"]["responses"];
    for code in ["200", "400", "413", "429"] {
        assert!(events[code].is_object(), "events: no {code}");
    }
    let rate = &spec["components"]["responses"]["RateLimited"];
    assert!(rate["headers"]["Retry-After"].is_object());
    let error = &spec["components"]["schemas"]["HubError"]["properties"];
    for field in ["code", "message", "index", "id"] {
        assert!(error[field].is_object(), "HubError.{field}");
    }
    let auth = &spec["components"]["securitySchemes"]["bearerAuth"];
    assert_eq!(auth["scheme"], "bearer");
}

// rule: EV-48
#[test]
fn ev_48_event_schema_requires_the_contracts_fields() {
    let event = &spec()["components"]["schemas"]["Event"];
    assert_eq!(strings(&event["required"]), REQUIRED_FIELDS);
}

// rule: EV-09, EV-62
#[test]
fn ev_09_event_schema_type_enum_is_the_seven_types() {
    let event = &spec()["components"]["schemas"]["Event"];
    let types = strings(&event["properties"]["type"]["enum"]);
    let expected: Vec<String> = EventType::ALL
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect();
    assert_eq!(types, expected);
}

// rule: EV-57
#[test]
fn ev_57_event_schema_bounds_message() {
    let event = &spec()["components"]["schemas"]["Event"];
    assert_eq!(event["properties"]["message"]["maxLength"], 1024);
}

/// Property names and required list of a JSON schema object.
fn shape(schema: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
    let props = schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    (props, strings(&schema["required"]).into_iter().collect())
}

macro_rules! rust_shape {
    ($t:ty) => {
        shape(schemars::schema_for!($t).as_value())
    };
}

#[test]
fn component_schemas_match_the_rust_wire_types() {
    use kerf_api::event::EventContainer;
    use kerf_api::hub::*;
    use kerf_api::policy::{ApplySettings, Guardrails, HpaSettings, RollbackSettings};
    use kerf_api::rsr::{ContainerRecommendation, DataCoverage, EffectiveModes};
    let spec = spec();
    let schemas = &spec["components"]["schemas"];
    let cases = [
        ("Event", rust_shape!(kerf_api::Event)),
        ("Workload", rust_shape!(kerf_api::EventWorkload)),
        ("EventContainer", rust_shape!(EventContainer)),
        ("ResourceValues", rust_shape!(kerf_api::ResourceValues)),
        (
            "ResourceRequirements",
            rust_shape!(kerf_api::ResourceRequirements),
        ),
        ("EventBatch", rust_shape!(EventBatch)),
        ("EventBatchResponse", rust_shape!(EventBatchResponse)),
        ("HubError", rust_shape!(HubError)),
        ("DataCoverage", rust_shape!(DataCoverage)),
        (
            "RecommendationSettings",
            rust_shape!(kerf_api::RecommendationSettings),
        ),
        (
            "ContainerRecommendation",
            rust_shape!(ContainerRecommendation),
        ),
        ("Recommendation", rust_shape!(Recommendation)),
        ("RecommendationList", rust_shape!(RecommendationList)),
        ("RollbackSettings", rust_shape!(RollbackSettings)),
        ("Guardrails", rust_shape!(Guardrails)),
        ("Window", rust_shape!(kerf_api::Window)),
        ("ApplySettings", rust_shape!(ApplySettings)),
        ("HpaSettings", rust_shape!(HpaSettings)),
        ("PolicyDefaults", rust_shape!(PolicyDefaults)),
        ("ClusterFlags", rust_shape!(ClusterFlags)),
        ("ConfigDefaults", rust_shape!(ConfigDefaults)),
        ("Approval", rust_shape!(Approval)),
        ("WorkloadOverride", rust_shape!(WorkloadOverride)),
        ("ClusterConfig", rust_shape!(ClusterConfig)),
        ("EffectiveModes", rust_shape!(EffectiveModes)),
        ("InventoryContainer", rust_shape!(InventoryContainer)),
        ("InventoryWorkload", rust_shape!(InventoryWorkload)),
        ("Inventory", rust_shape!(Inventory)),
    ];
    for (name, (rust_props, rust_required)) in cases {
        let (props, required) = shape(&schemas[name]);
        assert_eq!(
            props, rust_props,
            "{name}: properties differ from the Rust type"
        );
        assert_eq!(
            required, rust_required,
            "{name}: required differs from the Rust type"
        );
    }
}
