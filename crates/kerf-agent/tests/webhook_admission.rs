//! The admission handler driven in-process (`Router::oneshot`): which pods get live
//! values, what the patch does to them, and how bad input is answered.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use kerf_agent::webhook::{self, SharedIndex};
use kerf_api::RightsizingRecommendation;
use kerf_testkit::api::admission_review;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tower::ServiceExt as _;

/// An rsr for `kind/name` in `demo` whose `app` container has live values.
fn rsr(kind: &str, name: &str, phase: &str, live: Value) -> RightsizingRecommendation {
    let v = json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1",
        "kind": "RightsizingRecommendation",
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {
            "workloadRef": {"kind": kind, "name": name},
            "recommendationID": "r1",
            "containers": [],
        },
        "status": {"phase": phase, "live": live},
    });
    match serde_json::from_value(v) {
        Ok(r) => r,
        Err(e) => unreachable!("fixture rsr: {e}"),
    }
}

/// Live values: requests 250m -> 120m, memory 512Mi; limits cpu 1 -> 500m, memory 1Gi.
fn app_live() -> Value {
    json!({"containers": [{
        "name": "app",
        "requests": {"cpu": "120m", "memory": "512Mi"},
        "limits": {"cpu": "500m", "memory": "1Gi"},
        "base": {
            "requests": {"cpu": "250m", "memory": "512Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        },
    }]})
}

fn base_resources() -> Value {
    json!({"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
}

fn owner(kind: &str, name: &str) -> Value {
    json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "u", "controller": true}])
}

/// A pod of `owners` with one container `app`.
fn pod(owners: Value, resources: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "web-", "namespace": "demo", "ownerReferences": owners,
                     "labels": {"pod-template-hash": "7d9f"},
                     "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"containers": [{"name": "app", "image": "app:1", "resources": resources}]},
    })
}

/// A review of `operation` on pod `object` in namespace `demo` by the ReplicaSet controller.
fn review(uid: &str, operation: &str, object: Value) -> Value {
    let user = "system:serviceaccount:kube-system:replicaset-controller";
    let pods = ["", "v1", "Pod", "pods"];
    let mut r = admission_review(uid, operation, pods, user, [object, Value::Null]);
    r["request"]["namespace"] = json!("demo");
    r
}

/// An index with Deployment `web` (ReplicaSet `web-7d9f`) at live values.
fn web_index() -> SharedIndex {
    let index = SharedIndex::new();
    let applied = rsr("Deployment", "web", "Applied", app_live());
    assert!(index.upsert_rsr(&applied).is_ok());
    index.upsert_replicaset("demo", "web-7d9f", Some("web"));
    index
}

fn app(index: &SharedIndex) -> Router {
    webhook::router(
        index.clone(),
        webhook::register_metrics(&mut Registry::default()),
    )
}

async fn post(router: &Router, body: impl Into<Body>) -> (StatusCode, Vec<u8>) {
    let req = Request::post("/mutate?timeout=2s")
        .header("content-type", "application/json")
        .body(body.into());
    let Ok(req) = req else {
        return (StatusCode::IM_A_TEAPOT, Vec::new());
    };
    let Ok(resp) = router.clone().oneshot(req).await;
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .map(|b| b.to_vec())
        .unwrap_or_default();
    (status, bytes)
}

/// Sends a review and returns its response object.
async fn admit(router: &Router, review: &Value) -> Value {
    let (status, body) = post(router, review.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1", "{v}");
    assert_eq!(v["kind"], "AdmissionReview", "{v}");
    assert_eq!(v["response"]["uid"], review["request"]["uid"], "{v}");
    assert_eq!(
        v["response"]["allowed"], true,
        "the webhook never denies: {v}"
    );
    v["response"].clone()
}

/// The pod after the response's patch (unchanged without one).
fn patched(pod: &Value, response: &Value) -> Value {
    let mut out = pod.clone();
    if let Some(p) = response["patch"].as_str() {
        assert_eq!(response["patchType"], "JSONPatch");
        let bytes = B64.decode(p).unwrap_or_default();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap_or_default();
        assert!(json_patch::patch(&mut out, &patch).is_ok(), "{patch:?}");
    }
    out
}

// rule: AP-06
#[tokio::test]
async fn pod_created_after_in_place_change_gets_live_values() {
    let router = app(&web_index());
    let pod = pod(owner("ReplicaSet", "web-7d9f"), base_resources());
    let resp = admit(&router, &review("u1", "CREATE", pod.clone())).await;
    assert!(resp["patch"].is_string(), "{resp}");
    let out = patched(&pod, &resp);
    assert_eq!(
        out["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "120m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "1Gi"}})
    );
    assert_eq!(out["spec"]["containers"][0]["image"], "app:1");
}

// rule: AP-06
#[tokio::test]
async fn pod_whose_values_differ_from_base_is_left_alone() {
    let router = app(&web_index());
    let other = json!({"requests": {"cpu": "300m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
    let no_limits = json!({"requests": {"cpu": "250m", "memory": "512Mi"}});
    for resources in [other, no_limits, Value::Null] {
        let pod = pod(owner("ReplicaSet", "web-7d9f"), resources.clone());
        let resp = admit(&router, &review("u2", "CREATE", pod)).await;
        assert!(resp.get("patch").is_none(), "{resources}: {resp}");
    }
}

// rule: AP-06
#[tokio::test]
async fn base_is_compared_by_value_not_by_spelling() {
    let router = app(&web_index());
    let spelled = json!({"requests": {"cpu": "0.25", "memory": "524288Ki"}, "limits": {"cpu": "1000m", "memory": "1Gi"}});
    let pod = pod(owner("ReplicaSet", "web-7d9f"), spelled);
    let resp = admit(&router, &review("u3", "CREATE", pod.clone())).await;
    let out = patched(&pod, &resp);
    assert_eq!(
        out["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "120m"
    );
}

// rule: AP-06
#[tokio::test]
async fn workload_without_live_values_gets_no_patch() {
    let index = web_index();
    let pending = rsr("Deployment", "api", "Pending", Value::Null);
    assert!(index.upsert_rsr(&pending).is_ok());
    index.upsert_replicaset("demo", "api-5c6b", Some("api"));
    let router = app(&index);
    for owners in [
        owner("ReplicaSet", "api-5c6b"),
        owner("StatefulSet", "db"),
        json!([]),
    ] {
        let pod = pod(owners.clone(), base_resources());
        let resp = admit(&router, &review("u4", "CREATE", pod)).await;
        assert!(resp.get("patch").is_none(), "{owners}: {resp}");
    }
}

// rule: RB-21
#[tokio::test]
async fn rolled_back_rsr_stops_giving_live_values() {
    let index = web_index();
    let router = app(&index);
    let pod = pod(owner("ReplicaSet", "web-7d9f"), base_resources());
    let resp = admit(&router, &review("u5", "CREATE", pod.clone())).await;
    assert!(
        resp["patch"].is_string(),
        "live before the rollback: {resp}"
    );
    for phase in ["RolledBack", "Released"] {
        // The live values are still in the status: the phase alone stops them.
        assert!(
            index
                .upsert_rsr(&rsr("Deployment", "web", phase, app_live()))
                .is_ok()
        );
        let resp = admit(&router, &review("u6", "CREATE", pod.clone())).await;
        assert!(resp.get("patch").is_none(), "{phase}: {resp}");
    }
    assert_eq!(index.read().live_workloads(), 0);
}

// rule: RB-21
#[tokio::test]
async fn deleted_rsr_stops_giving_live_values() {
    let index = web_index();
    index.remove_rsr("demo", "web");
    assert_web_pod_left_alone(&index, "u7").await;
}

/// Admits a pod of the `web` Deployment and asserts it goes through unpatched.
async fn assert_web_pod_left_alone(index: &SharedIndex, uid: &str) {
    let router = app(index);
    let pod = pod(owner("ReplicaSet", "web-7d9f"), base_resources());
    let resp = admit(&router, &review(uid, "CREATE", pod)).await;
    assert!(resp.get("patch").is_none(), "{resp}");
}

// rule: AP-06
#[tokio::test]
async fn pods_map_to_their_workload() {
    let index = SharedIndex::new();
    for kind in ["Deployment", "StatefulSet", "DaemonSet"] {
        let name = kind.to_lowercase();
        assert!(
            index
                .upsert_rsr(&rsr(kind, &name, "Applied", app_live()))
                .is_ok()
        );
    }
    index.upsert_replicaset("demo", "front-1a2b", Some("deployment"));
    let router = app(&index);
    let patched_owner = |owners: Value| async {
        let pod = pod(owners, base_resources());
        admit(&router, &review("u8", "CREATE", pod)).await["patch"].is_string()
    };
    // A ReplicaSet maps through the index to its Deployment, whatever its name.
    assert!(patched_owner(owner("ReplicaSet", "front-1a2b")).await);
    // A ReplicaSet the index has not seen yet maps by `<deployment>-<pod-template-hash>`.
    assert!(patched_owner(owner("ReplicaSet", "deployment-7d9f")).await);
    assert!(!patched_owner(owner("ReplicaSet", "deployment-0000")).await);
    assert!(patched_owner(owner("StatefulSet", "statefulset")).await);
    assert!(patched_owner(owner("DaemonSet", "daemonset")).await);
    // A StatefulSet pod never takes a Deployment's values of the same name.
    assert!(!patched_owner(owner("StatefulSet", "deployment")).await);
    let not_controller =
        json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "daemonset", "uid": "u"}]);
    assert!(!patched_owner(not_controller).await);
    index.remove_replicaset("demo", "front-1a2b");
    assert!(!patched_owner(owner("ReplicaSet", "front-1a2b")).await);
}

// rule: AP-18
#[tokio::test]
async fn removed_limit_reaches_new_pods() {
    let index = SharedIndex::new();
    let live = json!({"containers": [{
        "name": "app",
        "requests": {"cpu": "120m", "memory": "512Mi"},
        "limits": {"memory": "1Gi"},
        "base": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
    }]});
    assert!(
        index
            .upsert_rsr(&rsr("StatefulSet", "db", "Applied", live))
            .is_ok()
    );
    let router = app(&index);
    let resources = json!({
        "requests": {"cpu": "250m", "memory": "512Mi", "ephemeral-storage": "1Gi"},
        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
    });
    let pod = pod(owner("StatefulSet", "db"), resources);
    let resp = admit(&router, &review("u9", "CREATE", pod.clone())).await;
    let out = patched(&pod, &resp);
    assert_eq!(
        out["spec"]["containers"][0]["resources"],
        json!({
            "requests": {"cpu": "120m", "memory": "512Mi", "ephemeral-storage": "1Gi"},
            "limits": {"memory": "1Gi", "nvidia.com/gpu": "1"},
        })
    );
}

// rule: AP-06
#[tokio::test]
async fn patch_is_idempotent() {
    let router = app(&web_index());
    let pod = pod(owner("ReplicaSet", "web-7d9f"), base_resources());
    let first = admit(&router, &review("u10", "CREATE", pod.clone())).await;
    let once = patched(&pod, &first);
    let second = admit(&router, &review("u11", "CREATE", once.clone())).await;
    assert!(second.get("patch").is_none(), "{second}");
    assert_eq!(patched(&once, &second), once);
}

// rule: AP-06
#[tokio::test]
async fn sidecars_get_live_values_and_plain_init_containers_do_not() {
    let index = SharedIndex::new();
    let mut live = app_live();
    let mut sidecar = live["containers"][0].clone();
    sidecar["name"] = json!("proxy");
    let mut init = live["containers"][0].clone();
    init["name"] = json!("setup");
    if let Some(list) = live["containers"].as_array_mut() {
        list.extend([sidecar, init]);
    }
    assert!(
        index
            .upsert_rsr(&rsr("DaemonSet", "agent", "Applied", live))
            .is_ok()
    );
    let router = app(&index);
    let mut pod = pod(owner("DaemonSet", "agent"), base_resources());
    pod["spec"]["initContainers"] = json!([
        {"name": "setup", "resources": base_resources()},
        {"name": "proxy", "restartPolicy": "Always", "resources": base_resources()},
    ]);
    let resp = admit(&router, &review("u12", "CREATE", pod.clone())).await;
    let out = patched(&pod, &resp);
    let cpu = |c: &Value| c["resources"]["requests"]["cpu"].clone();
    assert_eq!(cpu(&out["spec"]["containers"][0]), "120m");
    assert_eq!(cpu(&out["spec"]["initContainers"][0]), "250m");
    assert_eq!(cpu(&out["spec"]["initContainers"][1]), "120m");
}

// rule: AP-06
#[tokio::test]
async fn only_pod_create_is_mutated() {
    let router = app(&web_index());
    let pod = pod(owner("ReplicaSet", "web-7d9f"), base_resources());
    let resp = admit(&router, &review("u13", "UPDATE", pod.clone())).await;
    assert!(resp.get("patch").is_none(), "{resp}");
    let mut other_kind = review("u14", "CREATE", pod);
    other_kind["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    let resp = admit(&router, &other_kind).await;
    assert!(resp.get("patch").is_none(), "{resp}");
}

fn warning(resp: &Value) -> String {
    resp["warnings"][0].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn malformed_requests_get_a_clear_answer() {
    let router = app(&web_index());
    // No uid can be read: HTTP 400 with a message.
    for body in [
        "not json",
        "{}",
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
    ] {
        let (status, text) = post(&router, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(!text.is_empty(), "{body}: empty message");
    }
    let (status, text) = post(&router, Body::empty()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(!text.is_empty());

    // A uid: allowed unchanged, with a warning naming the problem.
    let mut v1beta1 = review(
        "m1",
        "CREATE",
        pod(owner("ReplicaSet", "web-7d9f"), base_resources()),
    );
    v1beta1["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let resp = admit(&router, &v1beta1).await;
    assert!(resp.get("patch").is_none());
    assert!(
        warning(&resp).contains("admission.k8s.io/v1beta1"),
        "{resp}"
    );

    let mut bad_pod = review("m2", "CREATE", Value::Null);
    bad_pod["request"]["object"] = json!({"spec": {"containers": "app"}});
    let resp = admit(&router, &bad_pod).await;
    assert!(resp.get("patch").is_none());
    assert!(
        warning(&resp).contains("request.object.spec.containers"),
        "{resp}"
    );

    let no_object = review("m3", "CREATE", Value::Null);
    let resp = admit(&router, &no_object).await;
    assert!(warning(&resp).contains("no object"), "{resp}");
}

#[tokio::test]
async fn invalid_quantity_in_the_pod_is_named() {
    let router = app(&web_index());
    let resources = json!({"requests": {"cpu": "12Q", "memory": "512Mi"}});
    let pod = pod(owner("ReplicaSet", "web-7d9f"), resources);
    let resp = admit(&router, &review("m4", "CREATE", pod)).await;
    assert!(resp.get("patch").is_none());
    let w = warning(&resp);
    assert!(
        w.contains("12Q") && w.contains("\"app\"") && w.contains("requests.cpu"),
        "{w}"
    );
}

#[tokio::test]
async fn rsr_with_invalid_live_values_is_not_indexed() {
    let index = web_index();
    let mut live = app_live();
    live["containers"][0]["requests"]["cpu"] = json!("12Q");
    let err = index.upsert_rsr(&rsr("Deployment", "web", "Applied", live));
    assert!(err.is_err_and(|e| e.to_string().contains("12Q")));
    assert_web_pod_left_alone(&index, "m5").await;
}

#[tokio::test]
async fn requests_are_counted_by_result() {
    let index = web_index();
    let mut registry = Registry::with_prefix("kerf_agent");
    let metrics = webhook::register_metrics(registry.sub_registry_with_prefix("webhook"));
    let router = webhook::router(index, metrics);
    let pod = pod(owner("ReplicaSet", "web-7d9f"), base_resources());
    admit(&router, &review("c1", "CREATE", pod.clone())).await;
    admit(&router, &review("c2", "UPDATE", pod)).await;
    post(&router, "not json").await;
    let mut text = String::new();
    assert!(prometheus_client::encoding::text::encode(&mut text, &registry).is_ok());
    for line in [
        "kerf_agent_webhook_requests_total{result=\"patched\"} 1",
        "kerf_agent_webhook_requests_total{result=\"allowed\"} 1",
        "kerf_agent_webhook_requests_total{result=\"error\"} 1",
        "kerf_agent_webhook_request_duration_seconds_count 3",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}
