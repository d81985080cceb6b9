//! A change that went in but has not settled on the workload yet: pods resized in place
//! whose status does not show the new values (a resize accepted, pending or Deferred by
//! the kubelet), or a rollout still progressing. While the change settles, a pass reports
//! the change's progress and takes no new decision about the recommendation the change
//! applied: the facts of such a decision would mix the pods' old values with the new
//! target, and report a block (a cooldown, say) for the change that is going in.
//!
//! A new recommendation from the hub is decided as usual (its cooldown block is real). A
//! rollout settles when its controller has rolled every replica (a rollout that stalls is
//! the health watch's to judge); an in-place change whose pods do not show it within
//! `fallbackAfter` of going in no longer holds decisions back: the pods then show what the
//! change achieved.

use chrono::{DateTime, Duration, Utc};
use kerf_api::Strategy;
use kerf_api::rsr::ChangeState;

use super::{PassFacts, rolling};
use crate::effective::EffectivePolicy;

/// How soon a settling change is looked at again, besides the pod and workload updates
/// that trigger a pass anyway.
pub const SETTLE_RECHECK: Duration = Duration::seconds(2);

/// Whether the applied change of the rsr is still settling on the workload and is the
/// change of the recommendation the rsr holds now: the pass then decides nothing new.
pub fn settling(f: &PassFacts<'_>, policy: &EffectivePolicy, now: DateTime<Utc>) -> bool {
    settle_end(f, policy, now).is_some()
}

/// Until when the applied change of the rsr settles, while it settles.
fn settle_end(
    f: &PassFacts<'_>,
    policy: &EffectivePolicy,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let c = f.status.change.as_ref()?;
    if c.state != ChangeState::Applied
        || c.recommendation_id != f.facts.recommendation.recommendation_id
    {
        return None;
    }
    let w = &f.workload;
    let end = match c.strategy {
        s if s.resizes_pods() => {
            if w.pods_settled {
                return None;
            }
            c.applied_at.unwrap_or(c.started_at) + policy.fallback_after.value
        }
        // A change of the template settles once the template holds it; a rollout also
        // waits for the rollout it started (a deferred one is followed by its window).
        _ if !w.template_covers_change => DateTime::<Utc>::MAX_UTC,
        Strategy::Rollout if rolling(w) => DateTime::<Utc>::MAX_UTC,
        _ => return None,
    };
    (now < end).then_some(end)
}

/// When to look again at a settling change: soon, and at the latest when it stops holding
/// decisions back.
pub fn settle_wake(
    f: &PassFacts<'_>,
    policy: &EffectivePolicy,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    settle_end(f, policy, now).map(|end| end.min(now + SETTLE_RECHECK))
}
