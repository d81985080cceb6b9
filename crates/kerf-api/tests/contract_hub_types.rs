//! The hub wire types read and write the documented JSON, and ignore unknown fields.

use kerf_api::hub::{
    ClusterConfig, ERROR_CODE_INVALID_BODY, ERROR_CODE_INVALID_ITEM, EventBatch,
    EventBatchResponse, HubError, Inventory, PauseScope, PolicyDefaults, RecommendationList,
    validate_batch_json,
};
use kerf_api::{Mode, RightsizingPolicySpec};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Parses `v` as `T`, serializes it back and compares.
#[allow(clippy::unwrap_used)]
fn round_trip<T: Serialize + DeserializeOwned>(v: Value) -> T {
    let parsed: T = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), v);
    parsed
}

/// Adds an unknown field to every object in `v`, except the open `details` maps.
fn with_unknown_fields(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut out: serde_json::Map<String, Value> = map
                .iter()
                .map(|(k, v)| {
                    let v = if k == "details" {
                        v.clone()
                    } else {
                        with_unknown_fields(v)
                    };
                    (k.clone(), v)
                })
                .collect();
            out.insert("addedLater".into(), json!("later"));
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(with_unknown_fields).collect()),
        other => other.clone(),
    }
}

fn recommendations() -> Value {
    let mut r = kerf_testkit::api::recommendation_json("payments-prod", "checkout");
    let app = &mut r["containers"][0];
    app["limits"] = json!({"memory": "512Mi"});
    app["removeLimits"] = json!(["cpu"]);
    app["confidence"] = json!("0.83");
    app["flags"] = json!(["throttled", "jvm-fixed-heap"]);
    json!({"recommendations": [r], "generatedAt": "2026-11-04T10:00:05Z"})
}

fn config() -> Value {
    json!({
        "flags": {"paused": true, "pauseScope": "fleet"},
        "defaults": {
            "fleet": {"mode": "audit", "guardrails": {"minConfidence": "0.7", "cooldown": "24h",
                      "rollback": {"oomKills": 1, "throttlingRatio": "0.25"}}},
            "cluster": {"resources": {"cpu": {"mode": "auto-patch"}},
                        "apply": {"strategy": "in-place", "freezeWindows": [
                            {"schedule": "0 0 24 12 *", "duration": "48h", "timeZone": "Europe/Berlin"}]},
                        "hpa": {"coordination": true, "minTargetUtilization": 50}}
        },
        "approvals": [{
            "approvalId": "apr-17",
            "workload": {"namespace": "payments-prod", "kind": "Deployment", "name": "checkout"},
            "recommendationID": "0b9b5c1e-4f7c-4a52-9a43-1f1d3f6b7c10",
            "approvedBy": "alice@example.com",
            "expiresAt": "2026-11-05T10:00:00Z"
        }],
        "overrides": [{
            "workload": {"namespace": "batch", "kind": "StatefulSet", "name": "db"},
            "spec": {"mode": "off", "recommendation": {"memoryPercentile": 100}}
        }]
    })
}

fn event_batch() -> Value {
    json!({"events": [{
        "id": "6f1c2a8e-0d7b-4c55-a0b1-8f9e2f0d1c3a",
        "type": "blocked",
        "time": "2026-11-04T10:15:00Z",
        "workload": {"namespace": "payments-prod", "kind": "Deployment", "name": "checkout"},
        "reason": "Paused",
        "details": {"pauseScope": "cluster"}
    }]})
}

fn inventory() -> Value {
    json!({"workloads": [{
        "namespace": "payments-prod",
        "kind": "Deployment",
        "name": "checkout",
        "uid": "8d7c7a57-6d0e-4b8c-b1a4-3b1e2f0d9c11",
        "containers": [{"name": "app", "requests": {"cpu": "500m", "memory": "1Gi"},
                        "limits": {"memory": "1Gi"}}],
        "mode": {"cpu": "auto-patch", "memory": "audit"},
        "strategy": "in-place",
        "settings": {"window": "336h", "cpuPercentile": 90}
    }]})
}

#[test]
fn recommendation_list_round_trips() {
    let list: RecommendationList = round_trip(recommendations());
    assert_eq!(list.recommendations[0].containers[0].name, "app");
    assert_eq!(list.recommendations[0].workload.kind, "Deployment");
}

// rule: EV-38, EV-40
#[test]
fn cluster_config_round_trips_with_flags_defaults_approvals_and_overrides() {
    let config: ClusterConfig = round_trip(config());
    assert!(config.flags.paused);
    assert_eq!(config.flags.pause_scope, Some(PauseScope::Fleet));
    assert_eq!(PauseScope::Fleet.as_str(), "fleet");
    assert_eq!(config.defaults.fleet.mode, Some(Mode::Audit));
    assert_eq!(config.approvals[0].approved_by, "alice@example.com");
    assert_eq!(config.overrides[0].spec.mode, Some(Mode::Off));
}

#[test]
fn empty_config_reads_as_not_paused_with_no_layers() {
    let config: ClusterConfig = serde_json::from_value(json!({})).unwrap();
    assert_eq!(config, ClusterConfig::default());
    assert!(!config.flags.paused);
}

#[test]
fn events_batch_and_answers_round_trip() {
    let batch: EventBatch = round_trip(event_batch());
    assert_eq!(batch.events[0].reason, "Paused");
    let answer: EventBatchResponse = round_trip(json!({"accepted": 3, "duplicates": 1}));
    assert_eq!(answer.accepted, 3);
    let rejected: HubError = round_trip(json!({
        "code": "invalid_item", "message": "reason: required field is missing",
        "index": 2, "id": "6f1c2a8e-0d7b-4c55-a0b1-8f9e2f0d1c3a"
    }));
    assert_eq!(rejected.index, Some(2));
    let plain: HubError = round_trip(json!({"code": "unauthorized", "message": "bad token"}));
    assert_eq!(plain.id, None);
}

#[test]
fn inventory_round_trips() {
    let inv: Inventory = round_trip(inventory());
    assert_eq!(inv.workloads[0].mode.memory, Mode::Audit);
}

#[test]
fn unknown_fields_are_ignored_on_read() {
    fn same<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: Value) {
        let plain: T = serde_json::from_value(v.clone()).unwrap();
        let extended: T = serde_json::from_value(with_unknown_fields(&v)).unwrap();
        assert_eq!(plain, extended);
    }
    same::<RecommendationList>(recommendations());
    same::<ClusterConfig>(config());
    same::<EventBatch>(event_batch());
    same::<Inventory>(inventory());
    same::<HubError>(json!({"code": "too_large", "message": "m"}));
}

// rule: EV-01, EV-48
#[test]
fn ev_01_invalid_item_names_index_id_and_field() {
    let mut body = event_batch();
    let mut second = body["events"][0].clone();
    second["id"] = json!("11111111-0d7b-4c55-a0b1-8f9e2f0d1c3a");
    second.as_object_mut().unwrap().remove("reason");
    body["events"].as_array_mut().unwrap().push(second);
    let err = validate_batch_json(&body).unwrap_err();
    assert_eq!(err.code, ERROR_CODE_INVALID_ITEM);
    assert_eq!(err.index, Some(1));
    assert_eq!(
        err.id.as_deref(),
        Some("11111111-0d7b-4c55-a0b1-8f9e2f0d1c3a")
    );
    assert_eq!(err.message, "reason: required field is missing");
    assert_eq!(validate_batch_json(&event_batch()).unwrap().events.len(), 1);
}

// rule: EV-62
#[test]
fn ev_62_a_config_changed_item_is_an_invalid_item() {
    let mut body = event_batch();
    body["events"][0]["type"] = json!("config_changed");
    let err = validate_batch_json(&body).unwrap_err();
    assert_eq!(err.code, ERROR_CODE_INVALID_ITEM);
    assert_eq!(err.index, Some(0));
    assert!(err.message.starts_with("type:"), "{}", err.message);
    let err = validate_batch_json(&json!({"items": []})).unwrap_err();
    assert_eq!(err.code, ERROR_CODE_INVALID_BODY);
}

#[test]
fn policy_defaults_take_the_layerable_fields_of_a_policy_spec() {
    let spec: RightsizingPolicySpec = serde_json::from_value(json!({
        "priority": 10,
        "selector": {"namespaces": ["payments-prod"]},
        "mode": "auto-patch",
        "hpa": {"coordination": false}
    }))
    .unwrap();
    let layer = PolicyDefaults::from(&spec);
    assert_eq!(
        serde_json::to_value(&layer).unwrap(),
        json!({"mode": "auto-patch", "hpa": {"coordination": false}})
    );
}
