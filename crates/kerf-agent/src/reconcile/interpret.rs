//! The effect interpreter: carries out the effects of a plan of [`kerf_decide::plan`] in
//! order, and a rollback's restore writes ([`restore`], planned by
//! [`kerf_decide::health::restore`]), each in a `tracing` span of its own. It is the one
//! place in the agent where the kinds of effect are matched; it decides nothing: a status edit is applied as planned, a
//! write goes to the API through the executor (the lease and the write limit checked
//! first), and the one answer that changes the plan, a resize refused as `Infeasible`,
//! replaces the rest of the plan with the planner's [`plan::on_infeasible`].

use std::collections::VecDeque;

use kerf_api::Strategy;
use kerf_api::rsr::HpaChange;
use kerf_api::rsr::{
    ChangeProgress, ChangeState, RightsizingRecommendationStatus, StrategyStatus, WatchStatus,
};
use kerf_api::wellknown as wk;
use kerf_decide::health::restore::{RestoreWrite, pod_restore};
use kerf_decide::inplace::FallbackReason;
use kerf_decide::plan::{self, Effect, FallbackGate, PodTarget, StatusEdit};
use tracing::Instrument;

use super::applied;
use super::healthwatch;
use super::hpa_step;
use super::ondelete_step;
use super::pass::Pass;
use super::release_step;
use super::step::{ActError, Flow, StepResult, event_workload, workload_id};
use crate::cache::PodInfo;
use crate::executor::ContainerResources;
use crate::executor::hpa::{HpaError, MetricSource, write_hpa_target};
use crate::executor::resize::{ResizeError, resize_pod};
use crate::executor::rollout::{self, ApplyError};
use crate::failpoints;
use crate::health::RollbackCtx;
use crate::health::rollback::{ROLLBACK_ACTION, RestoreError, RollbackWrite};
use crate::intent;

/// Carries out `effects` in order on the status `s` of pass `c`.
pub async fn run(
    effects: Vec<Effect>,
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    out: &mut StepResult,
) -> Result<(), ActError> {
    let mut queue: VecDeque<Effect> = effects.into();
    while let Some(effect) = queue.pop_front() {
        let span = tracing::debug_span!("effect", kind = effect.kind(), workload = %c.key);
        match carry(effect, s, c, out).instrument(span).await? {
            Flow::Next => {}
            Flow::Stop => break,
            Flow::Replace(rest) => queue = rest.into(),
        }
    }
    Ok(())
}

/// Carries out one effect.
async fn carry(
    effect: Effect,
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    out: &mut StepResult,
) -> Result<Flow, ActError> {
    match effect {
        Effect::Status(e) => edit(s, c, e),
        Effect::Resize { pods, to, gate } => return resize(s, c, &pods, &to, gate).await,
        Effect::ResizeBack { pods, to } => resize_back(c, &pods, &to).await?,
        Effect::PatchHpa(order) => hpa_step::write_due(s, c, order).await?,
        Effect::ApplyTemplate { to, resources } => {
            return apply_template(c, &to, &resources).await;
        }
        Effect::FallBack { reason, message } => fall_back(s, c, reason, &message, out),
        Effect::Refuse {
            fallback_reason,
            message,
        } => refuse(s, c, fallback_reason, &message, out),
        Effect::Evict { pod, retry_at } => {
            return ondelete_step::evict(s, c, &pod, retry_at, out).await;
        }
        Effect::RestoreHpa => hpa_step::restore(s, c).await?,
        Effect::ReleaseTemplate(resources) => release_step::release_template(c, &resources).await?,
        Effect::MarkReleased(rel) => release_step::mark_released(s, c, &rel, out),
        Effect::MarkApplied => applied::finish_applied(s, c, out),
        Effect::StartWatch => healthwatch::start(c, c.watcher, s).await,
        Effect::WakeAt(t) => out.wake_at = Some(t),
    }
    Ok(Flow::Next)
}

/// Applies a status edit to the change of `s`: the one place the planner's edits land.
pub fn edit(s: &mut RightsizingRecommendationStatus, c: &Pass<'_>, e: StatusEdit) {
    if e == StatusEdit::CanarySummary {
        return kerf_decide::status::summary::refresh_canary(s);
    }
    let Some(ch) = s.change.as_mut() else { return };
    match e {
        StatusEdit::Applying => ch.state = ChangeState::Applying,
        StatusEdit::CanaryChosen(pods) => {
            tracing::info!(change = %ch.id, pods = ?pods, "canary: these pods are resized first");
            ch.canary = Some(plan::chosen_canary(pods));
        }
        StatusEdit::CanaryStage { stage, until } => {
            if stage == kerf_api::rsr::CanaryStage::Passed {
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
        StatusEdit::FirstResizeAt(t) => ch.first_resize_at = t,
        StatusEdit::Progress { accepted, total } => ch.progress = Some(progress(accepted, total)),
        StatusEdit::ProgressComplete { targeted } => {
            let total = ch
                .progress
                .as_ref()
                .map_or_else(|| count(targeted), |p| p.pods_total);
            ch.progress = Some(ChangeProgress {
                pods_accepted: total,
                pods_total: total,
            });
        }
        StatusEdit::CanarySummary => {}
    }
}

/// A pod count as status holds it.
fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// `progress` of `accepted` pods out of `total`.
fn progress(accepted: usize, total: usize) -> ChangeProgress {
    ChangeProgress {
        pods_accepted: count(accepted),
        pods_total: count(total),
    }
}

/// Sends the planned resizes, one write token each; the first resize recorded as
/// `firstResizeAt` when none is. An `Infeasible` answer replaces the rest of the plan with
/// the planner's fallback or refusal (AP-08).
async fn resize(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    pods: &[PodTarget],
    to: &[ContainerResources],
    gate: FallbackGate,
) -> Result<Flow, ActError> {
    let mut flow = Flow::Next;
    let mut sent = 0usize;
    for pod in pods {
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
        let sidecars = sidecars_in(&c.pods, &pod.name);
        let ns = &c.workload.key.namespace;
        let res = resize_pod(c.ctx.client.clone(), ns, &pod.name, to, &sidecars).await;
        sent += 1;
        c.metrics().observe("resize", &res);
        match res {
            Ok(answer) => c.wrote_pod(&pod.name, answer.resource_version),
            Err(ResizeError::Infeasible { message }) => {
                let Some(change) = s.change.as_ref() else {
                    break;
                };
                let rest = plan::on_infeasible(change, gate, message, pod.node.clone());
                flow = Flow::Replace(rest);
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    if sent > 0 {
        failpoints::hit("after-resize")?;
    }
    Ok(flow)
}

/// Resizes `pods` back to `to` (design D16).
async fn resize_back(
    c: &Pass<'_>,
    pods: &[String],
    to: &[ContainerResources],
) -> Result<(), ActError> {
    for pod in pods {
        if !c.may_write() {
            return Err(ActError::NotLeader);
        }
        let sidecars = sidecars_in(&c.pods, pod);
        let ns = &c.workload.key.namespace;
        let sent = resize_pod(c.ctx.client.clone(), ns, pod, to, &sidecars).await?;
        c.wrote_pod(pod, sent.resource_version);
    }
    Ok(())
}

/// Applies the values to the pod template; without a write token a later pass does.
async fn apply_template(
    c: &Pass<'_>,
    to: &[ContainerResources],
    resources: &[kerf_api::Resource],
) -> Result<Flow, ActError> {
    if !c.may_write() {
        return Err(ActError::NotLeader);
    }
    if !c.write_token() {
        // A later pass applies the template: the change stays Applying.
        return Ok(Flow::Stop);
    }
    let id = workload_id(&c.workload);
    let res = rollout::apply_template(c.ctx.client.clone(), &id, to, resources).await;
    c.metrics().observe("apply", &res);
    c.wrote_workload(res?.resource_version);
    failpoints::hit("after-apply")?;
    Ok(Flow::Next)
}

/// The fallback to a rollout: the sticky strategy, the change recorded as a rollout with
/// neither pod counts nor canary (the rollout replaces every pod), `fallback` pending.
fn fall_back(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    reason: FallbackReason,
    message: &str,
    out: &mut StepResult,
) {
    let reason = reason.as_str();
    s.strategy = Some(StrategyStatus {
        configured: c.policy.strategy.value,
        effective: Strategy::Rollout,
        fallback_reason: Some(reason.to_owned()),
    });
    let Some(ch) = s.change.as_mut() else { return };
    ch.strategy = Strategy::Rollout;
    ch.progress = None;
    ch.canary = None;
    let e = intent::fallback_event(ch, event_workload(&c.workload), reason, message, c.now);
    intent::add_pending(s, &e);
    out.events.push(e);
}

/// The refused fallback: the change is `RolledBack`, `blocked SingleReplicaUnsafe`
/// recorded with the fallback's reason.
fn refuse(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    fallback_reason: FallbackReason,
    message: &str,
    out: &mut StepResult,
) {
    let Some(ch) = s.change.as_mut() else { return };
    ch.state = ChangeState::RolledBack;
    let change = ch.clone();
    let mut e = c.blocked_event(&change, wk::REASON_SINGLE_REPLICA_UNSAFE, message);
    e.details.insert(
        wk::DETAIL_FALLBACK_REASON.to_owned(),
        fallback_reason.as_str().to_owned(),
    );
    out.events.push(e);
    out.finished = true;
}

/// The restartable init containers of pod `name` among `pods` (none for an unknown pod).
fn sidecars_in<'a>(pods: &'a [std::sync::Arc<PodInfo>], name: &str) -> Vec<&'a str> {
    pods.iter()
        .find(|p| *p.name == *name)
        .map(|p| p.sidecars())
        .unwrap_or_default()
}

/// Carries out a rollback's restore writes, as [`kerf_decide::health::restore`] planned
/// them, in order (RB-22, RB-23, RB-24), each in an `effect` span. A rollback takes no
/// write token: it never waits for the write limit.
pub async fn restore(ctx: &RollbackCtx<'_>, writes: Vec<RestoreWrite>) -> Result<(), RestoreError> {
    for write in writes {
        let span =
            tracing::debug_span!("effect", kind = write.kind(), workload = %ctx.workload.name);
        async {
            match write {
                RestoreWrite::ResizeBack(back) => restore_pods(ctx, &back).await,
                RestoreWrite::Template { back, resources } => {
                    restore_template(ctx, &back, &resources).await
                }
                RestoreWrite::Hpa(h) => restore_hpa(ctx, &h).await,
            }
        }
        .instrument(span)
        .await?;
    }
    Ok(())
}

/// Resizes every pod still at the change's values back (RB-22); pods already back, or
/// gone, are skipped, so a resumed rollback sends only what is missing.
async fn restore_pods(
    ctx: &RollbackCtx<'_>,
    back: &[ContainerResources],
) -> Result<(), RestoreError> {
    for pod in ctx.pods.iter().filter(|p| p.deletion_timestamp.is_none()) {
        let wanted = pod_restore(&pod.spec_resources(), back);
        if wanted.is_empty() {
            continue;
        }
        if !(ctx.may_write)() {
            return Err(RestoreError::NotLeader);
        }
        let sidecars = pod.sidecars();
        let res = resize_pod(
            ctx.client.clone(),
            &pod.namespace,
            &pod.name,
            &wanted,
            &sidecars,
        )
        .await;
        ctx.metrics.observe(ROLLBACK_ACTION, &res);
        match res {
            Ok(sent) => (ctx.wrote)(
                RollbackWrite::Pod(pod.name.to_string()),
                sent.resource_version,
            ),
            Err(ResizeError::PodGone { .. } | ResizeError::NothingToSend { .. }) => {}
            Err(e) => return Err(RestoreError::Failed(format!("pod {}: {e}", pod.name))),
        }
    }
    Ok(())
}

/// Applies the old values to the pod template (RB-23).
async fn restore_template(
    ctx: &RollbackCtx<'_>,
    back: &[ContainerResources],
    restore: &[kerf_api::Resource],
) -> Result<(), RestoreError> {
    if !(ctx.may_write)() {
        return Err(RestoreError::NotLeader);
    }
    let res = rollout::apply_template(ctx.client.clone(), &ctx.workload, back, restore).await;
    ctx.metrics.observe(ROLLBACK_ACTION, &res);
    match res {
        Ok(applied) => {
            (ctx.wrote)(RollbackWrite::Workload, applied.resource_version);
            Ok(())
        }
        Err(ApplyError::NothingToApply) => Ok(()),
        Err(e @ (ApplyError::NotFound { .. } | ApplyError::Replaced { .. })) => {
            tracing::info!(workload = %ctx.workload.name, error = %e, "workload gone: nothing to restore");
            Ok(())
        }
        Err(e) => Err(RestoreError::Failed(e.to_string())),
    }
}

/// Writes the HPA target back (RB-24). A target someone else changed since is left alone.
async fn restore_hpa(ctx: &RollbackCtx<'_>, h: &HpaChange) -> Result<(), RestoreError> {
    let Some(info) = ctx.hpas.iter().find(|i| i.name == h.name) else {
        return Ok(());
    };
    let metric = info.resource_metrics.iter().find(|m| {
        m.resource == h.resource.as_str()
            && m.target_type == "Utilization"
            && (m.average_utilization == Some(h.from) || m.average_utilization == Some(h.to))
    });
    let Some(m) = metric.filter(|m| m.average_utilization == Some(h.from)) else {
        return Ok(());
    };
    let source = if m.container.is_some() {
        MetricSource::ContainerResource
    } else {
        MetricSource::Resource
    };
    if !(ctx.may_write)() {
        return Err(RestoreError::NotLeader);
    }
    let res = write_hpa_target(
        ctx.client.clone(),
        &info.namespace,
        &info.name,
        m.index,
        source,
        h.from,
        h.to,
    )
    .await;
    ctx.metrics.observe(ROLLBACK_ACTION, &res);
    match res {
        Ok(written) => {
            (ctx.wrote)(
                RollbackWrite::Hpa(info.name.clone()),
                written.resource_version,
            );
            Ok(())
        }
        Err(HpaError::NotFound { .. }) => Ok(()),
        Err(HpaError::Invalid { message }) => {
            tracing::warn!(hpa = %h.name, %message, "HPA target changed by someone else: left alone");
            Ok(())
        }
        Err(e) => Err(RestoreError::Failed(format!("HPA {}: {e}", h.name))),
    }
}
