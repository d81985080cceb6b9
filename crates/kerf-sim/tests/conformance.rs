//! Replays the recorded exchanges of a real v1.36 kube-apiserver (tests/conformance/) against
//! a running kerf-sim and compares status codes, Status reasons, causes and messages as the
//! corpus README prescribes (design D30).

use std::time::Duration;

use kerf_sim::sim::{Sim, SimConfig};
use kerf_sim::store::gvr;
use serde_json::{Value, json};

fn case(name: &str) -> Value {
    let path = format!(
        "{}/tests/conformance/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path)
        .unwrap_or_default()
        .replace("fake-node-1", "sim-node-1");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

async fn start() -> anyhow::Result<Sim> {
    let config = SimConfig {
        nodes: 2,
        node_cpu: "4".into(),
        node_memory: "8Gi".into(),
        kubelet_ready_delay: Duration::from_millis(50),
        ..SimConfig::default()
    };
    let sim = Sim::start(config).await?;
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "conf"}});
    let path = "/api/v1/namespaces?fieldManager=kubectl-create";
    send_json(&sim, "POST", path, &namespace).await?;
    Ok(sim)
}

/// Sends one request as curl did (User-Agent curl/7.88.1); returns status and parsed body
/// (a list of objects for watch streams).
async fn send(
    sim: &Sim,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &Value,
) -> anyhow::Result<(u16, Value)> {
    let bytes = match body {
        Value::Null => Vec::new(),
        Value::String(s) => s.clone().into_bytes(),
        other => serde_json::to_vec(other)?,
    };
    let mut b = kerf_testkit::curl(sim, method, path)?;
    if let Some(ct) = content_type {
        b = b.header("content-type", ct);
    }
    let resp = b.body(bytes).send().await?;
    let status = resp.status().as_u16();
    let text = resp.text().await?;
    let parsed = if path.contains("watch=1") {
        Value::Array(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect(),
        )
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Ok((status, parsed))
}

/// A GET without a body.
async fn get(sim: &Sim, path: &str) -> anyhow::Result<(u16, Value)> {
    send(sim, "GET", path, None, &Value::Null).await
}

/// Sends `body` as `application/json`.
async fn send_json(
    sim: &Sim,
    method: &str,
    path: &str,
    body: &Value,
) -> anyhow::Result<(u16, Value)> {
    send(sim, method, path, Some("application/json"), body).await
}

/// Sends a recorded request (`method`, `path`, `contentType`, `body`).
async fn send_recorded(sim: &Sim, r: &Value) -> anyhow::Result<(u16, Value)> {
    send(
        sim,
        r["method"].as_str().unwrap_or("GET"),
        r["path"].as_str().unwrap_or("/"),
        r["contentType"].as_str(),
        &r["body"],
    )
    .await
}

fn collection_path(obj: &Value) -> String {
    let api = obj["apiVersion"].as_str().unwrap_or("v1");
    let kind = obj["kind"].as_str().unwrap_or_default();
    let plural = match kind {
        "PodDisruptionBudget" => "poddisruptionbudgets".to_string(),
        "HorizontalPodAutoscaler" => "horizontalpodautoscalers".to_string(),
        k => format!("{}s", k.to_lowercase()),
    };
    let prefix = if api.contains('/') {
        format!("/apis/{api}")
    } else {
        format!("/api/{api}")
    };
    format!("{prefix}/namespaces/conf/{plural}")
}

/// Creates the setup objects as kubectl did (create, or client-side apply) and waits for
/// their pods to be Ready.
async fn set_up(sim: &Sim, c: &Value) -> anyhow::Result<()> {
    let applied = c["setup"]["description"]
        .as_str()
        .unwrap_or_default()
        .contains("kubectl apply");
    for obj in c["setup"]["objects"].as_array().into_iter().flatten() {
        let mut obj = obj.clone();
        let manager = if applied {
            let last = format!("{}\n", serde_json::to_string(&obj)?);
            obj["metadata"]["annotations"] =
                json!({"kubectl.kubernetes.io/last-applied-configuration": last});
            "kubectl-client-side-apply"
        } else {
            "kubectl-create"
        };
        let path = format!("{}?fieldManager={manager}", collection_path(&obj));
        let (code, body) = send_json(sim, "POST", &path, &obj).await?;
        anyhow::ensure!(code == 201, "setup create failed: {code} {body}");
    }
    for step in c["setup"]["steps"].as_array().into_iter().flatten() {
        let r = &step["request"];
        if r.is_object() {
            send_recorded(sim, r).await?;
        }
    }
    wait_settled(sim).await
}

/// Waits until every pod in `conf` is Ready and every Deployment has rolled out.
async fn wait_settled(sim: &Sim) -> anyhow::Result<()> {
    let store = &sim.context().store;
    for _ in 0..200 {
        let (pods, _) = store.list(&gvr::PODS, Some("conf"));
        let (deps, _) = store.list(&gvr::DEPLOYMENTS, Some("conf"));
        let pods_ready = pods.iter().all(|p| {
            p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        let deps_done = deps.iter().all(|d| {
            d["status"]["readyReplicas"] == d["spec"]["replicas"]
                && d["status"]["updatedReplicas"] == d["spec"]["replicas"]
                && d["status"]["replicas"] == d["spec"]["replicas"]
        });
        let want: i64 = deps
            .iter()
            .filter_map(|d| d["spec"]["replicas"].as_i64())
            .sum();
        if pods_ready && deps_done && pods.len() as i64 >= want {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("pods did not become Ready")
}

/// Compares a Status body as the corpus README says; `first_line` limits messages to their
/// first line (06, 07).
#[allow(clippy::panic)]
fn assert_status(expected: &Value, actual: &Value, first_line: bool) {
    for k in ["kind", "status", "reason", "code"] {
        assert_eq!(actual[k], expected[k], "{k}: {actual}");
    }
    let cut = |v: &Value| {
        let s = v.as_str().unwrap_or_default();
        if first_line {
            s.split('\n').next().unwrap_or_default().to_string()
        } else {
            s.to_string()
        }
    };
    assert_eq!(cut(&actual["message"]), cut(&expected["message"]));
    if first_line {
        assert!(
            actual["message"]
                .as_str()
                .unwrap_or_default()
                .contains("\n@@"),
            "a diff follows"
        );
    }
    for k in ["name", "kind", "group"] {
        assert_eq!(actual["details"][k], expected["details"][k], "details.{k}");
    }
    assert_eq!(
        actual.get("details").is_some(),
        expected.get("details").is_some(),
        "details presence: {actual}"
    );
    let causes = |v: &Value| -> Vec<(Value, Value, String)> {
        v["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| (c["reason"].clone(), c["field"].clone(), cut(&c["message"])))
            .collect()
    };
    assert_eq!(causes(actual), causes(expected));
}

/// The managedFields entries written by the API server's clients (not the controllers or
/// the kubelet), without their times.
fn client_entries(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| !matches!(e["manager"].as_str(), Some("fake-kubelet" | "kubelet" | "kube-controller-manager")))
        .map(|e| json!({"manager": e["manager"], "operation": e["operation"], "subresource": e["subresource"], "fieldsV1": e["fieldsV1"], "apiVersion": e["apiVersion"]}))
        .collect()
}

fn sorted(mut v: Vec<Value>) -> Vec<Value> {
    v.sort_by_key(|e| e.to_string());
    v
}

/// Runs the case's own request.
async fn replay(sim: &Sim, c: &Value) -> anyhow::Result<(u16, Value)> {
    send_recorded(sim, &c["request"]).await
}

/// A started sim with the case's setup done.
async fn started_with(c: &Value) -> anyhow::Result<Sim> {
    let sim = start().await?;
    set_up(&sim, c).await?;
    Ok(sim)
}

/// The case, its cluster once set up, and the object at `path` read before the request.
async fn case_and_object(name: &str, path: &str) -> anyhow::Result<(Value, Sim, Value)> {
    let c = case(name);
    let sim = started_with(&c).await?;
    let (_, obj) = get(&sim, path).await?;
    Ok((c, sim, obj))
}

/// PUTs `obj` to `path` and asserts the refusal `code` with the case's recorded Status.
async fn assert_put_refused(
    sim: &Sim,
    c: &Value,
    (path, obj): (&str, &Value),
    code: u16,
    first_line: bool,
) -> anyhow::Result<()> {
    let (got, body) = send_json(sim, "PUT", path, obj).await?;
    assert_eq!(got, code);
    assert_status(&c["response"]["body"], &body, first_line);
    Ok(())
}

/// Asserts the status code the case recorded.
fn assert_recorded_code(name: &str, c: &Value, code: u16, body: &Value) {
    assert_eq!(
        code,
        c["response"]["status"].as_u64().unwrap_or(0) as u16,
        "{name}: {body}"
    );
}

/// Asserts that `body` has the recorded body's values at `pointers` and the same client
/// managedFields entries.
fn assert_as_recorded(name: &str, body: &Value, expected: &Value, pointers: &[&str]) {
    for p in pointers {
        assert_eq!(body.pointer(p), expected.pointer(p), "{name}: {p}");
    }
    assert_eq!(
        sorted(client_entries(body)),
        sorted(client_entries(expected)),
        "{name}"
    );
}

/// The `type` of each event of a watch stream.
fn event_types(events: &Value) -> Vec<&str> {
    events
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["type"].as_str())
        .collect()
}

async fn run_status_case(name: &str, first_line: bool) -> anyhow::Result<(Sim, Value)> {
    let c = case(name);
    let sim = started_with(&c).await?;
    let (code, body) = replay(&sim, &c).await?;
    assert_recorded_code(name, &c, code, &body);
    if body["kind"] == "Status" {
        assert_status(&c["response"]["body"], &body, first_line);
    }
    Ok((sim, body))
}

#[tokio::test]
async fn resize_within_allocatable_bumps_generation_and_records_a_resize_manager()
-> anyhow::Result<()> {
    let name = "01-resize-accepted";
    let (_sim, body) = run_status_case(name, false).await?;
    let pointers = ["/metadata/generation", "/spec/containers/0/resources"];
    assert_as_recorded(name, &body, &case(name)["response"]["body"], &pointers);
    Ok(())
}

/// One test per case whose answer only has to match the recorded code and Status.
macro_rules! status_case_tests {
    ($($test:ident: $case:literal, first_line: $first_line:literal;)*) => {$(
        #[tokio::test]
        async fn $test() -> anyhow::Result<()> {
            run_status_case($case, $first_line).await.map(|_| ())
        }
    )*};
}

status_case_tests! {
    resize_beyond_node_allocatable_is_forbidden_with_node_capacity_cause:
        "02-resize-beyond-allocatable", first_line: false;
    resize_changing_qos_class_is_invalid: "03-resize-qos-change", first_line: false;
    resize_removing_a_limit_is_invalid: "04-resize-remove-limit", first_line: false;
    plain_pod_patch_of_resources_is_forbidden: "06-pod-patch-resources", first_line: true;
}

#[tokio::test]
async fn resize_silently_drops_image_change_but_records_field_ownership() -> anyhow::Result<()> {
    let name = "05-resize-change-image";
    let (_sim, body) = run_status_case(name, false).await?;
    let pointers = ["/spec/containers/0/image", "/metadata/generation"];
    assert_as_recorded(name, &body, &case(name)["response"]["body"], &pointers);
    Ok(())
}

#[tokio::test]
async fn plain_pod_put_of_resources_is_forbidden() -> anyhow::Result<()> {
    let path = "/api/v1/namespaces/conf/pods/plain-put";
    let (c, sim, mut pod) = case_and_object("07-pod-put-resources", path).await?;
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("150m");
    assert_put_refused(&sim, &c, (path, &pod), 422, true).await
}

#[tokio::test]
async fn ssa_conflict_then_force_takes_ownership_then_release_by_hand_over() -> anyhow::Result<()> {
    let conflict = case("08-ssa-conflict");
    let sim = started_with(&conflict).await?;
    let (code, body) = replay(&sim, &conflict).await?;
    assert_eq!(code, 409);
    assert_status(&conflict["response"]["body"], &body, false);
    for name in [
        "08-ssa-force",
        "09-release-1-co-own",
        "09-release-2-kerf-empty",
    ] {
        let c = case(name);
        let (code, body) = replay(&sim, &c).await?;
        assert_eq!(code, 200, "{name}: {body}");
        assert_as_recorded(name, &body, &c["response"]["body"], &["/spec/template"]);
        wait_settled(&sim).await?;
    }
    Ok(())
}

#[tokio::test]
async fn ssa_release_by_sole_owner_removes_the_field() -> anyhow::Result<()> {
    let name = "10-naive-release";
    let c = case(name);
    let sim = started_with(&c).await?;
    let (code, body) = replay(&sim, &c).await?;
    assert_eq!(code, 200, "{body}");
    let pointers = ["/spec/template", "/metadata/generation"];
    assert_as_recorded(name, &body, &c["response"]["body"], &pointers);
    Ok(())
}

async fn pod_of(sim: &Sim, prefix: &str) -> anyhow::Result<String> {
    let (pods, _) = sim.context().store.list(&gvr::PODS, Some("conf"));
    pods.iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .find(|n| n.starts_with(prefix))
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no pod {prefix}*"))
}

#[tokio::test]
async fn eviction_blocked_by_pdb_is_429_and_allowed_eviction_is_201() -> anyhow::Result<()> {
    let sim = started_with(&case("11-eviction-pdb-blocked")).await?;
    for (name, prefix) in [
        ("11-eviction-pdb-blocked", "guarded-"),
        ("11-eviction-allowed", "spare-"),
    ] {
        let c = case(name);
        let pod = pod_of(&sim, prefix).await?;
        let path = format!("/api/v1/namespaces/conf/pods/{pod}/eviction");
        let body = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": "conf"}});
        let (code, got) = send_json(&sim, "POST", &path, &body).await?;
        assert_recorded_code(name, &c, code, &got);
        if code == 201 {
            assert_eq!(got, c["response"]["body"]);
        } else {
            assert_status(&c["response"]["body"], &got, false);
        }
    }
    Ok(())
}

#[tokio::test]
async fn watch_from_rv_1_replays_history_on_a_young_cluster() -> anyhow::Result<()> {
    let sim = start().await?;
    set_up(&sim, &case("01-resize-accepted")).await?;
    let (code, events) = get(&sim, "/api/v1/namespaces/conf/pods?watch=1&resourceVersion=1&fieldSelector=metadata.name%3Dresize-ok&timeoutSeconds=1").await?;
    assert_eq!(code, 200);
    let types = event_types(&events);
    assert_eq!(types.first(), Some(&"ADDED"));
    assert!(types[1..].iter().all(|t| *t == "MODIFIED"), "{types:?}");
    Ok(())
}

#[tokio::test]
async fn watch_older_than_history_is_one_error_event_expired() -> anyhow::Result<()> {
    let c = case("12-watch-too-old");
    let sim = start().await?;
    set_up(&sim, &case("01-resize-accepted")).await?;
    sim.context().store.set_history_limit(1);
    let (code, events) = replay(&sim, &c).await?;
    assert_eq!(code, 200);
    let events = events.as_array().cloned().unwrap_or_default();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["type"], "ERROR");
    let expected = &c["response"]["body"][0]["object"];
    let (got, want) = (&events[0]["object"], expected);
    for k in ["kind", "status", "reason", "code"] {
        assert_eq!(got[k], want[k]);
    }
    assert!(
        got["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("too old resource version: 1 (")
    );
    Ok(())
}

#[tokio::test]
async fn list_with_exact_rv_older_than_history_is_410_expired() -> anyhow::Result<()> {
    let c = case("12-list-exact-rv-compacted");
    let sim = start().await?;
    sim.context().store.set_history_limit(1);
    let (code, body) = replay(&sim, &c).await?;
    assert_eq!(code, 410);
    assert_status(&c["response"]["body"], &body, false);
    Ok(())
}

async fn list_rv(sim: &Sim) -> anyhow::Result<String> {
    let (_, list) = get(sim, "/api/v1/namespaces/conf/pods").await?;
    Ok(list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

#[tokio::test]
async fn idle_watch_gets_no_bookmark_and_a_moving_cluster_gets_one_before_timeout()
-> anyhow::Result<()> {
    let sim = Sim::start(SimConfig {
        run_controllers: false,
        ..SimConfig::default()
    })
    .await?;
    let namespace = json!({"metadata": {"name": "conf"}});
    send_json(&sim, "POST", "/api/v1/namespaces", &namespace).await?;
    let rv = list_rv(&sim).await?;
    let (code, idle) = get(&sim, &format!("/api/v1/namespaces/conf/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3")).await?;
    assert_eq!((code, idle), (200, json!([])));
    let rv = list_rv(&sim).await?;
    let store = sim.context().store.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let pod = json!({"metadata": {"name": "bookmark-trigger", "namespace": "default"}, "spec": {"containers": [{"name": "a", "image": "x:1"}]}});
        let _ = store.create(&gvr::PODS, pod, "kubectl-run");
    });
    let (code, events) = get(&sim, &format!("/api/v1/namespaces/conf/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3")).await?;
    assert_eq!(code, 200);
    let expected = case("12-watch-bookmark");
    let want = &expected["response"]["body"][0];
    let got = &events[0];
    assert_eq!(events.as_array().map(Vec::len), Some(1));
    assert_eq!(got["type"], want["type"]);
    assert_eq!(got["object"]["spec"], want["object"]["spec"]);
    assert_eq!(got["object"]["kind"], want["object"]["kind"]);
    Ok(())
}

#[tokio::test]
async fn streaming_list_sends_added_then_initial_events_end_bookmark() -> anyhow::Result<()> {
    let c = case("12-watch-list-initial-events");
    let sim = start().await?;
    let cm = json!({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "x"}});
    send_json(&sim, "POST", "/api/v1/namespaces/conf/configmaps", &cm).await?;
    let path = c["request"]["path"]
        .as_str()
        .unwrap_or_default()
        .replace("timeoutSeconds=3", "timeoutSeconds=1");
    let (code, events) = get(&sim, &path).await?;
    assert_eq!(code, 200);
    let types = event_types(&events);
    assert_eq!(types, vec!["ADDED", "BOOKMARK"]);
    assert_eq!(
        events[1]["object"]["metadata"]["annotations"],
        json!({"k8s.io/initial-events-end": "true"})
    );
    Ok(())
}

#[tokio::test]
async fn put_with_stale_resource_version_is_409_conflict() -> anyhow::Result<()> {
    let path = "/api/v1/namespaces/conf/configmaps/occ";
    let (c, sim, mut cm) = case_and_object("13-put-stale-resourceversion", path).await?;
    let merge = Some("application/merge-patch+json");
    send(&sim, "PATCH", path, merge, &json!({"data": {"k": "v2"}})).await?;
    cm["data"]["k"] = json!("v3");
    assert_put_refused(&sim, &c, (path, &cm), 409, false).await
}

#[tokio::test]
async fn generic_errors_404_400_415_match_the_server() -> anyhow::Result<()> {
    let sim = start().await?;
    let cm = json!({"metadata": {"name": "occ"}, "data": {"k": "v1"}});
    send_json(&sim, "POST", "/api/v1/namespaces/conf/configmaps", &cm).await?;
    for name in [
        "14-get-missing-404",
        "14-list-bad-labelselector-400",
        "14-patch-unsupported-content-type-415",
        "14-post-malformed-json-400",
    ] {
        let c = case(name);
        let (code, body) = replay(&sim, &c).await?;
        assert_recorded_code(name, &c, code, &body);
        assert_status(&c["response"]["body"], &body, false);
    }
    Ok(())
}

#[tokio::test]
async fn resize_of_memory_with_restart_policy_is_accepted() -> anyhow::Result<()> {
    let (_sim, body) = run_status_case("15-resize-restart-container", false).await?;
    assert_eq!(
        body["spec"]["containers"][0]["resources"]["limits"]["memory"],
        "320Mi"
    );
    Ok(())
}

#[tokio::test]
async fn hpa_json_patch_replaces_the_target() -> anyhow::Result<()> {
    let c = case("16-hpa-json-patch");
    let (_sim, body) = run_status_case("16-hpa-json-patch", false).await?;
    assert_eq!(body["spec"], c["response"]["body"]["spec"]);
    Ok(())
}

#[tokio::test]
async fn discovery_lists_pod_subresources_and_version_reports_the_emulated_minor()
-> anyhow::Result<()> {
    let sim = start().await?;
    let c = case("17-discovery-api-v1");
    let (code, body) = replay(&sim, &c).await?;
    assert_eq!(code, 200);
    let expected: Vec<Value> = c["response"]["body"]["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for want in expected {
        let got = body["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["name"] == want["name"])
            .cloned()
            .unwrap_or(Value::Null);
        let mut want = want.clone();
        if let (Some(w), Some(g)) = (want.as_object_mut(), got.as_object()) {
            w.remove("storageVersionHash");
            assert_eq!(
                Value::Object(w.clone()),
                Value::Object(
                    g.iter()
                        .filter(|(k, _)| *k != "storageVersionHash")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                )
            );
        } else {
            panic!("missing {want}");
        }
    }
    let v = case("17-version");
    let (_, body) = replay(&sim, &v).await?;
    for k in [
        "major",
        "minor",
        "emulationMajor",
        "emulationMinor",
        "minCompatibilityMajor",
        "minCompatibilityMinor",
        "compiler",
    ] {
        assert_eq!(body[k], v["response"]["body"][k], "{k}");
    }
    Ok(())
}
