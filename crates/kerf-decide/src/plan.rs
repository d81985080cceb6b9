//! The action planner: how a recorded change goes onto its workload in one pass, as an
//! ordered list of [`Effect`]s.
//!
//! The agent gathers the facts of the pass, asks [`kerf_decide::pass::next_step`] for the
//! step, asks this module for the effects of the step and hands them to its one effect
//! interpreter, which carries them out in order: status edits are applied to the status the
//! pass writes, writes go to the API. Every decision of how a change goes in is taken here,
//! each in one named function: the apply strategy ([`advance`]), the in-place plan and the
//! canary's choice and hold ([`in_place`], [`canary_choice`]), the fallback and its refusal
//! ([`outcome_effects`], [`on_infeasible`]) and the rollout ([`rollout`]).
//!
//! One answer of the API changes the plan: a resize refused as `Infeasible` (design D17).
//! The interpreter then drops the rest of the plan and carries out [`on_infeasible`]
//! instead.
//!
//! [`kerf_decide::pass::next_step`]: crate::pass::next_step

use chrono::{DateTime, Utc};
use kerf_api::rsr::{CanaryRecord, CanaryStage, ChangeRecord, ChangeState, HpaOrder};
use kerf_api::{Resource, Strategy, WorkloadKind};

use crate::canary::{self, CanaryInput, CanaryPolicy, CanaryStep};
use crate::effective::EffectivePolicy;
use crate::facts::{Facts, PodFacts};
use crate::inplace::{self, FallbackReason, InPlaceInput, InPlaceOutcome};
use crate::pass::Release;
use crate::values::ContainerResources;

/// One thing the interpreter does, in plan order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Change the status the pass writes; no API call.
    Status(StatusEdit),
    /// Resize these pods to `to` through `pods/resize`, one write token each; the pods a
    /// pass has no token for wait for a later pass. An `Infeasible` answer replaces the rest
    /// of the plan with [`on_infeasible`]'s effects, with `gate`.
    Resize {
        /// The pods, with the node each runs on (named in the fallback's message).
        pods: Vec<PodTarget>,
        /// The values per container.
        to: Vec<ContainerResources>,
        /// What an `Infeasible` answer leads to.
        gate: FallbackGate,
    },
    /// Resize these pods back to `to`, the values before the change (design D16).
    ResizeBack {
        /// The pods whose spec already holds the change.
        pods: Vec<String>,
        /// The values before the change.
        to: Vec<ContainerResources>,
    },
    /// Write the coordinated HPA target of the change that goes in at `order` (design D22).
    PatchHpa(HpaOrder),
    /// Apply the change's values to the pod template by server-side apply (field manager
    /// `kerf`).
    ApplyTemplate {
        /// The values per container.
        to: Vec<ContainerResources>,
        /// The resources the change covers (the fields `kerf` owns).
        resources: Vec<Resource>,
    },
    /// The in-place change falls back to a rollout (AP-10, AP-11): the strategy becomes a
    /// sticky `rollout`, the pod counts and the canary go, `fallback` is recorded.
    FallBack {
        /// Why.
        reason: FallbackReason,
        /// The kubelet's or the server's message.
        message: String,
    },
    /// The fallback is refused (design D18, EV-41): the change is `RolledBack` and
    /// `blocked SingleReplicaUnsafe` recorded with `details.fallbackReason`.
    Refuse {
        /// The fallback that was refused.
        fallback_reason: FallbackReason,
        /// The event's message.
        message: String,
    },
    /// Evict this outdated pod of an OnDelete StatefulSet through the eviction API, never a
    /// delete (AP-59). A refusal (a PodDisruptionBudget, AP-60) ends the plan, records
    /// `blocked PodDisruptionBudget` once per change and pod, and looks again at `retry_at`
    /// (AP-61).
    Evict {
        /// The pod.
        pod: String,
        /// When a refused eviction is tried again.
        retry_at: DateTime<Utc>,
    },
    /// Write the coordinated HPA's target back to what it was before the change (RB-24),
    /// when the released resources include the HPA's.
    RestoreHpa,
    /// Hand the template's fields of these resources back to their owner: server-side
    /// apply without them, field manager `kerf` (AP-21).
    ReleaseTemplate(Vec<Resource>),
    /// The release is recorded: `live` without these resources, the change `Released` (or
    /// the resources dropped from it when others stay held) and its `released` (or
    /// `reverted`) event (EV-46).
    MarkReleased(Release),
    /// The change went in: `applied` (or the revert's end) is recorded, live values set.
    MarkApplied,
    /// Start the health watch that is due, the change's (once it went in) or its canary's
    /// (once the canary pods are resized): its baselines are taken from the pods as they
    /// are at the change (RB-03, RB-09). Nothing when no watch is due.
    StartWatch,
    /// Look at the workload again at this time.
    WakeAt(DateTime<Utc>),
}

impl Effect {
    /// A short, bounded name of the effect's kind, for spans and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Effect::Status(_) => "status",
            Effect::Resize { .. } => "resize",
            Effect::ResizeBack { .. } => "resize_back",
            Effect::PatchHpa(_) => "patch_hpa",
            Effect::ApplyTemplate { .. } => "apply_template",
            Effect::FallBack { .. } => "fall_back",
            Effect::Refuse { .. } => "refuse",
            Effect::Evict { .. } => "evict",
            Effect::RestoreHpa => "restore_hpa",
            Effect::ReleaseTemplate(_) => "release_template",
            Effect::MarkReleased(_) => "mark_released",
            Effect::MarkApplied => "mark_applied",
            Effect::StartWatch => "start_watch",
            Effect::WakeAt(_) => "wake_at",
        }
    }
}

/// An edit of the change in the rsr status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatusEdit {
    /// The change moves from `Intent` to `Applying`.
    Applying,
    /// Record these pods as the canary, stage `Resizing` (design D25: before any resize).
    CanaryChosen(Vec<String>),
    /// The canary moves to `stage`; a watch ending at `until` starts now. A canary that
    /// passed clears `firstResizeAt`: the other pods' `fallbackAfter` runs from their own
    /// first resize.
    CanaryStage {
        /// The new stage.
        stage: CanaryStage,
        /// The end of the canary watch that starts now, if one does.
        until: Option<DateTime<Utc>>,
    },
    /// Keep the summary's reason and next time current with the canary.
    CanarySummary,
    /// `firstResizeAt` of the change.
    FirstResizeAt(Option<DateTime<Utc>>),
    /// `progress` of the change.
    Progress {
        /// Pods accepted or complete.
        accepted: usize,
        /// Pods targeted.
        total: usize,
    },
    /// Every targeted pod accepted: `progress` is full, over the recorded total if there
    /// is one, else over `targeted`.
    ProgressComplete {
        /// The pods targeted in this pass.
        targeted: usize,
    },
}

/// A pod to resize, with the node it runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodTarget {
    /// Pod name.
    pub name: String,
    /// Its node.
    pub node: Option<String>,
}

/// Whether an in-place change may fall back to a rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FallbackGate {
    /// The workload's kind (a DaemonSet never falls back, design D18).
    pub kind: WorkloadKind,
    /// Whether a rollout would be safe (EV-41).
    pub rollout_safe: bool,
}

/// What the planner reads of a pass, besides the change.
#[derive(Clone, Copy, Debug)]
pub struct ChangeFacts<'a> {
    /// The facts of a decision.
    pub facts: &'a Facts,
    /// The effective policy.
    pub policy: &'a EffectivePolicy,
    /// Every running pod of the workload.
    pub pods: &'a [PodFacts],
    /// The pod template holds every value of the change.
    pub template_covers: bool,
    /// False while a freeze or a pause holds new resizes back (AP-37).
    pub may_start: bool,
    /// Now.
    pub now: DateTime<Utc>,
}

/// The effects that move a change in state `Intent` or `Applying` one step on, by its
/// strategy, ending with the start of the health watch that is then due. This is the one
/// place the apply strategy is matched.
pub fn advance(change: &ChangeRecord, f: &ChangeFacts<'_>) -> Vec<Effect> {
    let mut effects = Vec::new();
    if change.state == ChangeState::Intent {
        effects.push(Effect::Status(StatusEdit::Applying));
    }
    match change.strategy {
        Strategy::InPlace => effects.extend(in_place(change, f)),
        Strategy::Rollout | Strategy::Deferred => effects.extend(rollout(change, f)),
    }
    effects.push(Effect::StartWatch);
    effects
}

/// The values of the change per container.
pub fn target(change: &ChangeRecord) -> Vec<ContainerResources> {
    change
        .containers
        .iter()
        .map(|c| (c.name.clone(), c.to.clone()))
        .collect()
}

/// The values before the change per container.
fn previous(change: &ChangeRecord) -> Vec<ContainerResources> {
    change
        .containers
        .iter()
        .map(|c| (c.name.clone(), c.from.clone()))
        .collect()
}

/// A rollout (and a deferred change, whose window has opened): a lower HPA target first
/// (design D22), the template unless it holds the change already, then `applied`.
pub fn rollout(change: &ChangeRecord, f: &ChangeFacts<'_>) -> Vec<Effect> {
    let mut effects = vec![Effect::PatchHpa(HpaOrder::Before)];
    if !f.template_covers {
        effects.push(Effect::ApplyTemplate {
            to: target(change),
            resources: change.resources.clone(),
        });
    }
    effects.push(Effect::MarkApplied);
    effects
}

/// `progress` over every targeted pod.
fn progress(pods: &[PodFacts], target: &[ContainerResources]) -> StatusEdit {
    let targeted: Vec<&PodFacts> = pods.iter().filter(|p| p.targeted()).collect();
    let accepted = targeted
        .iter()
        .filter(|p| inplace::pod_state(p, target).is_accepted())
        .count();
    StatusEdit::Progress {
        accepted,
        total: targeted.len(),
    }
}

/// The canary's next step for the change (`breached` is false: a breach is the pass's
/// rollback step).
fn canary_step(
    change: &ChangeRecord,
    policy: Option<CanaryPolicy>,
    pods: &[PodFacts],
    now: DateTime<Utc>,
) -> CanaryStep {
    canary::next(&CanaryInput {
        policy,
        record: change.canary.as_ref(),
        pods,
        target: &target(change),
        breached: false,
        now,
    })
}

/// The canary of an in-place change about to start, recorded in the intent written before
/// any resize (design D25); none for another strategy, or for a canary that would hold
/// nothing back.
pub fn canary_choice(
    change: &ChangeRecord,
    policy: Option<CanaryPolicy>,
    pods: &[PodFacts],
    now: DateTime<Utc>,
) -> Option<Vec<String>> {
    if change.strategy != Strategy::InPlace {
        return None;
    }
    match canary_step(change, policy, pods, now) {
        CanaryStep::Choose(chosen) => Some(chosen),
        _ => None,
    }
}

/// The pods this pass's in-place plan covers after the canary's next step (every pod, the
/// canary pods only, or none: the canary recorded a step or holds), and the canary's
/// effects. A canary that passed in this pass is `passed`.
struct CanaryHold {
    views: Option<Vec<PodFacts>>,
    effects: Vec<Effect>,
    passed: bool,
}

/// The canary's hold over the in-place plan (design D16 with `apply.canary`).
fn canary_hold(change: &ChangeRecord, f: &ChangeFacts<'_>) -> CanaryHold {
    let all = f.pods.to_vec();
    let target = target(change);
    let edit = |e: StatusEdit| Effect::Status(e);
    let mut hold = CanaryHold {
        views: None,
        effects: Vec::new(),
        passed: false,
    };
    match canary_step(change, f.policy.canary.value, &all, f.now) {
        CanaryStep::All => hold.views = Some(all),
        CanaryStep::Resize(pods) => {
            hold.views = Some(all.into_iter().filter(|v| pods.contains(&v.name)).collect());
        }
        CanaryStep::Pass => {
            hold.effects.push(edit(StatusEdit::CanaryStage {
                stage: CanaryStage::Passed,
                until: None,
            }));
            hold.passed = true;
            hold.views = Some(all);
        }
        CanaryStep::Choose(pods) => {
            hold.effects.push(edit(StatusEdit::CanaryChosen(pods)));
            hold.effects.push(edit(progress(&all, &target)));
        }
        CanaryStep::Watch { until } => {
            let stage = CanaryStage::Watching;
            let until = Some(until);
            hold.effects
                .push(edit(StatusEdit::CanaryStage { stage, until }));
            hold.effects.push(edit(progress(&all, &target)));
        }
        CanaryStep::Wait { until } => hold.effects.push(Effect::WakeAt(until)),
        // A breach is the pass's rollback step, not this one.
        CanaryStep::Restore(_) => {}
    }
    hold.effects.push(edit(StatusEdit::CanarySummary));
    hold
}

/// The in-place state machine's step (design D16): the canary's hold, the resizes that
/// start now, and what the outcome records (AP-04, AP-08..AP-11, AP-36, AP-37, EV-10).
pub fn in_place(change: &ChangeRecord, f: &ChangeFacts<'_>) -> Vec<Effect> {
    let target = target(change);
    let CanaryHold {
        views,
        mut effects,
        passed,
    } = canary_hold(change, f);
    let Some(views) = views else {
        return effects;
    };
    let canary_running = !passed
        && change
            .canary
            .as_ref()
            .is_some_and(|k| k.stage == CanaryStage::Resizing);
    let recorded = if passed { None } else { change.first_resize_at };
    let first_resize_at =
        recorded.or_else(|| inplace::resumed_first_resize(&views, &target, f.now));
    effects.push(Effect::Status(StatusEdit::FirstResizeAt(first_resize_at)));
    let gate = fallback_gate(f);
    let input = InPlaceInput {
        kind: gate.kind,
        rollout_safe: gate.rollout_safe,
        target: &target,
        pods: &views,
        first_resize_at,
        fallback_after: f.policy.fallback_after.value,
        may_start: f.may_start,
        now: f.now,
    };
    let plan = inplace::plan(&input);
    if !plan.resize_now.is_empty() {
        effects.push(resize(&plan.resize_now, &views, target.clone(), gate));
    }
    if canary_running
        && matches!(
            plan.outcome,
            InPlaceOutcome::Progress { .. } | InPlaceOutcome::AllAccepted
        )
    {
        // The canary pods are resized; the next pass starts their watch once they run
        // the values. Progress counts every targeted pod.
        effects.push(Effect::Status(progress(f.pods, &target)));
        return effects;
    }
    effects.extend(outcome_effects(change, plan.outcome, views.len()));
    effects
}

/// Whether the change may fall back to a rollout: never for a DaemonSet (design D18), and
/// only where a rollout is safe (EV-41).
pub fn fallback_gate(f: &ChangeFacts<'_>) -> FallbackGate {
    let reason = kerf_api::wellknown::REASON_RESIZE_INFEASIBLE;
    FallbackGate {
        kind: f.facts.workload.kind,
        rollout_safe: crate::strategy::fallback_allowed(f.facts, f.policy, reason).is_ok(),
    }
}

/// The resize of the pods `names`, each with its node, to `to`.
fn resize(
    names: &[String],
    views: &[PodFacts],
    to: Vec<ContainerResources>,
    gate: FallbackGate,
) -> Effect {
    let node = |n: &String| {
        views
            .iter()
            .find(|v| &v.name == n)
            .and_then(|v| v.node.clone())
    };
    Effect::Resize {
        pods: names
            .iter()
            .map(|n| PodTarget {
                name: n.clone(),
                node: node(n),
            })
            .collect(),
        to,
        gate,
    }
}

/// What the in-place outcome records: progress, `applied`, the fallback or its refusal.
pub fn outcome_effects(
    change: &ChangeRecord,
    outcome: InPlaceOutcome,
    targeted: usize,
) -> Vec<Effect> {
    match outcome {
        InPlaceOutcome::Progress { accepted, total } => {
            vec![Effect::Status(StatusEdit::Progress { accepted, total })]
        }
        InPlaceOutcome::AllAccepted => vec![
            Effect::Status(StatusEdit::ProgressComplete { targeted }),
            Effect::MarkApplied,
        ],
        // Intent before action (design D25): the fallback (strategy rollout, its event
        // pending) is written with this pass's status; the next pass patches the template.
        // A kill between the two leaves a rollout to resume, never a patched template under
        // a change still recorded in place.
        InPlaceOutcome::FallBack { reason, message } => {
            vec![Effect::FallBack { reason, message }]
        }
        InPlaceOutcome::Refused {
            fallback_reason,
            message,
            resize_back,
            ..
        } => vec![
            Effect::ResizeBack {
                pods: resize_back,
                to: previous(change),
            },
            Effect::Refuse {
                fallback_reason,
                message,
            },
        ],
    }
}

/// The effects that replace the rest of a plan when the API refuses the resize of a pod on
/// `node` as `Infeasible` (AP-08, design D17): the fallback at once, or its refusal.
pub fn on_infeasible(
    change: &ChangeRecord,
    gate: FallbackGate,
    message: String,
    node: Option<String>,
) -> Vec<Effect> {
    let why = FallbackReason::ResizeInfeasible;
    let outcome = inplace::fallback_or_refusal(gate.kind, gate.rollout_safe, why, message, node);
    outcome_effects(change, outcome, 0)
}

/// The canary record of a change whose canary is `pods`, stage `Resizing`.
pub fn chosen_canary(pods: Vec<String>) -> CanaryRecord {
    CanaryRecord {
        pods,
        stage: CanaryStage::Resizing,
        watch: None,
    }
}

/// How long after a refused eviction the pod is tried again (AP-61).
pub const EVICTION_REFUSAL_RETRY: chrono::Duration = chrono::Duration::seconds(5);

/// The effects of an `Evict` step: look again after [`crate::pass::ON_DELETE_RECHECK`]
/// (besides the pod updates that wake the workload), then evict `pods` in the order the
/// replacement plan gave them ([`crate::ondelete::plan`], highest ordinal first).
pub fn evict(pods: Vec<String>, now: DateTime<Utc>) -> Vec<Effect> {
    let retry_at = now + EVICTION_REFUSAL_RETRY;
    std::iter::once(Effect::WakeAt(now + crate::pass::ON_DELETE_RECHECK))
        .chain(pods.into_iter().map(|pod| Effect::Evict { pod, retry_at }))
        .collect()
}

/// The effects of an `HpaAfter` step: the HPA target that waited for the completed
/// rollout of a change that lowers requests.
pub fn hpa_after() -> Vec<Effect> {
    vec![Effect::PatchHpa(HpaOrder::After)]
}

/// The effects of a `Release` step (AP-21, EV-46): the HPA's target back when the coupled
/// resource is among those released, the template's fields handed back for a change of the
/// template (an in-place change leaves the running pods alone), then the record.
pub fn release(change: &ChangeRecord, rel: &Release) -> Vec<Effect> {
    let hpa = change
        .hpa
        .as_ref()
        .is_some_and(|h| rel.resources.contains(&h.resource));
    hpa.then_some(Effect::RestoreHpa)
        .into_iter()
        .chain(
            (!change.strategy.resizes_pods())
                .then(|| Effect::ReleaseTemplate(rel.resources.clone())),
        )
        .chain(std::iter::once(Effect::MarkReleased(rel.clone())))
        .collect()
}
