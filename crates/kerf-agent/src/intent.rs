//! Intent before action (design section 3, D25).
//!
//! Before any actuating write the change is recorded in `status.change`: id, state
//! `Intent`, recommendation id, approval id, strategy, containers from/to, HPA change,
//! the id of its `applied` event and `startedAt`. The id of any other lifecycle event
//! (fallback, rolled_back, released, failed) is recorded by [`allocate`] when that outcome
//! is decided, in the same status write that precedes the event, so a resumed change
//! re-emits with the same ids and the record names only events that were or will be sent. The record moves `Intent -> Applying -> Applied` (then
//! `RollingBack -> RolledBack`, or `Released`). Status writes carry the resourceVersion the
//! agent read: a 409 means someone else wrote (a newer leader, a user): the step stops,
//! the rsr is read again and a deposed leader stops acting.
//!
//! An agent killed anywhere resumes from status alone: the reconciler re-reads the live
//! state, compares it to `to` before sending anything again, and emits the lifecycle
//! events with the recorded ids.

use chrono::{DateTime, Duration, Utc};
use kerf_api::event::{Event, EventContainer, EventType, EventWorkload};
use kerf_api::rsr::{
    ChangeRecord, ChangeState, EventIds, HpaChange, RightsizingRecommendationStatus, WatchStatus,
};
use kerf_api::wellknown as wk;
use kerf_decide::pipeline::ApplyPlan;
use kerf_decide::status::text;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::Value;
use uuid::Uuid;

/// Errors of intent and status writes.
#[derive(Debug, thiserror::Error)]
pub enum IntentError {
    /// The rsr changed since it was read (409): stop, read again; a deposed leader stops.
    #[error("rsr {name}: resourceVersion {resource_version} is stale (409)")]
    Conflict {
        /// The rsr.
        name: String,
        /// The resourceVersion sent.
        resource_version: String,
    },
    /// This replica does not hold the lease: no actuating write.
    #[error("not the leader: no actuating write")]
    NotLeader,
    /// Any other API error.
    #[error("rsr {name}: status write failed: {source}")]
    Kube {
        /// The rsr.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The status could not be serialized.
    #[error("rsr {name}: cannot serialize the status: {source}")]
    Encode {
        /// The rsr.
        name: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

impl IntentError {
    /// A short, bounded name for metric labels and logs.
    pub fn category(&self) -> &'static str {
        match self {
            IntentError::Conflict { .. } => "conflict",
            IntentError::NotLeader => "not_leader",
            IntentError::Kube { .. } => "kube",
            IntentError::Encode { .. } => "encode",
        }
    }
}

fn new_id() -> String {
    Uuid::new_v4().to_string()
}

/// The intent record of a change that is about to go in (state `Intent`).
pub fn new_change(plan: &ApplyPlan, now: DateTime<Utc>) -> ChangeRecord {
    ChangeRecord {
        id: new_id(),
        state: ChangeState::Intent,
        recommendation_id: plan.recommendation_id.clone(),
        approval_id: plan.approval.as_ref().map(|a| a.approval_id.clone()),
        strategy: plan.strategy,
        resources: plan.resources.clone(),
        started_at: now,
        first_resize_at: None,
        applied_at: None,
        containers: plan.containers.clone(),
        hpa: plan.hpa.clone(),
        event_ids: EventIds {
            applied: Some(new_id()),
            ..EventIds::default()
        },
        pending_events: Vec::new(),
        progress: None,
        canary: None,
        revert: plan.reason == wk::REASON_REVERTED,
    }
}

/// Moves the record to `Applied` and starts the health watch: for in-place it ends
/// `watch_duration` from now; for a rollout the end is set when the rollout completes
/// (design D23).
pub fn mark_applied(
    status: &mut RightsizingRecommendationStatus,
    now: DateTime<Utc>,
    watch_duration: Duration,
) {
    let Some(change) = status.change.as_mut() else {
        return;
    };
    change.state = ChangeState::Applied;
    change.applied_at = Some(now);
    let end = change.strategy.resizes_pods().then(|| now + watch_duration);
    status.watch = Some(WatchStatus {
        start: now,
        end,
        baselines: Default::default(),
        aggregated: None,
    });
}

/// The id recorded in `slot`, or a new one recorded there: called when an outcome is
/// decided, before the status write that precedes its event (design D25).
pub fn allocate(slot: &mut Option<String>) -> Uuid {
    if let Some(id) = slot.as_deref().and_then(|s| Uuid::parse_str(s).ok()) {
        return id;
    }
    let id = Uuid::new_v4();
    *slot = Some(id.to_string());
    id
}

/// Parses an event id recorded in the intent, or makes a new one.
pub fn event_id(recorded: Option<&String>) -> Uuid {
    recorded
        .and_then(|s| Uuid::parse_str(s).ok())
        .unwrap_or_else(Uuid::new_v4)
}

/// An event about `change` with its id and type (`head`): it names the change's
/// recommendation and resources.
pub(crate) fn change_event(
    change: &ChangeRecord,
    head: (Uuid, EventType),
    workload: EventWorkload,
    reason: &str,
    time: DateTime<Utc>,
) -> Event {
    let (id, type_) = head;
    let mut e = Event::new(id, type_, time, workload, reason);
    e.recommendation_id = Some(change.recommendation_id.clone());
    e.resources = change.resources.clone();
    e
}

/// The `applied` event of a change, with the id its intent recorded (EV-10..EV-12,
/// EV-23, EV-24, EV-26).
pub fn applied_event(
    change: &ChangeRecord,
    workload: EventWorkload,
    approved_by: Option<&str>,
    time: DateTime<Utc>,
) -> Event {
    let reason = if change.approval_id.is_some() {
        wk::REASON_APPROVED_ONCE
    } else {
        wk::REASON_RECOMMENDATION_APPLIED
    };
    let id = event_id(change.event_ids.applied.as_ref());
    let mut e = change_event(change, (id, EventType::Applied), workload, reason, time);
    e.strategy = Some(change.strategy.as_str().to_owned());
    e.containers = change
        .containers
        .iter()
        .map(|c| EventContainer {
            name: c.name.clone(),
            from: c.from.clone(),
            to: c.to.clone(),
        })
        .collect();
    if let Some(id) = &change.approval_id {
        e.details
            .insert(wk::DETAIL_APPROVAL_ID.to_owned(), id.clone());
        if let Some(by) = approved_by {
            e.details
                .insert(wk::DETAIL_APPROVED_BY.to_owned(), by.to_owned());
        }
    }
    if let Some(h) = &change.hpa {
        insert_hpa_details(&mut e, h);
    }
    e.with_message(&text::applied(change))
}

/// Names the HPA target change `h` in the details of `e`: the HPA, its resource and the
/// target before and after.
pub(crate) fn insert_hpa_details(e: &mut Event, h: &HpaChange) {
    e.details.insert(wk::DETAIL_HPA.to_owned(), h.name.clone());
    e.details.insert(
        wk::DETAIL_HPA_RESOURCE.to_owned(),
        h.resource.as_str().to_owned(),
    );
    e.details
        .insert(wk::DETAIL_HPA_TARGET_FROM.to_owned(), h.from.to_string());
    e.details
        .insert(wk::DETAIL_HPA_TARGET_TO.to_owned(), h.to.to_string());
}

/// The `fallback` event of a change (AP-11): strategy is the change's new one (the
/// interpreter records the fallback's rollout first). Records its id in the change; the
/// message names the values and why.
pub fn fallback_event(
    change: &mut ChangeRecord,
    workload: EventWorkload,
    reason: &str,
    message: &str,
    time: DateTime<Utc>,
) -> Event {
    let id = allocate(&mut change.event_ids.fallback);
    let mut e = change_event(change, (id, EventType::Fallback), workload, reason, time);
    e.strategy = Some(change.strategy.as_str().to_owned());
    e.with_message(&text::fallback(change, message))
}

/// The `released` event of a change (EV-46, design D21): the resources released now, the
/// mode they left and the one they have (`modes`). A release of the whole change carries
/// the id its intent recorded; a release of some of its resources carries its own.
pub fn released_event(
    change: &ChangeRecord,
    workload: EventWorkload,
    resources: &[kerf_api::Resource],
    id: Uuid,
    modes: (&str, &str),
    time: DateTime<Utc>,
) -> Event {
    let (previous_mode, new_mode) = modes;
    let head = (id, EventType::Released);
    let mut e = change_event(change, head, workload, wk::REASON_MODE_CHANGED, time);
    e.strategy = Some(change.strategy.as_str().to_owned());
    e.resources = resources.to_vec();
    e.details.insert(
        wk::DETAIL_PREVIOUS_MODE.to_owned(),
        previous_mode.to_owned(),
    );
    e.details
        .insert(wk::DETAIL_NEW_MODE.to_owned(), new_mode.to_owned());
    e.with_message(&text::released(
        change,
        resources,
        (previous_mode, new_mode),
    ))
}

/// The `released Reverted` event of a revert (annotation `kerf.getkerf.dev/revert`): the
/// values the revert replaced (`from`) and the template's it put back (`to`), with the id
/// the revert's record allocated before the event.
pub fn reverted_event(
    change: &ChangeRecord,
    workload: EventWorkload,
    id: Uuid,
    time: DateTime<Utc>,
) -> Event {
    let head = (id, EventType::Released);
    let mut e = change_event(change, head, workload, wk::REASON_REVERTED, time);
    e.strategy = Some(change.strategy.as_str().to_owned());
    e.containers = change
        .containers
        .iter()
        .map(|c| EventContainer {
            name: c.name.clone(),
            from: c.from.clone(),
            to: c.to.clone(),
        })
        .collect();
    e.with_message(&text::reverted(change))
}

/// Drops released `resources` from a change that keeps the others (design D21): the
/// record then names only what kerf still holds, for a later release or rollback.
pub fn drop_resources(change: &mut ChangeRecord, resources: &[kerf_api::Resource]) {
    change.resources.retain(|r| !resources.contains(r));
    for c in &mut change.containers {
        for r in resources {
            c.from.requests.set(*r, None);
            c.from.limits.set(*r, None);
            c.to.requests.set(*r, None);
            c.to.limits.set(*r, None);
        }
    }
    change.containers.retain(|c| !c.to.is_empty());
    if let Some(h) = &change.hpa
        && resources.contains(&h.resource)
    {
        change.hpa = None;
    }
}

/// The `failed` event of a change, with the id recorded by [`allocate`].
pub fn failed_event(
    change: &ChangeRecord,
    workload: EventWorkload,
    reason: &str,
    message: &str,
    time: DateTime<Utc>,
) -> Event {
    let id = event_id(change.event_ids.failed.as_ref());
    let mut e = change_event(change, (id, EventType::Failed), workload, reason, time);
    e.details.insert(
        wk::DETAIL_ERROR.to_owned(),
        kerf_api::event::cut_message(message).to_owned(),
    );
    e.with_message(message)
}

/// Adds a lifecycle event to `pendingEvents` (design D25) unless it is there already.
pub fn add_pending(status: &mut RightsizingRecommendationStatus, event: &Event) {
    if let Some(change) = status.change.as_mut()
        && !change.pending_events.iter().any(|e| e.id == event.id)
    {
        change.pending_events.push(event.clone());
    }
}

/// Drops acknowledged ids from `pendingEvents`; returns whether any was dropped.
pub fn clear_pending(status: &mut RightsizingRecommendationStatus, acked: &[Uuid]) -> bool {
    let Some(change) = status.change.as_mut() else {
        return false;
    };
    let before = change.pending_events.len();
    change.pending_events.retain(|e| !acked.contains(&e.id));
    before != change.pending_events.len()
}

/// Replaces the rsr's status with `status`, on the condition that the rsr is still at
/// `resource_version`. Returns the new resourceVersion. `spec` is the spec as read: the
/// API server ignores it on the status subresource, but a body without it fails schema
/// validation on servers that validate the body as sent.
pub async fn write_status(
    api: &Api<DynamicObject>,
    name: &str,
    resource_version: &str,
    spec: Option<&Value>,
    status: &RightsizingRecommendationStatus,
) -> Result<String, IntentError> {
    let encode = |source| IntentError::Encode {
        name: name.to_owned(),
        source,
    };
    let mut body: Value = serde_json::json!({
        "apiVersion": wk::API_GROUP_VERSION,
        "kind": "RightsizingRecommendation",
        "metadata": {"name": name, "resourceVersion": resource_version},
        "status": serde_json::to_value(status).map_err(encode)?,
    });
    if let Some(spec) = spec {
        body["spec"] = spec.clone();
    }
    match api
        .replace_subresource("status", name, &PostParams::default(), &body)
        .await
    {
        Ok(obj) => Ok(obj.metadata.resource_version.unwrap_or_default()),
        Err(kube::Error::Api(s)) if s.code == 409 => Err(IntentError::Conflict {
            name: name.to_owned(),
            resource_version: resource_version.to_owned(),
        }),
        Err(source) => Err(IntentError::Kube {
            name: name.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::policy::Strategy;
    use kerf_api::rsr::ContainerChange;
    use kerf_api::{Quantity, Resource, ResourceRequirements};

    fn plan() -> ApplyPlan {
        let mut from = ResourceRequirements::default();
        from.requests
            .set(Resource::Cpu, Some(Quantity("250m".into())));
        let mut to = ResourceRequirements::default();
        to.requests
            .set(Resource::Cpu, Some(Quantity("120m".into())));
        ApplyPlan {
            strategy: Strategy::InPlace,
            containers: vec![ContainerChange {
                name: "app".into(),
                from,
                to,
            }],
            resources: vec![Resource::Cpu],
            hpa: None,
            reason: wk::REASON_RECOMMENDATION_APPLIED,
            approval: None,
            recommendation_id: "rec-1".into(),
            kept_limits: vec![],
        }
    }

    fn workload() -> EventWorkload {
        EventWorkload {
            namespace: "shop".into(),
            kind: "Deployment".into(),
            name: "checkout".into(),
        }
    }

    // rule: EV-12
    #[test]
    fn applied_event_reuses_the_id_recorded_in_the_intent() {
        let now = Utc::now();
        let change = new_change(&plan(), now);
        assert_eq!(change.state, ChangeState::Intent);
        let a = applied_event(&change, workload(), None, now);
        let b = applied_event(&change, workload(), None, now + Duration::seconds(5));
        assert_eq!(a.id, b.id);
        assert_eq!(a.id.to_string(), change.event_ids.applied.clone().unwrap());
        a.validate().unwrap();
        assert_eq!(a.containers.len(), 1);
    }

    /// A status whose change of [`plan`] was made at `now`.
    fn changing(now: DateTime<Utc>) -> RightsizingRecommendationStatus {
        RightsizingRecommendationStatus {
            change: Some(Box::new(new_change(&plan(), now))),
            ..Default::default()
        }
    }

    #[test]
    fn pending_events_are_kept_once_and_cleared_on_ack() {
        let now = Utc::now();
        let mut status = changing(now);
        let e = applied_event(status.change.as_ref().unwrap(), workload(), None, now);
        add_pending(&mut status, &e);
        add_pending(&mut status, &e);
        assert_eq!(status.change.as_ref().unwrap().pending_events.len(), 1);
        assert!(clear_pending(&mut status, &[e.id]));
        assert!(status.change.as_ref().unwrap().pending_events.is_empty());
    }

    #[test]
    fn in_place_watch_ends_after_the_watch_duration() {
        let now = Utc::now();
        let mut status = changing(now);
        mark_applied(&mut status, now, Duration::seconds(30));
        assert_eq!(status.change.as_ref().unwrap().state, ChangeState::Applied);
        assert_eq!(
            status.watch.as_ref().unwrap().end,
            Some(now + Duration::seconds(30))
        );
    }
}
