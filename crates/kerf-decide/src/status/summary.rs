//! What `kubectl get rsr` shows (`status.summary`, design D5): a pure function of the
//! status, the decision, the pod template and the recommendation.
//!
//! - CPU and MEMORY: the pod's request as its pods are meant to run it now, summed over
//!   the containers Kerf may change. A container's value is, in this order: the live
//!   in-place value (`status.live`); the `to` value of an in-place change that was
//!   released, or whose rollback kept that resource (the running pods keep it); the
//!   template's. Shown as `current→recommended` whenever the hub's recommendation differs,
//!   in every mode, in Kubernetes quantity form.
//! - REASON: why the rsr is in its phase. Applying and Applied: RecommendationApplied or
//!   ApprovedOnce, and CanaryResizing or CanaryWatching while the canary of an in-place
//!   change holds the other pods back; RolledBack: the signal (OOMKills, Restarts, Throttling); Released:
//!   ModeChanged (only while the mode keeps the workload out of auto-patch), or Reverted
//!   after a revert (annotation `kerf.getkerf.dev/revert`); Skipped,
//!   Blocked and Deferred: the decision's reason. An invalid annotation or policy names
//!   itself instead (InvalidAnnotation, InvalidPolicy), except while a change goes in or
//!   after a rollback. An annotation key Kerf does not read (UnknownAnnotation) changes
//!   nothing and does not replace REASON: Valid=False and a Warning Event name it. A later
//!   pass that finds nothing to do keeps the reason of the phase.
//! - MODE: the effective modes, with `(annotation)` or `(hub override)` when a layer above
//!   the policy set them.
//! - `-o wide`: the policy, the last change's time and the end of a running canary watch,
//!   the next window or the end of the block (RFC 3339).

use crate::duration::Rfc3339;
use crate::effective::Layer;
use crate::facts::{ContainerFacts, Facts};
use crate::quantity;
use crate::{Decision, Outcome};
use chrono::{DateTime, Utc};
use kerf_api::Resource;
use kerf_api::rsr::{
    CanaryStage, ChangeRecord, ChangeState, Phase, RightsizingRecommendationStatus, Summary,
};
use kerf_api::wellknown as wk;

/// An invalid input the Valid condition names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// InvalidSpec, InvalidAnnotation, InvalidPolicy or ContainerNotFound.
    pub reason: &'static str,
    /// The field or annotation and what is wrong.
    pub message: String,
}

/// What the summary is built from besides the status.
#[derive(Clone, Copy, Debug)]
pub struct SummaryInput<'a> {
    /// The phase the status shows.
    pub phase: Phase,
    /// The decision, when one was made.
    pub decision: Option<&'a Decision>,
    /// The workload's template and the recommendation; `None` keeps CPU and MEMORY.
    pub facts: Option<&'a Facts>,
    /// The RightsizingPolicy that selects the workload.
    pub policy_name: Option<&'a str>,
    /// Invalid fields and annotations.
    pub invalid: &'a [Invalid],
}

/// The summary of status `s` (whose change, live values and last rollback are current).
pub fn summary(s: &RightsizingRecommendationStatus, input: &SummaryInput<'_>) -> Summary {
    let prev = s.summary.clone().unwrap_or_default();
    let show = |r: Resource| match input.facts {
        Some(f) => Some(request_text(
            r,
            running_request(f, s, r),
            recommended_request(f, s, r),
        )),
        None => match r {
            Resource::Cpu => prev.cpu.clone(),
            Resource::Memory => prev.memory.clone(),
        },
    };
    Summary {
        cpu: show(Resource::Cpu),
        memory: show(Resource::Memory),
        mode: input.decision.map(mode_text).or(prev.mode.clone()),
        reason: reason(s, input).or(prev.reason.clone()),
        policy: input.policy_name.map(str::to_owned),
        last_change: s.change.as_deref().and_then(last_change),
        next: next(s, input),
    }
}

/// `500m`, or `500m→300m` while the recommendation differs.
pub fn request_text(r: Resource, current: i64, recommended: i64) -> String {
    let now = quantity::format(r, current);
    if current == recommended {
        now.0
    } else {
        format!("{now}\u{2192}{}", quantity::format(r, recommended))
    }
}

/// `auto-patch`, or `cpu:auto-patch,memory:audit` when the modes differ; followed by
/// where a mode comes from when a layer above the policy set it (`audit (annotation)`,
/// `off (hub override)`), so that a MODE that differs from the POLICY's says why.
pub fn mode_text(d: &Decision) -> String {
    let modes = if d.modes.cpu == d.modes.memory {
        d.modes.cpu.as_str().to_owned()
    } else {
        format!(
            "cpu:{},memory:{}",
            d.modes.cpu.as_str(),
            d.modes.memory.as_str()
        )
    };
    let mut sources: Vec<&str> = Vec::new();
    for layer in [d.mode_layers.cpu, d.mode_layers.memory] {
        let source = match layer {
            Layer::Annotation => MODE_FROM_ANNOTATION,
            Layer::HubOverride => MODE_FROM_HUB_OVERRIDE,
            Layer::Scope => MODE_FROM_SCOPE,
            _ => continue,
        };
        if !sources.contains(&source) {
            sources.push(source);
        }
    }
    if sources.is_empty() {
        modes
    } else {
        format!("{modes} ({})", sources.join(", "))
    }
}

/// MODE's note for a mode set by a workload annotation.
pub const MODE_FROM_ANNOTATION: &str = "annotation";
/// MODE's note for a mode set by the hub's override for the workload.
pub const MODE_FROM_HUB_OVERRIDE: &str = "hub override";
/// MODE's note for a mode set because the workload left the agent's scope.
pub const MODE_FROM_SCOPE: &str = "outside the scope";

/// The pod request of `r` as the pods are meant to run it now.
pub fn running_request(f: &Facts, s: &RightsizingRecommendationStatus, r: Resource) -> i64 {
    changeable(f).map(|c| running_value(s, c, r)).sum()
}

/// The pod request of `r` with the hub's recommended value of every container that has
/// one (the others at their running value).
pub fn recommended_request(f: &Facts, s: &RightsizingRecommendationStatus, r: Resource) -> i64 {
    changeable(f)
        .map(|c| {
            f.recommendation
                .containers
                .iter()
                .find(|rc| rc.name == c.name)
                .and_then(|rc| rc.requests.get(r))
                .and_then(|q| quantity::parse(r, q).ok())
                .unwrap_or_else(|| running_value(s, c, r))
        })
        .sum()
}

fn changeable(f: &Facts) -> impl Iterator<Item = &ContainerFacts> {
    f.workload.containers.iter().filter(|c| c.changeable())
}

fn running_value(s: &RightsizingRecommendationStatus, c: &ContainerFacts, r: Resource) -> i64 {
    container_running_value(s, &c.name, *c.requests.get(r), *c.limits.get(r), r)
}

/// The request of `r` that the pods of container `name` are meant to run now: the live
/// in-place value, else the value an in-place change left on the running pods, else the
/// template's request (or limit, which Kubernetes copies into an absent request), else 0.
pub fn container_running_value(
    s: &RightsizingRecommendationStatus,
    name: &str,
    template_request: Option<i64>,
    template_limit: Option<i64>,
    r: Resource,
) -> i64 {
    let live = s
        .live
        .as_ref()
        .and_then(|l| l.containers.iter().find(|l| l.name == name))
        .and_then(|l| l.requests.get(r).or(l.limits.get(r)))
        .and_then(|q| quantity::parse(r, q).ok());
    live.or_else(|| kept_in_place(s, name, r))
        .or(template_request)
        .or(template_limit)
        .unwrap_or(0)
}

/// The `to` value the running pods keep after an in-place change left `live`: a released
/// change, or a rolled-back one whose rollback did not restore `r`.
fn kept_in_place(s: &RightsizingRecommendationStatus, container: &str, r: Resource) -> Option<i64> {
    let change = s.change.as_ref().filter(|c| c.strategy.resizes_pods())?;
    let kept = match change.state {
        ChangeState::Released => true,
        ChangeState::RollingBack | ChangeState::RolledBack => s
            .last_rollback
            .as_ref()
            .filter(|rb| rb.change_id == change.id)
            .is_some_and(|rb| !rb.resources.contains(&r)),
        _ => false,
    };
    if !kept {
        return None;
    }
    let to = &change.containers.iter().find(|c| c.name == container)?.to;
    quantity::parse(r, to.requests.get(r)?).ok()
}

/// Why the rsr is in its phase; `None` keeps the previous reason (Pending).
pub fn reason(s: &RightsizingRecommendationStatus, input: &SummaryInput<'_>) -> Option<String> {
    let of_phase = match input.phase {
        Phase::Applying | Phase::Applied => s
            .change
            .as_ref()
            .map(|c| canary_reason(c).unwrap_or(applied_reason(c)))
            .or(input.decision.map(|d| d.reason())),
        Phase::RolledBack => s
            .last_rollback
            .as_ref()
            .map(|rb| rb.reason.as_str())
            .or(Some(wk::REASON_RESTARTS)),
        Phase::Released if s.change.as_ref().is_some_and(|c| c.revert) => Some(wk::REASON_REVERTED),
        Phase::Released => Some(wk::REASON_MODE_CHANGED),
        Phase::Skipped | Phase::Blocked | Phase::Deferred => input.decision.map(|d| d.reason()),
        Phase::Pending => None,
    };
    let invalid = input
        .invalid
        .iter()
        .map(|i| i.reason)
        .find(|r| INVALID_REASONS.contains(r));
    let acting = matches!(input.phase, Phase::Applying | Phase::RolledBack);
    match invalid {
        Some(r) if !acting => Some(r.to_owned()),
        _ => of_phase.map(str::to_owned),
    }
}

/// The Valid reasons that name themselves in REASON.
pub const INVALID_REASONS: &[&str] = &[
    wk::CONDITION_REASON_INVALID_ANNOTATION,
    wk::CONDITION_REASON_INVALID_POLICY,
    wk::CONDITION_REASON_INVALID_SPEC,
];

/// RecommendationApplied, ApprovedOnce for a change an operator approved once, or Reverted
/// for a revert.
pub fn applied_reason(c: &ChangeRecord) -> &'static str {
    if c.revert {
        wk::REASON_REVERTED
    } else if c.approval_id.is_some() {
        wk::REASON_APPROVED_ONCE
    } else {
        wk::REASON_RECOMMENDATION_APPLIED
    }
}

/// REASON while the canary of an in-flight change holds the other pods back.
pub const REASON_CANARY_RESIZING: &str = "CanaryResizing";
/// REASON while the canary pods are watched.
pub const REASON_CANARY_WATCHING: &str = "CanaryWatching";

/// CanaryResizing or CanaryWatching while a canary of the in-flight change `c` runs.
pub fn canary_reason(c: &ChangeRecord) -> Option<&'static str> {
    if !matches!(c.state, ChangeState::Intent | ChangeState::Applying) {
        return None;
    }
    match c.canary.as_ref()?.stage {
        CanaryStage::Resizing => Some(REASON_CANARY_RESIZING),
        CanaryStage::Watching => Some(REASON_CANARY_WATCHING),
        CanaryStage::Passed | CanaryStage::RolledBack => None,
    }
}

/// Keeps REASON and NEXT of an in-flight change with a canary current after a step of it
/// (no decision is made while a change is in flight, so its steps keep them themselves).
pub fn refresh_canary(s: &mut RightsizingRecommendationStatus) {
    let Some(c) = s.change.as_ref().filter(|c| c.canary.is_some()) else {
        return;
    };
    let reason = canary_reason(c).unwrap_or(applied_reason(c)).to_owned();
    let next = canary_end(s).map(|t| Rfc3339(t).to_string());
    let sum = s.summary.get_or_insert_with(Summary::default);
    sum.reason = Some(reason);
    sum.next = next;
}

/// When the canary watch of an in-flight change ends, while it runs.
fn canary_end(s: &RightsizingRecommendationStatus) -> Option<DateTime<Utc>> {
    let c = s.change.as_ref()?;
    canary_reason(c)?;
    c.canary.as_ref()?.watch.as_ref()?.end
}

fn last_change(c: &ChangeRecord) -> Option<DateTime<Utc>> {
    c.applied_at.or(Some(c.started_at))
}

/// The end of a running canary watch, else the next maintenance window, else the end of
/// the block, RFC 3339.
fn next(s: &RightsizingRecommendationStatus, input: &SummaryInput<'_>) -> Option<String> {
    let block = input.decision.and_then(|d| match &d.outcome {
        Outcome::Block(b) => b.next_window.or(b.until),
        _ => None,
    });
    canary_end(s)
        .or(block)
        .or(s.next_window)
        .map(|t| Rfc3339(t).to_string())
}
