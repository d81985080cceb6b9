//! `failed` events of a change (rules EV-13, EV-47, design D17): an API call of an action
//! that still fails after its retries records `failed` with `ApplyError` (template apply),
//! `ResizeError` (resize) or `ReleaseError` (release), the Kubernetes error in the message.
//! The event carries the id recorded in the intent and is recorded once per change, so it
//! is de-duplicated like a block: the retries go on with backoff, silently.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use kerf_api::event::{Event, EventWorkload};
use kerf_api::rsr::RightsizingRecommendationStatus;
use kerf_api::wellknown as wk;

use super::step::ActError;
use crate::executor::hpa::HpaError;
use crate::executor::resize::ResizeError;
use crate::executor::rollout::ApplyError;
use crate::intent;

/// Failed attempts of a retryable call before `failed` is recorded.
pub const FAILED_AFTER_ATTEMPTS: u32 = 3;

/// The action a failed call belonged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Applying a change (template, resize, HPA target).
    Apply,
    /// Releasing a change on leaving auto-patch.
    Release,
}

/// The `failed` reason of an action error and whether the call is retried; `None` when
/// the error is no failed API call (not the leader, a fail point, a pod or workload gone).
pub fn classify(e: &ActError, action: Action) -> Option<(&'static str, bool)> {
    let apply_reason = match action {
        Action::Apply => wk::REASON_APPLY_ERROR,
        Action::Release => wk::REASON_RELEASE_ERROR,
    };
    match e {
        ActError::NotLeader | ActError::Failpoint(_) => None,
        ActError::Resize(ResizeError::PodGone { .. } | ResizeError::NothingToSend { .. }) => None,
        ActError::Resize(r) => Some((wk::REASON_RESIZE_ERROR, r.is_retryable())),
        ActError::Apply(ApplyError::NotFound { .. }) => None,
        ActError::Apply(a) => Some((apply_reason, a.is_retryable())),
        ActError::Evict(_) => Some((apply_reason, true)),
        ActError::Hpa(h) => Some((
            apply_reason,
            matches!(h, HpaError::Forbidden { .. } | HpaError::Transient { .. }),
        )),
    }
}

/// Counts a failed attempt of `change_id` in `attempts`; returns the `failed` event when
/// this attempt spends the retries (at once for a call that is not retried), after adding
/// it to `pendingEvents` (design D25). Later attempts return `None`.
pub fn record(
    attempts: &mut HashMap<String, u32>,
    s: &mut RightsizingRecommendationStatus,
    workload: EventWorkload,
    e: &ActError,
    action: Action,
    now: DateTime<Utc>,
) -> Option<Event> {
    let (reason, retried) = classify(e, action)?;
    let id = s.change.as_ref()?.id.clone();
    let n = attempts.entry(id).or_insert(0);
    *n = n.saturating_add(1);
    let due = if retried {
        *n == FAILED_AFTER_ATTEMPTS
    } else {
        *n == 1
    };
    if !due {
        return None;
    }
    let what = match (action, reason) {
        (_, wk::REASON_RESIZE_ERROR) => "resize",
        (Action::Release, _) => "release",
        (Action::Apply, _) => "template apply",
    };
    // The failed id is recorded now that the outcome is decided (D25).
    let change = s.change.as_mut()?;
    intent::allocate(&mut change.event_ids.failed);
    let change = change.clone();
    let message = kerf_decide::status::text::failed(&change, what, &e.to_string());
    let event = intent::failed_event(&change, workload, reason, &message, now);
    intent::add_pending(s, &event);
    Some(event)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::rsr::{ChangeRecord, ChangeState, EventIds};

    fn status() -> RightsizingRecommendationStatus {
        RightsizingRecommendationStatus {
            change: Some(Box::new(ChangeRecord {
                id: "c1".into(),
                state: ChangeState::Applying,
                recommendation_id: "rec-1".into(),
                approval_id: None,
                strategy: kerf_api::Strategy::Rollout,
                resources: vec![kerf_api::Resource::Cpu],
                started_at: Utc::now(),
                first_resize_at: None,
                applied_at: None,
                containers: vec![],
                hpa: None,
                event_ids: EventIds {
                    applied: Some(uuid::Uuid::new_v4().to_string()),
                    ..EventIds::default()
                },
                pending_events: vec![],
                progress: None,
                canary: None,
                revert: false,
            })),
            ..Default::default()
        }
    }

    fn workload() -> EventWorkload {
        EventWorkload {
            namespace: "shop".into(),
            kind: "Deployment".into(),
            name: "web".into(),
        }
    }

    // rule: EV-13, EV-47
    #[test]
    fn a_retried_call_records_failed_once_after_its_retries() {
        let mut attempts = HashMap::new();
        let mut s = status();
        let e = ActError::Apply(ApplyError::Forbidden {
            message: "admission webhook denied the request".into(),
        });
        let now = Utc::now();
        let mut sent = Vec::new();
        for _ in 0..5 {
            sent.extend(record(
                &mut attempts,
                &mut s,
                workload(),
                &e,
                Action::Apply,
                now,
            ));
        }
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].reason, wk::REASON_APPLY_ERROR);
        assert!(
            sent[0]
                .message
                .as_deref()
                .unwrap_or_default()
                .contains("admission webhook denied")
        );
        let change = s.change.as_ref().unwrap();
        assert_eq!(Some(sent[0].id.to_string()), change.event_ids.failed);
        assert_eq!(change.pending_events.len(), 1);
    }

    // rule: EV-47
    #[test]
    fn the_reason_names_the_action() {
        let forbidden = ActError::Resize(ResizeError::Forbidden {
            message: "pods \"web-1\" is forbidden: exceeded quota".into(),
            rbac: false,
        });
        assert_eq!(
            classify(&forbidden, Action::Apply),
            Some((wk::REASON_RESIZE_ERROR, true))
        );
        let invalid = ActError::Apply(ApplyError::Invalid {
            message: "spec.template: Invalid value".into(),
        });
        assert_eq!(
            classify(&invalid, Action::Release),
            Some((wk::REASON_RELEASE_ERROR, false))
        );
        assert_eq!(classify(&ActError::NotLeader, Action::Apply), None);
    }
}
