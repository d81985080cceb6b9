//! Data for `kerf-agent explain`: every pipeline step with the value it read, its
//! threshold and its verdict, the decision, and when the change could go in next.
//!
//! Unlike `decide()`, which stops at the first match, `explain` evaluates every step, so an
//! operator sees everything that would still hold the change back.

use chrono::{DateTime, Utc};

use crate::effective::EffectivePolicy;
use crate::facts::Facts;
use crate::pipeline::{self, Check, Ctx, Decision, Outcome, Step};

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

/// What `kerf-agent explain` prints for one workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// The winning RightsizingPolicy, if any.
    pub policy_name: Option<String>,
    /// Every step in pipeline order.
    pub steps: Vec<ExplainStep>,
    /// What `decide()` returns.
    pub decision: Decision,
    /// When the workload cooldown ends (last change plus cooldown, or the health watch).
    pub cooldown_end: Option<DateTime<Utc>>,
    /// The next maintenance window (deferred strategy).
    pub next_window: Option<DateTime<Utc>>,
    /// The earliest time the change could go in, when every step that holds it ends by
    /// itself (cooldown, freeze, maintenance window); `now` when nothing holds it.
    pub next_change_at: Option<DateTime<Utc>>,
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
        .find(|s| s.check == Check::MaintenanceWindow)
        .and_then(|s| s.until);
    Explanation {
        policy_name: policy.policy_name.clone(),
        next_change_at: next_change_at(&steps, now),
        cooldown_end: pipeline::cooldown_until(&ctx).flatten(),
        next_window,
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

/// The latest end among the holding steps, if every one of them ends by itself.
fn next_change_at(steps: &[ExplainStep], now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut at = now;
    for s in steps.iter().filter(|s| s.verdict != Verdict::Pass) {
        at = at.max(s.until?);
    }
    Some(at)
}
