//! Leader election metrics: whether this replica holds the Lease, and how often that
//! changed.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use crate::metrics::set::metric_set;

metric_set! {
    /// Leader election metrics.
    pub struct LeaderMetrics {
        /// `kerf_agent_leader`: 1 while this replica holds the Lease.
        leader: Gauge => "leader", "1 while this replica holds the Lease";
        /// `kerf_agent_leader_transitions_total`: times this replica gained or lost the Lease.
        transitions: Counter => "leader_transitions", "Times this replica gained or lost the Lease";
    }
}
