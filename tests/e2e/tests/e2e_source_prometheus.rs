//! e2e: the `prometheus` recommendation source without a hub (docs/sources.md,
//! docs/prometheus-source.md). A real Prometheus holds two days of usage of `web`'s
//! container `app` (100m of CPU and 150 MiB, written by the test and backfilled with
//! `promtool tsdb create-blocks-from openmetrics`); the agent computes the recommendation
//! (CPU: the 90th percentile plus 15 %, 115m; memory: the peak plus 15 %, 173Mi), mirrors
//! it into the rsr (`spec.source: prometheus`), the guardrails pass, the change goes in
//! place and the health watch starts, with the events kept in the cluster. Needs
//! `prometheus` and `promtool` on PATH (.ci/run installs Debian's package).

#[path = "../../../crates/kerf-agent/tests/prometheus_support/mod.rs"]
mod prometheus_support;

mod e2e_support;

use std::fmt::Write as _;

use chrono::{DurationRound, TimeDelta, Utc};
use e2e_support::{AgentOptions, Env, assert_pod_requests, condition, policy_spec};
use kerf_api::event::EventType;
use kerf_api::rsr::RecommendationSource;
use serde_json::json;

/// Seconds between two samples.
const SCRAPE: i64 = 60;

/// OpenMetrics text of `pods` of namespace `ns`, container `app`: 100m of CPU and 150 MiB
/// every minute for 48 hours, ending an hour ago.
fn usage(ns: &str, pods: &[&str]) -> anyhow::Result<String> {
    let start = (Utc::now() - TimeDelta::hours(49)).duration_trunc(TimeDelta::minutes(1))?;
    let samples = 48 * 3600 / SCRAPE;
    let mut out = String::new();
    for pod in pods {
        let labels = format!("namespace=\"{ns}\",pod=\"{pod}\",container=\"app\"");
        for k in 0..=samples {
            // Cumulative CPU seconds at 0.1 core.
            let cpu = k * SCRAPE / 10;
            let at = start.timestamp() + k * SCRAPE;
            writeln!(
                out,
                "container_cpu_usage_seconds_total{{{labels}}} {cpu} {at}"
            )?;
        }
    }
    for pod in pods {
        let labels = format!("namespace=\"{ns}\",pod=\"{pod}\",container=\"app\"");
        for k in 0..=samples {
            let at = start.timestamp() + k * SCRAPE;
            let bytes = 150u64 << 20;
            writeln!(
                out,
                "container_memory_working_set_bytes{{{labels}}} {bytes} {at}"
            )?;
        }
    }
    out.push_str("# EOF\n");
    Ok(out)
}

// portable
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_usage_becomes_a_recommendation_that_goes_in_place_without_a_hub()
-> anyhow::Result<()> {
    let mut env = Env::start("e2e-source-prometheus").await?;
    // Pod names of `web` as a Deployment's ReplicaSet names them (the source maps series to
    // workloads by that pattern): pods replaced since still count.
    let text = usage(&env.ns, &["web-7d9f8c6b5-x2c4z", "web-7d9f8c6b5-b9k2m"])?;
    let prom = prometheus_support::with_series(&text, &[]).await?;
    env.web(2).await?;
    let mut spec = policy_spec(&env.ns, "auto-patch", "in-place");
    // Two days of a 14-day window: confidence 0.14.
    spec["guardrails"]["minConfidence"] = json!("0.1");
    spec["guardrails"]["maxChangePercent"] = json!(100);
    env.policy("prom", spec).await?;
    let mut settings = env.settings(&AgentOptions::default())?;
    settings.hub.url = None;
    settings.recommendation_source = RecommendationSource::Prometheus;
    settings.health.metrics_url = Some(prom.url.clone());
    env.start_agent_with(settings).await;

    let rsr = env.wait_phase("web", "Applied").await?;
    let spec = &rsr["spec"];
    assert_eq!(spec["source"], "prometheus", "{spec}");
    assert_eq!(spec["confidence"], "0.14", "{spec}");
    // 48 hours of samples, and the lookback of the last one.
    let covered = spec["dataCoverage"]["covered"].as_str().unwrap_or_default();
    assert!(covered.starts_with("48h"), "{spec}");
    let id = spec["recommendationID"].as_str().unwrap_or_default();
    assert!(id.starts_with("prom-"), "{id}");
    assert_eq!(
        spec["containers"][0]["requests"],
        json!({"cpu": "115m", "memory": "173Mi"}),
        "{spec}"
    );
    assert_eq!(rsr["status"]["change"]["strategy"], "in-place");
    for p in &env.wait_ready("web", 2).await? {
        assert_pod_requests(p, "115m", "173Mi");
    }
    let watch = condition(&rsr, "HealthWatch").cloned().unwrap_or_default();
    assert!(
        watch["reason"] == "Watching" || watch["reason"] == "Healthy",
        "{watch}"
    );
    // Without a hub the events stay in the cluster.
    let applied = env
        .k8s_events(Some("web"), Some("RecommendationApplied"))
        .await?;
    assert_eq!(applied.len(), 1, "{applied:#?}");
    assert!(env.hub_events("web", EventType::Applied).is_empty());
    env.stop_agent().await;
    Ok(())
}
