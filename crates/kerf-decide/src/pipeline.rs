//! `decide()`: the ordered guardrail pipeline (GR-44..GR-56, design D10).
//!
//! The mode acts first, per resource. The per-resource step then computes every target
//! value; if no active resource moves by the tolerance or more the outcome is
//! `skipped NoSignificantChange` and nothing later is reported (GR-24). Checks 2 to 12 follow
//! in the guardrails document's order and the first that matches decides.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use kerf_api::policy::{Mode, Strategy};
use kerf_api::rsr::{ApprovalRef, ContainerChange, HpaChange, Phase, Summary};
use kerf_api::wellknown as wk;
use kerf_api::{Resource, ResourceRequirements};

use crate::effective::{EffectivePolicy, PerResource};
use crate::facts::Facts;
use crate::quantity;
use crate::resources::{self, BlockCtx, ResourceBlock, Targets};
use crate::strategy::{self, StrategyChoice};

mod checks;

pub use self::checks::Step;
pub(crate) use self::checks::{cooldown_until, run};

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
    /// The resources concerned (empty: the whole workload).
    pub resources: Vec<Resource>,
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
    /// The resources concerned (empty: the whole workload).
    pub resources: Vec<Resource>,
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
            resources: Vec::new(),
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
    /// The strategy decided.
    pub strategy: StrategyChoice,
    /// Short strings for `kubectl get rsr` (design D5).
    pub summary: Summary,
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
}

/// Everything the checks read, computed once.
pub(crate) struct Ctx<'a> {
    pub facts: &'a Facts,
    pub policy: &'a EffectivePolicy,
    pub now: DateTime<Utc>,
    pub modes: PerResource<Mode>,
    /// Resources that go on after the mode, with whether an approval carries them.
    pub active: Vec<(Resource, bool)>,
    pub mode_reports: Vec<ResourceReport>,
    pub targets: Targets,
    /// The HPA verdict on the targets before the per-resource blocks (check 5).
    pub hpa: checks::HpaVerdict,
    pub strategy: StrategyChoice,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        facts: &'a Facts,
        policy: &'a EffectivePolicy,
        now: DateTime<Utc>,
    ) -> Ctx<'a> {
        let modes = PerResource {
            cpu: policy.mode.cpu.value,
            memory: policy.mode.memory.value,
        };
        let approved = facts.pending_approval(now).is_some();
        let mut active = Vec::new();
        let mut mode_reports = Vec::new();
        for r in Resource::ALL {
            match *modes.get(r) {
                Mode::AutoPatch => active.push((r, false)),
                Mode::Audit if approved => active.push((r, true)),
                m => mode_reports.push(mode_report(r, m)),
            }
        }
        let resources: Vec<Resource> = active.iter().map(|(r, _)| *r).collect();
        let mut targets = resources::targets(facts, policy, &resources);
        let hpa = checks::hpa_verdict(facts, policy, &targets);
        let strategy = strategy::choose(policy, &facts.state, hpa.coordinated());
        let carrier = strategy.carrier();
        resources::mark_carrier(&mut targets, carrier);
        let block_ctx = BlockCtx {
            facts,
            policy,
            strategy: carrier,
            now,
        };
        resources::resource_blocks(&mut targets, &block_ctx);
        Ctx {
            facts,
            policy,
            now,
            modes,
            active,
            mode_reports,
            targets,
            hpa,
            strategy,
        }
    }

    pub(crate) fn active_resources(&self) -> Vec<Resource> {
        self.active.iter().map(|(r, _)| *r).collect()
    }
}

fn mode_report(resource: Resource, mode: Mode) -> ResourceReport {
    let reason = if mode == Mode::Off {
        wk::REASON_MODE_OFF
    } else {
        wk::REASON_MODE_AUDIT
    };
    ResourceReport {
        kind: ReportKind::Skipped,
        reason,
        resource,
        container: None,
        message: format!("{resource} is in mode {}", mode.as_str()),
    }
}

/// Decides what to do with the workload's recommendation at `now` (design section 5).
pub fn decide(facts: &Facts, policy: &EffectivePolicy, now: DateTime<Utc>) -> Decision {
    let ctx = Ctx::new(facts, policy, now);
    let stop = Check::ORDER
        .iter()
        .find_map(|&check| checks::run(&ctx, check).stop);
    let outcome = stop.unwrap_or_else(|| match checks::final_hpa_change(&ctx) {
        Ok(hpa) => Outcome::Apply(apply_plan(&ctx, hpa)),
        Err(block) => Outcome::Block(block),
    });
    finish(&ctx, outcome)
}

pub(crate) fn finish(ctx: &Ctx<'_>, outcome: Outcome) -> Decision {
    // A mode skip that decides the workload already covers its own resources.
    let mode_skip = match &outcome {
        Outcome::Skip(s) if s.check == Check::Mode => Some(s.reason),
        _ => None,
    };
    let mut reports: Vec<ResourceReport> = ctx
        .mode_reports
        .iter()
        .filter(|r| Some(r.reason) != mode_skip)
        .cloned()
        .collect();
    let per_resource_ran = !matches!(&outcome, Outcome::Skip(_))
        && !matches!(&outcome, Outcome::Block(b) if b.check < Check::ResourceLimits);
    if per_resource_ran {
        // When check 9 decides the workload, its first block is the outcome itself.
        let skip =
            usize::from(matches!(&outcome, Outcome::Block(b) if b.check == Check::ResourceLimits));
        reports.extend(ctx.targets.blocks().skip(skip).map(block_report));
    }
    let mut message = match &outcome {
        Outcome::Apply(a) => applied_message(a),
        Outcome::Skip(s) => s.message.clone(),
        Outcome::Block(b) => b.message.clone(),
    };
    let mut notes = ctx.targets.notes.clone();
    if !ctx.targets.dropped.is_empty() {
        notes.push(format!(
            "not in the pod template: {}",
            ctx.targets.dropped.join(", ")
        ));
    }
    if !notes.is_empty() {
        message = format!("{message}; {}", notes.join("; "));
    }
    let phase = phase(ctx, &outcome);
    let summary = summary(ctx, &outcome);
    Decision {
        outcome,
        reports,
        phase,
        message: kerf_api::event::cut_message(&message).to_owned(),
        modes: ctx.modes.clone(),
        strategy: ctx.strategy.clone(),
        summary,
        dropped_containers: ctx.targets.dropped.clone(),
    }
}

fn block_report(b: &ResourceBlock) -> ResourceReport {
    ResourceReport {
        kind: ReportKind::Blocked,
        reason: b.reason,
        resource: b.resource,
        container: Some(b.container.clone()),
        message: b.message.clone(),
    }
}

/// GR-40, AP-24: Blocked, unless an earlier change's values are still live; Deferred while
/// a deferred change waits for its window.
fn phase(ctx: &Ctx<'_>, outcome: &Outcome) -> Phase {
    let live = ctx.facts.state.values_live();
    match outcome {
        Outcome::Apply(_) => Phase::Applying,
        Outcome::Block(b) if b.reason == wk::REASON_OUTSIDE_MAINTENANCE_WINDOW => Phase::Deferred,
        _ if live => Phase::Applied,
        Outcome::Block(_) => Phase::Blocked,
        Outcome::Skip(_) => Phase::Skipped,
    }
}

fn apply_plan(ctx: &Ctx<'_>, hpa: Option<HpaChange>) -> ApplyPlan {
    let approval = ctx.facts.pending_approval(ctx.now);
    let resources = ctx.targets.applied_resources();
    let approved = ctx.active.iter().any(|(r, a)| *a && resources.contains(r));
    let approval = approval.filter(|_| approved).map(|a| ApprovalRef {
        approval_id: a.approval_id.clone(),
        approved_by: a.approved_by.clone(),
    });
    let reason = if approval.is_some() {
        wk::REASON_APPROVED_ONCE
    } else {
        wk::REASON_RECOMMENDATION_APPLIED
    };
    let kept_limits = ctx
        .targets
        .plans
        .iter()
        .filter(|p| p.goes_in() && p.limit_removal_left_to_new_pods)
        .map(|p| (p.container.clone(), p.resource))
        .collect();
    ApplyPlan {
        strategy: ctx.strategy.carrier(),
        containers: container_changes(&ctx.targets),
        resources,
        hpa,
        reason,
        approval,
        recommendation_id: ctx.facts.recommendation.recommendation_id.clone(),
        kept_limits,
    }
}

/// The containers and values of the change: only resources that go in (EV-56).
pub fn container_changes(targets: &Targets) -> Vec<ContainerChange> {
    let mut out: Vec<ContainerChange> = Vec::new();
    for p in targets.plans.iter().filter(|p| p.goes_in()) {
        let idx = match out.iter().position(|c| c.name == p.container) {
            Some(i) => i,
            None => {
                out.push(ContainerChange {
                    name: p.container.clone(),
                    from: ResourceRequirements::default(),
                    to: ResourceRequirements::default(),
                });
                out.len() - 1
            }
        };
        let r = p.resource;
        let fmt = |v: Option<i64>| v.map(|v| quantity::format(r, v));
        let c = &mut out[idx];
        c.from.requests.set(r, fmt(p.from.request));
        c.from.limits.set(r, fmt(p.from.limit));
        c.to.requests.set(r, fmt(p.to.request));
        c.to.limits.set(r, fmt(p.to.limit));
    }
    out
}

fn applied_message(a: &ApplyPlan) -> String {
    let mut parts: Vec<String> = a
        .containers
        .iter()
        .map(|c| {
            let show = |v: &kerf_api::ResourceValues| {
                Resource::ALL
                    .iter()
                    .filter_map(|r| v.get(*r).map(|q| format!("{r} {q}")))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            format!(
                "{}: requests {} -> {}",
                c.name,
                show(&c.from.requests),
                show(&c.to.requests)
            )
        })
        .collect();
    for (c, r) in &a.kept_limits {
        parts.push(format!(
            "the {r} limit of {c} stays on running pods; new pods get the removal"
        ));
    }
    format!(
        "{} by {}: {}",
        a.reason,
        a.strategy.as_str(),
        parts.join("; ")
    )
}

fn summary(ctx: &Ctx<'_>, outcome: &Outcome) -> Summary {
    let show = |r: Resource| {
        let before = ctx.targets.pod_request(ctx.facts, r, false);
        let after = ctx
            .targets
            .plans
            .iter()
            .filter(|p| p.resource == r)
            .fold(before, |acc, p| {
                acc - p.from.request.unwrap_or(0) + p.to.request.unwrap_or(0)
            });
        let b = quantity::format(r, before);
        if before == after {
            b.to_string()
        } else {
            format!("{b}\u{2192}{}", quantity::format(r, after))
        }
    };
    let mode = if ctx.modes.cpu == ctx.modes.memory {
        ctx.modes.cpu.as_str().to_owned()
    } else {
        format!(
            "cpu:{},memory:{}",
            ctx.modes.cpu.as_str(),
            ctx.modes.memory.as_str()
        )
    };
    let reason = match outcome {
        Outcome::Apply(a) => a.reason,
        Outcome::Skip(s) => s.reason,
        Outcome::Block(b) => b.reason,
    };
    Summary {
        cpu: Some(show(Resource::Cpu)),
        memory: Some(show(Resource::Memory)),
        mode: Some(mode),
        reason: Some(reason.to_owned()),
    }
}
