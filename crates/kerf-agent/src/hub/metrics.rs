//! Hub client metrics: requests by endpoint and status code, the time of the last
//! successful contact, and whether the hub refuses the token.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::metrics::set::metric_set;

/// Labels of a hub request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `recommendations`, `config`, `events`, `inventory`.
    pub endpoint: String,
    /// HTTP status code, or `error` when no answer came.
    pub code: String,
}

/// Labels naming a hub endpoint.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabel {
    /// `recommendations`, `config`, `events`, `inventory`.
    pub endpoint: String,
}

metric_set! {
    /// The hub client's metrics, registered under `hub_`.
    pub struct HubMetrics in "hub" {
        /// `kerf_agent_hub_requests_total{endpoint, code}`.
        requests: Family<RequestLabels, Counter> => "requests", "Hub requests by endpoint and status code";
        /// `kerf_agent_hub_last_success_timestamp_seconds{endpoint}`.
        last_success: Family<EndpointLabel, Gauge<f64, AtomicU64>> => "last_success_timestamp_seconds", "Unix time of the last successful hub request, by endpoint";
        /// `kerf_agent_hub_auth_failed`: 1 while the hub refuses the token (401 or 403).
        auth_failed: Gauge => "auth_failed", "1 while the hub refuses the agent's token";
    }
}

impl HubMetrics {
    pub(crate) fn request(&self, endpoint: &str, code: &str) {
        self.requests
            .get_or_create(&RequestLabels {
                endpoint: endpoint.to_owned(),
                code: code.to_owned(),
            })
            .inc();
    }

    pub(crate) fn success(&self, endpoint: &str, unix_seconds: f64) {
        self.last_success
            .get_or_create(&EndpointLabel {
                endpoint: endpoint.to_owned(),
            })
            .set(unix_seconds);
    }
}
