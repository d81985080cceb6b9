//! Outbox metrics: events sent, buffered and dropped.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::applied::AppliedRequestMetrics;

/// Labels with one event type.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabel {
    /// Event type.
    pub r#type: String,
}

/// The outbox's metrics.
#[derive(Clone, Debug, Default)]
pub struct OutboxMetrics {
    /// `kerf_agent_events_sent_total{type}`: events the hub acknowledged.
    pub sent: Family<TypeLabel, Counter>,
    /// `kerf_agent_events_buffered`: events waiting.
    pub buffered: Gauge,
    /// `kerf_agent_events_buffered_bytes`: serialized bytes waiting.
    pub buffered_bytes: Gauge,
    /// `kerf_agent_events_dropped_total`: events dropped because the outbox was full
    /// (rule EV-06).
    pub dropped: Counter,
    /// `kerf_agent_events_rejected_total`: events the hub refused as invalid.
    pub rejected: Counter,
    /// Requests before and after each applied change, per namespace (registered under
    /// `applied_`): every `applied` event passes through the outbox once.
    pub applied: AppliedRequestMetrics,
}

impl OutboxMetrics {
    /// Registers the metrics under `events_` in `registry` (the agent's `kerf_agent`
    /// registry).
    pub fn register(registry: &mut Registry) -> OutboxMetrics {
        let m = OutboxMetrics {
            applied: AppliedRequestMetrics::register(registry),
            ..OutboxMetrics::default()
        };
        let r = registry.sub_registry_with_prefix("events");
        r.register(
            "sent",
            "Events the hub acknowledged, by type",
            m.sent.clone(),
        );
        r.register(
            "buffered",
            "Events waiting in the outbox",
            m.buffered.clone(),
        );
        r.register(
            "buffered_bytes",
            "Serialized bytes of the events waiting in the outbox",
            m.buffered_bytes.clone(),
        );
        r.register(
            "dropped",
            "Events dropped, oldest first, because the outbox was full",
            m.dropped.clone(),
        );
        r.register(
            "rejected",
            "Events the hub refused as invalid",
            m.rejected.clone(),
        );
        m
    }
}
