//! Cache metrics: watch loops running and watch failures.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use crate::metrics::set::metric_set;

metric_set! {
    /// Cache metrics.
    pub struct CacheMetrics {
        /// `kerf_agent_watches_active`: watch loops running.
        watches_active: Gauge => "watches_active", "Watch loops running";
        /// `kerf_agent_watch_errors_total`: watch failures (each is retried).
        watch_errors: Counter => "watch_errors", "Watch failures, each retried with backoff";
    }
}
