//! Data for `kerf-agent explain`: every pipeline step with the value it read, its
//! threshold and its verdict, the decision, the target values, the state of the windows
//! and when the change could go in next.
//!
//! Unlike `decide()`, which stops at the first match, `explain` evaluates every step, so an
//! operator sees everything that would still hold the change back.

use std::fmt;

use chrono::{DateTime, Utc};
use kerf_api::Resource;
use kerf_api::policy::Mode;

use crate::duration::Rfc3339;
use crate::effective::EffectivePolicy;
use crate::facts::Facts;
use crate::pipeline::{self, Check, Ctx, Decision, Outcome, Step};
use crate::quantity;
use crate::resources::{self, Pair};
use crate::window::{WindowKind, WindowList};

/// The verdict of one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The step lets the change through.
    Pass,
    /// The step would skip the change with this reason.
    Skip(&'static str),
    /// The step would block the change with this reason.
    Block(&'static str),
}

/// One step as `explain` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExplainStep {
    /// The check.
    pub check: Check,
    /// Its number in the guardrails document (none for the tolerance).
    pub number: Option<u8>,
    /// Its name.
    pub name: &'static str,
    /// The value read.
    pub value: String,
    /// The threshold.
    pub threshold: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Whether this step decided the outcome (the first that matched).
    pub decisive: bool,
    /// When this step stops holding the change by itself, if known.
    pub until: Option<DateTime<Utc>>,
}

/// When the change could go in, as `explain` words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextChange {
    /// Nothing holds the change: it goes in at the next pass.
    Now,
    /// Every step that holds the change ends by itself; the last ends then.
    At(DateTime<Utc>),
    /// A step holds the change with no end of its own (hub unreachable, pause, ...).
    Held,
    /// There is nothing to change: the decision is a skip with this reason.
    NoChange(&'static str),
}

impl fmt::Display for NextChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NextChange::Now => f.write_str("The change could go in now."),
            NextChange::At(at) => write!(f, "The change could go in at {}.", Rfc3339(*at)),
            NextChange::Held => f.write_str(
                "The change waits for something that does not end by itself (see the blocking steps).",
            ),
            NextChange::NoChange(reason) => {
                write!(f, "Nothing waits: there is no change to make ({reason}).")
            }
        }
    }
}

/// The state of a list of windows at one instant, for people.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowState {
    /// No window is configured.
    NoneConfigured,
    /// A window is open now; the list stays open until then (`None`: an invalid freeze
    /// window holds it open with no end).
    OpenUntil(Option<DateTime<Utc>>),
    /// Every window is closed; the next opens then.
    NextOpens(DateTime<Utc>),
    /// Every window is closed and none opens again.
    Closed,
}

impl WindowState {
    /// The state of `list` at `now`.
    pub fn of(list: &WindowList, kind: WindowKind, now: DateTime<Utc>) -> WindowState {
        if list.is_empty() {
            return WindowState::NoneConfigured;
        }
        let status = list.status(kind, now);
        match (status.open, status.next_open) {
            (true, _) => WindowState::OpenUntil(status.open_until),
            (false, Some(next)) => WindowState::NextOpens(next),
            (false, None) => WindowState::Closed,
        }
    }
}

impl fmt::Display for WindowState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WindowState::NoneConfigured => f.write_str("none configured"),
            WindowState::OpenUntil(Some(end)) => write!(f, "open now, until {}", Rfc3339(*end)),
            WindowState::OpenUntil(None) => {
                f.write_str("open now (an invalid window counts as open)")
            }
            WindowState::NextOpens(at) => write!(f, "closed, next opens {}", Rfc3339(*at)),
            WindowState::Closed => f.write_str("closed, none opens again"),
        }
    }
}

/// What one container's resource would become.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetValue {
    /// The container.
    pub container: String,
    /// The resource.
    pub resource: Resource,
    /// The current request and limit.
    pub from: Pair,
    /// The target request and limit.
    pub to: Pair,
    /// The mode of the resource.
    pub mode: Mode,
    /// The per-resource block that keeps this value out of the change, if any.
    pub blocked: Option<&'static str>,
}

impl fmt::Display for TargetValue {
    /// `app/cpu: request 500m → 250m, limit none (kept)`, then the block or the mode when
    /// the value does not go in by itself.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.resource;
        let side =
            |v: Option<i64>| v.map_or_else(|| "none".to_owned(), |v| quantity::format(r, v).0);
        let pair = |name: &str, from: Option<i64>, to: Option<i64>| {
            if from == to {
                format!("{name} {} (kept)", side(from))
            } else {
                format!("{name} {} \u{2192} {}", side(from), side(to))
            }
        };
        write!(
            f,
            "{}/{}: {}, {}",
            self.container,
            r.as_str(),
            pair("request", self.from.request, self.to.request),
            pair("limit", self.from.limit, self.to.limit)
        )?;
        match (self.blocked, self.mode) {
            (Some(reason), _) => write!(f, " [blocked {reason}]"),
            (None, Mode::AutoPatch) => Ok(()),
            (None, mode) => write!(f, " [mode {}]", mode.as_str()),
        }
    }
}

/// What `kerf-agent explain` prints for one workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// The winning RightsizingPolicy, if any.
    pub policy_name: Option<String>,
    /// Every step in pipeline order.
    pub steps: Vec<ExplainStep>,
    /// What `decide()` returns.
    pub decision: Decision,
    /// The current and target values of every recommended container and resource,
    /// whatever the mode.
    pub targets: Vec<TargetValue>,
    /// When the workload cooldown ends (last change plus cooldown, or the health watch).
    pub cooldown_end: Option<DateTime<Utc>>,
    /// The next maintenance window, when a deferred change waits for one.
    pub next_window: Option<DateTime<Utc>>,
    /// The maintenance windows of the effective policy now.
    pub maintenance: WindowState,
    /// The freeze windows of the effective policy now.
    pub freeze: WindowState,
    /// The cluster-wide freeze windows now.
    pub cluster_freeze: WindowState,
    /// The earliest time the change could go in: `now` when nothing holds it; the latest
    /// end among the blocking steps when every one of them ends by itself; `None` when a
    /// block has no end of its own, or when there is nothing to change.
    pub next_change_at: Option<DateTime<Utc>>,
    /// [`Explanation::next_change_at`] with the reason when there is none.
    pub next_change: NextChange,
}

/// Explains the decision for the workload at `now`.
pub fn explain(facts: &Facts, policy: &EffectivePolicy, now: DateTime<Utc>) -> Explanation {
    let ctx = Ctx::full(facts, policy, now);
    let raw: Vec<Step> = Check::ORDER
        .iter()
        .map(|&c| pipeline::run(&ctx, c))
        .collect();
    let decision = pipeline::decide(facts, policy, now);
    let first = raw.iter().position(|s| s.stop.is_some());
    let steps: Vec<ExplainStep> = raw
        .into_iter()
        .enumerate()
        .map(|(i, s)| explain_step(s, first == Some(i)))
        .collect();
    let next_window = steps
        .iter()
        .find(|s| s.check == Check::MaintenanceWindow && s.verdict != Verdict::Pass)
        .and_then(|s| s.until);
    let next_change = next_change(&decision, &steps, now);
    let state = |list: &WindowList, kind| WindowState::of(list, kind, now);
    Explanation {
        policy_name: policy.policy_name.clone(),
        targets: target_values(&ctx),
        next_change_at: match next_change {
            NextChange::Now => Some(now),
            NextChange::At(at) => Some(at),
            NextChange::Held | NextChange::NoChange(_) => None,
        },
        next_change,
        cooldown_end: pipeline::cooldown_until(&ctx).flatten(),
        next_window,
        maintenance: state(&policy.maintenance_windows.value, WindowKind::Maintenance),
        freeze: state(&policy.freeze_windows.value, WindowKind::Freeze),
        cluster_freeze: state(&facts.cluster_freeze.windows, WindowKind::Freeze),
        decision,
        steps,
    }
}

fn explain_step(step: Step, decisive: bool) -> ExplainStep {
    let (verdict, until) = match &step.stop {
        None | Some(Outcome::Apply(_)) => (Verdict::Pass, None),
        Some(Outcome::Skip(s)) => (Verdict::Skip(s.reason), None),
        Some(Outcome::Block(b)) => (Verdict::Block(b.reason), b.until),
    };
    ExplainStep {
        check: step.check,
        number: step.check.number(),
        name: step.check.name(),
        value: step.value,
        threshold: step.threshold,
        verdict,
        decisive,
        until,
    }
}

/// From the decision: now when it applies, nothing to change when it skips; when it
/// blocks, the latest end among the blocking steps if every one of them ends by itself.
fn next_change(decision: &Decision, steps: &[ExplainStep], now: DateTime<Utc>) -> NextChange {
    match &decision.outcome {
        Outcome::Apply(_) => NextChange::Now,
        Outcome::Skip(s) => NextChange::NoChange(s.reason),
        Outcome::Block(b) => {
            let blocking = steps
                .iter()
                .filter(|s| matches!(s.verdict, Verdict::Block(_)));
            std::iter::once(b.until)
                .chain(blocking.map(|s| s.until))
                .try_fold(now, |at, until| until.map(|u| at.max(u)))
                .map_or(NextChange::Held, NextChange::At)
        }
    }
}

/// The current and target values of every recommended container and resource, whatever
/// the mode (an audit resource shows what auto-patch would do); blocks as decided.
fn target_values(ctx: &Ctx<'_>) -> Vec<TargetValue> {
    let all = resources::targets(ctx.facts, ctx.policy, &Resource::ALL);
    all.plans
        .iter()
        .map(|p| {
            let blocked = ctx
                .targets
                .plans
                .iter()
                .find(|a| a.container == p.container && a.resource == p.resource)
                .filter(|a| a.moves())
                .and_then(|a| a.block.as_ref())
                .map(|b| b.reason);
            TargetValue {
                container: p.container.to_owned(),
                resource: p.resource,
                from: p.from,
                to: p.to,
                mode: ctx.policy.mode_of(p.resource),
                blocked,
            }
        })
        .collect()
}
