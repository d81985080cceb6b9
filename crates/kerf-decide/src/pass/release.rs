//! Leaving auto-patch, per resource (design D21, AP-21, AP-35, EV-39, EV-46): which
//! resources of the applied change are released, and the block a release reports while a
//! freeze or a pause holds it.
//!
//! Nothing is released while a freeze window, the cluster-wide freeze or a pause is open:
//! the release waits, and the workload reports that block for the resources it would
//! release instead of their mode skip (the one exception to the mode deciding first).

use chrono::{DateTime, Utc};
use kerf_api::Resource;
use kerf_api::policy::Mode;
use kerf_api::rsr::{ChangeState, RightsizingRecommendationStatus};
use kerf_api::wellknown as wk;

use crate::effective::EffectivePolicy;
use crate::facts::Facts;
use crate::pipeline::{Block, Check, Decision, Outcome, ReportKind, ResourceReport, resource_list};
use crate::window::{WindowKind, evaluate_windows};

/// A release that is due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    /// The resources that left: released now.
    pub resources: Vec<Resource>,
    /// The mode they had (auto-patch, or audit for an approved change).
    pub previous: Mode,
    /// The mode of the first of them now.
    pub new: Mode,
}

/// The resources of the last applied change that left auto-patch (an approved change
/// keeps its fields until the mode is `off`, design D27; a revert releases every field
/// once its template apply is done), if any. The freeze and the
/// pause are not consulted here (see [`release_hold`]).
pub fn release_due(
    s: &RightsizingRecommendationStatus,
    policy: &EffectivePolicy,
) -> Option<Release> {
    let change = s
        .change
        .as_ref()
        .filter(|c| c.state == ChangeState::Applied)?;
    let approved = change.approval_id.is_some();
    let left = |r: &Resource| {
        let mode = policy.mode_of(*r);
        if approved {
            mode == Mode::Off
        } else {
            mode != Mode::AutoPatch
        }
    };
    // A revert that rewrote the template hands every field over at once.
    let resources: Vec<Resource> = (change.resources.iter().copied())
        .filter(|r| change.revert || left(r))
        .collect();
    let first = *resources.first()?;
    Some(Release {
        resources,
        previous: if approved {
            Mode::Audit
        } else {
            Mode::AutoPatch
        },
        new: policy.mode_of(first),
    })
}

/// The pause or freeze that holds a due release at `now`, as the block the workload
/// reports for the resources it would release (D21, AP-35, EV-39).
pub fn release_hold(
    s: &RightsizingRecommendationStatus,
    facts: &Facts,
    policy: &EffectivePolicy,
    now: DateTime<Utc>,
) -> Option<Block> {
    let rel = release_due(s, policy)?;
    let names: Vec<&str> = rel.resources.iter().map(|r| r.as_str()).collect();
    let waits = format!("the release of {} waits", names.join(", "));
    let mut block = if let Some(scope) = facts.hub.pause {
        let mut b = blank(wk::REASON_PAUSED, Check::Pause);
        b.message = format!(
            "automation is paused for the {} in the hub: {waits}",
            scope.as_str()
        );
        b.details
            .insert(wk::DETAIL_PAUSE_SCOPE.to_owned(), scope.as_str().to_owned());
        b
    } else {
        let (what, until) = freeze(facts, policy, now)?;
        let mut b = blank(wk::REASON_FREEZE_WINDOW, Check::FreezeWindow);
        b.message = format!("{what}: {waits}");
        b.until = until;
        b
    };
    block.resources = resource_list(super::resource_flags(&rel.resources));
    Some(block)
}

/// The open freeze, worded, and when it closes (`None` for `freeze.now`).
fn freeze(
    facts: &Facts,
    policy: &EffectivePolicy,
    now: DateTime<Utc>,
) -> Option<(&'static str, Option<DateTime<Utc>>)> {
    let chart = evaluate_windows(WindowKind::Freeze, &facts.cluster_freeze.windows, now);
    let own = evaluate_windows(WindowKind::Freeze, &policy.freeze_windows.value, now);
    if facts.cluster_freeze.now {
        Some(("the cluster-wide freeze (freeze.now) is on", None))
    } else if chart.open {
        Some(("a cluster-wide freeze window is open", chart.open_until))
    } else if own.open {
        Some(("a freeze window of the policy is open", own.open_until))
    } else {
        None
    }
}

fn blank(reason: &'static str, check: Check) -> Block {
    Block {
        reason,
        check,
        resources: &[],
        message: String::new(),
        details: Default::default(),
        next_window: None,
        until: None,
    }
}

/// Reports `held` for the resources a waiting release would release (D21): their mode
/// skips give way to it. A skip outcome becomes the block; a block with the same reason
/// already covers the whole workload; behind another block it is reported per resource.
pub fn report_hold(decision: &mut Decision, held: Block) {
    decision
        .reports
        .retain(|r| !(r.kind == ReportKind::Skipped && held.resources.contains(&r.resource)));
    match &decision.outcome {
        Outcome::Block(b) if b.reason == held.reason => {}
        Outcome::Skip(_) => {
            decision.message = held.message.clone();
            decision.outcome = Outcome::Block(held);
        }
        _ => {
            for r in held.resources {
                decision.reports.push(ResourceReport {
                    kind: ReportKind::Blocked,
                    reason: held.reason,
                    resource: *r,
                    container: None,
                    message: held.message.clone(),
                });
            }
        }
    }
}
