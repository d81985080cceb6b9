//! The conditions of the rsr status (design D5): Valid, Blocked, Applied, HealthWatch and
//! Progressing, with `lastTransitionTime` moving only when a condition's status changes,
//! and the Warning Events a change of the Valid condition calls for.

use chrono::{DateTime, Utc};
use kerf_api::condition::{Condition, ConditionStatus};
use kerf_api::rsr::{ChangeState, RightsizingRecommendationStatus};
use kerf_api::wellknown as wk;

use super::text;
use super::{Invalid, StatusInput};
use crate::duration::Rfc3339;
use crate::{Decision, Outcome};

/// A condition's status, reason and message.
type ConditionParts = (ConditionStatus, &'static str, String);

/// What every condition of one status write carries besides its parts.
#[derive(Clone, Copy)]
struct Stamp {
    now: DateTime<Utc>,
    generation: Option<i64>,
}

impl Stamp {
    fn set(self, conditions: &mut Vec<Condition>, type_: &str, parts: ConditionParts) {
        let (status, reason, message) = parts;
        set_condition(
            conditions,
            Condition {
                type_: type_.to_owned(),
                status,
                reason: reason.to_owned(),
                message,
                last_transition_time: self.now,
                observed_generation: self.generation,
            },
        );
    }
}

/// Sets the conditions of status `s` (design D5) from `input` and the rest of `s`.
pub(super) fn build_conditions(input: &StatusInput<'_>, s: &mut RightsizingRecommendationStatus) {
    let stamp = Stamp {
        now: input.now,
        generation: input.generation,
    };
    let applied = applied_condition(s);
    let health = health_condition(s, input.now);
    // A revert has no watch: the HealthWatch of the change it replaced goes.
    let unwatched_revert = health.is_none() && s.change.as_ref().is_some_and(|c| c.revert);
    let progressing = progressing_condition(input.rollout_in_progress, changes_by_rollout(s));
    let list = &mut s.conditions;
    stamp.set(list, wk::CONDITION_VALID, valid_condition(input.invalid));
    if let Some(d) = input.decision {
        stamp.set(list, wk::CONDITION_BLOCKED, blocked_condition(d));
    }
    stamp.set(list, wk::CONDITION_APPLIED, applied);
    if let Some(parts) = health {
        stamp.set(list, wk::CONDITION_HEALTH_WATCH, parts);
    }
    match progressing {
        Some(parts) => stamp.set(list, wk::CONDITION_PROGRESSING, parts),
        None => list.retain(|c| c.type_ != wk::CONDITION_PROGRESSING),
    }
    if unwatched_revert {
        list.retain(|c| c.type_ != wk::CONDITION_HEALTH_WATCH);
    }
}

/// Valid (design D8): True, or False with the first invalid input's reason and every
/// invalid input's message.
fn valid_condition(invalid: &[Invalid]) -> ConditionParts {
    match invalid.first() {
        None => (
            ConditionStatus::True,
            wk::CONDITION_REASON_VALID,
            String::new(),
        ),
        Some(first) => {
            let all: Vec<&str> = invalid.iter().map(|i| i.message.as_str()).collect();
            (ConditionStatus::False, first.reason, all.join("; "))
        }
    }
}

/// Blocked (GR-39): True with the block's reason and the decision's message, else False.
fn blocked_condition(d: &Decision) -> ConditionParts {
    match &d.outcome {
        Outcome::Block(b) => (ConditionStatus::True, b.reason, d.message.clone()),
        _ => (
            ConditionStatus::False,
            wk::CONDITION_REASON_NOT_BLOCKED,
            String::new(),
        ),
    }
}

/// Progressing: True while a rollout is in progress, False once it completed for a
/// workload whose changes go in by rollout, `None` (no condition) otherwise.
fn progressing_condition(rollout_in_progress: bool, by_rollout: bool) -> Option<ConditionParts> {
    if rollout_in_progress {
        Some((
            ConditionStatus::True,
            wk::CONDITION_REASON_ROLLOUT_IN_PROGRESS,
            "a rollout of the workload is in progress".to_owned(),
        ))
    } else if by_rollout {
        Some((
            ConditionStatus::False,
            wk::CONDITION_REASON_ROLLOUT_COMPLETE,
            String::new(),
        ))
    } else {
        None
    }
}

/// Whether the workload's changes go in by rollout: the last change did, or a resource is
/// in auto-patch and the effective strategy is a rollout (Progressing matters only then).
pub fn changes_by_rollout(s: &RightsizingRecommendationStatus) -> bool {
    if let Some(c) = &s.change {
        return !c.strategy.resizes_pods();
    }
    let auto = s.mode.as_ref().is_some_and(|m| {
        m.cpu == kerf_api::policy::Mode::AutoPatch || m.memory == kerf_api::policy::Mode::AutoPatch
    });
    auto && s
        .strategy
        .as_ref()
        .is_some_and(|st| !st.effective.resizes_pods())
}

fn applied_condition(s: &RightsizingRecommendationStatus) -> ConditionParts {
    let Some(c) = &s.change else {
        return (
            ConditionStatus::False,
            wk::CONDITION_REASON_NOT_APPLIED,
            String::new(),
        );
    };
    let reason = if c.approval_id.is_some() {
        wk::REASON_APPROVED_ONCE
    } else {
        wk::REASON_RECOMMENDATION_APPLIED
    };
    match c.state {
        ChangeState::Applied => (
            ConditionStatus::True,
            reason,
            format!("{} is live", text::applied(c)),
        ),
        ChangeState::Intent | ChangeState::Applying => (
            ConditionStatus::Unknown,
            wk::CONDITION_REASON_APPLYING,
            format!("{} is going in", text::applied(c)),
        ),
        ChangeState::RollingBack | ChangeState::RolledBack => (
            ConditionStatus::False,
            wk::CONDITION_REASON_NOT_APPLIED,
            format!("{} was rolled back", text::applied(c)),
        ),
        ChangeState::Released => (
            ConditionStatus::False,
            wk::CONDITION_REASON_NOT_APPLIED,
            format!("{}: field ownership released", text::applied(c)),
        ),
    }
}

/// HealthWatch (design D5): Unknown/Watching while the watch runs, False with the rollback
/// reason after a rollback of that change, True/Healthy after.
fn health_condition(
    s: &RightsizingRecommendationStatus,
    now: DateTime<Utc>,
) -> Option<ConditionParts> {
    let change = s.change.as_ref()?;
    if let Some(rb) = s
        .last_rollback
        .as_ref()
        .filter(|r| r.change_id == change.id)
    {
        let reason = wk::ROLLED_BACK_REASONS
            .iter()
            .find(|r| **r == rb.reason)
            .copied()
            .unwrap_or(wk::REASON_RESTARTS);
        return Some((
            ConditionStatus::False,
            reason,
            format!("rolled back at {}", Rfc3339(rb.time)),
        ));
    }
    let watch = s.watch.as_ref()?;
    match watch.end {
        Some(end) if now >= end => Some((
            ConditionStatus::True,
            wk::CONDITION_REASON_HEALTHY,
            format!("no threshold crossed until {}", Rfc3339(end)),
        )),
        Some(end) => Some((
            ConditionStatus::Unknown,
            wk::CONDITION_REASON_WATCHING,
            format!("watching until {}", Rfc3339(end)),
        )),
        None => Some((
            ConditionStatus::Unknown,
            wk::CONDITION_REASON_WATCHING,
            "watching; the watch ends after the rollout completes".to_owned(),
        )),
    }
}

/// Sets a condition, keeping `lastTransitionTime` when its status does not change.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time;
            }
            *old = new;
        }
        None => conditions.push(new),
    }
}

/// The Warning Kubernetes Event an invalid input calls for: when the Valid condition of
/// `new` names one (InvalidAnnotation, InvalidPolicy, UnknownAnnotation) and `old` did not
/// say the same. Returns the reason and the message (every invalid field). The status is
/// kept in the API server, so a restart or a later pass does not warn again.
pub fn invalid_warning(
    old: &RightsizingRecommendationStatus,
    new: &RightsizingRecommendationStatus,
) -> Option<(&'static str, String)> {
    let reasons = [
        wk::CONDITION_REASON_INVALID_ANNOTATION,
        wk::CONDITION_REASON_INVALID_POLICY,
        wk::CONDITION_REASON_UNKNOWN_ANNOTATION,
    ];
    valid_warning(old, new, &reasons)
}

/// The Warning Kubernetes Event of a refused recommendation (Valid=False InvalidSpec, the
/// message naming the recommendation id and every refused field), once per recommendation
/// id as [`invalid_warning`] is once per invalid input.
pub fn refused_warning(
    old: &RightsizingRecommendationStatus,
    new: &RightsizingRecommendationStatus,
) -> Option<(&'static str, String)> {
    valid_warning(old, new, &[wk::CONDITION_REASON_INVALID_SPEC])
}

fn valid_warning(
    old: &RightsizingRecommendationStatus,
    new: &RightsizingRecommendationStatus,
    reasons: &[&'static str],
) -> Option<(&'static str, String)> {
    let valid = |s: &RightsizingRecommendationStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == wk::CONDITION_VALID)
            .cloned()
    };
    let now = valid(new).filter(|c| c.status == ConditionStatus::False)?;
    let reason = reasons.iter().copied().find(|r| *r == now.reason)?;
    let before = valid(old);
    let same = before.is_some_and(|b| {
        b.status == now.status && b.reason == now.reason && b.message == now.message
    });
    (!same).then_some((reason, now.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(status: ConditionStatus, at: &str) -> Condition {
        Condition {
            type_: "Blocked".into(),
            status,
            reason: "Cooldown".into(),
            message: String::new(),
            last_transition_time: at.parse().unwrap(),
            observed_generation: None,
        }
    }

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let mut list = vec![cond(ConditionStatus::True, "2026-01-01T00:00:00Z")];
        // (the status set, when, the transition time after it)
        let steps = [
            (
                ConditionStatus::True,
                "2026-01-02T00:00:00Z",
                "2026-01-01T00:00:00Z",
            ),
            (
                ConditionStatus::False,
                "2026-01-03T00:00:00Z",
                "2026-01-03T00:00:00Z",
            ),
        ];
        for (status, at, transition) in steps {
            set_condition(&mut list, cond(status, at));
            let want: DateTime<Utc> = transition.parse().unwrap();
            assert_eq!(list[0].last_transition_time, want, "{at}");
        }
        assert_eq!(list.len(), 1);
    }

    /// A status whose change `c1` is under a health watch ending at `end`, rolled back at
    /// `rolled_back` when given.
    fn watched(end: &str, rolled_back: Option<&str>) -> RightsizingRecommendationStatus {
        let mut s = serde_json::json!({
            "change": {"id": "c1", "state": "Applied", "recommendationID": "r",
                "strategy": "in-place", "resources": ["cpu"],
                "startedAt": "2026-12-04T15:00:00Z", "containers": []},
            "watch": {"start": "2026-12-04T15:00:00Z", "end": end},
        });
        if let Some(at) = rolled_back {
            s["lastRollback"] = serde_json::json!({"time": at, "reason": "OOMKilled", "resources": ["cpu"], "changeId": "c1"});
        }
        serde_json::from_value(s).unwrap()
    }

    // One time format across logs, status, explain and report (issue 32).
    #[test]
    fn health_condition_messages_write_times_in_utc_with_z_and_whole_seconds() {
        let at = |t: &str| t.parse::<DateTime<Utc>>().unwrap();
        let end = "2026-12-04T15:45:00.250Z";
        let message = |s: &RightsizingRecommendationStatus, now: &str| {
            health_condition(s, at(now))
                .map(|(_, _, m)| m)
                .unwrap_or_default()
        };
        let cases = [
            (
                watched(end, None),
                "2026-12-04T15:10:00Z",
                "watching until 2026-12-04T15:45:00Z",
            ),
            (
                watched(end, None),
                "2026-12-04T16:00:00Z",
                "no threshold crossed until 2026-12-04T15:45:00Z",
            ),
            (
                watched(end, Some("2026-12-04T15:20:00.5Z")),
                "2026-12-04T15:30:00Z",
                "rolled back at 2026-12-04T15:20:00Z",
            ),
        ];
        for (s, now, want) in cases {
            assert_eq!(message(&s, now), want);
        }
    }
}
