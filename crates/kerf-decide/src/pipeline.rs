//! `decide()`: the ordered guardrail pipeline (GR-44..GR-56, design D10).
//!
//! The mode acts first, per resource. The tolerance follows (design D10): the per-resource
//! step computes what every value would become, and if no active resource moves by the
//! tolerance or more the outcome is `skipped NoSignificantChange` and nothing later is
//! reported (GR-24). That first pass keeps nothing, so a decision that stops there builds
//! only its messages. Otherwise the targets, the HPA verdict, the strategy and the
//! per-resource blocks are computed once, and checks 2 to 12 follow in the guardrails
//! document's order; the first that matches decides. Messages are worded only for the
//! outcome.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use kerf_api::Resource;
use kerf_api::policy::{Mode, Strategy};
use kerf_api::rsr::{ApprovalRef, ContainerChange, HpaChange, Phase, Summary};

use crate::effective::{EffectivePolicy, Layer, PerResource};
use crate::facts::Facts;
use crate::quantity;
use crate::resources::{self, BlockCtx, Targets};
use crate::strategy::{self, StrategyChoice};

mod checks;
mod finish;
mod settings;
mod steps;

pub(crate) use self::checks::cooldown_until;
pub use self::finish::container_changes;
pub use self::steps::Step;
pub(crate) use self::steps::run;

/// One step of the pipeline, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    /// 1: the mode of each resource (GR-45).
    Mode,
    /// The tolerance: no value would move enough (GR-23, GR-24, design D10).
    Tolerance,
    /// 2: the hub was reached recently enough (GR-46).
    HubReachable,
    /// 3: automation is not paused (GR-47).
    Pause,
    /// 4: the recommendation's settings match the policy (GR-48).
    StaleSettings,
    /// 5: an HPA is coordinated or absent (GR-49).
    HpaCoupling,
    /// 6: enough usage data (GR-50).
    LearningPeriod,
    /// 7: confidence (GR-51).
    Confidence,
    /// 8: freeze windows and the cluster-wide freeze (GR-52).
    FreezeWindow,
    /// 9: the per-resource limits (GR-53).
    ResourceLimits,
    /// 10: the cooldown (GR-54).
    Cooldown,
    /// 11: single-replica safety (GR-55).
    SingleReplica,
    /// 12: the maintenance window (GR-56).
    MaintenanceWindow,
}

impl Check {
    /// Every step in pipeline order.
    pub const ORDER: [Check; 13] = [
        Check::Mode,
        Check::Tolerance,
        Check::HubReachable,
        Check::Pause,
        Check::StaleSettings,
        Check::HpaCoupling,
        Check::LearningPeriod,
        Check::Confidence,
        Check::FreezeWindow,
        Check::ResourceLimits,
        Check::Cooldown,
        Check::SingleReplica,
        Check::MaintenanceWindow,
    ];

    /// The number the guardrails document gives the check (the tolerance has none).
    pub fn number(self) -> Option<u8> {
        let n = match self {
            Check::Mode => 1,
            Check::Tolerance => return None,
            Check::HubReachable => 2,
            Check::Pause => 3,
            Check::StaleSettings => 4,
            Check::HpaCoupling => 5,
            Check::LearningPeriod => 6,
            Check::Confidence => 7,
            Check::FreezeWindow => 8,
            Check::ResourceLimits => 9,
            Check::Cooldown => 10,
            Check::SingleReplica => 11,
            Check::MaintenanceWindow => 12,
        };
        Some(n)
    }

    /// A short name for `explain`.
    pub fn name(self) -> &'static str {
        match self {
            Check::Mode => "mode",
            Check::Tolerance => "tolerance",
            Check::HubReachable => "hub reachable",
            Check::Pause => "pause",
            Check::StaleSettings => "recommendation settings",
            Check::HpaCoupling => "HPA coordination",
            Check::LearningPeriod => "learning period",
            Check::Confidence => "confidence",
            Check::FreezeWindow => "freeze windows",
            Check::ResourceLimits => "per-resource limits",
            Check::Cooldown => "cooldown",
            Check::SingleReplica => "single-replica safety",
            Check::MaintenanceWindow => "maintenance window",
        }
    }
}

/// What the decision is.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The change goes in.
    Apply(ApplyPlan),
    /// Nothing to do: nothing is wrong.
    Skip(Skip),
    /// A guardrail holds the change.
    Block(Block),
}

/// A change that goes in.
#[derive(Clone, Debug, PartialEq)]
pub struct ApplyPlan {
    /// In-place or rollout (a deferred change goes in as a rollout inside its window).
    pub strategy: Strategy,
    /// Per container, the values before and after; only the resources that change.
    pub containers: Vec<ContainerChange>,
    /// The resources the change carries, CPU first.
    pub resources: Vec<Resource>,
    /// A coordinated HPA target change.
    pub hpa: Option<HpaChange>,
    /// RecommendationApplied or ApprovedOnce.
    pub reason: &'static str,
    /// The approval carried out (ApprovedOnce only).
    pub approval: Option<ApprovalRef>,
    /// The recommendation applied.
    pub recommendation_id: String,
    /// Limits that `containers[].to` removes but an in-place resize keeps on running pods
    /// (new pods get the removal through the webhook, design D9).
    pub kept_limits: Vec<(String, Resource)>,
}

/// A skip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip {
    /// ModeOff, ModeAudit, NoSignificantChange or RecommendationStale.
    pub reason: &'static str,
    /// The step that decided.
    pub check: Check,
    /// The resources concerned, CPU first (empty: the whole workload).
    pub resources: &'static [Resource],
    /// For people.
    pub message: String,
}

/// A block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// The contract's reason.
    pub reason: &'static str,
    /// The step that decided.
    pub check: Check,
    /// The resources concerned, CPU first (empty: the whole workload).
    pub resources: &'static [Resource],
    /// For people.
    pub message: String,
    /// Event details (`pauseScope`, `fallbackReason`, ...).
    pub details: BTreeMap<String, String>,
    /// The next maintenance window (OutsideMaintenanceWindow).
    pub next_window: Option<DateTime<Utc>>,
    /// When this block ends by itself, if known (cooldown end, window start).
    pub until: Option<DateTime<Utc>>,
}

impl Block {
    pub(crate) fn new(reason: &'static str, check: Check, message: String) -> Block {
        Block {
            reason,
            check,
            resources: &[],
            message,
            details: BTreeMap::new(),
            next_window: None,
            until: None,
        }
    }
}

/// Skipped or blocked, for per-resource reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReportKind {
    /// `skipped`.
    Skipped,
    /// `blocked`.
    Blocked,
}

/// A per-resource skip or block to report next to the outcome (EV-19, EV-27, EV-28).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceReport {
    /// skipped or blocked.
    pub kind: ReportKind,
    /// The contract's reason.
    pub reason: &'static str,
    /// The resource.
    pub resource: Resource,
    /// The container, where the report concerns one.
    pub container: Option<String>,
    /// For people.
    pub message: String,
}

/// The resources whose flag is set, CPU first, as a list that lives as long as the program
/// (so a skip or block names its resources without allocating).
pub fn resource_list(set: PerResource<bool>) -> &'static [Resource] {
    match (set.cpu, set.memory) {
        (true, true) => &Resource::ALL,
        (true, false) => &[Resource::Cpu],
        (false, true) => &[Resource::Memory],
        (false, false) => &[],
    }
}

/// One resource, as a list.
pub fn one_resource(r: Resource) -> &'static [Resource] {
    resource_list(PerResource {
        cpu: r == Resource::Cpu,
        memory: r == Resource::Memory,
    })
}

/// One resource's request summed over the changeable containers of the pod template
/// (millicores or bytes), before and after the change: the numbers of the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodRequest {
    /// The current pod request.
    pub before: i64,
    /// The pod request once every planned value of the resource is in.
    pub after: i64,
}

/// The result of `decide()`.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// Apply, skip or block.
    pub outcome: Outcome,
    /// Per-resource skips (mode) and blocks (check 9) besides the outcome.
    pub reports: Vec<ResourceReport>,
    /// The phase to show.
    pub phase: Phase,
    /// For people: the outcome's message plus what was left out.
    pub message: String,
    /// The effective mode per resource.
    pub modes: PerResource<Mode>,
    /// The layer that set each mode (an annotation or a hub override above the policy's).
    pub mode_layers: PerResource<Layer>,
    /// The strategy decided.
    pub strategy: StrategyChoice,
    /// The pod requests before and after, per resource; [`Decision::summary`] words them.
    pub requests: PerResource<PodRequest>,
    /// Recommended containers the template lacks (design D8).
    pub dropped_containers: Vec<String>,
}

impl Decision {
    /// The reason of the outcome.
    pub fn reason(&self) -> &'static str {
        match &self.outcome {
            Outcome::Apply(a) => a.reason,
            Outcome::Skip(s) => s.reason,
            Outcome::Block(b) => b.reason,
        }
    }

    /// Short strings for `kubectl get rsr` (design D5): the pod requests (`500m→250m`
    /// while they differ), the modes (one when both are equal) and the reason.
    pub fn summary(&self) -> Summary {
        let show = |r: Resource| {
            let p = self.requests.get(r);
            let before = quantity::format(r, p.before);
            if p.before == p.after {
                before.to_string()
            } else {
                format!("{before}\u{2192}{}", quantity::format(r, p.after))
            }
        };
        let mode = if self.modes.cpu == self.modes.memory {
            self.modes.cpu.as_str().to_owned()
        } else {
            format!(
                "cpu:{},memory:{}",
                self.modes.cpu.as_str(),
                self.modes.memory.as_str()
            )
        };
        Summary {
            cpu: Some(show(Resource::Cpu)),
            memory: Some(show(Resource::Memory)),
            mode: Some(mode),
            reason: Some(self.reason().to_owned()),
            ..Summary::default()
        }
    }
}

/// Everything the checks read. [`Ctx::base`] holds what the mode and the tolerance read;
/// [`Ctx::complete`] adds the targets, the HPA verdict, the strategy and the blocks.
pub(crate) struct Ctx<'a> {
    pub facts: &'a Facts,
    pub policy: &'a EffectivePolicy,
    pub now: DateTime<Utc>,
    pub modes: PerResource<Mode>,
    /// Per resource, `Some(approved)` when it goes on after the mode: auto-patch, or audit
    /// with an approve-once pending (`approved`).
    pub active: PerResource<Option<bool>>,
    /// The targets: after [`Ctx::complete`], every plan; before, at most what the message
    /// names (values left out, dropped containers).
    pub targets: Targets<'a>,
    /// The HPA verdict on the targets before the per-resource blocks (check 5).
    pub hpa: checks::HpaVerdict,
    pub strategy: StrategyChoice,
}

impl<'a> Ctx<'a> {
    /// The modes and the resources they let through; no targets yet.
    pub(crate) fn base(
        facts: &'a Facts,
        policy: &'a EffectivePolicy,
        now: DateTime<Utc>,
    ) -> Ctx<'a> {
        let modes = PerResource {
            cpu: policy.mode.cpu.value,
            memory: policy.mode.memory.value,
        };
        let approved = facts.pending_approval(now).is_some();
        let active_of = |m: Mode| match m {
            Mode::AutoPatch => Some(false),
            Mode::Audit if approved => Some(true),
            _ => None,
        };
        Ctx {
            facts,
            policy,
            now,
            active: PerResource {
                cpu: active_of(modes.cpu),
                memory: active_of(modes.memory),
            },
            modes,
            targets: Targets::default(),
            hpa: checks::HpaVerdict::NotInvolved,
            // No plan moves yet, so no HPA forces a rollout.
            strategy: strategy::choose(policy, &facts.state, false),
        }
    }

    /// Every step's input: [`Ctx::base`] plus [`Ctx::complete`].
    pub(crate) fn full(
        facts: &'a Facts,
        policy: &'a EffectivePolicy,
        now: DateTime<Utc>,
    ) -> Ctx<'a> {
        let mut ctx = Ctx::base(facts, policy, now);
        ctx.complete();
        ctx
    }

    /// Computes every target, the HPA verdict, the strategy and the per-resource blocks.
    pub(crate) fn complete(&mut self) {
        let (facts, policy) = (self.facts, self.policy);
        self.targets = resources::targets(facts, policy, self.active_resources());
        self.hpa = checks::hpa_verdict(facts, policy, &self.targets);
        self.strategy = strategy::choose(policy, &facts.state, self.hpa.coordinated());
        let carrier = self.strategy.carrier();
        resources::mark_carrier(&mut self.targets, carrier);
        let block_ctx = BlockCtx {
            facts,
            policy,
            strategy: carrier,
            now: self.now,
        };
        resources::resource_blocks(&mut self.targets, &block_ctx);
    }

    /// The resources that go on after the mode, CPU first.
    pub(crate) fn active_resources(&self) -> &'static [Resource] {
        resource_list(PerResource {
            cpu: self.active.cpu.is_some(),
            memory: self.active.memory.is_some(),
        })
    }

    /// The resources the mode holds back (off, or audit without an approval), CPU first.
    pub(crate) fn held_resources(&self) -> &'static [Resource] {
        resource_list(PerResource {
            cpu: self.active.cpu.is_none(),
            memory: self.active.memory.is_none(),
        })
    }
}

/// Decides what to do with the workload's recommendation at `now` (design section 5).
pub fn decide(facts: &Facts, policy: &EffectivePolicy, now: DateTime<Utc>) -> Decision {
    let mut ctx = Ctx::base(facts, policy, now);
    if let Some(outcome) = checks::mode_and_tolerance(&mut ctx) {
        return finish::finish(ctx, outcome);
    }
    ctx.complete();
    let stop = Check::ORDER
        .iter()
        .filter(|c| **c > Check::Tolerance)
        .find_map(|&check| checks::stop(&ctx, check));
    let outcome = match stop {
        Some(outcome) => outcome,
        None => match checks::final_hpa_change(&mut ctx) {
            Ok(hpa) => Outcome::Apply(finish::apply_plan(&ctx, hpa)),
            Err(block) => Outcome::Block(block),
        },
    };
    finish::finish(ctx, outcome)
}
