//! Server-side printing as kubectl asks for it (`Accept: ...;as=Table`): the built-in
//! kinds' columns in the real server's order and priorities, and table watches whose first
//! event alone carries the column definitions.

use kerf_sim::store::gvr;
use kerf_testkit::api_sim;
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

fn table_get(path: &str) -> anyhow::Result<http::Request<Vec<u8>>> {
    Ok(http::Request::get(path)
        .header("accept", TABLE)
        .body(Vec::new())?)
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}})
}

fn names(table: &Value) -> Vec<(String, i64)> {
    table["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                c["priority"].as_i64().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn pod_and_node_tables_have_the_real_columns_in_order() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    sim.context().store.create(&gvr::PODS, pod("a"), "test")?;
    let text = sim
        .client()
        .request_text(table_get("/api/v1/namespaces/default/pods")?)
        .await?;
    let table: Value = serde_json::from_str(&text)?;
    let cols = names(&table);
    let shown: Vec<&str> = cols
        .iter()
        .filter(|(_, p)| *p == 0)
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(shown, ["Name", "Ready", "Status", "Restarts", "Age"]);
    assert_eq!(cols[5], ("IP".to_string(), 1));
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[0], "a");
    assert_eq!(cells[5], "<none>", "no pod IP yet");
    assert_eq!(cells[6], "<none>", "not scheduled yet");
    let text = sim
        .client()
        .request_text(table_get("/api/v1/nodes")?)
        .await?;
    let nodes: Value = serde_json::from_str(&text)?;
    let shown: Vec<String> = names(&nodes)
        .into_iter()
        .filter(|(_, p)| *p == 0)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(shown, ["Name", "Status", "Roles", "Age", "Version"]);
    Ok(())
}

#[tokio::test]
async fn a_table_watch_sends_column_definitions_with_the_first_event_only() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let store = sim.context().store.clone();
    store.create(&gvr::PODS, pod("a"), "test")?;
    let writer = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let _ = store.create(&gvr::PODS, pod("b"), "test");
        let _ = store.delete(&gvr::PODS, Some("default"), "a");
    });
    let text = sim
        .client()
        .request_text(table_get(
            "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1",
        )?)
        .await?;
    writer.await?;
    let events: Vec<Value> = text
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds, ["ADDED", "ADDED", "DELETED"]);
    assert!(events.iter().all(|e| e["object"]["kind"] == "Table"));
    assert_eq!(names(&events[0]["object"]).len(), 9);
    for e in &events[1..] {
        assert!(e["object"]["columnDefinitions"].is_null(), "{e}");
        assert_eq!(e["object"]["rows"].as_array().map(Vec::len), Some(1));
    }
    Ok(())
}
