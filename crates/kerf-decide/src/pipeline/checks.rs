//! The checks of the pipeline as `decide()` runs them: each returns the skip or block it
//! decides, or `None`, and words a message only then. `explain` shows the same checks with
//! the values they read (`steps.rs`), through the helpers here.

use std::fmt::{self, Write as _};
use std::ops::ControlFlow;

use chrono::{DateTime, Duration, Utc};
use kerf_api::Resource;
use kerf_api::policy::Strategy;
use kerf_api::rsr::{HpaChange, RecommendationSource};
use kerf_api::wellknown as wk;

use super::finish::mode_reason;
use super::settings::{settings_diffs, settings_match};
use super::{Block, Check, Ctx, Outcome, Skip, one_resource, resource_list};
use crate::duration::{Rfc3339, format_go_duration, parse_go_duration};
use crate::effective::{EffectivePolicy, PerResource, Ratio};
use crate::facts::Facts;
use crate::hpa::{self, HpaBounds, HpaOutcome};
use crate::quantity;
use crate::resources::{self, Found, Targets};
use crate::strategy;
use crate::window::WindowKind;

pub(super) fn skip(
    check: Check,
    reason: &'static str,
    resources: &'static [Resource],
    message: String,
) -> Outcome {
    Outcome::Skip(Skip {
        reason,
        check,
        resources,
        message,
    })
}

/// The skip or block a check decides on a complete context, if it matches. `decide()`
/// runs check 1 and the tolerance earlier, through [`mode_and_tolerance`].
pub(crate) fn stop(ctx: &Ctx<'_>, check: Check) -> Option<Outcome> {
    match check {
        Check::Mode => mode(ctx),
        Check::Tolerance => tolerance(ctx, tolerance_moves(ctx), &ctx.targets.dropped),
        Check::HubReachable => hub(ctx),
        Check::Pause => pause(ctx),
        Check::StaleSettings => stale(ctx),
        Check::HpaCoupling => hpa_coupling(ctx),
        Check::LearningPeriod => learning(ctx),
        Check::Confidence => confidence(ctx),
        Check::FreezeWindow => freeze(ctx).map(|(message, until)| {
            let mut b = Block::new(wk::REASON_FREEZE_WINDOW, Check::FreezeWindow, message);
            b.until = until;
            Outcome::Block(b)
        }),
        Check::ResourceLimits => resource_limits(ctx),
        Check::Cooldown => cooldown(ctx),
        Check::SingleReplica => single_replica(ctx),
        Check::MaintenanceWindow => maintenance(ctx),
    }
}

/// Whether a value moves by the tolerance or more, for `explain`: of the active resources,
/// or, when the mode holds every resource back, of what auto-patch would move (the mode
/// step then decides; the tolerance does not claim that nothing would move).
fn tolerance_moves(ctx: &Ctx<'_>) -> bool {
    if ctx.active_resources().is_empty() {
        return resources::targets(ctx.facts, ctx.policy, &Resource::ALL).any_moves();
    }
    ctx.targets.any_moves()
}

/// Check 1 and the tolerance, before any target is kept (design D10). The tolerance reads
/// the targets one at a time; only a message that names values left out or containers
/// dropped makes it keep them (in `ctx.targets`).
pub(crate) fn mode_and_tolerance(ctx: &mut Ctx<'_>) -> Option<Outcome> {
    let active = ctx.active_resources();
    if active.is_empty() {
        // The message still names containers left out.
        ctx.targets = resources::targets(ctx.facts, ctx.policy, active);
        return mode(ctx);
    }
    // One moving value is enough to go on (and then no recommended container is missing
    // from the template, so the recommendation is not stale either).
    let (mut moves, mut named) = (false, false);
    resources::for_each_target(ctx.facts, ctx.policy, active, |found| {
        match found {
            Found::Plan(p) => moves = p.moves(),
            _ => named = true,
        }
        if moves {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    if moves {
        return None;
    }
    if named {
        ctx.targets = resources::targets(ctx.facts, ctx.policy, active);
    }
    tolerance(ctx, false, &ctx.targets.dropped)
}

/// Check 1 (GR-45, EV-27, EV-28, design D27): no resource goes on after the mode.
fn mode(ctx: &Ctx<'_>) -> Option<Outcome> {
    if !ctx.active_resources().is_empty() {
        return None;
    }
    let audit = resource_list(PerResource {
        cpu: mode_reason(ctx.modes.cpu) == wk::REASON_MODE_AUDIT,
        memory: mode_reason(ctx.modes.memory) == wk::REASON_MODE_AUDIT,
    });
    let (reason, resources) = if audit.is_empty() {
        (wk::REASON_MODE_OFF, &Resource::ALL[..])
    } else {
        (wk::REASON_MODE_AUDIT, audit)
    };
    let message = format!("no resource is in auto-patch ({})", Modes(&ctx.modes));
    Some(skip(Check::Mode, reason, resources, message))
}

/// `cpu:auto-patch,memory:audit`.
pub(super) struct Modes<'a>(pub &'a PerResource<kerf_api::policy::Mode>);

impl fmt::Display for Modes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(f, "cpu:{},memory:{}", m.cpu.as_str(), m.memory.as_str())
    }
}

/// The tolerance (GR-23, GR-24, design D8, D10), given whether an active resource moves
/// and which recommended containers the template lacks.
fn tolerance(ctx: &Ctx<'_>, moves: bool, dropped: &[&str]) -> Option<Outcome> {
    let recommended = ctx.facts.recommendation.containers.len();
    if recommended > 0 && dropped.len() == recommended {
        let message = format!(
            "no recommended container is in the pod template ({})",
            dropped.join(", ")
        );
        return Some(skip(
            Check::Tolerance,
            wk::REASON_RECOMMENDATION_STALE,
            &[],
            message,
        ));
    }
    if moves {
        return None;
    }
    let message = format!(
        "no value would move by the tolerance of {} or more: {}",
        Percent(ctx.facts.settings.tolerance_milli_percent),
        values_that_stay(ctx)
    );
    Some(skip(
        Check::Tolerance,
        wk::REASON_NO_SIGNIFICANT_CHANGE,
        ctx.active_resources(),
        message,
    ))
}

/// The values the tolerance checked, each as it stays (`cpu 300m (recommended 290m),
/// memory 384Mi`; `app/cpu ...` with several recommended containers), then the resources
/// the mode left out (`memory is in mode audit`): never a value that would move.
fn values_that_stay(ctx: &Ctx<'_>) -> String {
    let several = ctx.facts.recommendation.containers.len() > 1;
    let targets = resources::targets(ctx.facts, ctx.policy, ctx.active_resources());
    let mut parts: Vec<String> = targets
        .plans
        .iter()
        .filter(|p| !p.moves())
        .map(|p| value_that_stays(ctx.facts, p, several))
        .collect();
    if parts.is_empty() {
        parts.push("no value to compare".to_owned());
    }
    let mut out = parts.join(", ");
    for r in Resource::ALL {
        if ctx.active.get(r).is_none() {
            let _ = write!(out, "; {r} is in mode {}", ctx.modes.get(r).as_str());
        }
    }
    out
}

/// `cpu 300m (recommended 290m)`: the request that stays, and the hub's where it differs.
fn value_that_stays(facts: &Facts, p: &resources::ResourcePlan<'_>, several: bool) -> String {
    let r = p.resource;
    let text = |v: Option<i64>| v.map_or_else(|| "none".to_owned(), |v| quantity::format(r, v).0);
    let name = if several {
        format!("{}/{r}", p.container)
    } else {
        r.to_string()
    };
    let recommended = facts
        .recommendation
        .containers
        .iter()
        .find(|c| c.name == p.container)
        .and_then(|c| c.requests.get(r))
        .and_then(|q| quantity::parse(r, q).ok())
        .filter(|v| Some(*v) != p.from.request);
    match recommended {
        Some(v) => format!(
            "{name} {} (recommended {})",
            text(p.from.request),
            text(Some(v))
        ),
        None => format!("{name} {}", text(p.from.request)),
    }
}

/// Thousandths of a percent as text: 5000 is "5 %", 2500 is "2.5 %".
pub(super) struct Percent(pub u32);

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (int, mut frac) = (self.0 / 1000, self.0 % 1000);
        if frac == 0 {
            return write!(f, "{int} %");
        }
        let mut width = 3;
        while frac % 10 == 0 {
            frac /= 10;
            width -= 1;
        }
        write!(f, "{int}.{frac:0width$} %")
    }
}

/// Check 2 (GR-46, EV-37, reading 6, design D26): how long ago the hub was last reached,
/// or `None` when it never was.
pub(super) fn hub_age(ctx: &Ctx<'_>) -> Option<Duration> {
    ctx.facts.hub.last_success.map(|t| ctx.now - t)
}

/// `last successful fetch 1m ago`, or `no successful fetch`.
pub(super) fn hub_value(age: Option<Duration>) -> String {
    match age {
        Some(a) => format!(
            "last successful fetch {} ago",
            format_go_duration(a.max(Duration::zero()))
        ),
        None => "no successful fetch".to_owned(),
    }
}

/// Check 2: a VerticalPodAutoscaler that updates the workload's pods holds it
/// (`VPAActive`); else recommendations older than `hub.staleAfter` block new changes,
/// `HubUnreachable` for the hub and `SourceUnavailable` for another source.
fn hub(ctx: &Ctx<'_>) -> Option<Outcome> {
    let facts = &ctx.facts.hub;
    if let Some(vpa) = &facts.vpa_active {
        let b = Block::new(wk::REASON_VPA_ACTIVE, Check::HubReachable, vpa.clone());
        return Some(Outcome::Block(b));
    }
    let age = hub_age(ctx);
    if age.is_some_and(|a| a <= facts.stale_after) {
        return None;
    }
    let (reason, message) = match facts.source {
        RecommendationSource::Hub => (
            wk::REASON_HUB_UNREACHABLE,
            format!("the hub's recommendations are stale: {}", hub_value(age)),
        ),
        source => (
            wk::REASON_SOURCE_UNAVAILABLE,
            format!(
                "the {source} source's recommendations are stale: {}",
                source_value(age)
            ),
        ),
    };
    Some(Outcome::Block(Block::new(
        reason,
        Check::HubReachable,
        message,
    )))
}

/// `last successful read 1m ago`, or `no successful read` (a source other than the hub).
pub(super) fn source_value(age: Option<Duration>) -> String {
    hub_value(age).replace("fetch", "read")
}

/// Check 3 (GR-47, AP-43, EV-40).
fn pause(ctx: &Ctx<'_>) -> Option<Outcome> {
    let scope = ctx.facts.hub.pause?;
    let mut b = Block::new(
        wk::REASON_PAUSED,
        Check::Pause,
        format!("automation is paused for the {} in the hub", scope.as_str()),
    );
    b.details
        .insert(wk::DETAIL_PAUSE_SCOPE.to_owned(), scope.as_str().to_owned());
    Some(Outcome::Block(b))
}

/// Check 4 (GR-48, EV-29, design D6).
fn stale(ctx: &Ctx<'_>) -> Option<Outcome> {
    if settings_match(ctx.policy, ctx.facts) {
        return None;
    }
    let message = format!(
        "the recommendation was made with other settings: {}",
        settings_diffs(ctx.policy, ctx.facts).join(", ")
    );
    Some(skip(
        Check::StaleSettings,
        wk::REASON_RECOMMENDATION_STALE,
        &[],
        message,
    ))
}

/// The HPA verdict of check 5.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum HpaVerdict {
    /// No HPA, or it does not scale on a resource the change touches.
    NotInvolved,
    /// The HPA target moves with the requests: the change goes in as a rollout.
    Coordinated(HpaChange),
    /// The HPA cannot be coordinated.
    Coupled { resource: Resource, message: String },
}

impl HpaVerdict {
    pub(crate) fn coordinated(&self) -> bool {
        matches!(self, HpaVerdict::Coordinated(_))
    }
}

/// The HPA verdict on the plans that go in (AP-22, EV-31..EV-33, design D22).
pub(crate) fn hpa_verdict(
    facts: &Facts,
    policy: &EffectivePolicy,
    targets: &Targets<'_>,
) -> HpaVerdict {
    let Some(input) = &facts.hpa else {
        return HpaVerdict::NotInvolved;
    };
    let (old, new) = targets.container_requests(facts);
    match hpa::coordinate(input, &old, &new, HpaBounds::from_policy(policy)) {
        HpaOutcome::NotCoupled => HpaVerdict::NotInvolved,
        HpaOutcome::Coordinated(c) => HpaVerdict::Coordinated(c),
        HpaOutcome::Coupled { resource, message } => HpaVerdict::Coupled { resource, message },
    }
}

/// The HPA change of an applied change, on the final plans (after the per-resource
/// blocks). Values that can no longer be coordinated block `HPACoupled`. With no block,
/// the plans are those check 5 read, and its verdict is taken from `ctx`.
pub(crate) fn final_hpa_change(ctx: &mut Ctx<'_>) -> Result<Option<HpaChange>, Block> {
    let verdict = if ctx.targets.blocks().next().is_none() {
        std::mem::replace(&mut ctx.hpa, HpaVerdict::NotInvolved)
    } else {
        hpa_verdict(ctx.facts, ctx.policy, &ctx.targets)
    };
    match verdict {
        HpaVerdict::Coordinated(c) => Ok(Some(c)),
        HpaVerdict::NotInvolved => Ok(None),
        HpaVerdict::Coupled { resource, message } => {
            let mut b = Block::new(wk::REASON_HPA_COUPLED, Check::HpaCoupling, message);
            b.resources = one_resource(resource);
            Err(b)
        }
    }
}

/// Check 5 (GR-49, EV-31..EV-33).
fn hpa_coupling(ctx: &Ctx<'_>) -> Option<Outcome> {
    let HpaVerdict::Coupled { resource, message } = &ctx.hpa else {
        return None;
    };
    let mut b = Block::new(wk::REASON_HPA_COUPLED, Check::HpaCoupling, message.clone());
    b.resources = one_resource(*resource);
    Some(Outcome::Block(b))
}

/// Check 6 (GR-11, GR-50): the coverage as written and as read.
pub(super) fn coverage<'a>(ctx: &Ctx<'a>) -> (Option<&'a str>, Option<Duration>) {
    let covered = ctx
        .facts
        .recommendation
        .data_coverage
        .as_ref()
        .map(|d| d.covered.as_str());
    (covered, covered.and_then(|c| parse_go_duration(c).ok()))
}

/// `240h`, `unreadable (soon)` or `no coverage reported`.
pub(super) fn coverage_value(covered: Option<&str>, parsed: Option<Duration>) -> String {
    match (covered, parsed) {
        (_, Some(d)) => format_go_duration(d),
        (Some(c), None) => format!("unreadable ({c})"),
        (None, None) => "no coverage reported".to_owned(),
    }
}

fn learning(ctx: &Ctx<'_>) -> Option<Outcome> {
    let needed = ctx.policy.learning_period.value;
    let (covered, parsed) = coverage(ctx);
    if parsed.is_some_and(|d| d >= needed) {
        return None;
    }
    let message = format!(
        "usage data covers {}, the learning period is {}",
        coverage_value(covered, parsed),
        format_go_duration(needed)
    );
    let b = Block::new(wk::REASON_LEARNING_PERIOD, Check::LearningPeriod, message);
    Some(Outcome::Block(b))
}

/// The workload's confidence: the lowest of its containers, else the recommendation's
/// (GR-12). An unreadable or missing confidence counts as 0.
pub(crate) fn workload_confidence(facts: &Facts) -> Ratio {
    let rec = &facts.recommendation;
    let read = |d: &kerf_api::UnitDecimal| Ratio::parse(d.as_str()).unwrap_or(Ratio(0));
    let per_container = rec
        .containers
        .iter()
        .filter_map(|c| c.confidence.as_ref())
        .map(read)
        .min();
    per_container
        .or_else(|| rec.confidence.as_ref().map(read))
        .unwrap_or(Ratio(0))
}

/// Check 7 (GR-12, GR-13, GR-51).
fn confidence(ctx: &Ctx<'_>) -> Option<Outcome> {
    let have = workload_confidence(ctx.facts);
    let need = ctx.policy.min_confidence.value;
    if have >= need {
        return None;
    }
    let message = format!("confidence {have} is below minConfidence {need}");
    let b = Block::new(wk::REASON_LOW_CONFIDENCE, Check::Confidence, message);
    Some(Outcome::Block(b))
}

/// Check 8 (GR-52, AP-34, AP-39..AP-42): what is frozen and until when, or `None`.
pub(super) fn freeze(ctx: &Ctx<'_>) -> Option<(String, Option<DateTime<Utc>>)> {
    let cluster = &ctx.facts.cluster_freeze;
    if cluster.now {
        return Some(("cluster-wide freeze (freeze.now)".to_owned(), None));
    }
    let (open, until) = cluster.windows.open_until(WindowKind::Freeze, ctx.now);
    if open {
        return Some(("a cluster-wide freeze window is open".to_owned(), until));
    }
    let list = &ctx.policy.freeze_windows.value;
    let (open, until) = list.open_until(WindowKind::Freeze, ctx.now);
    if !open {
        return None;
    }
    let invalid = if list.has_errors() {
        " (an invalid freeze window counts as open)"
    } else {
        ""
    };
    Some((
        format!("a freeze window of the policy is open{invalid}"),
        until,
    ))
}

/// Check 9 (GR-53, reading 5): decides the workload only when no resource is left.
fn resource_limits(ctx: &Ctx<'_>) -> Option<Outcome> {
    let t = &ctx.targets;
    if t.any_goes_in() {
        return None;
    }
    let first = t.blocks().next()?;
    let mut b = Block::new(first.reason, Check::ResourceLimits, first.message());
    b.resources = one_resource(first.resource);
    Some(Outcome::Block(b))
}

/// When the workload cooldown ends: the last applied change plus cooldown, or the end of
/// a running health watch (GR-21, design D11, reading 18). `Some(None)`: held with no
/// known end (a change in flight, a watch whose end is not known yet).
pub(crate) fn cooldown_until(ctx: &Ctx<'_>) -> Option<Option<DateTime<Utc>>> {
    let state = &ctx.facts.state;
    if state.change_in_flight() {
        return Some(None);
    }
    let after_change = state
        .change
        .as_ref()
        .and_then(|c| c.applied_at)
        .map(|t| t + ctx.policy.cooldown.value)
        .filter(|until| ctx.now < *until);
    let watch = state
        .watch
        .as_ref()
        .filter(|w| w.running && w.end.is_none_or(|e| ctx.now < e));
    match (after_change, watch) {
        (None, None) => None,
        (Some(u), None) => Some(Some(u)),
        (u, Some(w)) => Some(w.end.map(|e| u.map_or(e, |u| u.max(e)))),
    }
}

/// `held until <time>`, or that a change or watch still runs.
pub(super) struct HeldUntil(pub Option<DateTime<Utc>>);

impl fmt::Display for HeldUntil {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(u) => write!(f, "held until {}", Rfc3339(u)),
            None => f.write_str("a change or its health watch is still running"),
        }
    }
}

/// Check 10 (GR-21, GR-54, design D11).
fn cooldown(ctx: &Ctx<'_>) -> Option<Outcome> {
    let until = cooldown_until(ctx)?;
    let message = format!("cooldown: {}", HeldUntil(until));
    let mut b = Block::new(wk::REASON_COOLDOWN, Check::Cooldown, message);
    b.until = until;
    Some(Outcome::Block(b))
}

/// Check 11 (GR-55, AP-44..AP-51): why the change is unsafe, or `None`.
pub(super) fn single_replica_why(ctx: &Ctx<'_>) -> Option<String> {
    let carrier = ctx.strategy.carrier();
    strategy::single_replica_unsafe(ctx.facts, ctx.policy, &ctx.targets, carrier)
}

fn single_replica(ctx: &Ctx<'_>) -> Option<Outcome> {
    let why = single_replica_why(ctx)?;
    let b = Block::new(wk::REASON_SINGLE_REPLICA_UNSAFE, Check::SingleReplica, why);
    Some(Outcome::Block(b))
}

/// Why a deferred change waits (check 12).
pub(super) enum Wait {
    /// No maintenance window is configured (AP-28).
    NoWindow,
    /// A window is open, with less than `minWindowRemaining` left.
    EndsTooSoon,
    /// The next window opens then.
    Next(DateTime<Utc>),
    /// No window opens again.
    Never,
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wait::NoWindow => f.write_str("no maintenance window configured"),
            Wait::EndsTooSoon => f.write_str("the open window ends too soon"),
            Wait::Next(n) => write!(f, "next window opens {}", Rfc3339(*n)),
            Wait::Never => f.write_str("no window opens again"),
        }
    }
}

/// Check 12 (GR-56, AP-23, AP-25, AP-26, AP-28, AP-33, design D23): `None` when the change
/// may go in now, else why it waits and when the next window opens.
pub(super) fn maintenance_wait(ctx: &Ctx<'_>) -> Option<(Wait, Option<DateTime<Utc>>)> {
    if ctx.strategy.effective != Strategy::Deferred {
        return None;
    }
    let windows = &ctx.policy.maintenance_windows.value;
    let status = windows.status(WindowKind::Maintenance, ctx.now);
    let (open, next) = (status.open, status.next_open);
    let remaining = ctx.policy.min_window_remaining.value;
    let enough = status
        .open_until
        .is_none_or(|end| end - ctx.now >= remaining);
    if !windows.is_empty() && open && enough {
        return None;
    }
    let wait = match (windows.is_empty(), open, next) {
        (true, _, _) => Wait::NoWindow,
        (false, true, _) => Wait::EndsTooSoon,
        (false, false, Some(n)) => Wait::Next(n),
        (false, false, None) => Wait::Never,
    };
    Some((wait, next))
}

fn maintenance(ctx: &Ctx<'_>) -> Option<Outcome> {
    let (wait, next) = maintenance_wait(ctx)?;
    let mut b = Block::new(
        wk::REASON_OUTSIDE_MAINTENANCE_WINDOW,
        Check::MaintenanceWindow,
        format!("deferred change waits for a maintenance window: {wait}"),
    );
    b.next_window = next;
    b.until = next;
    Some(Outcome::Block(b))
}
