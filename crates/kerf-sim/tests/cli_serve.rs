//! The `kerf-sim` binary: `serve` prints the API server, control listener and dev hub
//! addresses; `fault` injects faults through the control listener.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kerf_testkit::{KillOnDrop, spawn_with_stdout};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

mod support;

const BIN: &str = env!("CARGO_BIN_EXE_kerf-sim");

/// Starts `kerf-sim serve` with `extra` flags; returns the child and its first `lines`
/// lines of output.
fn serve(
    kubeconfig: &std::path::Path,
    extra: &[&str],
    lines: usize,
) -> anyhow::Result<(KillOnDrop, Vec<String>)> {
    // The served cluster is stopped when the test ends, passing or failing.
    let (served, stdout) = spawn_with_stdout(
        Command::new(BIN)
            .arg("serve")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(extra)
            .stderr(Stdio::null()),
    )?;
    let out: Vec<String> = BufReader::new(stdout)
        .lines()
        .take(lines)
        .collect::<Result<_, _>>()?;
    Ok((served, out))
}

fn after<'a>(lines: &'a [String], prefix: &str) -> anyhow::Result<&'a str> {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(prefix))
        .map(|r| r.split_whitespace().next().unwrap_or_default())
        .ok_or_else(|| anyhow::anyhow!("no line starting {prefix:?} in {lines:?}"))
}

fn fault(control: &str, pod: &str, args: &[&str]) -> anyhow::Result<(bool, String)> {
    let out = Command::new(BIN)
        .args([
            "fault",
            "--control",
            control,
            "--namespace",
            "default",
            "--pod",
            pod,
            "--container",
            "app",
        ])
        .args(args)
        .output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

async fn wait_pod(api: &Api<Pod>, f: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
    for _ in 0..200 {
        let p = serde_json::to_value(api.get("w").await?)?;
        if f(&p) {
            return Ok(p);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    anyhow::bail!("pod w never reached the condition")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_prints_its_listeners_and_fault_injects_through_the_control_listener() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (_served, lines) = serve(&kubeconfig, &["--nodes", "1"], 2).unwrap();
    assert!(
        lines[0].starts_with("kerf-sim serving https://127.0.0.1:"),
        "{lines:?}"
    );
    let control = format!(
        "http://{}",
        after(&lines, "control listener http://").unwrap()
    );

    let client = kerf_sim::sim::client_for(&kubeconfig).await.unwrap();
    let api: Api<Pod> = Api::namespaced(client, "default");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w"},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}});
    api.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap();
    wait_pod(&api, |p| p["status"]["phase"] == "Running")
        .await
        .unwrap();

    let (ok, err) = fault(&control, "w", &["oom-kill"]).unwrap();
    assert!(ok, "{err}");
    let p = wait_pod(&api, |p| {
        p["status"]["containerStatuses"][0]["restartCount"] == 1
    })
    .await
    .unwrap();
    assert_eq!(
        p["status"]["containerStatuses"][0]["lastState"]["terminated"]["reason"],
        "OOMKilled"
    );
    let (ok, err) = fault(&control, "w", &["throttle", "--ratio", "0.5"]).unwrap();
    assert!(ok, "{err}");
    let (ok, _) = fault(&control, "w", &["throttle"]).unwrap();
    assert!(!ok, "throttle needs --ratio");
    let (ok, err) = fault(&control, "nope", &["restart"]).unwrap();
    assert!(!ok && err.contains("404"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_a_hub_file_serves_the_dev_hub() {
    let dir = tempfile::tempdir().unwrap();
    let hub_file = support::hub_file(dir.path(), "").unwrap();
    let hub_arg = hub_file.to_string_lossy().into_owned();
    let (_served, lines) = serve(
        &dir.path().join("kubeconfig"),
        &["--nodes", "1", "--hub-file", &hub_arg, "--hub-token", "tok"],
        3,
    )
    .unwrap();
    let hub = after(&lines, "dev hub ").unwrap();
    assert!(hub.starts_with("http://127.0.0.1:"), "{lines:?}");
    let list = support::json_body(
        reqwest::Client::new()
            .get(format!("{hub}/v1/clusters/dev/recommendations"))
            .bearer_auth("tok"),
    )
    .await
    .unwrap();
    assert_eq!(list["recommendations"][0]["recommendationID"], "r-1");
}
