//! Carrying a recorded change onto the workload through the executor: the in-place state
//! machine (design D16) with its fallback to rollout (AP-10, AP-11) and the rollout (the
//! release when a workload leaves auto-patch is [`super::release_step`]). Every step starts
//! from the intent in status and the live state, so a resumed change sends nothing twice.

use kerf_api::Strategy;
use kerf_api::event::{Event, EventType};
use kerf_api::rsr::{
    ChangeProgress, ChangeRecord, ChangeState, HpaOrder, LiveContainer, LiveValues,
    RightsizingRecommendationStatus, StrategyStatus,
};
use kerf_api::wellknown as wk;
use kerf_api::{Resource, ResourceRequirements};
use kerf_decide::facts::Facts;

use super::hpa_step;
use super::pass::Pass;
use super::step::{ActError, StepResult, event_workload, template_covers, workload_id};
use crate::cache::{PodInfo, WorkloadInfo};
use crate::executor::ContainerResources;
use crate::executor::inplace::{
    self, InPlaceInput, InPlaceOutcome, PodResizeView, ResizeCondition,
};
use crate::executor::resize::{ResizeError, resize_pod};
use crate::executor::rollout;
use crate::failpoints;
use crate::intent;

/// How many carried-out approvals `status.consumedApprovals` keeps (its CRD limit).
pub const MAX_CONSUMED_APPROVALS: usize = 32;

fn target(change: &ChangeRecord) -> Vec<ContainerResources> {
    change
        .containers
        .iter()
        .map(|c| (c.name.clone(), c.to.clone()))
        .collect()
}

fn view(p: &PodInfo) -> PodResizeView {
    let cond = |type_: &str, c: &crate::cache::pods::ResizeCondition| ResizeCondition {
        type_: type_.to_owned(),
        reason: c.reason.clone(),
        message: c.message.clone(),
        since: c.since,
    };
    let mut conditions = Vec::new();
    if let Some(c) = &p.resize_pending {
        conditions.push(cond(wk::POD_CONDITION_RESIZE_PENDING, c));
    }
    if let Some(c) = &p.resize_in_progress {
        conditions.push(cond(wk::POD_CONDITION_RESIZE_IN_PROGRESS, c));
    }
    PodResizeView {
        name: p.name.clone(),
        node: p.node_name.as_deref().map(str::to_owned),
        spec: p
            .containers
            .iter()
            .map(|c| {
                let r = ResourceRequirements {
                    requests: c.requests.clone(),
                    limits: c.limits.clone(),
                };
                (c.name.to_string(), r)
            })
            .collect(),
        status: p
            .containers
            .iter()
            .filter_map(|c| Some((c.name.to_string(), c.status_resources.clone()?)))
            .collect(),
        conditions,
        terminating: p.deletion_timestamp.is_some(),
        current_revision: true,
        completed_at: None,
    }
}

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

fn finish_applied(s: &mut RightsizingRecommendationStatus, c: &Pass<'_>, out: &mut StepResult) {
    intent::mark_applied(s, c.now, c.policy.watch_duration.value);
    let Some(change) = s.change.clone() else {
        return;
    };
    s.live = (change.strategy == Strategy::InPlace).then(|| live_values(&change, &c.workload));
    if change.strategy != Strategy::InPlace {
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

/// Moves a change in state Intent or Applying one step on; `may_start` is false while a
/// freeze or a pause holds new resizes back.
pub async fn advance(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    may_start: bool,
) -> Result<StepResult, ActError> {
    let mut out = StepResult::default();
    let Some(change) = s.change.as_mut() else {
        return Ok(out);
    };
    if change.state == ChangeState::Intent {
        change.state = ChangeState::Applying;
    }
    match change.strategy {
        Strategy::InPlace => in_place(s, c, may_start, &mut out).await?,
        Strategy::Rollout | Strategy::Deferred => rollout_step(s, c, &mut out).await?,
    }
    Ok(out)
}

async fn in_place(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    may_start: bool,
    out: &mut StepResult,
) -> Result<(), ActError> {
    let Some(change) = s.change.clone() else {
        return Ok(());
    };
    let target = target(&change);
    let views: Vec<PodResizeView> = c.pods.iter().map(|p| view(p)).collect();
    let first_resize_at = change
        .first_resize_at
        .or_else(|| inplace::resumed_first_resize(&views, &target, c.now));
    if let Some(ch) = s.change.as_mut() {
        ch.first_resize_at = first_resize_at;
    }
    let rollout_safe =
        kerf_decide::strategy::fallback_allowed(&c.facts, &c.policy, wk::REASON_RESIZE_INFEASIBLE)
            .is_ok();
    let input = InPlaceInput {
        kind: c.workload.key.kind,
        rollout_safe,
        target: &target,
        pods: &views,
        first_resize_at,
        fallback_after: c.policy.fallback_after.value,
        may_start,
        now: c.now,
    };
    let outcome = resize_planned(s, c, &input).await?;
    match outcome {
        InPlaceOutcome::Progress { accepted, total } => {
            if let Some(ch) = s.change.as_mut() {
                ch.progress = Some(ChangeProgress {
                    pods_accepted: i32::try_from(accepted).unwrap_or(i32::MAX),
                    pods_total: i32::try_from(total).unwrap_or(i32::MAX),
                });
            }
        }
        InPlaceOutcome::AllAccepted => {
            if let Some(ch) = s.change.as_mut() {
                let total = ch.progress.as_ref().map_or_else(
                    || i32::try_from(views.len()).unwrap_or(i32::MAX),
                    |p| p.pods_total,
                );
                ch.progress = Some(ChangeProgress {
                    pods_accepted: total,
                    pods_total: total,
                });
            }
            finish_applied(s, c, out)
        }
        InPlaceOutcome::FallBack { reason, message } => {
            fall_back(s, c, reason.as_str(), &message, out);
            rollout_step(s, c, out).await?;
        }
        InPlaceOutcome::Refused {
            fallback_reason,
            message,
            resize_back,
            ..
        } => {
            refuse(s, c, fallback_reason.as_str(), &message, &resize_back, out).await?;
        }
    }
    Ok(())
}

/// Sends the resizes the plan of `input` starts now; an Infeasible answer turns the
/// outcome into a refusal or a fallback (AP-08).
async fn resize_planned(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    input: &InPlaceInput<'_>,
) -> Result<InPlaceOutcome, ActError> {
    let plan = inplace::plan(input);
    let mut outcome = plan.outcome.clone();
    let mut sent = 0usize;
    for pod in &plan.resize_now {
        if !c.may_write() {
            return Err(ActError::NotLeader);
        }
        if !c.write_token() {
            // The pods left are resized by a later pass: the change stays Applying.
            break;
        }
        if let Some(ch) = s.change.as_mut()
            && ch.first_resize_at.is_none()
        {
            ch.first_resize_at = Some(c.now);
        }
        let sidecars = sidecars_in(&c.pods, pod);
        let ns = &c.workload.key.namespace;
        let res = resize_pod(c.ctx.client.clone(), ns, pod, input.target, &sidecars).await;
        sent += 1;
        c.metrics().observe("resize", &res);
        match res {
            Ok(sent) => c.wrote_pod(pod, sent.resource_version),
            Err(ResizeError::Infeasible { message }) => {
                let node = input
                    .pods
                    .iter()
                    .find(|v| &v.name == pod)
                    .and_then(|v| v.node.clone());
                let why = inplace::FallbackReason::ResizeInfeasible;
                outcome = inplace::refusal_or_fallback(input, why, message, node, Vec::new());
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    if sent > 0 {
        failpoints::hit("after-resize")?;
    }
    Ok(outcome)
}

fn fall_back(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    reason: &str,
    message: &str,
    out: &mut StepResult,
) {
    let configured = c.policy.strategy.value;
    s.strategy = Some(StrategyStatus {
        configured,
        effective: Strategy::Rollout,
        fallback_reason: Some(reason.to_owned()),
    });
    let Some(ch) = s.change.as_mut() else { return };
    ch.strategy = Strategy::Rollout;
    // Pod counts belong to in-place changes only.
    ch.progress = None;
    let e = intent::fallback_event(ch, event_workload(&c.workload), reason, message, c.now);
    intent::add_pending(s, &e);
    out.events.push(e);
}

async fn refuse(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    fallback_reason: &str,
    message: &str,
    resize_back: &[String],
    out: &mut StepResult,
) -> Result<(), ActError> {
    let Some(change) = s.change.clone() else {
        return Ok(());
    };
    let back: Vec<ContainerResources> = change
        .containers
        .iter()
        .map(|x| (x.name.clone(), x.from.clone()))
        .collect();
    for pod in resize_back {
        if !c.may_write() {
            return Err(ActError::NotLeader);
        }
        let sidecars = sidecars_in(&c.pods, pod);
        let ns = &c.workload.key.namespace;
        let sent = resize_pod(c.ctx.client.clone(), ns, pod, &back, &sidecars).await?;
        c.wrote_pod(pod, sent.resource_version);
    }
    if let Some(ch) = s.change.as_mut() {
        ch.state = ChangeState::RolledBack;
    }
    let mut e = Event::new(
        uuid::Uuid::new_v4(),
        EventType::Blocked,
        c.now,
        event_workload(&c.workload),
        wk::REASON_SINGLE_REPLICA_UNSAFE,
    )
    .with_message(message);
    e.recommendation_id = Some(change.recommendation_id.clone());
    e.details.insert(
        wk::DETAIL_FALLBACK_REASON.to_owned(),
        fallback_reason.to_owned(),
    );
    out.events.push(e);
    out.finished = true;
    Ok(())
}

async fn rollout_step(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    out: &mut StepResult,
) -> Result<(), ActError> {
    // A lower HPA target goes in before the template (design D22).
    hpa_step::write_due(s, c, HpaOrder::Before).await?;
    let Some(change) = s.change.clone() else {
        return Ok(());
    };
    if !template_covers(&change, &c.workload) {
        if !c.may_write() {
            return Err(ActError::NotLeader);
        }
        if !c.write_token() {
            // A later pass applies the template: the change stays Applying.
            return Ok(());
        }
        let res = rollout::apply_template(
            c.ctx.client.clone(),
            &workload_id(&c.workload),
            &target(&change),
            &change.resources,
        )
        .await;
        c.metrics().observe("apply", &res);
        c.wrote_workload(res?.resource_version);
        failpoints::hit("after-apply")?;
    }
    finish_applied(s, c, out);
    Ok(())
}

/// The restartable init containers of pod `name` among `pods` (none for an unknown pod).
fn sidecars_in<'a>(pods: &'a [std::sync::Arc<PodInfo>], name: &str) -> Vec<&'a str> {
    pods.iter()
        .find(|p| p.name == name)
        .map(|p| p.sidecars())
        .unwrap_or_default()
}
