//! Events: every event goes to the outbox (for the hub) and is written as a Kubernetes
//! Event on the rsr with the event's reason, type Warning for failed, rolled_back and
//! fallback and Normal otherwise (EV-07, EV-08). Skips and blocks are de-duplicated with
//! `kerf_decide::dedup` and count as reported once the hub acknowledged them (D25).

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::Event as K8sEvent;
use kerf_api::Resource;
use kerf_api::event::{Event, EventType, EventWorkload};
use kerf_api::wellknown::{self as wk, API_GROUP_VERSION};
use kerf_decide::dedup::Candidate;
use kerf_decide::pipeline::{Decision, Outcome, ReportKind};
use kube::api::{Api, PostParams};
use serde_json::json;
use uuid::Uuid;

use crate::outbox::Outbox;

/// Component name on Kubernetes Events.
pub const COMPONENT: &str = "kerf-agent";

/// Where events go.
#[derive(Clone)]
pub struct EventRecorder {
    /// The Kubernetes client.
    pub client: kube::Client,
    /// The hub outbox.
    pub outbox: Outbox,
}

/// The rsr an event is recorded on.
#[derive(Clone, Debug)]
pub struct RsrRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: Option<String>,
}

impl EventRecorder {
    /// Queues `event` for the hub and writes it as a Kubernetes Event on the rsr. The
    /// Kubernetes Event's name derives from the event id, so a re-emitted event does not
    /// make a second one.
    pub async fn record(&self, rsr: &RsrRef, event: &Event) {
        log_lifecycle(event);
        if let Err(e) = self.outbox.enqueue(event.clone()) {
            tracing::error!(error = %e, category = e.category(), "event not queued");
        }
        self.create(rsr, k8s_event(rsr, event)).await;
    }

    /// Writes a Warning Kubernetes Event on the rsr only (no hub event: the contract has
    /// no type for it), such as an invalid annotation or policy field.
    pub async fn warn(&self, rsr: &RsrRef, reason: &str, message: &str, time: DateTime<Utc>) {
        tracing::warn!(rsr = %rsr.name, namespace = %rsr.namespace, reason, message, "invalid input");
        self.create(rsr, k8s_warning(rsr, reason, message, time))
            .await;
    }

    async fn create(&self, rsr: &RsrRef, body: serde_json::Value) {
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &rsr.namespace);
        let Ok(obj) = serde_json::from_value::<K8sEvent>(body) else {
            return;
        };
        let started = std::time::Instant::now();
        let res = api.create(&PostParams::default(), &obj).await;
        tracing::debug!(rsr = %rsr.name, took_ms = started.elapsed().as_millis(), "Kubernetes Event written");
        match res {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                tracing::warn!(error = %e, rsr = %rsr.name, "cannot write the Kubernetes Event")
            }
        }
    }
}

/// An INFO line for every applied change, fallback, rollback and release, naming the
/// workload (`namespace/Kind/name`) and the values (the event's message carries them).
fn log_lifecycle(event: &Event) {
    if !matches!(
        event.type_,
        EventType::Applied | EventType::Fallback | EventType::RolledBack | EventType::Released
    ) {
        return;
    }
    let w = &event.workload;
    let workload = format!("{}/{}/{}", w.namespace, w.kind, w.name);
    let message = event.message.as_deref().unwrap_or_default();
    tracing::info!(%workload, r#type = event.type_.as_str(), reason = %event.reason, "{} {workload}: {message}", event.type_.as_str());
}

/// A Warning Kubernetes Event on the rsr that the hub does not get.
pub fn k8s_warning(
    rsr: &RsrRef,
    reason: &str,
    message: &str,
    time: DateTime<Utc>,
) -> serde_json::Value {
    let mut body = k8s_event_body(rsr, Uuid::new_v4(), time);
    body["reason"] = json!(reason);
    body["type"] = json!("Warning");
    body["message"] = json!(kerf_api::event::cut_message(message));
    body["action"] = json!("validate");
    body
}

fn k8s_event_body(rsr: &RsrRef, id: Uuid, at: DateTime<Utc>) -> serde_json::Value {
    let time = at.to_rfc3339_opts(SecondsFormat::Secs, true);
    let micro = at.to_rfc3339_opts(SecondsFormat::Micros, true);
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": format!("{}.{}", rsr.name, id.simple()),
            "namespace": rsr.namespace,
        },
        "involvedObject": {
            "apiVersion": API_GROUP_VERSION,
            "kind": "RightsizingRecommendation",
            "name": rsr.name,
            "namespace": rsr.namespace,
            "uid": rsr.uid,
        },
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "firstTimestamp": time,
        "lastTimestamp": time,
        "eventTime": micro,
        "count": 1,
    })
}

/// The Kubernetes Event of `event` on the rsr (EV-07, EV-08).
pub fn k8s_event(rsr: &RsrRef, event: &Event) -> serde_json::Value {
    let mut body = k8s_event_body(rsr, event.id, event.time);
    body["reason"] = json!(event.reason);
    body["type"] = json!(wk::k8s_event_type(event.type_));
    body["message"] = json!(
        event
            .message
            .clone()
            .unwrap_or_else(|| event.type_.as_str().to_owned())
    );
    body["action"] = json!(event.type_.as_str());
    body
}

/// A skip or block the decision would report, with its event.
#[derive(Clone, Debug)]
pub struct Report {
    /// The de-duplication key.
    pub candidate: Candidate,
    /// The event to send.
    pub event: Event,
}

/// The skips and blocks of a decision: the outcome (whole workload) and the per-resource
/// reports, each as an event with a fresh id.
pub fn reports(
    decision: &Decision,
    workload: &EventWorkload,
    recommendation_id: &str,
    time: DateTime<Utc>,
) -> Vec<Report> {
    let mut out = Vec::new();
    let mut push = |type_: EventType,
                    reason: &str,
                    resources: Vec<Resource>,
                    message: &str,
                    details: BTreeMap<String, String>| {
        let Ok(candidate) = Candidate::new(type_, reason, resources.first().copied()) else {
            return;
        };
        let mut event =
            Event::new(Uuid::new_v4(), type_, time, workload.clone(), reason).with_message(message);
        event.recommendation_id = Some(recommendation_id.to_owned());
        event.resources = resources;
        event.details = details;
        out.push(Report { candidate, event });
    };
    match &decision.outcome {
        Outcome::Skip(s) => push(
            EventType::Skipped,
            s.reason,
            s.resources.to_vec(),
            &decision.message,
            BTreeMap::new(),
        ),
        Outcome::Block(b) => push(
            EventType::Blocked,
            b.reason,
            b.resources.to_vec(),
            &decision.message,
            b.details.clone(),
        ),
        Outcome::Apply(_) => {}
    }
    for r in &decision.reports {
        let type_ = match r.kind {
            ReportKind::Skipped => EventType::Skipped,
            ReportKind::Blocked => EventType::Blocked,
        };
        push(
            type_,
            r.reason,
            vec![r.resource],
            &r.message,
            BTreeMap::new(),
        );
    }
    out
}

/// Adds the pod's requests, as the CPU and MEMORY columns show them, to the message of
/// every skip and block but `NoSignificantChange`: its message names the values that stay
/// itself, and the columns may show a value the mode holds back as `current→recommended`.
pub fn add_requests(reports: &mut [Report], summary: Option<&kerf_api::rsr::Summary>) {
    let Some(sum) = summary else { return };
    for r in reports
        .iter_mut()
        .filter(|r| r.event.reason != wk::REASON_NO_SIGNIFICANT_CHANGE)
    {
        let m = r.event.message.as_deref().unwrap_or_default();
        r.event.message = Some(kerf_decide::status::text::with_requests(m, sum));
    }
}
