//! Injected faults and cAdvisor counters on a manual sim clock: an OOM kill and a restart
//! show in the pod status, throttling shows in the CFS counters, both through the Rust API
//! and the plain-HTTP control listener.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kerf_sim::clock::Clock;
use kerf_sim::kubelet::{Fault, inject, render_cadvisor, serve_control};
use kerf_sim::sim::{Sim, SimConfig};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 request with `Connection: close`; returns (status line, body).
async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> anyhow::Result<(String, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    Ok((
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    ))
}

/// The value of a counter sample line starting with `prefix` (chunked bodies included).
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}

async fn wait_pod(api: &Api<Pod>, name: &str, f: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
    for _ in 0..200 {
        let p = serde_json::to_value(api.get(name).await?)?;
        if f(&p) {
            return Ok(p);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    anyhow::bail!("pod {name} never reached the condition")
}

async fn running_pod(sim: &Sim, clock: &Clock) -> anyhow::Result<Api<Pod>> {
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w", "namespace": "default"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "sim-node-1"},
                 "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                     "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}]}});
    api.create(&PostParams::default(), &serde_json::from_value(pod)?)
        .await?;
    wait_pod(&api, "w", |p| p["spec"]["nodeName"].is_string()).await?;
    clock.advance(Duration::from_secs(2));
    wait_pod(&api, "w", |p| p["status"]["phase"] == "Running").await?;
    Ok(api)
}

fn manual_config(clock: &Clock) -> SimConfig {
    SimConfig {
        clock: clock.clone(),
        kubelet_ready_delay: Duration::from_secs(1),
        ..SimConfig::default()
    }
}

#[tokio::test]
async fn oom_kill_and_restart_faults_show_in_pod_status() {
    let clock = Clock::manual(chrono::Utc::now());
    let sim = Sim::start(manual_config(&clock)).await.unwrap();
    let api = running_pod(&sim, &clock).await.unwrap();

    let oom = Fault::OomKill {
        namespace: "default".into(),
        pod: "w".into(),
        container: "app".into(),
    };
    inject(sim.context(), oom).unwrap();
    let p = serde_json::to_value(api.get("w").await.unwrap()).unwrap();
    let c = &p["status"]["containerStatuses"][0];
    assert_eq!(c["restartCount"], 1);
    assert_eq!(c["lastState"]["terminated"]["reason"], "OOMKilled");
    assert_eq!(c["lastState"]["terminated"]["exitCode"], 137);
    assert!(c["state"]["running"].is_object());

    let addr = serve_control(sim.context(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let body = r#"{"kind":"Restart","namespace":"default","pod":"w","container":"app"}"#;
    let (status, _) = http(addr, "POST", "/sim/faults", body).await.unwrap();
    assert!(status.contains("204"), "{status}");
    let p = serde_json::to_value(api.get("w").await.unwrap()).unwrap();
    let c = &p["status"]["containerStatuses"][0];
    assert_eq!(c["restartCount"], 2);
    assert_eq!(c["lastState"]["terminated"]["reason"], "Error");

    let missing = r#"{"kind":"OomKill","namespace":"default","pod":"nope","container":"app"}"#;
    let (status, _) = http(addr, "POST", "/sim/faults", missing).await.unwrap();
    assert!(status.contains("404"), "{status}");
}

#[tokio::test]
async fn cadvisor_counters_rise_with_sim_time_and_throttling() {
    let clock = Clock::manual(chrono::Utc::now());
    let sim = Sim::start(manual_config(&clock)).await.unwrap();
    running_pod(&sim, &clock).await.unwrap();
    let addr = serve_control(sim.context(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let body =
        r#"{"kind":"Throttle","namespace":"default","pod":"w","container":"app","ratio":0.25}"#;
    let (status, _) = http(addr, "POST", "/sim/faults", body).await.unwrap();
    assert!(status.contains("204"), "{status}");

    let periods =
        "container_cpu_cfs_periods_total{container=\"app\",namespace=\"default\",pod=\"w\"}";
    let throttled = "container_cpu_cfs_throttled_periods_total{container=\"app\",namespace=\"default\",pod=\"w\"}";
    let before = render_cadvisor(sim.context(), Some("sim-node-1"));
    let (p0, t0) = (
        sample(&before, periods).unwrap(),
        sample(&before, throttled).unwrap(),
    );
    clock.advance(Duration::from_secs(60));
    let (status, after) = http(addr, "GET", "/metrics/cadvisor?node=sim-node-1", "")
        .await
        .unwrap();
    assert!(status.contains("200"), "{status}");
    assert!(after.contains("# TYPE container_cpu_cfs_periods_total counter"));
    let (p1, t1) = (
        sample(&after, periods).unwrap(),
        sample(&after, throttled).unwrap(),
    );
    assert!(
        (p1 - p0 - 600.0).abs() <= 1.0,
        "10 periods a second: {p0} -> {p1}"
    );
    assert!(
        (t1 - t0 - 150.0).abs() <= 1.0,
        "a quarter throttled: {t0} -> {t1}"
    );
    assert!(!render_cadvisor(sim.context(), Some("sim-node-2")).contains("pod=\"w\""));
}

#[tokio::test]
async fn node_proxy_serves_the_nodes_cadvisor_counters_through_the_api_server() {
    let clock = Clock::manual(chrono::Utc::now());
    let sim = Sim::start(manual_config(&clock)).await.unwrap();
    running_pod(&sim, &clock).await.unwrap();
    clock.advance(Duration::from_secs(10));
    let get = |node: &str| {
        http::Request::get(format!("/api/v1/nodes/{node}/proxy/metrics/cadvisor"))
            .body(Vec::new())
            .unwrap()
    };
    let text = sim.client().request_text(get("sim-node-1")).await.unwrap();
    let periods =
        "container_cpu_cfs_periods_total{container=\"app\",namespace=\"default\",pod=\"w\"}";
    assert!(sample(&text, periods).is_some_and(|p| p >= 100.0), "{text}");
    let other = sim.client().request_text(get("sim-node-2")).await.unwrap();
    assert!(other.contains("# TYPE container_cpu_cfs_periods_total counter"));
    assert!(!other.contains("pod=\"w\""));
    match sim.client().request_text(get("no-such-node")).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
            assert_eq!(s.message, "nodes \"no-such-node\" not found");
        }
        other => panic!("expected 404, got {other:?}"),
    }
}
