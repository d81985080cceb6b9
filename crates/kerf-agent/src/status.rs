//! The rsr status built from a decision and the state of the change: a pure function, so
//! what `kubectl get rsr` and `kubectl describe rsr` show is tested without a cluster.
//!
//! - phase: the decision's (Blocked unless the last change is Applied, GR-40; Deferred
//!   with `nextWindow` while a deferred change waits, AP-24); Applying while a change is in
//!   flight; RolledBack while the last change is rolling or rolled back (until a new change
//!   starts, whatever blocks or skips meanwhile); Released while the mode keeps the
//!   released workload out of auto-patch (a mode skip), the decision's phase once it is
//!   back in auto-patch.
//! - conditions (design D5): Valid (naming every invalid field or annotation), Blocked
//!   (reason and message, GR-39), Applied, HealthWatch, Progressing. `lastTransitionTime`
//!   moves only when a condition's status changes.
//! - strategy: configured and effective; a fallback's rollout sticks until the configured
//!   strategy changes (AP-10, AP-13).
//! - summary for the printer columns (D5): [`crate::summary`].
//! - Progressing only where a rollout matters: while one is in progress, or for a workload
//!   whose changes go in by rollout; in-place and audit workloads do not show it otherwise.
//!
//! [`status_changed`] tells the caller whether a write is needed at all.

use chrono::{DateTime, Utc};
use kerf_api::condition::{Condition, ConditionStatus};
use kerf_api::policy::Strategy;
use kerf_api::rsr::{
    ChangeState, EffectiveModes, Phase, RightsizingRecommendationStatus, StrategyStatus,
};
use kerf_api::wellknown as wk;
use kerf_decide::duration::Rfc3339;
use kerf_decide::effective::{EffectivePolicy, Layer};
use kerf_decide::facts::Facts;
use kerf_decide::pipeline::Check;
use kerf_decide::{Decision, Outcome};

use crate::event_text;
use crate::summary::{self, SummaryInput};

pub use crate::summary::Invalid;

/// The invalid inputs of an effective policy and a decision: bad annotations, annotation
/// keys Kerf does not read, bad policy fields and recommended containers the template
/// lacks (design D8).
pub fn invalid_inputs(policy: &EffectivePolicy, decision: Option<&Decision>) -> Vec<Invalid> {
    let mut out: Vec<Invalid> = policy
        .problems
        .iter()
        .map(|p| Invalid {
            reason: match p.layer {
                Layer::Annotation if p.is_unknown_key() => wk::CONDITION_REASON_UNKNOWN_ANNOTATION,
                Layer::Annotation => wk::CONDITION_REASON_INVALID_ANNOTATION,
                Layer::Policy => wk::CONDITION_REASON_INVALID_POLICY,
                _ => wk::CONDITION_REASON_INVALID_SPEC,
            },
            message: format!("{} = {:?}: {}", p.field, p.value, p.message),
        })
        .collect();
    if let Some(d) = decision.filter(|d| !d.dropped_containers.is_empty()) {
        out.push(Invalid {
            reason: wk::CONDITION_REASON_CONTAINER_NOT_FOUND,
            message: format!(
                "recommended containers not in the pod template: {}",
                d.dropped_containers.join(", ")
            ),
        });
    }
    out
}

/// What the status is built from.
#[derive(Clone, Debug)]
pub struct StatusInput<'a> {
    /// The status as last written (or as the change's progress left it).
    pub previous: &'a RightsizingRecommendationStatus,
    /// The decision, when one was made.
    pub decision: Option<&'a Decision>,
    /// The facts of the decision (template and recommendation), for CPU and MEMORY.
    pub facts: Option<&'a Facts>,
    /// The RightsizingPolicy that selects the workload.
    pub policy_name: Option<&'a str>,
    /// metadata.generation of the rsr.
    pub generation: Option<i64>,
    /// Invalid fields and annotations (the Valid condition).
    pub invalid: &'a [Invalid],
    /// A rollout of the workload is in progress.
    pub rollout_in_progress: bool,
    /// The hub no longer lists the recommendation.
    pub withdrawn: bool,
    /// Now.
    pub now: DateTime<Utc>,
}

/// The summary reason of a withdrawn recommendation (a printer string, not an event reason).
pub const SUMMARY_WITHDRAWN: &str = "RecommendationWithdrawn";

/// Builds the status. The intent record, live values, watch, last rollback, reported keys
/// and consumed approvals are carried over from `previous`: their writers are the intent
/// record and the reconciler.
pub fn build_status(input: &StatusInput<'_>) -> RightsizingRecommendationStatus {
    let prev = input.previous;
    let mut s = prev.clone();
    s.observed_generation = input.generation.or(prev.observed_generation);
    if let Some(d) = input.decision {
        s.mode = Some(EffectiveModes {
            cpu: d.modes.cpu,
            memory: d.modes.memory,
        });
        s.strategy = Some(strategy_status(d, prev.strategy.as_ref()));
        s.next_window = match &d.outcome {
            Outcome::Block(b) if b.reason == wk::REASON_OUTSIDE_MAINTENANCE_WINDOW => b.next_window,
            _ => None,
        };
    }
    let phase = phase(input, prev);
    s.phase = Some(phase);
    let mut summary = summary::summary(
        &s,
        &SummaryInput {
            phase,
            decision: input.decision,
            facts: input.facts,
            policy_name: input.policy_name,
            invalid: input.invalid,
        },
    );
    // A refused recommendation names itself (InvalidSpec) rather than the withdrawal.
    if input.withdrawn && input.invalid.is_empty() {
        summary.reason = Some(SUMMARY_WITHDRAWN.to_owned());
    }
    s.summary = Some(summary);
    conditions(input, &mut s);
    s
}

/// The strategy to record: a fallback's rollout sticks while the configured strategy stays
/// the same (AP-13); an HPA-forced rollout is not recorded as sticky.
pub fn strategy_status(d: &Decision, prev: Option<&StrategyStatus>) -> StrategyStatus {
    let configured = d.strategy.configured;
    if let Some(p) = prev.filter(|p| {
        p.configured == configured
            && p.effective == Strategy::Rollout
            && p.fallback_reason.is_some()
    }) {
        return p.clone();
    }
    let sticky = d.strategy.fallback_reason.is_some();
    StrategyStatus {
        configured,
        effective: if sticky {
            Strategy::Rollout
        } else {
            configured
        },
        fallback_reason: d.strategy.fallback_reason.clone(),
    }
}

fn phase(input: &StatusInput<'_>, prev: &RightsizingRecommendationStatus) -> Phase {
    let state = prev.change.as_ref().map(|c| c.state);
    match state {
        Some(ChangeState::Intent | ChangeState::Applying) => return Phase::Applying,
        Some(ChangeState::RollingBack | ChangeState::RolledBack) => return Phase::RolledBack,
        _ => {}
    }
    let Some(d) = input.decision else {
        return prev.phase.unwrap_or(Phase::Pending);
    };
    match state {
        Some(ChangeState::Released) if is_mode_skip(&d.outcome) => Phase::Released,
        _ => d.phase,
    }
}

/// Whether the mode keeps every resource out of auto-patch: a released change shows
/// Released (ModeChanged) only then. Once the mode is auto-patch again the row shows the
/// decision's phase and reason, such as Skipped NoSignificantChange.
fn is_mode_skip(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Skip(s) if s.check == Check::Mode)
}

fn conditions(input: &StatusInput<'_>, s: &mut RightsizingRecommendationStatus) {
    let now = input.now;
    let generation = input.generation;
    let applied = applied_condition(s);
    let health = health_condition(s, now);
    // A revert has no watch: the HealthWatch of the change it replaced goes.
    let unwatched_revert = health.is_none() && s.change.as_ref().is_some_and(|c| c.revert);
    let by_rollout = changes_by_rollout(s);
    let mut set = |type_: &str, status, reason: &str, message: String| {
        set_condition(
            &mut s.conditions,
            Condition {
                type_: type_.to_owned(),
                status,
                reason: reason.to_owned(),
                message,
                last_transition_time: now,
                observed_generation: generation,
            },
        );
    };
    match input.invalid.first() {
        None => set(
            wk::CONDITION_VALID,
            ConditionStatus::True,
            wk::CONDITION_REASON_VALID,
            String::new(),
        ),
        Some(first) => {
            let all: Vec<&str> = input.invalid.iter().map(|i| i.message.as_str()).collect();
            set(
                wk::CONDITION_VALID,
                ConditionStatus::False,
                first.reason,
                all.join("; "),
            );
        }
    }
    if let Some(d) = input.decision {
        match &d.outcome {
            Outcome::Block(b) => set(
                wk::CONDITION_BLOCKED,
                ConditionStatus::True,
                b.reason,
                d.message.clone(),
            ),
            _ => set(
                wk::CONDITION_BLOCKED,
                ConditionStatus::False,
                wk::CONDITION_REASON_NOT_BLOCKED,
                String::new(),
            ),
        }
    }
    let (status, reason, message) = applied;
    set(wk::CONDITION_APPLIED, status, reason, message);
    if let Some((status, reason, message)) = health {
        set(wk::CONDITION_HEALTH_WATCH, status, reason, message);
    }
    if input.rollout_in_progress {
        set(
            wk::CONDITION_PROGRESSING,
            ConditionStatus::True,
            wk::CONDITION_REASON_ROLLOUT_IN_PROGRESS,
            "a rollout of the workload is in progress".to_owned(),
        );
    } else if by_rollout {
        set(
            wk::CONDITION_PROGRESSING,
            ConditionStatus::False,
            wk::CONDITION_REASON_ROLLOUT_COMPLETE,
            String::new(),
        );
    } else {
        s.conditions
            .retain(|c| c.type_ != wk::CONDITION_PROGRESSING);
    }
    if unwatched_revert {
        s.conditions
            .retain(|c| c.type_ != wk::CONDITION_HEALTH_WATCH);
    }
}

/// Whether the workload's changes go in by rollout: the last change did, or a resource is
/// in auto-patch and the effective strategy is a rollout (Progressing matters only then).
pub fn changes_by_rollout(s: &RightsizingRecommendationStatus) -> bool {
    if let Some(c) = &s.change {
        return c.strategy != Strategy::InPlace;
    }
    let auto = s.mode.as_ref().is_some_and(|m| {
        m.cpu == kerf_api::policy::Mode::AutoPatch || m.memory == kerf_api::policy::Mode::AutoPatch
    });
    auto && s
        .strategy
        .as_ref()
        .is_some_and(|st| st.effective != Strategy::InPlace)
}

fn applied_condition(
    s: &RightsizingRecommendationStatus,
) -> (ConditionStatus, &'static str, String) {
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
            format!("{} is live", event_text::applied(c)),
        ),
        ChangeState::Intent | ChangeState::Applying => (
            ConditionStatus::Unknown,
            wk::CONDITION_REASON_APPLYING,
            format!("{} is going in", event_text::applied(c)),
        ),
        ChangeState::RollingBack | ChangeState::RolledBack => (
            ConditionStatus::False,
            wk::CONDITION_REASON_NOT_APPLIED,
            format!("{} was rolled back", event_text::applied(c)),
        ),
        ChangeState::Released => (
            ConditionStatus::False,
            wk::CONDITION_REASON_NOT_APPLIED,
            format!("{}: field ownership released", event_text::applied(c)),
        ),
    }
}

/// HealthWatch (design D5): Unknown/Watching while the watch runs, False with the rollback
/// reason after a rollback of that change, True/Healthy after.
fn health_condition(
    s: &RightsizingRecommendationStatus,
    now: DateTime<Utc>,
) -> Option<(ConditionStatus, &'static str, String)> {
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

/// Whether writing `new` would change anything (compare before writing).
pub fn status_changed(
    old: Option<&RightsizingRecommendationStatus>,
    new: &RightsizingRecommendationStatus,
) -> bool {
    old != Some(new)
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
