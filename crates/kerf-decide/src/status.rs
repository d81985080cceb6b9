//! The rsr status built from a decision and the state of the change: a pure function, so
//! what `kubectl get rsr` and `kubectl describe rsr` show is tested without a cluster.
//!
//! - phase: the decision's (Blocked unless the last change is Applied, GR-40; Deferred
//!   with `nextWindow` while a deferred change waits, AP-24); Applying while a change is in
//!   flight; RolledBack while the last change is rolling or rolled back (until a new change
//!   starts, whatever blocks or skips meanwhile); Released while the mode keeps the
//!   released workload out of auto-patch (a mode skip), the decision's phase once it is
//!   back in auto-patch.
//! - conditions (design D5), in [`conditions`]: Valid (naming every invalid field or
//!   annotation), Blocked (reason and message, GR-39), Applied, HealthWatch, Progressing.
//!   `lastTransitionTime` moves only when a condition's status changes.
//! - strategy: configured and effective; a fallback's rollout sticks until the configured
//!   strategy changes (AP-10, AP-13).
//! - summary for the printer columns (D5): [`summary`]; the words of events and condition
//!   messages: [`text`].
//! - Progressing only where a rollout matters: while one is in progress, or for a workload
//!   whose changes go in by rollout; in-place and audit workloads do not show it otherwise.
//!
//! [`status_changed`] tells the caller whether a write is needed at all.

use chrono::{DateTime, Utc};
use kerf_api::policy::Strategy;
use kerf_api::rsr::{
    ChangeState, EffectiveModes, Phase, RightsizingRecommendationStatus, StrategyStatus,
};
use kerf_api::wellknown as wk;

use crate::effective::{EffectivePolicy, Layer};
use crate::facts::Facts;
use crate::pipeline::Check;
use crate::{Decision, Outcome};

pub mod conditions;
pub mod summary;
pub mod text;

use summary::SummaryInput;

pub use conditions::{changes_by_rollout, invalid_warning, refused_warning, set_condition};
pub use summary::Invalid;

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
    conditions::build_conditions(input, &mut s);
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

/// Whether writing `new` would change anything (compare before writing).
pub fn status_changed(
    old: Option<&RightsizingRecommendationStatus>,
    new: &RightsizingRecommendationStatus,
) -> bool {
    old != Some(new)
}
