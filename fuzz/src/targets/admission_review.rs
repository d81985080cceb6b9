//! The mutating webhook's answer to an AdmissionReview body (`kerf_agent::webhook::answer`):
//! decoding the review and the pod, choosing the workload's live values, building the
//! JSON patch and encoding the answer.
//!
//! The index holds Deployment `web` (ReplicaSet `web-7d9f`) and StatefulSet `db` in
//! namespace `demo`, both with live values for container `app`, so pods of theirs reach
//! the patch. Checked: the webhook never denies, answers with the request's uid, and its
//! patch applies to the pod it was sent.

use std::sync::LazyLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use kerf_agent::webhook::{Answer, LiveIndex, answer, encode};
use kerf_api::RightsizingRecommendation;
use serde_json::{Value, json};

fn live_rsr(kind: &str, name: &str) -> Option<RightsizingRecommendation> {
    let v = json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1",
        "kind": "RightsizingRecommendation",
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {"workloadRef": {"kind": kind, "name": name}, "recommendationID": "r1",
                 "containers": []},
        "status": {"phase": "Applied", "live": {"containers": [{
            "name": "app",
            "requests": {"cpu": "120m", "memory": "512Mi"},
            "limits": {"memory": "1Gi"},
            "base": {"requests": {"cpu": "250m", "memory": "512Mi"},
                     "limits": {"cpu": "1", "memory": "1Gi"}},
        }]}},
    });
    serde_json::from_value(v).ok()
}

static INDEX: LazyLock<LiveIndex> = LazyLock::new(|| {
    let mut index = LiveIndex::default();
    for (kind, name) in [("Deployment", "web"), ("StatefulSet", "db")] {
        let rsr = live_rsr(kind, name);
        assert!(rsr.is_some_and(|r| index.upsert_rsr(&r).is_ok()));
    }
    index.upsert_replicaset("demo", "web-7d9f", Some("web"));
    index
});

/// One input of the target.
pub fn run(data: &[u8]) {
    let Answer::Review(review, _) = answer(&INDEX, data) else {
        return;
    };
    let Some(resp) = &review.response else {
        unreachable!("a review answer without a response");
    };
    assert!(resp.allowed, "the webhook denied: {resp:?}");
    // A body the typed decoder reads may still not load as a `Value` (a number out of
    // f64's range in a field the webhook skips): nothing to compare with then.
    let Ok(sent) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    assert_eq!(sent["request"]["uid"].as_str(), Some(resp.uid.as_str()));
    let wire = encode(&review);
    assert!(wire.is_ok(), "{wire:?}");
    let Some(bytes) = &resp.patch else {
        return;
    };
    let patch: json_patch::Patch = match serde_json::from_slice(bytes) {
        Ok(p) => p,
        Err(e) => unreachable!("the patch does not decode: {e}"),
    };
    let mut pod = sent["request"]["object"].clone();
    let applied = json_patch::patch(&mut pod, &patch);
    assert!(applied.is_ok(), "{applied:?}: {patch:?} on {pod}");
    let wire: Value = serde_json::from_slice(&wire.unwrap_or_default()).unwrap_or_default();
    assert_eq!(
        wire["response"]["patch"].as_str(),
        Some(B64.encode(bytes).as_str())
    );
}
