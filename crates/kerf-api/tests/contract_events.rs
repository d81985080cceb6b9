//! The event payload: the contract's example, validation of every rule, the hub's reading.

use kerf_api::event::{EventError, MAX_MESSAGE_CHARS, cut_message, validate_json};
use kerf_api::{Event, EventType};
use serde_json::{Value, json};

/// The payload example of the events contract, verbatim.
fn contract_example() -> Value {
    json!({
      "id": "6f1c2a8e-0d7b-4c55-a0b1-8f9e2f0d1c3a",
      "type": "rolled_back",
      "time": "2026-11-04T10:15:00Z",
      "workload": {"namespace": "payments-prod", "kind": "Deployment", "name": "checkout"},
      "recommendationID": "0b9b5c1e-4f7c-4a52-9a43-1f1d3f6b7c10",
      "strategy": "in-place",
      "resources": ["memory"],
      "containers": [
        {
          "name": "app",
          "from": {"requests": {"memory": "384Mi"}, "limits": {"memory": "384Mi"}},
          "to":   {"requests": {"memory": "1Gi"},   "limits": {"memory": "1Gi"}}
        }
      ],
      "reason": "OOMKills",
      "message": "2 OOM kills within 30m after change (threshold 1)",
      "details": {"oomKills": "2", "watchDuration": "30m"}
    })
}

#[allow(clippy::unwrap_used)]
fn example() -> Event {
    serde_json::from_value(contract_example()).unwrap()
}

/// A valid event of type `t` with reason `reason`, built from the example.
fn event_of(t: &str, reason: &str) -> Value {
    let mut v = contract_example();
    v["type"] = json!(t);
    v["reason"] = json!(reason);
    v["strategy"] = json!(if t == "fallback" {
        "rollout"
    } else {
        "in-place"
    });
    v
}

#[allow(clippy::unwrap_used)]
fn field_of(v: Value) -> String {
    validate_json(&v).unwrap_err().field().to_owned()
}

// rule: EV-48, EV-58
#[test]
fn the_contract_example_round_trips_exactly() {
    let original = contract_example();
    let event: Event = serde_json::from_value(original.clone()).unwrap();
    assert_eq!(serde_json::to_value(&event).unwrap(), original);
    assert_eq!(validate_json(&original).unwrap(), event);
    assert_eq!(event.validate(), Ok(()));
}

// rule: EV-09
#[test]
fn ev_09_reason_must_belong_to_the_type() {
    let mut e = example();
    e.reason = "Foo".into();
    let err = e.validate().unwrap_err();
    assert_eq!(err.field(), "reason");
    assert_eq!(
        err.to_string(),
        r#"reason: "Foo" is not a reason of type rolled_back"#
    );
    e.reason = "Cooldown".into();
    assert_eq!(e.validate().unwrap_err().field(), "reason");
    for (t, reason) in [
        ("applied", "RecommendationApplied"),
        ("rolled_back", "Throttling"),
        ("fallback", "ResizeInfeasible"),
        ("released", "ModeChanged"),
    ] {
        assert!(validate_json(&event_of(t, reason)).is_ok(), "{t} {reason}");
    }
    let blocked = Event::new(
        e.id,
        EventType::Blocked,
        e.time,
        e.workload.clone(),
        "Cooldown",
    );
    assert_eq!(blocked.validate(), Ok(()));
    let wrong = Event::new(e.id, EventType::Blocked, e.time, e.workload, "ModeOff");
    assert_eq!(
        wrong.validate().unwrap_err().to_string(),
        r#"reason: "ModeOff" is not a reason of type blocked"#
    );
}

// rule: EV-57
#[test]
fn ev_57_message_at_most_1024_characters() {
    let mut e = example();
    e.message = Some("é".repeat(MAX_MESSAGE_CHARS));
    assert_eq!(e.validate(), Ok(()));
    e.message = Some("é".repeat(MAX_MESSAGE_CHARS + 1));
    let err = e.validate().unwrap_err();
    assert_eq!(err.field(), "message");
    assert_eq!(err.to_string(), "message: 1025 characters, at most 1024");
}

// rule: EV-57
#[test]
fn ev_57_cut_message_keeps_1024_characters_on_a_char_boundary() {
    let long = "€".repeat(2000);
    let cut = cut_message(&long);
    assert_eq!(cut.chars().count(), MAX_MESSAGE_CHARS);
    assert_eq!(cut.len(), MAX_MESSAGE_CHARS * '€'.len_utf8());
    assert_eq!(cut_message("short"), "short");
    let e = example().with_message(&long);
    assert_eq!(e.validate(), Ok(()));
}

// rule: EV-52
#[test]
fn ev_52_strategy_present_on_applied_fallback_rolled_back_released() {
    for (t, reason) in [
        ("applied", "RecommendationApplied"),
        ("fallback", "ResizeInfeasible"),
        ("rolled_back", "OOMKills"),
        ("released", "ModeChanged"),
    ] {
        let mut v = event_of(t, reason);
        assert!(validate_json(&v).is_ok(), "{t}");
        v.as_object_mut().unwrap().remove("strategy");
        let err = validate_json(&v).unwrap_err();
        assert_eq!(err.to_string(), format!("strategy: required on type {t}"));
    }
    let mut v = event_of("blocked", "Cooldown");
    v.as_object_mut().unwrap().remove("strategy");
    v.as_object_mut().unwrap().remove("containers");
    assert!(validate_json(&v).is_ok(), "blocked needs no strategy");
    v["strategy"] = json!("sideways");
    assert_eq!(field_of(v), "strategy");
}

// rule: EV-53
#[test]
fn ev_53_fallback_strategy_is_rollout() {
    let mut v = event_of("fallback", "ResizeDeferredTimeout");
    assert!(validate_json(&v).is_ok());
    v["strategy"] = json!("in-place");
    let err = validate_json(&v).unwrap_err();
    assert_eq!(err.field(), "strategy");
}

// rule: EV-55
#[test]
fn ev_55_containers_present_on_applied_and_rolled_back() {
    for (t, reason) in [("applied", "ApprovedOnce"), ("rolled_back", "Restarts")] {
        let mut v = event_of(t, reason);
        assert!(validate_json(&v).is_ok());
        v["containers"] = json!([]);
        let err = validate_json(&v).unwrap_err();
        assert_eq!(err.to_string(), format!("containers: required on type {t}"));
    }
    let mut v = event_of("released", "ModeChanged");
    v.as_object_mut().unwrap().remove("containers");
    assert!(validate_json(&v).is_ok(), "released needs no containers");
}

// rule: EV-56
#[test]
fn ev_56_containers_list_only_changed_resources() {
    let mut v = contract_example();
    v["containers"][0]["to"] = v["containers"][0]["from"].clone();
    let err = validate_json(&v).unwrap_err();
    assert_eq!(err.field(), "containers[0]");
    assert!(err.to_string().contains("did not change"), "{err}");
    let mut v = contract_example();
    v["containers"][0]["from"] = json!({});
    v["containers"][0]["to"] = json!({});
    assert_eq!(field_of(v), "containers[0]");
    let mut v = contract_example();
    v["containers"][0]["to"]["limits"] = json!({});
    assert!(validate_json(&v).is_ok(), "a removed limit is a change");
}

// rule: EV-54
#[test]
fn ev_54_resources_and_containers_agree() {
    let mut v = contract_example();
    v["resources"] = json!(["cpu"]);
    let err = validate_json(&v).unwrap_err();
    assert_eq!(err.field(), "containers[0]");
    assert!(err.to_string().contains("memory"), "{err}");
    let mut v = contract_example();
    v["resources"] = json!(["memory", "memory"]);
    assert_eq!(field_of(v), "resources");
    let mut v = contract_example();
    v["resources"] = json!(["cpu", "memory"]);
    assert!(validate_json(&v).is_ok());
    let mut v = contract_example();
    v.as_object_mut().unwrap().remove("resources");
    assert!(
        validate_json(&v).is_ok(),
        "empty resources: the whole workload"
    );
    let mut v = contract_example();
    v["resources"] = json!(["gpu"]);
    assert_eq!(field_of(v), "resources");
}

#[test]
fn container_names_are_set_and_unique() {
    let mut v = contract_example();
    let c = v["containers"][0].clone();
    v["containers"] = json!([c.clone(), c]);
    assert_eq!(field_of(v), "containers[1].name");
    let mut v = contract_example();
    v["containers"][0]["name"] = json!("");
    assert_eq!(field_of(v), "containers[0].name");
}

// rule: EV-50
#[test]
fn ev_50_workload_holds_namespace_kind_and_name() {
    for sub in ["namespace", "kind", "name"] {
        let mut v = contract_example();
        v["workload"][sub] = json!("");
        assert_eq!(field_of(v), format!("workload.{sub}"));
        let mut v = contract_example();
        v["workload"].as_object_mut().unwrap().remove(sub);
        let err = validate_json(&v).unwrap_err();
        assert_eq!(
            err,
            EventError::Missing {
                field: format!("workload.{sub}")
            }
        );
    }
    let mut v = contract_example();
    v["workload"]["kind"] = json!("ReplicaSet");
    assert_eq!(field_of(v), "workload.kind");
    for kind in ["Deployment", "StatefulSet", "DaemonSet"] {
        let mut v = contract_example();
        v["workload"]["kind"] = json!(kind);
        assert!(validate_json(&v).is_ok(), "{kind}");
    }
}

// rule: EV-48
#[test]
fn ev_48_missing_required_field_is_named() {
    for field in ["id", "type", "time", "workload", "reason"] {
        let mut v = contract_example();
        v.as_object_mut().unwrap().remove(field);
        let err = validate_json(&v).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{field}: required field is missing")
        );
        let mut v = contract_example();
        v[field] = Value::Null;
        assert_eq!(validate_json(&v).unwrap_err().field(), field);
    }
}

// rule: EV-02, EV-49
#[test]
fn ev_02_id_is_a_uuid_and_time_a_timestamp() {
    let mut v = contract_example();
    v["id"] = json!("not-a-uuid");
    assert_eq!(field_of(v), "id");
    let mut v = contract_example();
    v["time"] = json!("yesterday");
    assert_eq!(field_of(v), "time");
}

// rule: EV-58
#[test]
fn ev_58_details_are_strings() {
    let mut v = contract_example();
    v["details"]["oomKills"] = json!(2);
    assert_eq!(field_of(v), "details");
}

// rule: EV-62, EV-09
#[test]
fn ev_62_config_changed_and_unknown_types_are_rejected() {
    for t in ["config_changed", "Applied", "deleted"] {
        let mut v = contract_example();
        v["type"] = json!(t);
        let err = validate_json(&v).unwrap_err();
        assert_eq!(err, EventError::UnknownType { value: t.into() });
        assert_eq!(err.field(), "type");
    }
    assert_eq!(EventType::parse("config_changed"), None);
    for t in EventType::ALL {
        assert_eq!(EventType::parse(t.as_str()), Some(t));
        assert_eq!(serde_json::to_value(t).unwrap(), json!(t.as_str()));
    }
}

#[test]
fn unknown_fields_are_ignored_and_not_an_object_is_named() {
    let mut v = contract_example();
    v["cluster"] = json!("prod-eu");
    assert_eq!(validate_json(&v).unwrap(), example());
    assert_eq!(field_of(json!([1, 2])), "event");
}
