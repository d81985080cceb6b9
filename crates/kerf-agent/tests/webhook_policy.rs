//! The validating policy webhook driven in-process (`Router::oneshot`): a policy the agent
//! would mark `Valid=False` is refused with the condition's own message; a valid one, an
//! UPDATE that leaves the spec alone and a request the webhook cannot read are allowed.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::Utc;
use kerf_agent::cache::{Interner, PolicyEntry};
use kerf_agent::reconcile::policies::desired_status;
use kerf_agent::webhook::{self, SharedIndex};
use kerf_api::policy::RightsizingPolicyStatus;
use kerf_decide::coverage::PolicyCoverage;
use kerf_testkit::api::admission_review;
use kube::core::DynamicObject;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tower::ServiceExt as _;

fn policy(apply: Value) -> Value {
    json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1",
        "kind": "RightsizingPolicy",
        "metadata": {"name": "shop", "generation": 2},
        "spec": {"selector": {"namespaces": ["shop"]}, "mode": "audit", "apply": apply},
    })
}

fn window(schedule: &str, duration: &str, time_zone: &str) -> Value {
    json!({"freezeWindows": [{"schedule": schedule, "duration": duration, "timeZone": time_zone}]})
}

/// A review of `operation` on policy `shop` by alice.
fn review(uid: &str, operation: &str, object: Value, old: Value) -> Value {
    let policies = [
        "kerf.getkerf.dev",
        "v1alpha1",
        "RightsizingPolicy",
        "rightsizingpolicies",
    ];
    let mut r = admission_review(uid, operation, policies, "alice", [object, old]);
    r["request"]["name"] = json!("shop");
    r
}

fn app(registry: &mut Registry) -> Router {
    let metrics = webhook::register_metrics(registry.sub_registry_with_prefix("webhook"));
    webhook::router(SharedIndex::new(), metrics)
}

async fn post(router: &Router, body: impl Into<Body>) -> (StatusCode, Value, String) {
    let req = Request::post("/validate-policy?timeout=5s")
        .header("content-type", "application/json")
        .body(body.into());
    let Ok(req) = req else {
        return (StatusCode::IM_A_TEAPOT, Value::Null, String::new());
    };
    let Ok(resp) = router.clone().oneshot(req).await;
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .map(|b| b.to_vec())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        text,
    )
}

/// Sends a review; returns its response object after checking the envelope.
async fn admit(router: &Router, review: &Value) -> Value {
    let (status, v, text) = post(router, review.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1", "{v}");
    assert_eq!(v["kind"], "AdmissionReview", "{v}");
    assert_eq!(v["response"]["uid"], review["request"]["uid"], "{v}");
    v["response"].clone()
}

/// The message of the `Valid` condition the agent writes for `object`.
fn condition_message(object: &Value) -> String {
    let Ok(obj) = serde_json::from_value::<DynamicObject>(object.clone()) else {
        return String::new();
    };
    let entry = PolicyEntry::from_dynamic(obj, &mut Interner::default());
    let covered = PolicyCoverage::default();
    let status = desired_status(
        &entry,
        &RightsizingPolicyStatus::default(),
        &covered,
        Utc::now(),
    );
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "Valid")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn bad_schedule_time_zone_and_duration_are_refused_with_the_condition_words() {
    let router = app(&mut Registry::default());
    for (apply, field, words) in [
        (
            window("0 25 * * *", "2h", "UTC"),
            "freezeWindows[0].schedule",
            "\"0 25 * * *\"",
        ),
        (
            window("0 2 * * *", "2h", "Europe/Berln"),
            "freezeWindows[0].timeZone",
            "\"Europe/Berln\"",
        ),
        (
            window("0 2 * * *", "2 hours", "UTC"),
            "freezeWindows[0].duration",
            "2 hours",
        ),
        (
            json!({"freezeWindows": [{"schedule": "0 2 * * *"}]}),
            "freezeWindows[0].duration",
            "a window is either",
        ),
        (
            json!({"maintenanceWindows": [{"start": "2026-05-02T10:00:00Z", "end": "2026-05-01T10:00:00Z"}]}),
            "maintenanceWindows[0].end",
            "end must be after start",
        ),
    ] {
        let object = policy(apply);
        let resp = admit(
            &router,
            &review("p1", "CREATE", object.clone(), Value::Null),
        )
        .await;
        assert_eq!(resp["allowed"], false, "{field}: {resp}");
        let message = resp["status"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("spec.apply.{field}")),
            "{message}"
        );
        assert!(message.contains(words), "{message}");
        assert_eq!(message, condition_message(&object), "the condition's words");
        assert_eq!(resp["status"]["code"], 422, "{resp}");
        assert_eq!(resp["status"]["reason"], "Invalid", "{resp}");
    }
}

#[tokio::test]
async fn valid_policy_is_allowed_on_create_and_update() {
    let router = app(&mut Registry::default());
    let good = policy(window("0 2 * * 6", "4h", "Europe/Berlin"));
    let resp = admit(&router, &review("p2", "CREATE", good.clone(), Value::Null)).await;
    assert_eq!(resp["allowed"], true, "{resp}");
    assert!(condition_message(&good).is_empty());
    let bad = policy(window("0 25 * * *", "2h", "UTC"));
    let resp = admit(&router, &review("p3", "UPDATE", good, bad)).await;
    assert_eq!(resp["allowed"], true, "a fix is allowed: {resp}");
}

#[tokio::test]
async fn update_that_makes_a_policy_invalid_is_refused() {
    let router = app(&mut Registry::default());
    let good = policy(window("0 2 * * 6", "4h", "UTC"));
    let bad = policy(window("0 2 * * 6", "4h", "Europe/Berln"));
    let resp = admit(&router, &review("p4", "UPDATE", bad, good)).await;
    assert_eq!(resp["allowed"], false, "{resp}");
}

#[tokio::test]
async fn update_leaving_an_invalid_spec_alone_is_allowed() {
    let router = app(&mut Registry::default());
    let stored = policy(window("0 25 * * *", "2h", "UTC"));
    let mut relabelled = stored.clone();
    relabelled["metadata"]["labels"] = json!({"team": "shop"});
    let resp = admit(&router, &review("p5", "UPDATE", relabelled, stored)).await;
    assert_eq!(resp["allowed"], true, "{resp}");
}

#[tokio::test]
async fn request_status_is_not_judged() {
    // The API server keeps the stored status; a request's own status is not what the
    // agent reads.
    let router = app(&mut Registry::default());
    let mut object = policy(window("0 2 * * 6", "4h", "UTC"));
    object["status"] = json!({"matchedWorkloads": "many"});
    let resp = admit(&router, &review("p6", "CREATE", object, Value::Null)).await;
    assert_eq!(resp["allowed"], true, "{resp}");
}

#[tokio::test]
async fn other_kinds_and_operations_are_allowed() {
    let router = app(&mut Registry::default());
    let bad = policy(window("0 25 * * *", "2h", "UTC"));
    let resp = admit(&router, &review("p7", "DELETE", Value::Null, bad.clone())).await;
    assert_eq!(resp["allowed"], true, "{resp}");
    let mut other = review("p8", "CREATE", bad, Value::Null);
    other["request"]["kind"]["kind"] = json!("RightsizingRecommendation");
    let resp = admit(&router, &other).await;
    assert_eq!(resp["allowed"], true, "{resp}");
}

#[tokio::test]
async fn corrupt_reviews_get_a_clear_answer_and_never_block() {
    let router = app(&mut Registry::default());
    for body in [
        "not json",
        "{}",
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
        "",
    ] {
        let (status, _, text) = post(&router, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}");
        assert!(!text.is_empty(), "{body:?}: empty message");
    }
    let mut corrupt = review("p9", "CREATE", Value::Null, Value::Null);
    corrupt["request"]["object"] = json!({"metadata": {"labels": "team"}, "spec": {}});
    let resp = admit(&router, &corrupt).await;
    assert_eq!(resp["allowed"], true, "{resp}");
    let warning = resp["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains("did not check the policy"), "{warning}");
    assert!(
        warning.contains("request.object.metadata.labels"),
        "{warning}"
    );

    let resp = admit(&router, &review("p10", "CREATE", Value::Null, Value::Null)).await;
    assert_eq!(resp["allowed"], true, "{resp}");
    assert!(
        resp["warnings"][0]
            .as_str()
            .unwrap_or_default()
            .contains("no object")
    );

    let mut v1beta1 = review(
        "p11",
        "CREATE",
        policy(window("0 25 * * *", "2h", "UTC")),
        Value::Null,
    );
    v1beta1["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let resp = admit(&router, &v1beta1).await;
    assert_eq!(resp["allowed"], true, "{resp}");
}

#[tokio::test]
async fn policy_requests_are_counted_by_result() {
    let mut registry = Registry::with_prefix("kerf_agent");
    let router = app(&mut registry);
    let good = policy(window("0 2 * * 6", "4h", "UTC"));
    let bad = policy(window("0 25 * * *", "2h", "UTC"));
    admit(&router, &review("c1", "CREATE", good, Value::Null)).await;
    admit(&router, &review("c2", "CREATE", bad, Value::Null)).await;
    post(&router, "not json").await;
    let mut text = String::new();
    assert!(prometheus_client::encoding::text::encode(&mut text, &registry).is_ok());
    for line in [
        "kerf_agent_webhook_requests_total{result=\"allowed\"} 1",
        "kerf_agent_webhook_requests_total{result=\"denied\"} 1",
        "kerf_agent_webhook_requests_total{result=\"error\"} 1",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}
