//! Recommendations computed from the cluster's Prometheus (the `prometheus` recommendation
//! source; the algorithm, its defaults and how it compares with VPA's recommender and
//! Robusta KRR are in docs/prometheus-source.md).
//!
//! Per container, over `window`: CPU requests from a percentile of the 5-minute rate of
//! `container_cpu_usage_seconds_total`, memory requests from the peak of
//! `container_memory_working_set_bytes`, each with a margin, rounded up (millicores, MiB)
//! and at least a floor; the `oom-killed` and `throttled` flags as a hub sets them. Pods map
//! to their workload by the names their controllers give them (`query.rs`). Queries go per
//! namespace, at most `batch_size` workloads each, after a count of the series they would
//! read (a batch over `series_limit` is halved), each within `query_timeout`. A workload
//! with less than `min_coverage` of data gets no recommendation; above it, its confidence
//! is the covered part of the window.

mod compute;
mod fetch;
mod query;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kerf_api::hub::{HubWorkload, Recommendation};
use kerf_api::policy::RecommendationSettings;
use serde::Serialize;

pub use compute::{
    Answer, ContainerUsage, Usage, build, confidence, container_recommendation, covered,
    cpu_millicores, memory_mib, recommendation_id, settings_echo,
};
pub use query::{BatchQueries, PodNaming, RATE_WINDOW, is_queryable_name, pod_regex};

/// A workload to recommend for, and the containers to recommend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Namespace, kind (Deployment, StatefulSet or DaemonSet) and name.
    pub workload: HubWorkload,
    /// The containers (not the init containers) to recommend.
    pub containers: Vec<String>,
}

/// How recommendations are computed and how Prometheus is queried.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromSettings {
    /// The usage window read. Default 336h (14 days).
    #[serde(serialize_with = "ser_duration")]
    pub window: Duration,
    /// Resolution of the percentile and of the coverage count. Default 5m.
    #[serde(serialize_with = "ser_duration")]
    pub step: Duration,
    /// CPU percentile, 1 to 100. Default 90.
    pub cpu_percentile: u8,
    /// Memory percentile, 1 to 100; 100 is the peak of the raw samples. Default 100.
    pub memory_percentile: u8,
    /// Margin added to the CPU percentile, in percent. Default 15.
    pub cpu_margin_percent: u16,
    /// Margin added to the memory peak, in percent. Default 15.
    pub memory_margin_percent: u16,
    /// Less data than this: no recommendation for the container. Default 24h.
    #[serde(serialize_with = "ser_duration")]
    pub min_coverage: Duration,
    /// Throttled share of CFS periods, in percent, that flags a container `throttled`.
    /// Default 25 (the health watch's default `throttlingRatio`).
    pub throttled_percent: u8,
    /// The recent time the throttled share is measured over. Default 24h.
    #[serde(serialize_with = "ser_duration")]
    pub throttled_window: Duration,
    /// Lowest CPU request recommended, in millicores. Default 10.
    pub min_cpu_millicores: u32,
    /// Lowest memory request recommended, in MiB. Default 32.
    pub min_memory_mib: u32,
    /// Time one request to Prometheus may take. Default 30s.
    #[serde(serialize_with = "ser_duration")]
    pub query_timeout: Duration,
    /// Most raw series (CPU and memory together) one query batch may read; a larger batch
    /// is halved. Default 2000.
    pub series_limit: usize,
    /// Most workloads in one batch of queries. Default 100.
    pub batch_size: usize,
}

impl Default for PromSettings {
    fn default() -> Self {
        PromSettings {
            window: Duration::from_secs(336 * 3600),
            step: Duration::from_secs(300),
            cpu_percentile: 90,
            memory_percentile: 100,
            cpu_margin_percent: 15,
            memory_margin_percent: 15,
            min_coverage: Duration::from_secs(24 * 3600),
            throttled_percent: 25,
            throttled_window: Duration::from_secs(24 * 3600),
            min_cpu_millicores: 10,
            min_memory_mib: 32,
            query_timeout: Duration::from_secs(30),
            series_limit: 2_000,
            batch_size: 100,
        }
    }
}

impl PromSettings {
    /// The first setting that cannot be used, named as its field: a zero step, timeout,
    /// batch or series limit, a window shorter than the step or than the minimum data, a
    /// percentile outside 1 to 100, a margin over 1000 %.
    pub fn validate(&self) -> Result<(), String> {
        let checks = [
            (self.step.as_secs() >= 1, "step: must be at least 1s"),
            (
                self.window >= self.step,
                "window: must be at least the step",
            ),
            (
                self.min_coverage <= self.window,
                "minCoverage: must be at most the window",
            ),
            (
                (1..=100).contains(&self.cpu_percentile),
                "cpuPercentile: must be 1 to 100",
            ),
            (
                (1..=100).contains(&self.memory_percentile),
                "memoryPercentile: must be 1 to 100",
            ),
            (
                self.cpu_margin_percent <= 1000 && self.memory_margin_percent <= 1000,
                "cpuMarginPercent, memoryMarginPercent: must be 0 to 1000",
            ),
            (
                (1..=100).contains(&self.throttled_percent),
                "throttledPercent: must be 1 to 100",
            ),
            (
                self.throttled_window.as_secs() >= 300,
                "throttledWindow: must be at least 5m",
            ),
            (!self.query_timeout.is_zero(), "queryTimeout: must not be 0"),
            (self.series_limit >= 1, "seriesLimit: must be at least 1"),
            (self.batch_size >= 1, "batchSize: must be at least 1"),
        ];
        match checks.into_iter().find(|(ok, _)| !ok) {
            Some((_, reason)) => Err(reason.to_owned()),
            None => Ok(()),
        }
    }

    /// These settings with the recommender fields a policy sets (`spec.recommendation`):
    /// `window`, `cpuPercentile`, `memoryPercentile`, and `headroomPercent` as both margins.
    /// `limits` is not taken: this source keeps limits, and its echo says `Keep`, so a
    /// policy asking for `Ratio` or `Remove` sees the recommendation as stale. A field that
    /// cannot be used (an unparsable window, a percentile out of 1 to 100) keeps this
    /// source's value; the policy reports its own bad fields. The result passes
    /// [`PromSettings::validate`] when these settings do.
    pub fn with_policy(&self, policy: &RecommendationSettings) -> PromSettings {
        let mut out = self.clone();
        if let Some(w) = policy.window.as_ref().and_then(|w| {
            kerf_decide::duration::parse_go_duration(w.as_str())
                .ok()?
                .to_std()
                .ok()
        }) && !w.is_zero()
        {
            out.window = w;
        }
        let percentile = |p: Option<u8>| p.filter(|p| (1..=100).contains(p));
        if let Some(p) = percentile(policy.cpu_percentile) {
            out.cpu_percentile = p;
        }
        if let Some(p) = percentile(policy.memory_percentile) {
            out.memory_percentile = p;
        }
        if let Some(h) = policy.headroom_percent.filter(|h| *h <= 1000) {
            out.cpu_margin_percent = h;
            out.memory_margin_percent = h;
        }
        // A window shorter than the minimum data or the step lowers them with it.
        out.min_coverage = out.min_coverage.min(out.window);
        out.step = out.step.min(out.window);
        out
    }
}

fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::settings::format_duration(*d))
}

/// Why no recommendations could be computed: Prometheus cannot be used. Workloads without
/// enough data are no error (they get no recommendation).
#[derive(Debug, thiserror::Error)]
pub enum PromError {
    /// No answer: connection refused, DNS, TLS, or an answer that is not Prometheus'.
    #[error("Prometheus at {url} cannot be reached: {message}")]
    Unreachable {
        /// The base URL.
        url: String,
        /// The client's error.
        message: String,
    },
    /// Prometheus answered with an error.
    #[error("Prometheus at {url} refused a query for namespace {namespace}: {message}")]
    Refused {
        /// The base URL.
        url: String,
        /// The namespace queried.
        namespace: String,
        /// Prometheus' error type and text.
        message: String,
    },
    /// No answer within the query timeout.
    #[error("Prometheus at {url} did not answer within {timeout} for namespace {namespace}")]
    Timeout {
        /// The base URL.
        url: String,
        /// The namespace queried.
        namespace: String,
        /// The timeout, in Go syntax.
        timeout: String,
    },
    /// One workload alone has more series than one query may read.
    #[error(
        "{workload} has {series} usage series in the window, over the limit of {limit} per query: no recommendation is computed (raise the series limit or shorten the window)"
    )]
    SeriesLimit {
        /// `<Kind> <namespace>/<name>`.
        workload: String,
        /// Series counted (CPU and memory).
        series: usize,
        /// The limit.
        limit: usize,
    },
    /// An answer of a shape the queries never ask for.
    #[error("Prometheus at {url} answered a query for namespace {namespace} with a {shape}")]
    UnexpectedAnswer {
        /// The base URL.
        url: String,
        /// The namespace queried.
        namespace: String,
        /// What came back.
        shape: &'static str,
    },
}

impl PromError {
    /// A short label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            PromError::Unreachable { .. } => "unreachable",
            PromError::Refused { .. } => "refused",
            PromError::Timeout { .. } => "timeout",
            PromError::SeriesLimit { .. } => "series_limit",
            PromError::UnexpectedAnswer { .. } => "unexpected_answer",
        }
    }
}

/// Recommendations for `targets` from Prometheus at `now`. Targets of another kind, with a
/// name that cannot be a Kubernetes name, or without enough data get none. A batch over the
/// series limit is halved until it fits; one workload alone over it, or any Prometheus
/// failure (unreachable, refused, slow), fails the call, and no partial list is returned.
pub async fn recommend(
    client: &prometheus_http_query::Client,
    targets: &[Target],
    settings: &PromSettings,
    now: DateTime<Utc>,
) -> Result<Vec<Recommendation>, PromError> {
    let mut out = Vec::new();
    for (namespace, list) in by_namespace(targets) {
        let call = fetch::Call {
            client,
            namespace,
            settings,
            now,
        };
        // A stack of batches, the first on top, so the answer keeps the targets' order.
        let mut pending: Vec<&[(&Target, PodNaming)]> =
            list.chunks(settings.batch_size.max(1)).rev().collect();
        while let Some(batch) = pending.pop() {
            let q = BatchQueries::new(namespace, batch, settings);
            let series = call.count_series(&q).await?;
            if series > settings.series_limit {
                pending.extend(halves(batch, series, settings)?);
                continue;
            }
            let mut usage = Usage::default();
            call.read(&q.cpu, Answer::Cpu, &mut usage).await?;
            call.read(&q.memory, Answer::Memory, &mut usage).await?;
            call.read(&q.flags, Answer::Flags, &mut usage).await?;
            out.extend(
                batch
                    .iter()
                    .filter_map(|(t, _)| build(t, &usage, settings, now)),
            );
        }
    }
    Ok(out)
}

/// A batch over the series limit in two halves, the first last (on top of the stack); one
/// workload cannot be split.
fn halves<'a, 't>(
    batch: &'a [(&'t Target, PodNaming)],
    series: usize,
    settings: &PromSettings,
) -> Result<[&'a [(&'t Target, PodNaming)]; 2], PromError> {
    match batch {
        [(t, _)] => Err(PromError::SeriesLimit {
            workload: format!(
                "{} {}/{}",
                t.workload.kind, t.workload.namespace, t.workload.name
            ),
            series,
            limit: settings.series_limit,
        }),
        _ => {
            let (first, second) = batch.split_at(batch.len() / 2);
            Ok([second, first])
        }
    }
}

/// Targets that can be queried, per namespace, in a stable order.
fn by_namespace(targets: &[Target]) -> BTreeMap<&str, Vec<(&Target, PodNaming)>> {
    let mut out: BTreeMap<&str, Vec<(&Target, PodNaming)>> = BTreeMap::new();
    for t in targets {
        let w = &t.workload;
        let naming = PodNaming::of_kind(&w.kind);
        let names_ok = is_queryable_name(&w.namespace)
            && is_queryable_name(&w.name)
            && !t.containers.is_empty()
            && t.containers.iter().all(|c| is_queryable_name(c));
        match naming {
            Some(n) if names_ok => out.entry(w.namespace.as_str()).or_default().push((t, n)),
            _ => tracing::warn!(
                namespace = %w.namespace,
                kind = %w.kind,
                name = %w.name,
                "no Prometheus recommendation: the kind or a name cannot be queried"
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests;
