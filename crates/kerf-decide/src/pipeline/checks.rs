//! The checks of the pipeline, one function each. Every check reports the value it read,
//! the threshold it compared against, and whether it stops the pipeline, so `decide()`
//! and `explain` share them.

use chrono::{DateTime, Duration, Utc};
use kerf_api::Resource;
use kerf_api::policy::Strategy;
use kerf_api::rsr::HpaChange;
use kerf_api::wellknown as wk;

use super::{Block, Check, Ctx, Outcome, Skip};
use crate::duration::{format_go_duration, parse_go_duration};
use crate::effective::{EffectivePolicy, Ratio};
use crate::facts::Facts;
use crate::hpa::{self, HpaBounds, HpaOutcome};
use crate::resources::Targets;
use crate::strategy;
use crate::window::{WindowKind, evaluate_windows};

/// One step as evaluated: what it read, what it compared against, and its verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The check.
    pub check: Check,
    /// The value read, for people.
    pub value: String,
    /// The threshold, for people.
    pub threshold: String,
    /// The skip or block this check decides, if it matches.
    pub stop: Option<Outcome>,
}

fn pass(check: Check, value: String, threshold: String) -> Step {
    Step {
        check,
        value,
        threshold,
        stop: None,
    }
}

fn stop(check: Check, value: String, threshold: String, outcome: Outcome) -> Step {
    Step {
        check,
        value,
        threshold,
        stop: Some(outcome),
    }
}

fn skip(check: Check, reason: &'static str, resources: Vec<Resource>, message: String) -> Outcome {
    Outcome::Skip(Skip {
        reason,
        check,
        resources,
        message,
    })
}

/// Runs one check.
pub(crate) fn run(ctx: &Ctx<'_>, check: Check) -> Step {
    match check {
        Check::Mode => mode(ctx),
        Check::Tolerance => tolerance(ctx),
        Check::HubReachable => hub(ctx),
        Check::Pause => pause(ctx),
        Check::StaleSettings => stale(ctx),
        Check::HpaCoupling => hpa_check(ctx),
        Check::LearningPeriod => learning(ctx),
        Check::Confidence => confidence(ctx),
        Check::FreezeWindow => freeze(ctx),
        Check::ResourceLimits => resource_limits(ctx),
        Check::Cooldown => cooldown(ctx),
        Check::SingleReplica => single_replica(ctx),
        Check::MaintenanceWindow => maintenance(ctx),
    }
}

/// Check 1 (GR-45, EV-27, EV-28, design D27).
fn mode(ctx: &Ctx<'_>) -> Step {
    let value = format!(
        "cpu:{},memory:{}",
        ctx.modes.cpu.as_str(),
        ctx.modes.memory.as_str()
    );
    let threshold = "auto-patch, or audit with an approve-once pending".to_owned();
    if !ctx.active.is_empty() {
        return pass(Check::Mode, value, threshold);
    }
    let audit: Vec<Resource> = ctx
        .mode_reports
        .iter()
        .filter(|r| r.reason == wk::REASON_MODE_AUDIT)
        .map(|r| r.resource)
        .collect();
    let (reason, resources) = if audit.is_empty() {
        (wk::REASON_MODE_OFF, Resource::ALL.to_vec())
    } else {
        (wk::REASON_MODE_AUDIT, audit)
    };
    let message = format!("no resource is in auto-patch ({value})");
    let outcome = skip(Check::Mode, reason, resources, message);
    stop(Check::Mode, value, threshold, outcome)
}

/// The tolerance (GR-23, GR-24, design D8, D10).
fn tolerance(ctx: &Ctx<'_>) -> Step {
    let t = &ctx.targets;
    let tol = ctx.facts.settings.tolerance_milli_percent;
    let percent = percent(tol);
    let threshold = format!("a move of {percent} or more");
    let moving = t.moving_resources();
    let value = if moving.is_empty() {
        "no value moves".to_owned()
    } else {
        format!("{} would move", names(&moving))
    };
    let recommended = ctx.facts.recommendation.containers.len();
    if recommended > 0 && t.dropped.len() == recommended {
        let message = format!(
            "no recommended container is in the pod template ({})",
            t.dropped.join(", ")
        );
        let outcome = skip(
            Check::Tolerance,
            wk::REASON_RECOMMENDATION_STALE,
            Vec::new(),
            message,
        );
        return stop(Check::Tolerance, value, threshold, outcome);
    }
    if moving.is_empty() {
        let message = format!("no value would move by the tolerance of {percent} or more");
        let outcome = skip(
            Check::Tolerance,
            wk::REASON_NO_SIGNIFICANT_CHANGE,
            ctx.active_resources(),
            message,
        );
        return stop(Check::Tolerance, value, threshold, outcome);
    }
    pass(Check::Tolerance, value, threshold)
}

/// Thousandths of a percent as text: 5000 is "5 %", 2500 is "2.5 %".
fn percent(milli: u32) -> String {
    let frac = format!("{:03}", milli % 1000);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{} %", milli / 1000)
    } else {
        format!("{}.{frac} %", milli / 1000)
    }
}

fn names(resources: &[Resource]) -> String {
    resources
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(" and ")
}

/// Check 2 (GR-46, EV-37, reading 6, design D26).
fn hub(ctx: &Ctx<'_>) -> Step {
    let h = &ctx.facts.hub;
    let threshold = format!(
        "a successful fetch within {}",
        format_go_duration(h.stale_after)
    );
    let age = h.last_success.map(|t| ctx.now - t);
    let value = match age {
        Some(a) => format!(
            "last successful fetch {} ago",
            format_go_duration(a.max(Duration::zero()))
        ),
        None => "no successful fetch".to_owned(),
    };
    if age.is_some_and(|a| a <= h.stale_after) {
        return pass(Check::HubReachable, value, threshold);
    }
    let message = format!("the hub's recommendations are stale: {value}");
    let outcome = Outcome::Block(Block::new(
        wk::REASON_HUB_UNREACHABLE,
        Check::HubReachable,
        message,
    ));
    stop(Check::HubReachable, value, threshold, outcome)
}

/// Check 3 (GR-47, AP-43, EV-40).
fn pause(ctx: &Ctx<'_>) -> Step {
    let threshold = "not paused".to_owned();
    let Some(scope) = ctx.facts.hub.pause else {
        return pass(Check::Pause, "not paused".to_owned(), threshold);
    };
    let value = format!("paused ({})", scope.as_str());
    let mut b = Block::new(
        wk::REASON_PAUSED,
        Check::Pause,
        format!("automation is paused for the {} in the hub", scope.as_str()),
    );
    b.details
        .insert(wk::DETAIL_PAUSE_SCOPE.to_owned(), scope.as_str().to_owned());
    stop(Check::Pause, value, threshold, Outcome::Block(b))
}

/// Check 4 (GR-48, EV-29, design D6).
fn stale(ctx: &Ctx<'_>) -> Step {
    let diffs = settings_diffs(ctx.policy, ctx.facts);
    let threshold = "every setting a layer sets equals the recommendation's echo".to_owned();
    if diffs.is_empty() {
        return pass(Check::StaleSettings, "settings match".to_owned(), threshold);
    }
    let value = diffs.join(", ");
    let message = format!("the recommendation was made with other settings: {value}");
    let outcome = skip(
        Check::StaleSettings,
        wk::REASON_RECOMMENDATION_STALE,
        Vec::new(),
        message,
    );
    stop(Check::StaleSettings, value, threshold, outcome)
}

/// The settings some layer sets that differ from the echo (design D6).
pub(crate) fn settings_diffs(policy: &EffectivePolicy, facts: &Facts) -> Vec<String> {
    let want = &policy.recommendation;
    let echo = facts.recommendation.settings.clone().unwrap_or_default();
    let mut out = Vec::new();
    let mut differ = |field: &str, wanted: String, got: Option<String>, same: bool| {
        if !same {
            out.push(format!(
                "{field} {wanted} (recommendation: {})",
                got.unwrap_or_else(|| "unset".into())
            ));
        }
    };
    if let Some(w) = &want.window {
        let got = echo
            .window
            .as_ref()
            .and_then(|g| parse_go_duration(g.as_str()).ok());
        let text = echo.window.as_ref().map(|g| g.as_str().to_owned());
        differ(
            "window",
            format_go_duration(w.value),
            text,
            got == Some(w.value),
        );
    }
    if let Some(p) = &want.cpu_percentile {
        let got = echo.cpu_percentile;
        differ(
            "cpuPercentile",
            p.value.to_string(),
            got.map(|g| g.to_string()),
            got == Some(p.value),
        );
    }
    if let Some(p) = &want.memory_percentile {
        let got = echo.memory_percentile;
        differ(
            "memoryPercentile",
            p.value.to_string(),
            got.map(|g| g.to_string()),
            got == Some(p.value),
        );
    }
    if let Some(p) = &want.headroom_percent {
        let got = echo.headroom_percent;
        differ(
            "headroomPercent",
            p.value.to_string(),
            got.map(|g| g.to_string()),
            got == Some(p.value),
        );
    }
    if let Some(l) = &want.limits {
        let got = echo.limits;
        differ(
            "limits",
            format!("{:?}", l.value),
            got.map(|g| format!("{g:?}")),
            got == Some(l.value),
        );
    }
    out
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
    targets: &Targets,
) -> HpaVerdict {
    let Some(input) = &facts.hpa else {
        return HpaVerdict::NotInvolved;
    };
    let old = targets.container_requests(facts, false);
    let new = targets.container_requests(facts, true);
    match hpa::coordinate(input, &old, &new, HpaBounds::from_policy(policy)) {
        HpaOutcome::NotCoupled => HpaVerdict::NotInvolved,
        HpaOutcome::Coordinated(c) => HpaVerdict::Coordinated(c),
        HpaOutcome::Coupled { resource, message } => HpaVerdict::Coupled { resource, message },
    }
}

/// The HPA change of an applied change, on the final plans (after the per-resource
/// blocks). Values that can no longer be coordinated block `HPACoupled`.
pub(crate) fn final_hpa_change(ctx: &Ctx<'_>) -> Result<Option<HpaChange>, Block> {
    match hpa_verdict(ctx.facts, ctx.policy, &ctx.targets) {
        HpaVerdict::Coordinated(c) => Ok(Some(c)),
        HpaVerdict::NotInvolved => Ok(None),
        HpaVerdict::Coupled { resource, message } => {
            let mut b = Block::new(wk::REASON_HPA_COUPLED, Check::HpaCoupling, message);
            b.resources = vec![resource];
            Err(b)
        }
    }
}

/// Check 5 (GR-49, EV-31..EV-33).
fn hpa_check(ctx: &Ctx<'_>) -> Step {
    let threshold = format!(
        "coordination on, target within {}..{} %",
        ctx.policy.hpa_min_target.value, ctx.policy.hpa_max_target.value
    );
    match &ctx.hpa {
        HpaVerdict::NotInvolved => pass(
            Check::HpaCoupling,
            "no HPA on a changed resource".into(),
            threshold,
        ),
        HpaVerdict::Coordinated(c) => {
            let value = format!(
                "HPA {} {}: target {} -> {} %",
                c.name, c.resource, c.from, c.to
            );
            pass(Check::HpaCoupling, value, threshold)
        }
        HpaVerdict::Coupled { resource, message } => {
            let mut b = Block::new(wk::REASON_HPA_COUPLED, Check::HpaCoupling, message.clone());
            b.resources = vec![*resource];
            stop(
                Check::HpaCoupling,
                message.clone(),
                threshold,
                Outcome::Block(b),
            )
        }
    }
}

/// Check 6 (GR-11, GR-50).
fn learning(ctx: &Ctx<'_>) -> Step {
    let needed = ctx.policy.learning_period.value;
    let threshold = format_go_duration(needed);
    let covered = ctx
        .facts
        .recommendation
        .data_coverage
        .as_ref()
        .map(|d| d.covered.as_str());
    let parsed = covered.and_then(|c| parse_go_duration(c).ok());
    let value = match (covered, parsed) {
        (_, Some(d)) => format_go_duration(d),
        (Some(c), None) => format!("unreadable ({c})"),
        (None, None) => "no coverage reported".to_owned(),
    };
    if parsed.is_some_and(|d| d >= needed) {
        return pass(Check::LearningPeriod, value, threshold);
    }
    let message = format!("usage data covers {value}, the learning period is {threshold}");
    let outcome = Outcome::Block(Block::new(
        wk::REASON_LEARNING_PERIOD,
        Check::LearningPeriod,
        message,
    ));
    stop(Check::LearningPeriod, value, threshold, outcome)
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
fn confidence(ctx: &Ctx<'_>) -> Step {
    let have = workload_confidence(ctx.facts);
    let need = ctx.policy.min_confidence.value;
    let (value, threshold) = (have.to_string(), need.to_string());
    if have >= need {
        return pass(Check::Confidence, value, threshold);
    }
    let message = format!("confidence {value} is below minConfidence {threshold}");
    let outcome = Outcome::Block(Block::new(
        wk::REASON_LOW_CONFIDENCE,
        Check::Confidence,
        message,
    ));
    stop(Check::Confidence, value, threshold, outcome)
}

/// Check 8 (GR-52, AP-34, AP-39..AP-42).
fn freeze(ctx: &Ctx<'_>) -> Step {
    let threshold = "no freeze window open".to_owned();
    let policy = evaluate_windows(
        WindowKind::Freeze,
        &ctx.policy.freeze_windows.value,
        ctx.now,
    );
    let cluster = &ctx.facts.cluster_freeze;
    let chart = evaluate_windows(WindowKind::Freeze, &cluster.windows, ctx.now);
    let (value, until) = if cluster.now {
        ("cluster-wide freeze (freeze.now)".to_owned(), None)
    } else if chart.open {
        (
            "a cluster-wide freeze window is open".to_owned(),
            chart.open_until,
        )
    } else if policy.open {
        let invalid = if policy.errors.is_empty() {
            ""
        } else {
            " (an invalid freeze window counts as open)"
        };
        (
            format!("a freeze window of the policy is open{invalid}"),
            policy.open_until,
        )
    } else {
        return pass(
            Check::FreezeWindow,
            "no freeze window open".to_owned(),
            threshold,
        );
    };
    let mut b = Block::new(wk::REASON_FREEZE_WINDOW, Check::FreezeWindow, value.clone());
    b.until = until;
    stop(Check::FreezeWindow, value, threshold, Outcome::Block(b))
}

/// Check 9 (GR-53, reading 5): decides the workload only when no resource is left.
fn resource_limits(ctx: &Ctx<'_>) -> Step {
    let t = &ctx.targets;
    let threshold = "at least one resource left after the per-resource limits".to_owned();
    let blocked: Vec<String> = t
        .blocks()
        .map(|b| format!("{}/{}: {}", b.container, b.resource, b.reason))
        .collect();
    let value = if blocked.is_empty() {
        "nothing refused".to_owned()
    } else {
        blocked.join(", ")
    };
    if t.any_goes_in() {
        return pass(Check::ResourceLimits, value, threshold);
    }
    let Some(first) = t.blocks().next() else {
        return pass(Check::ResourceLimits, value, threshold);
    };
    let mut b = Block::new(first.reason, Check::ResourceLimits, first.message.clone());
    b.resources = vec![first.resource];
    stop(Check::ResourceLimits, value, threshold, Outcome::Block(b))
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

/// Check 10 (GR-21, GR-54, design D11).
fn cooldown(ctx: &Ctx<'_>) -> Step {
    let threshold = format!(
        "{} since the last change, no health watch running",
        format_go_duration(ctx.policy.cooldown.value)
    );
    let Some(until) = cooldown_until(ctx) else {
        return pass(Check::Cooldown, "no recent change".to_owned(), threshold);
    };
    let value = match until {
        Some(u) => format!("held until {}", u.to_rfc3339()),
        None => "a change or its health watch is still running".to_owned(),
    };
    let mut b = Block::new(
        wk::REASON_COOLDOWN,
        Check::Cooldown,
        format!("cooldown: {value}"),
    );
    b.until = until;
    stop(Check::Cooldown, value, threshold, Outcome::Block(b))
}

/// Check 11 (GR-55, AP-44..AP-51).
fn single_replica(ctx: &Ctx<'_>) -> Step {
    let threshold = "keeps a Ready pod, or allow-disruption".to_owned();
    let carrier = ctx.strategy.carrier();
    match strategy::single_replica_unsafe(ctx.facts, ctx.policy, &ctx.targets, carrier) {
        None => pass(Check::SingleReplica, "safe".to_owned(), threshold),
        Some(why) => {
            let b = Block::new(
                wk::REASON_SINGLE_REPLICA_UNSAFE,
                Check::SingleReplica,
                why.clone(),
            );
            stop(Check::SingleReplica, why, threshold, Outcome::Block(b))
        }
    }
}

/// Check 12 (GR-56, AP-23, AP-25, AP-26, AP-28, AP-33, design D23).
fn maintenance(ctx: &Ctx<'_>) -> Step {
    let remaining = ctx.policy.min_window_remaining.value;
    let threshold = format!(
        "a maintenance window open with {} left",
        format_go_duration(remaining)
    );
    if ctx.strategy.effective != Strategy::Deferred {
        let value = format!("strategy {}", ctx.strategy.effective.as_str());
        return pass(Check::MaintenanceWindow, value, threshold);
    }
    let windows = &ctx.policy.maintenance_windows.value;
    let v = evaluate_windows(WindowKind::Maintenance, windows, ctx.now);
    let enough = v.open_until.is_none_or(|end| end - ctx.now >= remaining);
    if !windows.is_empty() && v.open && enough {
        return pass(
            Check::MaintenanceWindow,
            "a maintenance window is open".to_owned(),
            threshold,
        );
    }
    let value = match (windows.is_empty(), v.open, v.next_open) {
        (true, _, _) => "no maintenance window configured".to_owned(),
        (false, true, _) => "the open window ends too soon".to_owned(),
        (false, false, Some(n)) => format!("next window opens {}", n.to_rfc3339()),
        (false, false, None) => "no window opens again".to_owned(),
    };
    let mut b = Block::new(
        wk::REASON_OUTSIDE_MAINTENANCE_WINDOW,
        Check::MaintenanceWindow,
        format!("deferred change waits for a maintenance window: {value}"),
    );
    b.next_window = v.next_open;
    b.until = v.next_open;
    stop(
        Check::MaintenanceWindow,
        value,
        threshold,
        Outcome::Block(b),
    )
}
