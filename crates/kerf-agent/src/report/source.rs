//! Where the report's inputs come from: the agent's caches. `GET /report` reads the running
//! agent's caches; `kerf-agent report` fills caches of its own from the cluster (LIST and
//! WATCH only, nothing is written) and prints the report once they synced.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use kerf_api::WorkloadKind;

use super::Report;
use super::compute::{self, ContainerInput, RsrInput, WorkloadInput};
use crate::cache::CacheSet;
use crate::cache::metrics::CacheMetrics;
use crate::cache::workloads::WorkloadInfo;
use crate::clock::SharedClock;

/// How the command prints the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The table for people.
    #[default]
    Table,
    /// The JSON document of `docs/report.md`.
    Json,
}

/// Errors of the report command.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// No Kubernetes client could be built.
    #[error("cannot build a Kubernetes client (in-cluster or KUBECONFIG): {0}")]
    Client(#[source] kube::Error),
    /// The caches did not list everything in time.
    #[error("the caches did not sync within {0:?}")]
    SyncTimeout(std::time::Duration),
    /// The report could not be written as JSON.
    #[error("cannot write the report as JSON: {0}")]
    Json(#[source] serde_json::Error),
}

/// How long `report` waits for the caches.
pub const SYNC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The report of what `cache` holds at `now`.
pub fn snapshot(cache: &CacheSet, now: DateTime<Utc>) -> Report {
    let (inputs, problems) = inputs(cache);
    compute::build(&inputs, problems, now)
}

/// The inputs of every cached workload, and the rsrs that could not be read.
pub fn inputs(cache: &CacheSet) -> (Vec<WorkloadInput>, Vec<String>) {
    let mut problems = Vec::new();
    let inputs = cache
        .workloads()
        .iter()
        .map(|w| {
            let rsr = cache.rsrs_for(&w.key).into_iter().next();
            let rsr = rsr.and_then(|e| match &e.rsr {
                Ok(r) => Some(RsrInput {
                    spec: r.spec.clone(),
                    status: r.status.clone().unwrap_or_default(),
                }),
                Err(err) => {
                    problems.push(format!(
                        "{}/{}: the RightsizingRecommendation does not convert: {err}",
                        e.namespace, e.name
                    ));
                    None
                }
            });
            workload_input(w, rsr)
        })
        .collect();
    (inputs, problems)
}

fn workload_input(w: &WorkloadInfo, rsr: Option<RsrInput>) -> WorkloadInput {
    let replicas = match w.key.kind {
        WorkloadKind::DaemonSet => w.status.desired_number_scheduled.unwrap_or(0),
        _ => w.replicas.unwrap_or(1),
    };
    WorkloadInput {
        namespace: w.key.namespace.to_string(),
        kind: w.key.kind,
        name: w.key.name.to_string(),
        replicas: i64::from(replicas.max(0)),
        containers: w
            .containers
            .iter()
            .map(|c| ContainerInput {
                name: c.name.to_string(),
                requests: c.requests.clone(),
                limits: c.limits.clone(),
            })
            .collect(),
        rsr,
    }
}

#[derive(Clone)]
struct EndpointState {
    cache: CacheSet,
    clock: SharedClock,
}

/// The router of `GET /report`: the report of the agent's caches as JSON, or 503 until
/// they synced.
pub fn router(cache: CacheSet, clock: SharedClock) -> Router {
    Router::new()
        .route("/report", get(report_handler))
        .with_state(EndpointState { cache, clock })
}

async fn report_handler(State(s): State<EndpointState>) -> Response {
    if !s.cache.is_synced() {
        return (StatusCode::SERVICE_UNAVAILABLE, "caches not synced").into_response();
    }
    match serde_json::to_string_pretty(&snapshot(&s.cache, s.clock.now())) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot encode the report",
        )
            .into_response(),
    }
}

/// `kerf-agent report`: the report of the cluster the client reaches, as text.
pub async fn run(output: Output) -> Result<String, ReportError> {
    let client = kube::Client::try_default()
        .await
        .map_err(ReportError::Client)?;
    report_with(client, output, Utc::now()).await
}

/// [`run`] on a given client, dated `now`.
pub async fn report_with(
    client: kube::Client,
    output: Output,
    now: DateTime<Utc>,
) -> Result<String, ReportError> {
    let cache = CacheSet::new();
    let mut watches = cache.start(client, CacheMetrics::default(), &[]);
    let synced = tokio::time::timeout(SYNC_TIMEOUT, cache.wait_synced()).await;
    watches.abort_all();
    synced.map_err(|_| ReportError::SyncTimeout(SYNC_TIMEOUT))?;
    let report = snapshot(&cache, now);
    match output {
        Output::Table => Ok(super::table::render(&report)),
        Output::Json => serde_json::to_string_pretty(&report)
            .map(|s| s + "\n")
            .map_err(ReportError::Json),
    }
}
