//! Late watch delivery (`SimConfig::watch_delay`, `kerf-sim serve --watch-delay`): each
//! change reaches a watch no sooner than the delay's start, and in the order it happened.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kerf_sim::sim::{Sim, SimConfig};
use kerf_testkit::spawn_with_stdout;
use kube::api::{PostParams, WatchEvent};
use kube::{Api, Client};
use serde_json::json;

fn config_map(name: &str) -> anyhow::Result<ConfigMap> {
    Ok(serde_json::from_value(json!({"metadata": {"name": name}}))?)
}

/// Opens a watch of the default namespace's ConfigMaps, creates `names` one after the
/// other, and returns the names in the order the watch delivered them, with the time from
/// the first create to the first delivery.
async fn watch_creates(client: Client, names: &[&str]) -> anyhow::Result<(Vec<String>, Duration)> {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut stream = kerf_testkit::watch_from_now(&api, 30).await?;
    let started = Instant::now();
    for n in names {
        api.create(&PostParams::default(), &config_map(n)?).await?;
    }
    let mut seen = Vec::new();
    let mut first = None;
    while seen.len() < names.len() {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
            .await??
            .ok_or_else(|| anyhow::anyhow!("watch ended after {seen:?}"))?;
        if let WatchEvent::Added(cm) = ev {
            first.get_or_insert_with(|| started.elapsed());
            seen.push(cm.metadata.name.unwrap_or_default());
        }
    }
    Ok((seen, first.unwrap_or_default()))
}

fn sim_config(delay: std::ops::Range<Duration>) -> SimConfig {
    SimConfig {
        run_controllers: false,
        watch_delay: delay,
        ..SimConfig::default()
    }
}

#[tokio::test]
async fn a_watch_gets_a_change_no_sooner_than_the_delay() -> anyhow::Result<()> {
    let delay = Duration::from_millis(400);
    let sim = Sim::start(sim_config(delay..delay)).await?;
    let (seen, first) = watch_creates(sim.client(), &["late"]).await?;
    assert_eq!(seen, ["late"]);
    assert!(
        first >= delay,
        "delivered after {first:?}, the delay is {delay:?}"
    );
    Ok(())
}

#[tokio::test]
async fn jittered_delivery_keeps_the_order_of_changes() -> anyhow::Result<()> {
    let sim = Sim::start(sim_config(
        Duration::from_millis(10)..Duration::from_millis(200),
    ))
    .await?;
    let names: Vec<String> = (0..12).map(|i| format!("cm-{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (seen, first) = watch_creates(sim.client(), &refs).await?;
    assert_eq!(seen, names, "changes overtook each other");
    assert!(
        first >= Duration::from_millis(10),
        "delivered after {first:?}"
    );
    Ok(())
}

#[tokio::test]
async fn serve_takes_a_watch_delay_range() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    let (served, stdout) = spawn_with_stdout(
        Command::new(env!("CARGO_BIN_EXE_kerf-sim"))
            .args(["serve", "--watch-delay", "300ms..300ms", "--kubeconfig"])
            .arg(&kubeconfig)
            .stderr(Stdio::null()),
    )?;
    let mut lines = BufReader::new(stdout).lines();
    let first_line = lines.next().transpose()?;
    // Keeps reading, so that the server's later lines never meet a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let result = async {
        anyhow::ensure!(
            first_line
                .as_deref()
                .is_some_and(|l| l.starts_with("kerf-sim serving")),
            "kerf-sim serve printed {first_line:?}"
        );
        let client = kerf_sim::sim::client_for(&kubeconfig).await?;
        watch_creates(client, &["served"]).await
    }
    .await;
    drop(served);
    let (seen, first) = result?;
    assert_eq!(seen, ["served"]);
    assert!(
        first >= Duration::from_millis(300),
        "delivered after {first:?}"
    );

    let bad = Command::new(env!("CARGO_BIN_EXE_kerf-sim"))
        .args(["serve", "--watch-delay", "400ms..50ms", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()?;
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("the end of the range is before its start"),
        "{err}"
    );
    Ok(())
}
