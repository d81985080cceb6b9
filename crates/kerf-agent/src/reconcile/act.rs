//! Carrying a recorded change onto the workload through the executor: the in-place state
//! machine (design D16) with its fallback to rollout (AP-10, AP-11) and the rollout (the
//! release when a workload leaves auto-patch is [`super::release_step`]). Every step starts
//! from the intent in status and the live state, so a resumed change sends nothing twice.

use kerf_api::Strategy;
use kerf_api::rsr::{
    CanaryRecord, CanaryStage, ChangeProgress, ChangeRecord, ChangeState, HpaOrder, LiveContainer,
    LiveValues, RightsizingRecommendationStatus, StrategyStatus, WatchStatus,
};
use kerf_api::wellknown as wk;
use kerf_api::{Resource, ResourceRequirements};
use kerf_decide::canary::{self, CanaryInput, CanaryPod, CanaryStep};
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
            .filter_map(|c| Some((c.name.to_string(), c.status_resources()?.into_owned())))
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
    if s.change.as_ref().is_some_and(|ch| ch.revert) {
        return finish_reverted(s, c, out);
    }
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
    if ch.strategy != Strategy::InPlace {
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

fn all_views(c: &Pass<'_>) -> Vec<PodResizeView> {
    c.pods.iter().map(|p| view(p)).collect()
}

/// The targeted pods (running, current revision) as the canary sees them.
fn canary_pods(views: &[PodResizeView], target: &[ContainerResources]) -> Vec<CanaryPod> {
    views
        .iter()
        .filter(|v| !v.terminating && v.current_revision)
        .map(|v| {
            let state = inplace::pod_state(v, target);
            CanaryPod {
                name: v.name.clone(),
                resized: state != inplace::PodResize::NeedsResize,
                accepted: state.is_accepted(),
            }
        })
        .collect()
}

/// The canary's next step for the change (kerf_decide::canary::next); `breached` is false
/// here: a breach is the pass's rollback step.
fn canary_step(
    change: &ChangeRecord,
    c: &Pass<'_>,
    views: &[PodResizeView],
    target: &[ContainerResources],
) -> CanaryStep {
    let pods = canary_pods(views, target);
    canary::next(&CanaryInput {
        policy: c.policy.canary.value,
        record: change.canary.as_ref(),
        pods: &pods,
        breached: false,
        now: c.now,
    })
}

/// Records the canary of a change about to start, in the intent written before any resize
/// (design D25). Called before the intent's first write; a change without a canary, or
/// whose canary would hold nothing back, records none.
pub fn choose_canary(s: &mut RightsizingRecommendationStatus, c: &Pass<'_>) {
    let Some(change) = s
        .change
        .clone()
        .filter(|ch| ch.strategy == Strategy::InPlace)
    else {
        return;
    };
    let target = target(&change);
    if let CanaryStep::Choose(pods) = canary_step(&change, c, &all_views(c), &target) {
        choose(s, pods);
    }
}

fn choose(s: &mut RightsizingRecommendationStatus, pods: Vec<String>) {
    if let Some(ch) = s.change.as_mut() {
        tracing::info!(change = %ch.id, pods = ?pods, "canary: these pods are resized first");
        ch.canary = Some(CanaryRecord {
            pods,
            stage: CanaryStage::Resizing,
            watch: None,
        });
    }
}

/// Moves the canary to `stage`; a watch ending at `until` starts now. A canary that passed
/// lets the other pods' `fallbackAfter` run from their own first resize.
fn record_canary(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    stage: CanaryStage,
    until: Option<chrono::DateTime<chrono::Utc>>,
) {
    let Some(ch) = s.change.as_mut() else { return };
    if stage == CanaryStage::Passed {
        ch.first_resize_at = None;
    }
    let Some(k) = ch.canary.as_mut() else { return };
    tracing::info!(change = %ch.id, pods = ?k.pods, stage = stage.as_str(), "canary");
    k.stage = stage;
    if let Some(end) = until {
        k.watch = Some(WatchStatus {
            start: c.now,
            end: Some(end),
            baselines: Default::default(),
            aggregated: None,
        });
    }
}

/// `progress` over every targeted pod, while the canary holds the others back.
fn set_progress(
    s: &mut RightsizingRecommendationStatus,
    views: &[PodResizeView],
    target: &[ContainerResources],
) {
    let pods = canary_pods(views, target);
    let accepted = pods.iter().filter(|p| p.accepted).count();
    if let Some(ch) = s.change.as_mut() {
        ch.progress = Some(ChangeProgress {
            pods_accepted: i32::try_from(accepted).unwrap_or(i32::MAX),
            pods_total: i32::try_from(pods.len()).unwrap_or(i32::MAX),
        });
    }
}

/// The views of the named pods only.
fn only(views: Vec<PodResizeView>, names: &[String]) -> Vec<PodResizeView> {
    views
        .into_iter()
        .filter(|v| names.contains(&v.name))
        .collect()
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
    let Some(views) = canary_views(s, c, &change, &target, out) else {
        return Ok(());
    };
    let canary_running = s
        .change
        .as_ref()
        .and_then(|ch| ch.canary.as_ref())
        .is_some_and(|k| k.stage == CanaryStage::Resizing);
    let first_resize_at = s
        .change
        .as_ref()
        .and_then(|ch| ch.first_resize_at)
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
    if canary_running
        && matches!(
            outcome,
            InPlaceOutcome::Progress { .. } | InPlaceOutcome::AllAccepted
        )
    {
        // The canary pods are resized; the next pass starts their watch once they run
        // the values. Progress counts every targeted pod.
        set_progress(s, &all_views(c), &target);
        return Ok(());
    }
    carry_outcome(s, c, outcome, views.len(), out).await
}

/// The pods this pass's in-place plan covers, after the canary's next step: every pod, the
/// canary pods only, or none (the canary recorded a step, or waits).
fn canary_views(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    change: &ChangeRecord,
    target: &[ContainerResources],
    out: &mut StepResult,
) -> Option<Vec<PodResizeView>> {
    let all = all_views(c);
    let views = match canary_step(change, c, &all, target) {
        CanaryStep::All => Some(all),
        CanaryStep::Resize(pods) => Some(only(all, &pods)),
        CanaryStep::Pass => {
            record_canary(s, c, CanaryStage::Passed, None);
            Some(all)
        }
        CanaryStep::Choose(pods) => {
            choose(s, pods);
            set_progress(s, &all, target);
            None
        }
        CanaryStep::Watch { until } => {
            record_canary(s, c, CanaryStage::Watching, Some(until));
            set_progress(s, &all, target);
            None
        }
        CanaryStep::Wait { until } => {
            out.wake_at = Some(until);
            None
        }
        // A breach is the pass's rollback step, not this one.
        CanaryStep::Restore(_) => None,
    };
    crate::summary::refresh_canary(s);
    views
}

async fn carry_outcome(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    outcome: InPlaceOutcome,
    targeted: usize,
    out: &mut StepResult,
) -> Result<(), ActError> {
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
                    || i32::try_from(targeted).unwrap_or(i32::MAX),
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
            // Intent before action (design D25): the fallback (strategy rollout, its event
            // pending) is written with this pass's status; the next pass patches the
            // template. A kill between the two leaves a rollout to resume, never a patched
            // template under a change still recorded in place.
            fall_back(s, c, reason.as_str(), &message, out);
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
    // Pod counts and the canary belong to in-place changes only: the rollout replaces
    // every pod, the canary's included.
    ch.progress = None;
    ch.canary = None;
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
    let mut e = c.blocked_event(&change, wk::REASON_SINGLE_REPLICA_UNSAFE, message);
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
