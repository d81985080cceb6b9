//! Outbox metrics: events sent, buffered and dropped.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::metrics::applied::AppliedRequestMetrics;
use crate::metrics::set::metric_set;

/// Labels with one event type.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabel {
    /// Event type.
    pub r#type: String,
}

metric_set! {
    /// The outbox's metrics, registered under `events_`.
    pub struct OutboxMetrics in "events" {
        /// `kerf_agent_events_sent_total{type}`: events the hub acknowledged.
        sent: Family<TypeLabel, Counter> => "sent", "Events the hub acknowledged, by type";
        /// `kerf_agent_events_buffered`: events waiting.
        buffered: Gauge => "buffered", "Events waiting in the outbox";
        /// `kerf_agent_events_buffered_bytes`: serialized bytes waiting.
        buffered_bytes: Gauge => "buffered_bytes", "Serialized bytes of the events waiting in the outbox";
        /// `kerf_agent_events_dropped_total`: events dropped because the outbox was full
        /// (rule EV-06).
        dropped: Counter => "dropped", "Events dropped, oldest first, because the outbox was full";
        /// `kerf_agent_events_rejected_total`: events the hub refused as invalid.
        rejected: Counter => "rejected", "Events the hub refused as invalid";
    }
    nested {
        /// Requests before and after each applied change, per namespace (registered under
        /// `applied_`): every `applied` event passes through the outbox once.
        applied: AppliedRequestMetrics;
    }
}
