//! Updates of a pod's metadata through every write path: the API defaults of the kind are
//! applied to the patched or replaced object the same way as to the stored one, so they
//! never count as a change of an immutable spec field.

use k8s_openapi::api::core::v1::Pod;
use kerf_sim::store::gvr;
use kerf_testkit::api_sim;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// A pod written straight into the store the way the controllers write them: a bare spec,
/// none of the fields the API server defaults.
fn bare_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
            "resources": {"limits": {"cpu": "200m", "memory": "128Mi"}}}]}})
}

/// Writes `bare_pod(name)` into the store as the controllers do; the pods API of `default`.
fn controller_written_pod(sim: &kerf_sim::sim::Sim, name: &str) -> anyhow::Result<Api<Pod>> {
    sim.context()
        .store
        .create(&gvr::PODS, bare_pod(name), "kube-controller-manager")?;
    Ok(Api::namespaced(sim.client(), "default"))
}

fn generation(p: &Pod) -> i64 {
    p.metadata.generation.unwrap_or_default()
}

#[tokio::test]
async fn label_only_patches_of_a_controller_written_pod_are_accepted() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let api = controller_written_pod(&sim, "web-1")?;
    let pp = PatchParams::default();
    for (label, patch) in [
        (
            "m",
            Patch::Merge(json!({"metadata": {"labels": {"m": "1"}}})),
        ),
        (
            "s",
            Patch::Strategic(json!({"metadata": {"labels": {"s": "1"}}})),
        ),
    ] {
        let patched = api.patch("web-1", &pp, &patch).await?;
        assert_eq!(patched.labels().get(label).map(String::as_str), Some("1"));
    }
    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/metadata/labels/j", "value": "1"}]))?;
    let jsonp = api.patch("web-1", &pp, &Patch::<()>::Json(ops)).await?;
    assert_eq!(jsonp.labels().get("j").map(String::as_str), Some("1"));
    assert_eq!(
        generation(&jsonp),
        1,
        "a metadata change is not a spec change"
    );
    assert_eq!(
        jsonp.spec.as_ref().and_then(|s| s.enable_service_links),
        Some(true)
    );
    Ok(())
}

#[tokio::test]
async fn put_of_an_unchanged_pod_is_accepted_and_changes_nothing() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let api = controller_written_pod(&sim, "web-2")?;
    let current = api.get("web-2").await?;
    let replaced = api
        .replace("web-2", &PostParams::default(), &current)
        .await?;
    assert_eq!(
        replaced.metadata.resource_version,
        current.metadata.resource_version
    );
    // A pod PUT without the defaulted fields is the same pod too.
    let mut stripped: Value = serde_json::to_value(&replaced)?;
    for f in [
        "enableServiceLinks",
        "dnsPolicy",
        "restartPolicy",
        "schedulerName",
    ] {
        stripped["spec"].as_object_mut().map(|s| s.remove(f));
    }
    let again = api
        .replace(
            "web-2",
            &PostParams::default(),
            &serde_json::from_value(stripped)?,
        )
        .await?;
    assert_eq!(generation(&again), 1);
    Ok(())
}

#[tokio::test]
async fn a_patch_that_changes_a_defaulted_field_is_still_refused() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let api = controller_written_pod(&sim, "web-3")?;
    let err = api
        .patch(
            "web-3",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"enableServiceLinks": false}})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err}");
    };
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .contains("pod updates may not change fields other than"),
        "{}",
        status.message
    );
    Ok(())
}
