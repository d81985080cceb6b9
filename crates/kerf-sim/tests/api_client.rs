//! kube's real Client against kerf-sim over HTTPS: CRUD, watch, patches, server-side
//! apply, resize, CRD validation and eviction.

use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kerf_testkit::api_sim;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent};
use serde_json::json;

/// Asserts that `res` is the API server's refusal with HTTP `code`.
fn assert_api_code<T: std::fmt::Debug>(res: &kube::Result<T>, code: u16) {
    assert!(
        matches!(res, Err(kube::Error::Api(e)) if e.code == code),
        "{res:?}"
    );
}

#[tokio::test]
async fn client_creates_lists_by_label_and_deletes_configmaps() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    for (name, tier) in [("a", "web"), ("b", "db"), ("c", "web")] {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"tier": tier}}}))?;
        api.create(&PostParams::default(), &cm).await?;
    }
    let web = api
        .list(&ListParams::default().labels("tier in (web)"))
        .await?;
    assert_eq!(web.items.len(), 2);
    let page = api.list(&ListParams::default().limit(2)).await?;
    assert_eq!(page.items.len(), 2);
    let rest = api
        .list(
            &ListParams::default()
                .limit(2)
                .continue_token(page.metadata.continue_.as_deref().unwrap_or_default()),
        )
        .await?;
    assert_eq!(rest.items.len(), 1);
    api.delete("a", &DeleteParams::default()).await?;
    assert!(api.get_opt("a").await?.is_none());
    Ok(())
}

#[tokio::test]
async fn client_watch_sees_added_modified_deleted() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let mut stream = kerf_testkit::watch_from_now(&api, 5).await?;
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "w"}, "data": {"k": "1"}}))?;
    api.create(&PostParams::default(), &cm).await?;
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await?;
    api.delete("w", &DeleteParams::default()).await?;
    let mut kinds = Vec::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await?? {
        kinds.push(match ev {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            _ => "OTHER",
        });
        if kinds.len() == 3 {
            break;
        }
    }
    assert_eq!(kinds, vec!["ADDED", "MODIFIED", "DELETED"]);
    Ok(())
}

fn pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": "sim-node-1", "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "200m", "memory": "256Mi"}}}]}
    }))?)
}

#[tokio::test]
async fn client_resize_changes_resources_and_plain_patch_is_refused() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    api.create(&PostParams::default(), &pod("p")?).await?;
    let patch = json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "150m"}}}]}});
    let plain = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(patch.clone()),
        )
        .await;
    assert_api_code(&plain, 422);
    let resized = api
        .patch_subresource(
            "resize",
            "p",
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await?;
    let cpu = resized
        .spec
        .and_then(|s| s.containers[0].resources.clone())
        .and_then(|r| r.requests)
        .and_then(|r| r.get("cpu").cloned());
    assert_eq!(cpu.map(|q| q.0), Some("150m".to_string()));
    assert_eq!(resized.metadata.generation, Some(2));
    Ok(())
}

#[tokio::test]
async fn client_server_side_apply_conflicts_without_force_and_wins_with_force() -> anyhow::Result<()>
{
    let sim = api_sim().await?;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": {"k": "a"}});
    api.patch("s", &PatchParams::apply("owner"), &Patch::Apply(&cm))
        .await?;
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": {"k": "b"}});
    let refused = api
        .patch("s", &PatchParams::apply("kerf"), &Patch::Apply(&other))
        .await;
    assert_api_code(&refused, 409);
    let forced = api
        .patch(
            "s",
            &PatchParams::apply("kerf").force(),
            &Patch::Apply(&other),
        )
        .await?;
    assert_eq!(
        forced.data.and_then(|d| d.get("k").cloned()),
        Some("b".to_string())
    );
    let managers: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, vec!["kerf".to_string()]);
    Ok(())
}

#[tokio::test]
async fn custom_resource_with_bad_enum_is_invalid_naming_the_field() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let crd_path = format!(
        "{}/../../config/crds/kerf.getkerf.dev.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(crd_path)?;
    let crds: Api<kube::api::DynamicObject> = Api::all_with(
        sim.client(),
        &kube::api::ApiResource::erase::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(&()),
    );
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc)?;
        if v.is_null() {
            continue;
        }
        crds.create(&PostParams::default(), &serde_json::from_value(v)?)
            .await?;
    }
    let ar = kube::api::ApiResource {
        group: "kerf.getkerf.dev".into(),
        version: "v1alpha1".into(),
        api_version: "kerf.getkerf.dev/v1alpha1".into(),
        kind: "RightsizingPolicy".into(),
        plural: "rightsizingpolicies".into(),
    };
    let api: Api<kube::api::DynamicObject> = Api::all_with(sim.client(), &ar);
    let bad = json!({"apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingPolicy", "metadata": {"name": "x"}, "spec": {"mode": "bogus"}});
    let err = api
        .create(&PostParams::default(), &serde_json::from_value(bad)?)
        .await;
    let Err(kube::Error::Api(e)) = err else {
        anyhow::bail!("expected 422, got {err:?}")
    };
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .starts_with("RightsizingPolicy.kerf.getkerf.dev \"x\" is invalid: "),
        "{}",
        e.message
    );
    assert!(
        e.message
            .contains("spec.mode: Unsupported value: \"bogus\": supported values: "),
        "{}",
        e.message
    );
    Ok(())
}

#[tokio::test]
async fn a_status_put_takes_only_status_and_ignores_an_invalid_spec() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(sim.client(), "default");
    let d = json!({"metadata": {"name": "web"}, "spec": {"replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}});
    let created = api
        .create(&PostParams::default(), &serde_json::from_value(d)?)
        .await?;
    // The body carries a spec the main resource would refuse (negative replicas, no
    // containers) and new labels: a status PUT ignores all of it, as the real server does.
    let mut body = serde_json::to_value(&created)?;
    body["spec"]["replicas"] = json!(-3);
    body["spec"]["template"]["spec"]["containers"] = json!([]);
    body["metadata"]["labels"] = json!({"changed": "yes"});
    body["status"] = json!({"observedGeneration": 1, "replicas": 2});
    let updated = api
        .replace_status(
            "web",
            &PostParams::default(),
            &serde_json::from_value(body.clone())?,
        )
        .await?;
    let spec = updated.spec.clone().unwrap_or_default();
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(spec.template.spec.map(|s| s.containers.len()), Some(1));
    assert_eq!(updated.metadata.labels, None);
    assert_eq!(updated.status.and_then(|s| s.replicas), Some(2));
    // A stale resourceVersion in the body is still a conflict.
    let err = api
        .replace_status(
            "web",
            &PostParams::default(),
            &serde_json::from_value(body.clone())?,
        )
        .await;
    let Err(kube::Error::Api(e)) = err else {
        anyhow::bail!("expected 409, got {err:?}")
    };
    assert_eq!(e.code, 409);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_patches_without_a_resource_version_all_go_in() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "race"}}))?;
    api.create(&PostParams::default(), &cm).await?;
    // Each patch is read-modify-write inside the server; as the real API server, a patch
    // without a resourceVersion is retried there when another write got in between.
    let writes = (0..40).map(|i| {
        let api = api.clone();
        tokio::spawn(async move {
            let body = json!({"data": {format!("k{i}"): "v"}});
            let pp = PatchParams::default();
            if i % 2 == 0 {
                api.patch("race", &pp, &Patch::Merge(&body)).await
            } else {
                let apply = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "race"}, "data": {format!("k{i}"): "v"}});
                let pp = PatchParams::apply(&format!("m{i}"));
                api.patch("race", &pp, &Patch::Apply(&apply)).await
            }
        })
    });
    for w in futures::future::join_all(writes).await {
        w??;
    }
    let data = api.get("race").await?.data.unwrap_or_default();
    assert_eq!(data.len(), 40, "{data:?}");
    // A patch that names a stale resourceVersion is still a conflict.
    let stale = json!({"metadata": {"resourceVersion": "1"}, "data": {"x": "y"}});
    let err = api
        .patch("race", &PatchParams::default(), &Patch::Merge(&stale))
        .await;
    let Err(kube::Error::Api(e)) = err else {
        anyhow::bail!("expected 409, got {err:?}")
    };
    assert_eq!(e.code, 409);
    Ok(())
}

/// The managers of the object's managedFields, in order.
fn managers_of(meta: &kube::api::ObjectMeta) -> Vec<String> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect()
}

#[tokio::test]
async fn json_patch_rewrites_managed_fields_and_keeps_values_and_generation() -> anyhow::Result<()>
{
    use k8s_openapi::api::apps::v1::Deployment;
    let sim = api_sim().await?;
    let api: Api<Deployment> = Api::namespaced(sim.client(), "default");
    let body = |cpu: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "app", "image": "pause",
                "resources": {"requests": {"cpu": cpu}}}]}}}})
    };
    api.patch(
        "d",
        &PatchParams::apply("ghost"),
        &Patch::Apply(&body("200m")),
    )
    .await?;
    let live = api.get("d").await?;
    assert_eq!(managers_of(&live.metadata), ["ghost"]);
    let rv = live.metadata.resource_version.clone().unwrap_or_default();
    let ops = |rv: &str, value: serde_json::Value| -> anyhow::Result<json_patch::Patch> {
        Ok(serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "replace", "path": "/metadata/managedFields", "value": value}
        ]))?)
    };
    // A stale resourceVersion fails the test op: nothing changes.
    let stale = api
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Json::<()>(ops("stale", json!([{}]))?),
        )
        .await;
    assert_api_code(&stale, 422);
    // An empty list keeps the entries, as for a client that does not know the field.
    let kept = api
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Json::<()>(ops(&rv, json!([]))?),
        )
        .await?;
    assert_eq!(managers_of(&kept.metadata), ["ghost"]);
    // One empty entry resets them; values and generation stay.
    let rv = kept.metadata.resource_version.clone().unwrap_or_default();
    let reset = api
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Json::<()>(ops(&rv, json!([{}]))?),
        )
        .await?;
    assert!(
        managers_of(&reset.metadata).is_empty(),
        "{:?}",
        reset.metadata
    );
    assert_eq!(reset.metadata.generation, live.metadata.generation);
    assert_eq!(reset.spec, live.spec);
    // Nobody owns the fields now: a non-forced apply of another value by another manager wins.
    let taken = api
        .patch(
            "d",
            &PatchParams::apply("gitops"),
            &Patch::Apply(&body("300m")),
        )
        .await?;
    let cpu = taken.spec.and_then(|s| s.template.spec).and_then(|s| {
        s.containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("cpu").cloned())
    });
    assert_eq!(cpu.map(|q| q.0), Some("300m".to_string()));
    Ok(())
}
