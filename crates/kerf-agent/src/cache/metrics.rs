//! Cache metrics: watch loops running and watch failures.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Cache metrics.
#[derive(Clone, Debug, Default)]
pub struct CacheMetrics {
    /// `kerf_agent_watches_active`: watch loops running.
    pub watches_active: Gauge,
    /// `kerf_agent_watch_errors_total`: watch failures (each is retried).
    pub watch_errors: Counter,
}

impl CacheMetrics {
    /// Registers the metrics in `registry` (the agent's `kerf_agent` registry).
    pub fn register(registry: &mut Registry) -> CacheMetrics {
        let m = CacheMetrics::default();
        registry.register(
            "watches_active",
            "Watch loops running",
            m.watches_active.clone(),
        );
        registry.register(
            "watch_errors",
            "Watch failures, each retried with backoff",
            m.watch_errors.clone(),
        );
        m
    }
}
