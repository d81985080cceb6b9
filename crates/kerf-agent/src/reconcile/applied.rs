//! What a change that went in records (design D20, D25, EV-10, EV-26): `applied` pending,
//! the live values of an in-place change, the approval it carried out consumed; and the
//! end of a revert. The effect interpreter calls it for `Effect::MarkApplied`.

use kerf_api::rsr::{
    ChangeRecord, ChangeState, LiveContainer, LiveValues, RightsizingRecommendationStatus,
};
use kerf_api::{Resource, ResourceRequirements};
use kerf_decide::facts::Facts;

use super::pass::Pass;
use super::step::{StepResult, event_workload};
use crate::cache::WorkloadInfo;
use crate::intent;

/// How many carried-out approvals `status.consumedApprovals` keeps (its CRD limit).
pub const MAX_CONSUMED_APPROVALS: usize = 32;

/// The live values of an applied in-place change (design D20): the template's values with
/// the change's `to` laid over them, and the template's values as `base`.
pub fn live_values(change: &ChangeRecord, w: &WorkloadInfo) -> LiveValues {
    let containers = change
        .containers
        .iter()
        .filter_map(|c| {
            let t = w.containers.iter().find(|t| *t.name == c.name)?;
            let base = ResourceRequirements {
                requests: t.requests.clone(),
                limits: t.limits.clone(),
            };
            let mut requests = base.requests.clone();
            let mut limits = base.limits.clone();
            for r in Resource::ALL {
                if let Some(q) = c.to.requests.get(r) {
                    requests.set(r, Some(q.clone()));
                }
                if let Some(q) = c.to.limits.get(r) {
                    limits.set(r, Some(q.clone()));
                } else if c.from.limits.get(r).is_some() && c.to.requests.get(r).is_some() {
                    limits.set(r, None);
                }
            }
            Some(LiveContainer {
                name: c.name.clone(),
                requests,
                limits,
                base,
            })
        })
        .collect();
    LiveValues { containers }
}

/// Records the change as applied: `applied` pending, the live values of an in-place
/// change (design D20), a carried-out approval consumed (a revert ends as a revert).
pub fn finish_applied(s: &mut RightsizingRecommendationStatus, c: &Pass<'_>, out: &mut StepResult) {
    if s.change.as_ref().is_some_and(|ch| ch.revert) {
        return finish_reverted(s, c, out);
    }
    intent::mark_applied(s, c.now, c.policy.watch_duration.value);
    let Some(change) = s.change.clone() else {
        return;
    };
    s.live = change
        .strategy
        .resizes_pods()
        .then(|| live_values(&change, &c.workload));
    if !change.strategy.resizes_pods() {
        s.live = None;
    }
    if let Some(a) = &change.approval_id
        && !s.consumed_approvals.contains(a)
    {
        s.consumed_approvals.push(a.clone());
        // The CRD holds 32: the oldest go first (their recommendations are long replaced).
        let over = s
            .consumed_approvals
            .len()
            .saturating_sub(MAX_CONSUMED_APPROVALS);
        s.consumed_approvals.drain(..over);
    }
    let approved_by = approver(&change, &c.facts);
    let e = intent::applied_event(&change, event_workload(&c.workload), approved_by, c.now);
    intent::add_pending(s, &e);
    out.events.push(e);
    out.finished = true;
}

/// The end of a revert's executor step (annotation `kerf.getkerf.dev/revert`): nothing is
/// live and nothing is watched (a rollback would undo the revert). In place the pods run
/// the template's values: the change is `Released` and `released Reverted` recorded. A
/// rollout's template apply leaves the change `Applied` for the release of `kerf`'s fields,
/// which records the event.
fn finish_reverted(s: &mut RightsizingRecommendationStatus, c: &Pass<'_>, out: &mut StepResult) {
    s.live = None;
    s.watch = None;
    let Some(ch) = s.change.as_mut() else {
        return;
    };
    ch.applied_at = Some(c.now);
    out.finished = true;
    if !ch.strategy.resizes_pods() {
        ch.state = ChangeState::Applied;
        return;
    }
    ch.state = ChangeState::Released;
    let id = intent::allocate(&mut ch.event_ids.released);
    let change = ch.clone();
    let e = intent::reverted_event(&change, event_workload(&c.workload), id, c.now);
    intent::add_pending(s, &e);
    out.events.push(e);
}

/// Who approved the change's approval (EV-26): the hub config's approval with that id, or
/// the rsr's mirror of it (a resumed change whose approval the config no longer lists).
fn approver<'a>(change: &ChangeRecord, facts: &'a Facts) -> Option<&'a str> {
    let id = change.approval_id.as_deref()?;
    let from_config = facts
        .approval
        .as_ref()
        .filter(|a| a.approval_id == id)
        .map(|a| a.approved_by.as_str());
    let mirrored = || {
        facts
            .recommendation
            .approval
            .as_ref()
            .filter(|a| a.approval_id == id)
            .map(|a| a.approved_by.as_str())
    };
    from_config.or_else(mirrored)
}
