//! LIST with `limit` and `continue` against kerf-sim over HTTPS: pages in the API server's
//! key order (namespace, then name), key-based continue tokens that survive writes between
//! pages, the first page's resourceVersion on every page, remainingItemCount (unfiltered
//! lists only), the 410 of a continue token older than the kept history, and large lists
//! and initial watch events written in chunks.

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kerf_sim::sim::Sim;
use kerf_sim::store::gvr;
use kerf_testkit::api_sim;
use kube::api::{Api, ListParams, ObjectList};
use kube::runtime::watcher::{self, Event};
use serde_json::json;

/// Creates namespace `ns` (if needed) and a ConfigMap `name` in it, with `labels`.
fn config_map(sim: &Sim, ns: &str, name: &str, labels: serde_json::Value) -> anyhow::Result<()> {
    let store = &sim.context().store;
    if store.get(&gvr::NAMESPACES, None, ns).is_none() {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        store.create(&gvr::NAMESPACES, obj, "test")?;
    }
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": {"k": "v"}});
    store.create(&gvr::CONFIGMAPS, obj, "test")?;
    Ok(())
}

fn keys(list: &ObjectList<ConfigMap>) -> Vec<String> {
    list.items
        .iter()
        .map(|c| {
            format!(
                "{}/{}",
                c.metadata.namespace.as_deref().unwrap_or_default(),
                c.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

fn page(limit: u32, token: Option<&str>) -> ListParams {
    let lp = ListParams::default().limit(limit);
    match token {
        Some(t) => lp.continue_token(t),
        None => lp,
    }
}

/// A sim holding `n` ConfigMaps `{prefix}-000`… in `default`, each with 4 KiB of `fill`.
async fn sim_with_blobs(prefix: &str, n: usize, fill: &str) -> anyhow::Result<Sim> {
    let sim = api_sim().await?;
    let blob = fill.repeat(4096);
    for i in 0..n {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{prefix}-{i:03}"), "namespace": "default"},
            "data": {"blob": blob}});
        sim.context().store.create(&gvr::CONFIGMAPS, obj, "test")?;
    }
    Ok(sim)
}

#[tokio::test]
async fn pages_follow_key_order_and_keep_the_first_pages_resource_version() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    for (ns, name) in [("b", "x"), ("a", "z"), ("a-b", "m"), ("a", "y"), ("b", "w")] {
        config_map(&sim, ns, name, json!({"set": "paging"}))?;
    }
    let api: Api<ConfigMap> = Api::all(sim.client());
    let first = api.list(&page(2, None)).await?;
    assert_eq!(keys(&first), ["a-b/m", "a/y"]);
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    let rv = first.metadata.resource_version.clone();
    // A write between pages: a ConfigMap before the continue key is not listed, one after
    // it is, and nothing is skipped or repeated.
    config_map(&sim, "a", "a0", json!({}))?;
    config_map(&sim, "b", "v", json!({}))?;
    let second = api
        .list(&page(2, first.metadata.continue_.as_deref()))
        .await?;
    assert_eq!(keys(&second), ["a/z", "b/v"]);
    assert_eq!(second.metadata.resource_version, rv);
    assert_eq!(second.metadata.remaining_item_count, Some(2));
    let last = api
        .list(&page(2, second.metadata.continue_.as_deref()))
        .await?;
    assert_eq!(keys(&last), ["b/w", "b/x"]);
    assert_eq!(last.metadata.continue_, None);
    assert_eq!(last.metadata.remaining_item_count, None);
    assert_eq!(last.metadata.resource_version, rv);
    Ok(())
}

#[tokio::test]
async fn pages_of_one_namespace_with_a_label_selector_report_no_remaining_count()
-> anyhow::Result<()> {
    let sim = api_sim().await?;
    for (name, tier) in [("c1", "web"), ("c2", "db"), ("c3", "web"), ("c4", "web")] {
        config_map(&sim, "shop", name, json!({"tier": tier}))?;
    }
    config_map(&sim, "shop-2", "c0", json!({"tier": "web"}))?;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "shop");
    let lp = |token: Option<&str>| page(1, token).labels("tier=web");
    let first = api.list(&lp(None)).await?;
    assert_eq!(keys(&first), ["shop/c1"]);
    // The real API server leaves the count out for a filtered list (it would be inexact).
    assert!(first.metadata.continue_.is_some());
    assert_eq!(first.metadata.remaining_item_count, None);
    let second = api.list(&lp(first.metadata.continue_.as_deref())).await?;
    assert_eq!(keys(&second), ["shop/c3"]);
    let third = api.list(&lp(second.metadata.continue_.as_deref())).await?;
    assert_eq!(keys(&third), ["shop/c4"]);
    assert_eq!(third.metadata.continue_, None);
    Ok(())
}

#[tokio::test]
async fn a_continue_token_older_than_the_history_is_410_with_a_token_to_go_on() -> anyhow::Result<()>
{
    let sim = api_sim().await?;
    for name in ["a", "b", "c"] {
        config_map(&sim, "default", name, json!({}))?;
    }
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let first = api.list(&page(1, None)).await?;
    let token = first.metadata.continue_.clone().unwrap_or_default();
    sim.context().store.set_history_limit(1);
    config_map(&sim, "default", "d", json!({}))?;
    config_map(&sim, "default", "e", json!({}))?;
    let err = api.list(&page(1, Some(&token))).await;
    let Err(kube::Error::Api(status)) = err else {
        anyhow::bail!("expected 410, got {err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert!(
        status.message.starts_with(
            "The provided continue parameter is too old to display a consistent list result."
        ),
        "{}",
        status.message
    );
    let inconsistent = status
        .metadata
        .and_then(|m| m.continue_)
        .unwrap_or_default();
    let rest = api.list(&page(10, Some(&inconsistent))).await?;
    assert_eq!(
        keys(&rest),
        ["default/b", "default/c", "default/d", "default/e"]
    );
    assert_eq!(
        rest.metadata.resource_version,
        Some(sim.context().store.resource_version().to_string())
    );
    Ok(())
}

#[tokio::test]
async fn a_malformed_continue_token_is_400() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let err = api.list(&page(1, Some("bm90LWpzb24"))).await;
    let Err(kube::Error::Api(status)) = err else {
        anyhow::bail!("expected 400, got {err:?}")
    };
    assert_eq!(status.code, 400);
    assert!(
        status.message.starts_with("continue key is not valid"),
        "{}",
        status.message
    );
    Ok(())
}

#[tokio::test]
async fn a_list_larger_than_a_chunk_is_the_same_json_as_one_list_value() -> anyhow::Result<()> {
    let sim = sim_with_blobs("big", 150, "x").await?;
    let store = &sim.context().store;
    let req = http::Request::get("/api/v1/namespaces/default/configmaps").body(Vec::new())?;
    let text = sim.client().request_text(req).await?;
    let (items, rv) = store.list(&gvr::CONFIGMAPS, Some("default"));
    let expected = json!({"kind": "ConfigMapList", "apiVersion": "v1",
        "metadata": {"resourceVersion": rv.to_string()}, "items": items});
    assert!(text.len() > 512 * 1024, "{} bytes", text.len());
    assert!(
        text == serde_json::to_string(&expected)?,
        "the bodies differ"
    );
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let list = api.list(&ListParams::default()).await?;
    assert_eq!(list.items.len(), 150);
    assert_eq!(list.items[149].metadata.name.as_deref(), Some("big-149"));
    Ok(())
}

#[tokio::test]
async fn initial_watch_events_larger_than_one_write_arrive_line_by_line() -> anyhow::Result<()> {
    let sim = sim_with_blobs("w", 100, "y").await?;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let config = watcher::Config::default().streaming_lists();
    let mut stream = Box::pin(watcher::watcher(api, config));
    let mut names = Vec::new();
    while let Some(ev) = stream.try_next().await? {
        match ev {
            Event::InitApply(cm) => names.push(cm.metadata.name.unwrap_or_default()),
            Event::InitDone => break,
            _ => {}
        }
    }
    let expected: Vec<String> = (0..100).map(|i| format!("w-{i:03}")).collect();
    assert_eq!(names, expected);
    Ok(())
}
