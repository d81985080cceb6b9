//! The checks as `explain` shows them: every check reports the value it read, the
//! threshold it compared against, and the skip or block it decides (the same as
//! `decide()`'s, from `checks.rs`).

use chrono::Duration;
use kerf_api::Resource;
use kerf_api::policy::Strategy;

use super::checks::{self, HpaVerdict, Modes, Percent};
use super::settings;
use super::{Check, Ctx, Outcome};
use crate::duration::format_go_duration;
use crate::resources;

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

/// Runs one check on a complete context ([`Ctx::full`]).
pub(crate) fn run(ctx: &Ctx<'_>, check: Check) -> Step {
    let (value, threshold) = match check {
        Check::Mode => mode(ctx),
        Check::Tolerance => tolerance(ctx),
        Check::HubReachable => hub(ctx),
        Check::Pause => pause(ctx),
        Check::StaleSettings => stale(ctx),
        Check::HpaCoupling => hpa_coupling(ctx),
        Check::LearningPeriod => learning(ctx),
        Check::Confidence => confidence(ctx),
        Check::FreezeWindow => freeze(ctx),
        Check::ResourceLimits => resource_limits(ctx),
        Check::Cooldown => cooldown(ctx),
        Check::SingleReplica => single_replica(ctx),
        Check::MaintenanceWindow => maintenance(ctx),
    };
    Step {
        check,
        value,
        threshold,
        stop: checks::stop(ctx, check),
    }
}

type Text = (String, String);

fn mode(ctx: &Ctx<'_>) -> Text {
    let value = Modes(&ctx.modes).to_string();
    let threshold = "auto-patch, or audit with an approve-once pending".to_owned();
    (value, threshold)
}

/// What would move: the active resources, then what auto-patch would move of the
/// resources the mode holds back (`cpu and memory would move in auto-patch
/// (cpu:audit,memory:audit)`), or `no value moves`.
fn tolerance(ctx: &Ctx<'_>) -> Text {
    let percent = Percent(ctx.facts.settings.tolerance_milli_percent);
    let names = |list: &[Resource]| {
        let names: Vec<&str> = list.iter().map(|r| r.as_str()).collect();
        names.join(" and ")
    };
    let mut parts = Vec::new();
    let moving = ctx.targets.moving_resources();
    if !moving.is_empty() {
        parts.push(format!("{} would move", names(&moving)));
    }
    let held = resources::targets(ctx.facts, ctx.policy, ctx.held_resources());
    let held_moving = held.moving_resources();
    if !held_moving.is_empty() {
        let modes = Modes(&ctx.modes);
        parts.push(format!(
            "{} would move in auto-patch ({modes})",
            names(&held_moving)
        ));
    }
    let value = if parts.is_empty() {
        "no value moves".to_owned()
    } else {
        parts.join("; ")
    };
    (value, format!("a move of {percent} or more"))
}

fn hub(ctx: &Ctx<'_>) -> Text {
    let hub = &ctx.facts.hub;
    if let Some(vpa) = &hub.vpa_active {
        return (
            vpa.clone(),
            "no VerticalPodAutoscaler updating the pods".to_owned(),
        );
    }
    let within = format_go_duration(hub.stale_after);
    let age = checks::hub_age(ctx);
    if hub.source.is_local() {
        let threshold = format!(
            "a successful read of the {} source within {within}",
            hub.source
        );
        return (checks::source_value(age), threshold);
    }
    (
        checks::hub_value(age),
        format!("a successful fetch within {within}"),
    )
}

fn pause(ctx: &Ctx<'_>) -> Text {
    let value = match ctx.facts.hub.pause {
        Some(scope) => format!("paused ({})", scope.as_str()),
        None => "not paused".to_owned(),
    };
    (value, "not paused".to_owned())
}

fn stale(ctx: &Ctx<'_>) -> Text {
    let diffs = settings::settings_diffs(ctx.policy, ctx.facts);
    let threshold = "every setting a layer sets equals the recommendation's echo".to_owned();
    (listed(&diffs, "settings match"), threshold)
}

/// The items joined by commas, or `none` when there are none.
fn listed(items: &[String], none: &str) -> String {
    if items.is_empty() {
        none.to_owned()
    } else {
        items.join(", ")
    }
}

fn hpa_coupling(ctx: &Ctx<'_>) -> Text {
    let threshold = format!(
        "coordination on, target within {}..{} %",
        ctx.policy.hpa_min_target.value, ctx.policy.hpa_max_target.value
    );
    let value = match &ctx.hpa {
        HpaVerdict::NotInvolved => "no HPA on a changed resource".to_owned(),
        HpaVerdict::Coordinated(c) => format!(
            "HPA {} {}: target {} -> {} %",
            c.name, c.resource, c.from, c.to
        ),
        HpaVerdict::Coupled { message, .. } => message.clone(),
    };
    (value, threshold)
}

fn learning(ctx: &Ctx<'_>) -> Text {
    let (covered, parsed) = checks::coverage(ctx);
    let threshold = format_go_duration(ctx.policy.learning_period.value);
    (checks::coverage_value(covered, parsed), threshold)
}

fn confidence(ctx: &Ctx<'_>) -> Text {
    let have = checks::workload_confidence(ctx.facts);
    (
        have.to_string(),
        ctx.policy.min_confidence.value.to_string(),
    )
}

fn freeze(ctx: &Ctx<'_>) -> Text {
    let value = checks::freeze(ctx).map_or_else(|| "no freeze window open".to_owned(), |f| f.0);
    (value, "no freeze window open".to_owned())
}

fn resource_limits(ctx: &Ctx<'_>) -> Text {
    let blocked: Vec<String> = ctx
        .targets
        .blocks()
        .map(|b| format!("{}/{}: {}", b.container, b.resource, b.reason))
        .collect();
    let threshold = "at least one resource left after the per-resource limits".to_owned();
    (listed(&blocked, "nothing refused"), threshold)
}

fn cooldown(ctx: &Ctx<'_>) -> Text {
    let threshold = format!(
        "{} since the last change, no health watch running",
        format_go_duration(ctx.policy.cooldown.value)
    );
    let value = match checks::cooldown_until(ctx) {
        None => "no recent change".to_owned(),
        Some(until) => checks::HeldUntil(until).to_string(),
    };
    (value, threshold)
}

fn single_replica(ctx: &Ctx<'_>) -> Text {
    let value = checks::single_replica_why(ctx).unwrap_or_else(|| "safe".to_owned());
    (value, "keeps a Ready pod, or allow-disruption".to_owned())
}

fn maintenance(ctx: &Ctx<'_>) -> Text {
    let remaining: Duration = ctx.policy.min_window_remaining.value;
    let threshold = format!(
        "a maintenance window open with {} left",
        format_go_duration(remaining)
    );
    let value = if ctx.strategy.effective != Strategy::Deferred {
        format!("strategy {}", ctx.strategy.effective.as_str())
    } else {
        checks::maintenance_wait(ctx).map_or_else(
            || "a maintenance window is open".to_owned(),
            |(wait, _)| wait.to_string(),
        )
    };
    (value, threshold)
}
