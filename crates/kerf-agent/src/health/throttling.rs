//! Throttling samples (rules RB-12 to RB-17): PromQL against `health.metricsURL`, or, with
//! no endpoint and `health.cadvisorFallback` on, two scrapes of the kubelets' cAdvisor
//! metrics through the API server's node proxy. Neither: no sample, so throttling never
//! fires (RB-16).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use kerf_decide::health::{
    CfsCounters, CfsKey, PodMatch, ThrottlingSample, parse_cadvisor, sample_from_scrapes,
    throttling_queries, throttling_window,
};
use prometheus_http_query::response::Data;

use super::HealthError;

/// Where throttling comes from.
#[derive(Clone)]
pub enum ThrottlingSource {
    /// No metrics endpoint and no cAdvisor fallback: throttling never fires (RB-16).
    Off,
    /// PromQL against `health.metricsURL` (RB-13).
    Prometheus(prometheus_http_query::Client),
    /// The kubelets' cAdvisor metrics through the node proxy (RB-17).
    Cadvisor,
}

impl std::fmt::Debug for ThrottlingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThrottlingSource::Off => f.write_str("Off"),
            ThrottlingSource::Prometheus(c) => write!(f, "Prometheus({})", c.base_url()),
            ThrottlingSource::Cadvisor => f.write_str("Cadvisor"),
        }
    }
}

/// The first cAdvisor scrape of a watch's throttling window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirstScrape {
    /// When it was taken: the start of the window.
    pub at: DateTime<Utc>,
    /// The counters.
    pub counters: BTreeMap<CfsKey, CfsCounters>,
}

/// What one throttling sampling needs.
#[derive(Clone, Debug)]
pub struct ThrottlingTarget<'a> {
    /// Namespace of the workload.
    pub namespace: &'a str,
    /// Names of the workload's pods.
    pub pods: Vec<String>,
    /// Nodes the pods run on.
    pub nodes: BTreeSet<String>,
    /// Containers whose CPU the change touched.
    pub containers: Vec<String>,
    /// When the watch started.
    pub start: DateTime<Utc>,
    /// `health.throttlingDelay`.
    pub delay: Duration,
}

/// One sample per container from PromQL, evaluated at `now` over the window from
/// `start + delay` (RB-12 to RB-14). Empty before the window opens.
pub async fn promql_samples(
    client: &prometheus_http_query::Client,
    target: &ThrottlingTarget<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<ThrottlingSample>, HealthError> {
    let Some((window_start, seconds)) = throttling_window(target.start, target.delay, now) else {
        return Ok(Vec::new());
    };
    let pods = PodMatch::Names(target.pods.clone());
    let mut out = Vec::new();
    for container in &target.containers {
        let Some(q) = throttling_queries(target.namespace, &pods, container, seconds) else {
            continue;
        };
        let throttled = instant(client, &q.throttled_periods, now).await?;
        let periods = instant(client, &q.periods, now).await?;
        if let Some(s) =
            ThrottlingSample::from_increase(container, throttled, periods, window_start)
        {
            out.push(s);
        }
    }
    Ok(out)
}

/// The value of an instant query at `now`: the first series' sample, 0 for an empty
/// answer (no series yet).
async fn instant(
    client: &prometheus_http_query::Client,
    query: &str,
    now: DateTime<Utc>,
) -> Result<f64, HealthError> {
    let res = client
        .query(query)
        .at(now.timestamp())
        .get()
        .await
        .map_err(|e| HealthError::Prometheus {
            message: e.to_string(),
        })?;
    Ok(match res.data() {
        Data::Vector(v) => v.first().map_or(0.0, |s| s.sample().value()),
        Data::Scalar(s) => s.value(),
        Data::Matrix(_) => {
            return Err(HealthError::Prometheus {
                message: format!("query {query:?} answered a range vector"),
            });
        }
    })
}

/// Scrapes `/api/v1/nodes/{node}/proxy/metrics/cadvisor` of every node and merges the
/// counters.
pub async fn scrape_nodes(
    client: &kube::Client,
    nodes: &BTreeSet<String>,
) -> Result<BTreeMap<CfsKey, CfsCounters>, HealthError> {
    let mut out = BTreeMap::new();
    for node in nodes {
        let path = format!("/api/v1/nodes/{node}/proxy/metrics/cadvisor");
        let req =
            http::Request::get(&path)
                .body(Vec::new())
                .map_err(|e| HealthError::Cadvisor {
                    node: node.clone(),
                    message: e.to_string(),
                })?;
        let text = client
            .request_text(req)
            .await
            .map_err(|e| HealthError::Cadvisor {
                node: node.clone(),
                message: e.to_string(),
            })?;
        let parsed = parse_cadvisor(&text).map_err(|e| HealthError::Cadvisor {
            node: node.clone(),
            message: e.to_string(),
        })?;
        out.extend(parsed);
    }
    Ok(out)
}

/// One sample per container from two scrapes (RB-17): the window starts at the first
/// scrape, which is taken no earlier than `start + delay` (RB-14).
pub fn cadvisor_samples(
    first: &FirstScrape,
    now_counters: &BTreeMap<CfsKey, CfsCounters>,
    target: &ThrottlingTarget<'_>,
) -> Vec<ThrottlingSample> {
    target
        .containers
        .iter()
        .map(|c| {
            sample_from_scrapes(
                &first.counters,
                now_counters,
                target.namespace,
                &target.pods,
                c,
                first.at,
            )
        })
        .collect()
}
