//! Metrics (prometheus-client) and the `/metrics`, `/healthz`, `/readyz` server.
//!
//! Each component owns a metrics struct registered under `kerf_agent_`; label values are
//! bounded (types, reasons, resources, results, endpoints, status codes), never object
//! names.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::cache::metrics::CacheMetrics;
use crate::executor::metrics::ExecutorMetrics;
use crate::hub::HubMetrics;
use crate::lease::metrics::LeaderMetrics;
use crate::outbox::OutboxMetrics;

pub mod applied;
pub(crate) mod set;

/// Prefix of every metric of the agent.
pub const PREFIX: &str = "kerf_agent";

/// The agent's version, as `kerf_agent_build_info{version}` reports it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Labels of the build information.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionLabel {
    /// The agent's version (`0.1.0`).
    pub version: String,
}

/// Label of `kerf_agent_invalid_setting`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SettingLabel {
    /// The chart value (`freeze.windows`, `clusterDefaults`).
    pub setting: String,
}

/// `kerf_agent_build_info{version}`: always 1, the version in its label.
#[derive(Clone, Debug, Default)]
pub struct BuildInfo {
    /// The gauge family; one label set, set to 1 at registration.
    pub info: Family<VersionLabel, Gauge>,
}

impl BuildInfo {
    /// Registers `build_info` in `registry` (the agent's `kerf_agent` registry) with
    /// `version`, set to 1.
    pub fn register(registry: &mut Registry, version: &str) -> BuildInfo {
        let m = BuildInfo::default();
        m.info
            .get_or_create(&VersionLabel {
                version: version.to_owned(),
            })
            .set(1);
        registry.register(
            "build_info",
            "Always 1; the version of the agent in the label",
            m.info.clone(),
        );
        m
    }
}

/// Labels of an event or decision: its type and reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeReason {
    /// Event type (`applied`, `skipped`, ...).
    pub r#type: String,
    /// Contract reason.
    pub reason: String,
}

/// Labels of an outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// `ok` or an error category.
    pub result: String,
}

/// Label of a pass's duration: the step it took.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabel {
    /// The step, in snake case (`start`, `resume`, `report`, `hpa_after`, ...).
    pub step: String,
}

/// Reconciler and decision metrics.
#[derive(Clone, Debug)]
pub struct ReconcileMetrics {
    /// `kerf_agent_decisions_total{type, reason}`.
    pub decisions: Family<TypeReason, Counter>,
    /// `kerf_agent_reconcile_duration_seconds{result}`.
    pub duration: Family<ResultLabel, Histogram>,
    /// `kerf_agent_pass_duration_seconds{step}`.
    pub pass_duration: Family<StepLabel, Histogram>,
}

/// Webhook metrics.
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    /// `kerf_agent_webhook_requests_total{result}` (`patched`, `allowed`, `denied`, `error`).
    pub requests: Family<ResultLabel, Counter>,
    /// `kerf_agent_webhook_request_duration_seconds`.
    pub duration: Histogram,
}

/// Every metric of the agent and the registry they are in.
#[derive(Debug)]
pub struct Metrics {
    /// The registry `/metrics` encodes.
    pub registry: Arc<Registry>,
    /// Build information.
    pub build: BuildInfo,
    /// Outbox (registered by the outbox itself, under `events_`).
    pub outbox: OutboxMetrics,
    /// Reconciler.
    pub reconcile: ReconcileMetrics,
    /// Executor.
    pub executor: ExecutorMetrics,
    /// Webhook.
    pub webhook: WebhookMetrics,
    /// Hub client (registered by the hub client itself, under `hub_`).
    pub hub: HubMetrics,
    /// Caches.
    pub cache: CacheMetrics,
    /// Leader election.
    pub leader: LeaderMetrics,
    /// The Kubernetes client's.
    pub api: crate::apiclient::ApiMetrics,
    /// `kerf_agent_invalid_setting{setting}`: 1 for a cluster setting that cannot be used
    /// (the agent then makes no change).
    pub invalid_setting: Family<SettingLabel, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl ReconcileMetrics {
    /// Registers the metrics in `registry` (the agent's `kerf_agent` registry).
    pub fn register(registry: &mut Registry) -> ReconcileMetrics {
        let m = ReconcileMetrics {
            decisions: Family::default(),
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 16))
            }),
            pass_duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 16))
            }),
        };
        registry.register(
            "decisions",
            "Decisions by event type and reason",
            m.decisions.clone(),
        );
        registry.sub_registry_with_prefix("reconcile").register(
            "duration_seconds",
            "Time of one reconcile of a workload",
            m.duration.clone(),
        );
        registry.register(
            "pass_duration_seconds",
            "Time of one pass over a workload, by the step it took",
            m.pass_duration.clone(),
        );
        m
    }
}

impl WebhookMetrics {
    /// Registers the metrics under `webhook_` in `registry` (the agent's `kerf_agent`
    /// registry).
    pub fn register(registry: &mut Registry) -> WebhookMetrics {
        let buckets = exponential_buckets(0.0005, 2.0, 14);
        WebhookMetrics::register_with(registry.sub_registry_with_prefix("webhook"), buckets)
    }

    /// Registers `requests` and `request_duration_seconds` (with `buckets`) in `registry`
    /// itself.
    pub fn register_with(
        registry: &mut Registry,
        buckets: impl Iterator<Item = f64>,
    ) -> WebhookMetrics {
        let m = WebhookMetrics {
            requests: Family::default(),
            duration: Histogram::new(buckets),
        };
        registry.register(
            "requests",
            "Admission requests by result",
            m.requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time to answer an admission request",
            m.duration.clone(),
        );
        m
    }
}

impl Metrics {
    /// Declares every metric in a fresh registry: each component registers its own, in
    /// the order `/metrics` lists them.
    pub fn new() -> Metrics {
        let mut root = Registry::with_prefix(PREFIX);
        let build = BuildInfo::register(&mut root, VERSION);
        let outbox = OutboxMetrics::register(&mut root);
        let reconcile = ReconcileMetrics::register(&mut root);
        let executor = ExecutorMetrics::register(&mut root);
        let webhook = WebhookMetrics::register(&mut root);
        let hub = HubMetrics::register(&mut root);
        let cache = CacheMetrics::register(&mut root);
        let leader = LeaderMetrics::register(&mut root);
        let api = crate::apiclient::ApiMetrics::register(&mut root);
        let invalid_setting = Family::<SettingLabel, Gauge>::default();
        root.register_collector(Box::new(AllocatorBytes));
        root.register(
            "invalid_setting",
            "1 for a cluster setting that cannot be used; the agent then makes no change",
            invalid_setting.clone(),
        );
        Metrics {
            registry: Arc::new(root),
            build,
            outbox,
            reconcile,
            executor,
            webhook,
            hub,
            cache,
            leader,
            api,
            invalid_setting,
        }
    }

    /// The registry in the Prometheus text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        encode(&self.registry)
    }
}

/// The allocator's own figures, in bytes, as `kerf_agent_allocator_bytes{state}` reports
/// them at each scrape: `allocated` (what the agent's objects take), `active` (the pages
/// those lie in: the difference is room left between objects), `resident` (the pages the
/// allocator holds in memory, its `metadata` included) and `retained` (address space it
/// gave back to the system and keeps for reuse, not in memory). Empty with the system
/// allocator, or when jemalloc does not answer.
pub fn allocator_stats() -> Vec<(&'static str, u64)> {
    #[cfg(feature = "jemalloc")]
    {
        use tikv_jemalloc_ctl::{epoch, stats};
        // The figures are those of the last epoch: move it on to read them now.
        if epoch::advance().is_err() {
            return Vec::new();
        }
        [
            ("allocated", stats::allocated::read()),
            ("active", stats::active::read()),
            ("resident", stats::resident::read()),
            ("metadata", stats::metadata::read()),
            ("retained", stats::retained::read()),
        ]
        .into_iter()
        .filter_map(|(state, bytes)| Some((state, u64::try_from(bytes.ok()?).ok()?)))
        .collect()
    }
    #[cfg(not(feature = "jemalloc"))]
    Vec::new()
}

/// `kerf_agent_allocator_bytes{state}`: the allocator's own figures, read at each scrape
/// ([`allocator_stats`]); absent with the system allocator. What the
/// agent's objects take (`allocated`) against what the allocator holds in memory
/// (`resident`) tells growth from room the allocator keeps.
#[derive(Debug)]
struct AllocatorBytes;

impl Collector for AllocatorBytes {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = allocator_stats();
        if stats.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(
            "allocator_bytes",
            "The allocator's bytes by state: allocated, active, resident, metadata, retained",
            None,
            MetricType::Gauge,
        )?;
        for (state, bytes) in stats {
            let gauge = ConstGauge::new(i64::try_from(bytes).unwrap_or(i64::MAX));
            gauge.encode(family.encode_family(&[("state", state)])?)?;
        }
        Ok(())
    }
}

fn encode(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

/// Answers readiness: `Ok` once the agent may serve (the caches have synced and the API
/// server answers), else why not.
pub type ReadyCheck = Arc<dyn Fn() -> Result<(), Cow<'static, str>> + Send + Sync>;

#[derive(Clone)]
struct ServerState {
    registry: Arc<Registry>,
    ready: ReadyCheck,
}

/// The router of `/metrics`, `/healthz` and `/readyz`.
pub fn router(registry: Arc<Registry>, ready: ReadyCheck) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready_handler))
        .with_state(ServerState { registry, ready })
}

async fn metrics_handler(State(s): State<ServerState>) -> impl IntoResponse {
    match encode(&s.registry) {
        Ok(body) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics").into_response(),
    }
}

async fn ready_handler(State(s): State<ServerState>) -> impl IntoResponse {
    match (s.ready)() {
        Ok(()) => (StatusCode::OK, Cow::Borrowed("ready")),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// Serves `router` on `addr` until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = crate::listen::bind(addr)?;
    tracing::info!(addr = %listener.local_addr()?, "metrics and health server listening");
    serve_on(listener, router, shutdown).await
}

/// Serves `router` on a bound `listener` until `shutdown` completes.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::metrics::{ActionLabels, ReasonLabel};
    use crate::hub::metrics::{EndpointLabel, RequestLabels};
    use crate::outbox::metrics::TypeLabel;
    use axum::body::Body;
    use axum::http::Request;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tower::ServiceExt;

    #[test]
    fn the_section_9_metrics_are_declared() {
        let m = Metrics::new();
        m.outbox.dropped.inc();
        m.outbox
            .sent
            .get_or_create(&TypeLabel {
                r#type: "applied".into(),
            })
            .inc();
        // A family without any label set encodes nothing, so each gets one sample.
        let (t, r) = ("applied".to_owned(), "ok".to_owned());
        let tr = TypeReason {
            r#type: t.clone(),
            reason: r.clone(),
        };
        m.reconcile.decisions.get_or_create(&tr).inc();
        let result = ResultLabel { result: r.clone() };
        m.reconcile.duration.get_or_create(&result).observe(0.01);
        let step = StepLabel {
            step: "start".into(),
        };
        m.reconcile.pass_duration.get_or_create(&step).observe(0.01);
        let action = ActionLabels {
            action: "resize".into(),
            result: r.clone(),
        };
        m.executor.actions.get_or_create(&action).inc();
        let reason = ReasonLabel { reason: r.clone() };
        m.executor.rollbacks.get_or_create(&reason).inc();
        m.webhook.requests.get_or_create(&result).inc();
        let hub = RequestLabels {
            endpoint: "config".into(),
            code: "200".into(),
        };
        m.hub.requests.get_or_create(&hub).inc();
        let endpoint = EndpointLabel {
            endpoint: "config".into(),
        };
        m.hub.last_success.get_or_create(&endpoint).set(1.0);
        let text = m.encode().unwrap();
        for name in [
            "kerf_agent_events_sent_total",
            "kerf_agent_events_buffered ",
            "kerf_agent_events_dropped_total 1",
            "kerf_agent_decisions_total",
            "kerf_agent_actions_total",
            "kerf_agent_rollbacks_total",
            "kerf_agent_reconcile_duration_seconds",
            "kerf_agent_pass_duration_seconds_count{step=\"start\"} 1",
            "kerf_agent_webhook_requests_total",
            "kerf_agent_webhook_request_duration_seconds",
            "kerf_agent_hub_requests_total",
            "kerf_agent_hub_last_success_timestamp_seconds",
            "kerf_agent_watches_active",
            "kerf_agent_leader ",
            "kerf_agent_events_rejected_total",
            "kerf_agent_hub_auth_failed",
        ] {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
    }

    #[test]
    fn every_metric_is_declared_once() {
        let m = Metrics::new();
        // Families encode only once they hold a label set.
        let label = |t: &str| TypeLabel { r#type: t.into() };
        m.outbox.sent.get_or_create(&label("applied")).inc();
        let hub = RequestLabels {
            endpoint: "config".into(),
            code: "200".into(),
        };
        m.hub.requests.get_or_create(&hub).inc();
        let text = m.encode().unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = line
                .split_whitespace()
                .nth(2)
                .unwrap_or_default()
                .to_owned();
            assert!(seen.insert(name.clone()), "{name} declared twice:\n{text}");
        }
        for name in [
            "kerf_agent_hub_requests",
            "kerf_agent_hub_auth_failed",
            "kerf_agent_events_sent",
            "kerf_agent_events_rejected",
        ] {
            assert!(seen.contains(name), "{name} missing:\n{text}");
        }
    }

    #[test]
    fn build_info_reports_the_version_with_value_1() {
        let text = Metrics::new().encode().unwrap();
        let line = format!("kerf_agent_build_info{{version=\"{VERSION}\"}} 1\n");
        assert!(text.contains(&line), "{line} missing from:\n{text}");
        assert!(
            text.contains("# TYPE kerf_agent_build_info gauge"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn readyz_follows_the_caches() {
        let ready = Arc::new(AtomicBool::new(false));
        let r = ready.clone();
        let app = router(
            Metrics::new().registry,
            Arc::new(move || {
                if r.load(Ordering::SeqCst) {
                    Ok(())
                } else {
                    Err("caches not synced".into())
                }
            }),
        );
        let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
        let resp = app.clone().oneshot(get("/readyz")).await.unwrap();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        ready.store(true, Ordering::SeqCst);
        let resp = app.clone().oneshot(get("/readyz")).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let resp = app.clone().oneshot(get("/healthz")).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let resp = app.oneshot(get("/metrics")).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
    }
}
