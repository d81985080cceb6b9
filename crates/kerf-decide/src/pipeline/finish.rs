//! The decision around an outcome: reports, message, phase, summary numbers, and the plan
//! of a change that goes in.

use std::fmt::Write as _;

use kerf_api::policy::Mode;
use kerf_api::rsr::{ApprovalRef, ContainerChange, HpaChange, Phase};
use kerf_api::wellknown as wk;
use kerf_api::{Resource, ResourceRequirements, ResourceValues};

use super::{ApplyPlan, Check, Ctx, Decision, Outcome, PodRequest, ReportKind, ResourceReport};
use crate::effective::PerResource;
use crate::quantity;
use crate::resources::{ResourceBlock, Targets};

/// Builds the decision: the outcome, the reports besides it, the message (the outcome's,
/// plus what was left out), the phase and the pod requests.
pub(crate) fn finish(ctx: Ctx<'_>, outcome: Outcome) -> Decision {
    let reports = reports(&ctx, &outcome);
    let message = message(&ctx.targets, &outcome);
    let phase = phase(&ctx, &outcome);
    let request = |r: Resource| {
        let (before, after) = ctx.targets.pod_request(ctx.facts, r);
        PodRequest { before, after }
    };
    let requests = PerResource {
        cpu: request(Resource::Cpu),
        memory: request(Resource::Memory),
    };
    Decision {
        outcome,
        reports,
        phase,
        message,
        modes: ctx.modes,
        mode_layers: PerResource {
            cpu: ctx.policy.mode.cpu.layer,
            memory: ctx.policy.mode.memory.layer,
        },
        strategy: ctx.strategy,
        requests,
        dropped_containers: ctx
            .targets
            .dropped
            .iter()
            .map(|d| (*d).to_owned())
            .collect(),
    }
}

/// The mode skips of the resources the mode holds back, and the per-resource blocks when
/// check 9 ran (EV-19, EV-27, EV-28).
fn reports(ctx: &Ctx<'_>, outcome: &Outcome) -> Vec<ResourceReport> {
    // A mode skip that decides the workload already covers its own resources.
    let mode_skip = match outcome {
        Outcome::Skip(s) if s.check == Check::Mode => Some(s.reason),
        _ => None,
    };
    let mut reports = Vec::new();
    for r in Resource::ALL {
        let mode = *ctx.modes.get(r);
        if ctx.active.get(r).is_none() && Some(mode_reason(mode)) != mode_skip {
            reports.push(mode_report(r, mode));
        }
    }
    let per_resource_ran = !matches!(outcome, Outcome::Skip(_))
        && !matches!(outcome, Outcome::Block(b) if b.check < Check::ResourceLimits);
    if per_resource_ran {
        // When check 9 decides the workload, its first block is the outcome itself.
        let skip =
            usize::from(matches!(outcome, Outcome::Block(b) if b.check == Check::ResourceLimits));
        reports.extend(ctx.targets.blocks().skip(skip).map(block_report));
    }
    reports
}

/// The reason a resource the mode holds back is skipped with.
pub(crate) fn mode_reason(mode: Mode) -> &'static str {
    if mode == Mode::Off {
        wk::REASON_MODE_OFF
    } else {
        wk::REASON_MODE_AUDIT
    }
}

fn mode_report(resource: Resource, mode: Mode) -> ResourceReport {
    ResourceReport {
        kind: ReportKind::Skipped,
        reason: mode_reason(mode),
        resource,
        container: None,
        message: format!("{resource} is in mode {}", mode.as_str()),
    }
}

fn block_report(b: &ResourceBlock<'_>) -> ResourceReport {
    ResourceReport {
        kind: ReportKind::Blocked,
        reason: b.reason,
        resource: b.resource,
        container: Some(b.container.to_owned()),
        message: b.message(),
    }
}

/// The outcome's message, then the values left out and the containers dropped, cut to the
/// events contract's length.
fn message(targets: &Targets<'_>, outcome: &Outcome) -> String {
    let mut message = match outcome {
        Outcome::Apply(a) => applied_message(a),
        Outcome::Skip(s) => s.message.clone(),
        Outcome::Block(b) => b.message.clone(),
    };
    for note in &targets.notes {
        message.push_str("; ");
        message.push_str(note);
    }
    if let Some((first, rest)) = targets.dropped.split_first() {
        message.push_str("; not in the pod template: ");
        message.push_str(first);
        for d in rest {
            message.push_str(", ");
            message.push_str(d);
        }
    }
    // A message of no more bytes than the limit has no more characters either.
    if message.len() > kerf_api::event::MAX_MESSAGE_CHARS {
        let kept = kerf_api::event::cut_message(&message).len();
        message.truncate(kept);
    }
    message
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

/// The change that goes in: its values, resources, HPA change and approval.
pub(crate) fn apply_plan(ctx: &Ctx<'_>, hpa: Option<HpaChange>) -> ApplyPlan {
    let approval = ctx.facts.pending_approval(ctx.now);
    let resources = ctx.targets.applied_resources();
    let approved = resources
        .iter()
        .any(|r| ctx.active.get(*r).is_some_and(|approved| approved));
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
        .map(|p| (p.container.to_owned(), p.resource))
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
pub fn container_changes(targets: &Targets<'_>) -> Vec<ContainerChange> {
    let mut out: Vec<ContainerChange> = Vec::new();
    for p in targets.plans.iter().filter(|p| p.goes_in()) {
        let idx = match out.iter().position(|c| c.name == p.container) {
            Some(i) => i,
            None => {
                out.push(ContainerChange {
                    name: p.container.to_owned(),
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

/// `RecommendationApplied by in-place: app: requests cpu 500m -> cpu 250m; ...`.
fn applied_message(a: &ApplyPlan) -> String {
    let mut out = String::with_capacity(128);
    let _ = write!(out, "{} by {}: ", a.reason, a.strategy.as_str());
    let mut sep = "";
    for c in &a.containers {
        let _ = write!(out, "{sep}{}: requests ", c.name);
        show_values(&mut out, &c.from.requests);
        out.push_str(" -> ");
        show_values(&mut out, &c.to.requests);
        sep = "; ";
    }
    for (c, r) in &a.kept_limits {
        let _ = write!(
            out,
            "{sep}the {r} limit of {c} stays on running pods; new pods get the removal"
        );
        sep = "; ";
    }
    out
}

/// `cpu 250m, memory 256Mi`: the values that are set.
fn show_values(out: &mut String, v: &ResourceValues) {
    let mut sep = "";
    for r in Resource::ALL {
        if let Some(q) = v.get(r) {
            let _ = write!(out, "{sep}{r} {q}");
            sep = ", ";
        }
    }
}
