//! Throttling through PromQL against a real Prometheus that scrapes kerf-sim's cAdvisor
//! counters on the control listener (rule RB-13). Skipped, with a note, where no
//! `prometheus` binary is installed.

mod health_support;
mod prometheus_support;

use std::time::Duration as StdDuration;

use chrono::{Duration, Utc};
use health_support::*;
use kerf_agent::executor::resize::resize_pod;
use kerf_agent::health::{HealthStep, ThrottlingSource, WatchInput, Watcher};
use kerf_api::Resource;
use kerf_decide::health::BreachReason;
use kerf_sim::kubelet::{inject, serve_control};
use prometheus_support::Prometheus;
use serde_json::json;

/// Starts Prometheus scraping `target` (host:port) at `/metrics/cadvisor` every second.
async fn start_prometheus(bin: &std::path::Path, target: &str) -> anyhow::Result<Prometheus> {
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: sim\n    honor_labels: true\n    metrics_path: /metrics/cadvisor\n    static_configs:\n      - targets: ['{target}']\n"
    );
    prometheus_support::start(bin, &config, &[], tempfile::tempdir()?).await
}

// rule: RB-08, RB-12, RB-13, RB-15
#[tokio::test]
async fn rb_13_throttling_from_promql_against_a_real_prometheus() -> anyhow::Result<()> {
    let Some(bin) = prometheus_support::binary("prometheus") else {
        anyhow::bail!(
            "prometheus is needed on PATH for RB-13 against a real Prometheus: install it \
             (`apt-get install prometheus`, as .ci/run does)"
        );
    };
    let sim = kerf_testkit::sim().await?;
    let client = sim.client();
    let control = serve_control(sim.context(), "127.0.0.1:0".parse()?).await?;
    let prom = start_prometheus(&bin, &control.to_string()).await?;
    let _wl = deployment(
        &client,
        "prom",
        2,
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}}),
    )
    .await?;
    let ps = running_pods(&client, "prom", 2, || {}).await?;
    let t0 = Utc::now();
    let change = cpu_change(t0);
    let to = app_to(&change);
    for p in &ps {
        resize_pod(client.clone(), NS, &p.name, &to, &[]).await?;
        inject(sim.context(), throttle(&p.name, 0.5))?;
    }
    let mut status = watching(change, t0, Some(t0 + Duration::minutes(30)));
    let source =
        ThrottlingSource::Prometheus(prometheus_http_query::Client::try_from(prom.url.as_str())?);
    let w = Watcher::with_source(source, Duration::seconds(1));
    let mut seen_watching = false;
    for _ in 0..90 {
        let input = WatchInput {
            namespace: NS,
            pods: &ps,
            thresholds: thresholds(Duration::seconds(1)),
            watch_duration: Duration::minutes(30),
            rollout_complete: true,
            now: Utc::now(),
        };
        match w.step(&client, &mut status, &input).await {
            HealthStep::Breach(b) => {
                assert!(seen_watching, "a breach before the window held 300 periods");
                assert_eq!(b.reason, BreachReason::Throttling);
                assert_eq!(b.restore, vec![Resource::Cpu]);
                let ratio: f64 = b.details["throttlingRatio"].parse()?;
                assert!((0.4..=0.6).contains(&ratio), "ratio {ratio}");
                return Ok(());
            }
            HealthStep::Watching { .. } => seen_watching = true,
            other => panic!("unexpected {other:?}"),
        }
        tokio::time::sleep(StdDuration::from_secs(1)).await;
    }
    panic!("no throttling breach from Prometheus within 90 s")
}
