//! Requests of the applied changes, summed per namespace: what the containers requested
//! before and after each change that became live.
//!
//! `kerf_agent_applied_cpu_request_cores_total{workload_namespace, when}` and
//! `kerf_agent_applied_memory_request_bytes_total{workload_namespace, when}`, with `when` either
//! `before` or `after`. Each `applied` event adds the requests of the containers it
//! changed (only the resources that changed, as the event lists them); a request that was
//! not set counts as 0. The difference `after - before` over a range is what the applied
//! changes saved (negative) or added. Labels are bounded by the cluster's namespaces.

use std::sync::atomic::AtomicU64;

use kerf_api::event::{Event, EventType};
use kerf_api::quantity::{Resource, ResourceValues};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::metrics::set::metric_set;

/// Labels of an applied request total.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AppliedLabels {
    /// Namespace of the workload (not `namespace`, which Prometheus sets to the agent's
    /// own namespace when it scrapes).
    pub workload_namespace: String,
    /// `before` or `after` the change.
    pub when: String,
}

type FloatCounter = Counter<f64, AtomicU64>;

metric_set! {
    /// Requests before and after the applied changes, per namespace, registered under
    /// `applied_`.
    pub struct AppliedRequestMetrics in "applied" {
        /// `kerf_agent_applied_cpu_request_cores_total{workload_namespace, when}`.
        cpu_cores: Family<AppliedLabels, FloatCounter> => "cpu_request_cores", "CPU requested by the containers of applied changes, before and after, per namespace";
        /// `kerf_agent_applied_memory_request_bytes_total{workload_namespace, when}`.
        memory_bytes: Family<AppliedLabels, FloatCounter> => "memory_request_bytes", "Memory requested by the containers of applied changes, before and after, per namespace";
    }
}

/// The summed requests of one event, in cores and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RequestSums {
    /// CPU in cores.
    pub cpu_cores: f64,
    /// Memory in bytes.
    pub memory_bytes: f64,
}

impl AppliedRequestMetrics {
    /// Adds the requests of an `applied` event; other events change nothing.
    pub fn observe(&self, event: &Event) {
        if event.type_ != EventType::Applied {
            return;
        }
        let (before, after) = sums(event);
        let ns = &event.workload.namespace;
        self.add(ns, "before", before);
        self.add(ns, "after", after);
    }

    fn add(&self, namespace: &str, when: &str, sums: RequestSums) {
        let labels = AppliedLabels {
            workload_namespace: namespace.to_owned(),
            when: when.to_owned(),
        };
        self.cpu_cores.get_or_create(&labels).inc_by(sums.cpu_cores);
        self.memory_bytes
            .get_or_create(&labels)
            .inc_by(sums.memory_bytes);
    }
}

/// The requests of an event's containers before and after, summed. A value that does
/// not parse counts as 0 (the outbox refuses such events before they get here).
pub fn sums(event: &Event) -> (RequestSums, RequestSums) {
    let mut before = RequestSums::default();
    let mut after = RequestSums::default();
    for c in &event.containers {
        add_values(&mut before, &c.from.requests);
        add_values(&mut after, &c.to.requests);
    }
    (before, after)
}

fn add_values(sums: &mut RequestSums, values: &ResourceValues) {
    sums.cpu_cores += value(values, Resource::Cpu) / 1000.0;
    sums.memory_bytes += value(values, Resource::Memory);
}

fn value(values: &ResourceValues, resource: Resource) -> f64 {
    values
        .get(resource)
        .and_then(|q| kerf_decide::quantity::parse(resource, q).ok())
        .map_or(0.0, |v| v as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::event::{EventContainer, EventWorkload};
    use kerf_api::quantity::ResourceRequirements;
    use prometheus_client::registry::Registry;

    fn requests(cpu: Option<&str>, memory: Option<&str>) -> ResourceRequirements {
        ResourceRequirements {
            requests: ResourceValues {
                cpu: cpu.map(Into::into),
                memory: memory.map(Into::into),
            },
            ..Default::default()
        }
    }

    fn event(type_: EventType, namespace: &str, containers: Vec<EventContainer>) -> Event {
        Event {
            id: uuid::Uuid::nil(),
            type_,
            time: chrono::DateTime::UNIX_EPOCH,
            workload: EventWorkload {
                namespace: namespace.into(),
                kind: "Deployment".into(),
                name: "web".into(),
            },
            recommendation_id: None,
            strategy: None,
            resources: vec![],
            containers,
            reason: "Applied".into(),
            message: None,
            details: Default::default(),
        }
    }

    fn container(from: ResourceRequirements, to: ResourceRequirements) -> EventContainer {
        EventContainer {
            name: "app".into(),
            from,
            to,
        }
    }

    fn total(f: &Family<AppliedLabels, FloatCounter>, ns: &str, when: &str) -> f64 {
        let labels = AppliedLabels {
            workload_namespace: ns.into(),
            when: when.into(),
        };
        f.get_or_create(&labels).get()
    }

    #[test]
    fn applied_changes_add_their_requests_per_namespace() {
        let mut registry = Registry::with_prefix("kerf_agent");
        let m = AppliedRequestMetrics::register(&mut registry);
        let web = container(
            requests(Some("500m"), Some("1Gi")),
            requests(Some("250m"), Some("512Mi")),
        );
        // A request not set before counts as 0; only memory changed in the sidecar.
        let sidecar = container(requests(None, Some("64Mi")), requests(None, Some("128Mi")));
        m.observe(&event(
            EventType::Applied,
            "shop",
            vec![web.clone(), sidecar],
        ));
        m.observe(&event(EventType::Applied, "shop", vec![web.clone()]));
        m.observe(&event(EventType::Applied, "blog", vec![web.clone()]));
        assert_eq!(total(&m.cpu_cores, "shop", "before"), 1.0);
        assert_eq!(total(&m.cpu_cores, "shop", "after"), 0.5);
        let mi = 1024.0 * 1024.0;
        assert_eq!(total(&m.memory_bytes, "shop", "before"), 2112.0 * mi);
        assert_eq!(total(&m.memory_bytes, "shop", "after"), 1152.0 * mi);
        assert_eq!(total(&m.cpu_cores, "blog", "before"), 0.5);
        assert_eq!(total(&m.memory_bytes, "blog", "after"), 512.0 * mi);
    }

    #[test]
    fn the_outbox_counts_an_applied_event_once_per_id() {
        let mut registry = Registry::with_prefix("kerf_agent");
        let metrics = crate::outbox::OutboxMetrics::register(&mut registry);
        let outbox = crate::outbox::Outbox::new(Default::default(), metrics.clone(), None);
        let c = container(requests(Some("1"), None), requests(Some("500m"), None));
        let mut e = event(EventType::Applied, "shop", vec![c]);
        e.id = uuid::Uuid::from_u128(7);
        e.reason = kerf_api::wellknown::REASON_RECOMMENDATION_APPLIED.into();
        e.resources = vec![Resource::Cpu];
        e.strategy = Some("in-place".into());
        assert!(outbox.enqueue(e.clone()).unwrap());
        // A resumed action emits the same event again: it is not counted twice.
        assert!(!outbox.enqueue(e).unwrap());
        assert_eq!(total(&metrics.applied.cpu_cores, "shop", "before"), 1.0);
        assert_eq!(total(&metrics.applied.cpu_cores, "shop", "after"), 0.5);
    }

    #[test]
    fn other_event_types_add_nothing() {
        let m = AppliedRequestMetrics::default();
        let c = container(requests(Some("1"), None), requests(Some("2"), None));
        for t in [
            EventType::RolledBack,
            EventType::Fallback,
            EventType::Blocked,
        ] {
            m.observe(&event(t, "shop", vec![c.clone()]));
        }
        assert_eq!(total(&m.cpu_cores, "shop", "before"), 0.0);
        assert_eq!(total(&m.cpu_cores, "shop", "after"), 0.0);
    }

    #[test]
    fn the_totals_are_exported_with_workload_namespace_and_when_only() {
        let mut registry = Registry::with_prefix("kerf_agent");
        let m = AppliedRequestMetrics::register(&mut registry);
        let c = container(requests(Some("1"), Some("1Gi")), requests(Some("2"), None));
        m.observe(&event(EventType::Applied, "shop", vec![c]));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            r#"kerf_agent_applied_cpu_request_cores_total{workload_namespace="shop",when="before"} 1.0"#,
            r#"kerf_agent_applied_cpu_request_cores_total{workload_namespace="shop",when="after"} 2.0"#,
            r#"kerf_agent_applied_memory_request_bytes_total{workload_namespace="shop",when="after"} 0.0"#,
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
