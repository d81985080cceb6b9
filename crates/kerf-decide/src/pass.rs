//! One pass over one workload: which single step it carries out next.
//!
//! The agent gathers the facts of a workload once ([`PassFacts`]), asks [`next_step`] what
//! to do, carries out that one step, records status and events and schedules the next
//! pass. The steps are tried in [`StepKind::ORDER`]; the first that is due is the step of
//! the pass. A pass that acted is followed at once by another one (once the caches show
//! its own write), so a change that needs several steps takes them in consecutive passes.
//!
//! While a change is in flight (`Intent`, `Applying`) or settles on the workload after it
//! went in ([`settling`]), the pass reports the change's progress and never takes a new
//! decision about the recommendation it applies; and no pass acts on facts older than the
//! agent's own last write to the workload, its pods or its rsr ([`fresh`]).
//!
//! The guardrails around the steps live here too: the freeze and the pause that hold a
//! start or a release (AP-34, AP-35, EV-39), the release that waits for them (D21), the
//! HPA target written after the rollout (D22), the OnDelete eviction that waits for a
//! health breach to be rolled back first (AP-58), and the wake-up times of a workload.

use chrono::{DateTime, Utc};
use kerf_api::rsr::{ChangeState, HpaOrder, RightsizingRecommendationStatus};
use kerf_api::{ConditionStatus, Resource, WorkloadKind};
use kerf_api::{Strategy, wellknown as wk};

use crate::effective::EffectivePolicy;
use crate::facts::Facts;
use crate::health::Breach;
use crate::pipeline::{Decision, Outcome};
use crate::window::{WindowKind, evaluate_windows};

pub mod fresh;
mod release;
pub mod revert;
mod settle;

pub use self::release::{Release, release_due, release_hold, report_hold};
pub use self::revert::revert_plan;
pub use self::settle::{SETTLE_RECHECK, settle_wake, settling};

/// The kinds of step of a pass, in the order they are tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StepKind {
    /// The hub withdrew the recommendation: say so in status, nothing else.
    Withdrawn,
    /// A change in `Intent` or `Applying` goes on (design D25): its progress, no decision.
    Resume,
    /// A rollback left in `RollingBack` goes on (RB-28).
    ResumeRollback,
    /// Resources of the applied change left auto-patch: release them (D21, AP-21, EV-46).
    Release,
    /// The health watch found a breach: roll the change back (RB-11).
    RollBack,
    /// The higher HPA target of an applied change, once its rollout completed (D22).
    HpaAfter,
    /// Outdated pods of an OnDelete StatefulSet are replaced (AP-52..AP-61).
    Evict,
    /// The applied change of the recommendation settles on the workload (pods not showing
    /// its values yet, a rollout progressing): its progress, no new decision.
    Settle,
    /// The annotation `kerf.getkerf.dev/revert` asks for the template's values and some
    /// differ: a change puts them back ([`revert::revert_plan`]). Like a rollback it waits
    /// for no freeze, pause or cooldown; it comes after every step of a change under way
    /// and waits for a rollout in progress to end.
    Revert,
    /// A new decision applies a change: intent first, then the action (D25).
    Start,
    /// A new decision that acts on nothing: report its skip or block.
    Report,
}

impl StepKind {
    /// Whether the step finishes what the agent already did (a change in flight, its
    /// rollback, its release, its later writes), as a workload that left the agent's scope
    /// still needs: not a new decision, a report nor the withdrawal.
    pub fn winds_down(self) -> bool {
        !matches!(
            self,
            StepKind::Withdrawn | StepKind::Revert | StepKind::Start | StepKind::Report
        )
    }

    /// Every step kind in the order [`next_step`] tries them.
    pub const ORDER: [StepKind; 11] = [
        StepKind::Withdrawn,
        StepKind::Resume,
        StepKind::ResumeRollback,
        StepKind::Release,
        StepKind::RollBack,
        StepKind::HpaAfter,
        StepKind::Evict,
        StepKind::Settle,
        StepKind::Revert,
        StepKind::Start,
        StepKind::Report,
    ];
}

/// A decision of a pass, with the release it holds back, if any (D21).
#[derive(Clone, Debug)]
pub struct Decided {
    /// The decision, with a held release reported for its resources.
    pub decision: Decision,
    /// When a freeze window holding a release closes (decide again then).
    pub hold_until: Option<DateTime<Utc>>,
}

/// The one step of a pass.
#[derive(Clone, Debug)]
pub enum Step {
    /// See [`StepKind::Withdrawn`].
    Withdrawn,
    /// See [`StepKind::Resume`]; `may_start` is false while a freeze or a pause is open:
    /// pods not resized yet wait.
    Resume {
        /// Whether new resizes may start.
        may_start: bool,
    },
    /// See [`StepKind::ResumeRollback`].
    ResumeRollback,
    /// See [`StepKind::Revert`]: the revert's decision, carried out as a start.
    Revert(Box<Decided>),
    /// See [`StepKind::Release`].
    Release(Release),
    /// See [`StepKind::RollBack`].
    RollBack(Box<Breach>),
    /// See [`StepKind::HpaAfter`].
    HpaAfter,
    /// See [`StepKind::Evict`]: the pods to evict in this pass.
    Evict(Vec<String>),
    /// See [`StepKind::Settle`].
    Settle,
    /// See [`StepKind::Start`].
    Start(Box<Decided>),
    /// See [`StepKind::Report`].
    Report(Box<Decided>),
}

impl Step {
    /// The kind of the step.
    pub fn kind(&self) -> StepKind {
        match self {
            Step::Withdrawn => StepKind::Withdrawn,
            Step::Resume { .. } => StepKind::Resume,
            Step::ResumeRollback => StepKind::ResumeRollback,
            Step::Revert(_) => StepKind::Revert,
            Step::Release(_) => StepKind::Release,
            Step::RollBack(_) => StepKind::RollBack,
            Step::HpaAfter => StepKind::HpaAfter,
            Step::Evict(_) => StepKind::Evict,
            Step::Settle => StepKind::Settle,
            Step::Start(_) => StepKind::Start,
            Step::Report(_) => StepKind::Report,
        }
    }
}

/// The workload as its controller reports it (status fields the steps read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadState {
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: WorkloadKind,
    /// A StatefulSet with `updateStrategy: OnDelete`.
    pub on_delete: bool,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
    /// `spec.replicas`.
    pub replicas: Option<i32>,
    /// `status.replicas`.
    pub status_replicas: Option<i32>,
    /// `status.updatedReplicas`.
    pub updated_replicas: Option<i32>,
    /// `status.desiredNumberScheduled` (DaemonSet).
    pub desired_number_scheduled: Option<i32>,
    /// `status.updatedNumberScheduled` (DaemonSet).
    pub updated_number_scheduled: Option<i32>,
    /// The pod template holds every value of the recorded change.
    pub template_covers_change: bool,
    /// Every running pod whose spec holds the values of the recorded change also shows
    /// them in its status, with no resize pending or in progress.
    pub pods_settled: bool,
    /// The rollout of the template has completed (every pod updated and available).
    pub rollout_complete: bool,
    /// The target utilization the HPA of the change has now for its resource, if the HPA
    /// and that metric are there.
    pub hpa_target: Option<i32>,
}

/// Outdated pods of an OnDelete StatefulSet, as the replacement plan sees them before any
/// guardrail: none, some waiting for their turn, or some ready to go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Outdated {
    /// No outdated pod (or not an OnDelete StatefulSet).
    #[default]
    None,
    /// Outdated pods wait (a pod not Ready or settling, a replacement under way);
    /// look again at `until` or soon.
    Waiting {
        /// When the wait ends, if known.
        until: Option<DateTime<Utc>>,
    },
    /// These pods may be evicted now.
    Ready(Vec<String>),
}

/// Everything one pass knows, gathered once.
#[derive(Clone, Debug)]
pub struct PassFacts<'a> {
    /// The rsr status as the pass found it.
    pub status: &'a RightsizingRecommendationStatus,
    /// The facts of a decision.
    pub facts: &'a Facts,
    /// The hub no longer lists the recommendation.
    pub withdrawn: bool,
    /// The workload's controller status.
    pub workload: WorkloadState,
    /// The breach the health watch found in this pass, if any.
    pub breach: Option<Breach>,
    /// Outdated OnDelete pods.
    pub outdated: Outdated,
}

/// The next step of a pass: the first kind of [`StepKind::ORDER`] that is due. When no
/// change is under way, the pipeline decides (once) whether a change starts or the pass
/// reports.
pub fn next_step(f: &PassFacts<'_>, policy: &EffectivePolicy, now: DateTime<Utc>) -> Step {
    let under_way = StepKind::ORDER
        .iter()
        .take_while(|k| **k < StepKind::Start)
        .find_map(|k| step_if_due(*k, f, policy, now));
    under_way.unwrap_or_else(|| {
        let d = Box::new(decided(f, policy, now));
        match d.decision.outcome {
            Outcome::Apply(_) => Step::Start(d),
            _ => Step::Report(d),
        }
    })
}

fn step_if_due(
    kind: StepKind,
    f: &PassFacts<'_>,
    policy: &EffectivePolicy,
    now: DateTime<Utc>,
) -> Option<Step> {
    let state = f.status.change.as_ref().map(|c| c.state);
    match kind {
        StepKind::Withdrawn => f.withdrawn.then_some(Step::Withdrawn),
        // A breach of an in-flight change is a breach of its canary: the rollback goes first.
        StepKind::Resume => (in_flight(f.status) && f.breach.is_none()).then(|| Step::Resume {
            may_start: !frozen(f.facts, policy, now),
        }),
        StepKind::ResumeRollback => {
            (state == Some(ChangeState::RollingBack)).then_some(Step::ResumeRollback)
        }
        // Pods of a rollout in progress are about to be replaced: the revert waits for it.
        // So do pods still taking the values of the last in-place revert.
        StepKind::Revert => (policy.revert && !rolling(&f.workload) && !revert::settling(f))
            .then(|| revert_plan(f.facts, f.status))
            .flatten()
            .map(|plan| {
                let d = crate::decide(f.facts, policy, now);
                Step::Revert(Box::new(Decided {
                    decision: revert::revert_decision(d, f.facts, plan),
                    hold_until: None,
                }))
            }),
        StepKind::Release => release_due(f.status, policy)
            .filter(|_| !frozen(f.facts, policy, now))
            .map(Step::Release),
        StepKind::RollBack => f.breach.clone().map(|b| Step::RollBack(Box::new(b))),
        StepKind::HpaAfter => hpa_after_due(f.status, &f.workload).then_some(Step::HpaAfter),
        StepKind::Evict => evict_now(f, policy, now).map(Step::Evict),
        StepKind::Settle => settling(f, policy, now).then_some(Step::Settle),
        // Decided once, in `next_step`.
        StepKind::Start | StepKind::Report => None,
    }
}

/// The decision of the pipeline, with a release held by a freeze or a pause reported for
/// the resources it would release (D21).
fn decided(f: &PassFacts<'_>, policy: &EffectivePolicy, now: DateTime<Utc>) -> Decided {
    let mut decision = crate::decide(f.facts, policy, now);
    if policy.revert {
        return Decided {
            decision: revert::hold(decision),
            hold_until: None,
        };
    }
    let mut hold_until = None;
    if let Some(held) = release_hold(f.status, f.facts, policy, now) {
        hold_until = held.until.map(|t| t.max(now));
        report_hold(&mut decision, held);
    }
    Decided {
        decision,
        hold_until,
    }
}

/// Whether a change is in flight: recorded as `Intent` or `Applying` (design D25).
pub fn in_flight(s: &RightsizingRecommendationStatus) -> bool {
    s.change
        .as_ref()
        .is_some_and(|c| matches!(c.state, ChangeState::Intent | ChangeState::Applying))
}

/// Whether the agent still has something to finish on a workload that left its scope: a
/// change in flight, an applied change whose fields it holds, a rollback under way, or
/// events the status holds until the hub acknowledges them. Until then the workload's
/// passes wind it down ([`StepKind::winds_down`]).
pub fn left_to_wind_down(s: &RightsizingRecommendationStatus) -> bool {
    s.change.as_ref().is_some_and(|c| {
        !c.pending_events.is_empty()
            || matches!(
                c.state,
                ChangeState::Intent
                    | ChangeState::Applying
                    | ChangeState::Applied
                    | ChangeState::RollingBack
            )
    })
}

/// Whether a freeze window, the cluster-wide freeze or a pause is open (AP-34, AP-35,
/// EV-39): nothing starts and nothing is released.
pub fn frozen(facts: &Facts, policy: &EffectivePolicy, now: DateTime<Utc>) -> bool {
    facts.cluster_freeze.now
        || facts.hub.pause.is_some()
        || evaluate_windows(WindowKind::Freeze, &policy.freeze_windows.value, now).open
        || evaluate_windows(WindowKind::Freeze, &facts.cluster_freeze.windows, now).open
}

/// Whether an applied change still has a higher HPA target to write: its order is After,
/// it is not written yet, the rollout it waits for completed with the template holding the
/// change (D22), and the HPA still has the old target (or already the new one, to record).
/// A target someone else changed, or an HPA that is gone, is left alone.
pub fn hpa_after_due(s: &RightsizingRecommendationStatus, w: &WorkloadState) -> bool {
    let waiting = s.change.as_ref().and_then(|c| {
        c.hpa.as_ref().filter(|h| {
            c.state == ChangeState::Applied
                && h.order == HpaOrder::After
                && !h.written
                && h.from != h.to
        })
    });
    waiting.is_some_and(|h| {
        w.template_covers_change
            && w.rollout_complete
            && w.hpa_target.is_some_and(|t| t == h.from || t == h.to)
    })
}

fn applied_rollout(s: &RightsizingRecommendationStatus) -> bool {
    s.change
        .as_ref()
        .is_some_and(|c| c.state == ChangeState::Applied && c.strategy != Strategy::InPlace)
}

fn generation_observed(w: &WorkloadState) -> bool {
    w.observed_generation
        .zip(w.generation)
        .is_none_or(|(o, g)| o >= g)
}

/// Whether the change has outdated OnDelete pods to replace: an applied rollout of an
/// OnDelete StatefulSet whose controller has seen the patched template (AP-52).
pub fn on_delete_due(s: &RightsizingRecommendationStatus, w: &WorkloadState) -> bool {
    w.on_delete && generation_observed(w) && applied_rollout(s) && w.template_covers_change
}

/// Whether an applied rollout of an OnDelete StatefulSet waits for its controller to
/// observe the patched template.
pub fn on_delete_waits_for_controller(
    s: &RightsizingRecommendationStatus,
    w: &WorkloadState,
) -> bool {
    w.on_delete && applied_rollout(s) && !generation_observed(w)
}

/// Whether an outdated OnDelete pod may be evicted: no freeze, no pause (AP-34, EV-39) and
/// no health breach (AP-58).
pub fn eviction_allowed(f: &PassFacts<'_>, policy: &EffectivePolicy, now: DateTime<Utc>) -> bool {
    f.breach.is_none() && !frozen(f.facts, policy, now)
}

fn evict_now(
    f: &PassFacts<'_>,
    policy: &EffectivePolicy,
    now: DateTime<Utc>,
) -> Option<Vec<String>> {
    let Outdated::Ready(pods) = &f.outdated else {
        return None;
    };
    (on_delete_due(f.status, &f.workload) && eviction_allowed(f, policy, now) && !pods.is_empty())
        .then(|| pods.clone())
}

/// How soon outdated OnDelete pods that wait are looked at again, besides the pod and
/// workload updates that trigger a pass anyway.
pub const ON_DELETE_RECHECK: chrono::Duration = chrono::Duration::seconds(2);

/// When to look again at outdated OnDelete pods that wait: at the end of a pod's settle
/// time (AP-56), else soon while the controller has not seen the template, a replacement
/// is under way, or a freeze, a pause or a breach holds the eviction.
pub fn on_delete_wake(
    f: &PassFacts<'_>,
    policy: &EffectivePolicy,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if on_delete_waits_for_controller(f.status, &f.workload) {
        return Some(now + ON_DELETE_RECHECK);
    }
    if !on_delete_due(f.status, &f.workload) {
        return None;
    }
    match &f.outdated {
        Outdated::None => None,
        Outdated::Waiting { until } => Some(until.unwrap_or(now + ON_DELETE_RECHECK)),
        Outdated::Ready(_) if !eviction_allowed(f, policy, now) => Some(now + ON_DELETE_RECHECK),
        Outdated::Ready(_) => None,
    }
}

/// Whether a rollout of the workload is in progress: the controller has not seen the
/// latest template, or not every replica runs it yet.
pub fn rolling(w: &WorkloadState) -> bool {
    if w.observed_generation
        .zip(w.generation)
        .is_some_and(|(o, g)| o < g)
    {
        return true;
    }
    match w.kind {
        WorkloadKind::DaemonSet => {
            w.updated_number_scheduled.unwrap_or(0) < w.desired_number_scheduled.unwrap_or(0)
        }
        _ => {
            let want = w.replicas.unwrap_or(1);
            w.updated_replicas.unwrap_or(0) < want || w.status_replicas.unwrap_or(0) > want
        }
    }
}

/// Whether the watch of the canary of an in-flight change is evaluated: the canary pods
/// run the new values and the canary has not passed (its last evaluation, at the end,
/// passes it).
pub fn canary_watch_due(s: &RightsizingRecommendationStatus) -> bool {
    s.change.as_ref().is_some_and(|c| {
        c.state == ChangeState::Applying
            && c.canary.as_ref().is_some_and(|k| {
                k.stage == kerf_api::rsr::CanaryStage::Watching && k.watch.is_some()
            })
    })
}

/// Whether the health watch is evaluated at `now`: it runs (no end yet, or before it), or
/// it has ended and HealthWatch does not say so yet (one last evaluation reports Healthy,
/// RB-19). A watch that ended and was reported is not evaluated again.
pub fn watch_due(s: &RightsizingRecommendationStatus, now: DateTime<Utc>) -> bool {
    if s.change.as_ref().map(|c| c.state) != Some(ChangeState::Applied) {
        return false;
    }
    let Some(w) = &s.watch else {
        return false;
    };
    if w.end.is_none_or(|e| now < e) {
        return true;
    }
    !s.conditions.iter().any(|c| {
        c.type_ == wk::CONDITION_HEALTH_WATCH
            && c.status == ConditionStatus::True
            && c.reason == wk::CONDITION_REASON_HEALTHY
    })
}

/// How long after a step that wrote a resize the agent looks at an `Applying` change at
/// the latest, when no pod update comes first.
const APPLYING_RECHECK: chrono::Duration = chrono::Duration::seconds(1);

/// When the workload must be decided again without a trigger: a block's end or its next
/// window, the end of the health watch, and the `fallbackAfter` of a change being resized
/// in place (AP-10).
pub fn wake_times(
    decision: Option<&Decision>,
    s: &RightsizingRecommendationStatus,
    policy: &EffectivePolicy,
    now: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    if let Some(Outcome::Block(b)) = decision.map(|d| &d.outcome) {
        out.extend(
            [b.until, b.next_window]
                .into_iter()
                .flatten()
                .map(|t| t.max(now)),
        );
    }
    let canary_end = s
        .change
        .as_ref()
        .and_then(|c| c.canary.as_ref())
        .and_then(|c| c.watch.as_ref());
    for w in [s.watch.as_ref(), canary_end].into_iter().flatten() {
        if let Some(end) = w.end.filter(|e| *e > now) {
            out.push(end);
        }
    }
    if let Some(c) = s
        .change
        .as_ref()
        .filter(|c| c.state == ChangeState::Applying)
    {
        let at = c
            .first_resize_at
            .map_or(now, |f| f + policy.fallback_after.value);
        out.push(at.max(now + APPLYING_RECHECK));
    }
    out
}

/// The resources named in a list, as the per-resource flags a block reports.
pub(crate) fn resource_flags(resources: &[Resource]) -> crate::effective::PerResource<bool> {
    crate::effective::PerResource {
        cpu: resources.contains(&Resource::Cpu),
        memory: resources.contains(&Resource::Memory),
    }
}
