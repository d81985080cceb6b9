//! The health watch of an applied change and the rollback of a breached one, within a
//! pass over one workload (`docs/health-runtime.md`, rules RB-11, RB-19, RB-20 to RB-30,
//! design D11, D23, D25).
//!
//! Pod updates trigger a pass of their workload, so a breach of OOM kills or restarts is
//! acted on at the pod status update that shows it (RB-11). A rollback consults no freeze
//! window, pause or hub: its event is recorded like every lifecycle event and buffered by
//! the outbox until the hub takes it (RB-28, RB-30).

use std::sync::Arc;

use kerf_api::rsr::{CanaryStage, ChangeState, RightsizingRecommendationStatus};
use kerf_api::wellknown as wk;
use kerf_decide::health::Breach;

use super::pass::Pass;
use super::step::{KeyError, StepResult, event_workload, health_error, workload_id};
use crate::cache::PodInfo;
use crate::health::{
    self, HealthStep, RollbackCtx, RollbackOutcome, StatusWriter, WatchInput, Watcher,
    rollback::RollbackWrite,
};

/// Evaluates the watch of the applied change of `s` once (rules RB-03 to RB-17, RB-19),
/// recording its baselines and end in `s`. The caller asks
/// [`kerf_decide::pass::watch_due`] first.
pub async fn evaluate(
    p: &Pass<'_>,
    watcher: &Watcher,
    s: &mut RightsizingRecommendationStatus,
) -> HealthStep {
    let input = WatchInput {
        namespace: &p.key.namespace,
        pods: &p.all_pods,
        thresholds: watcher.thresholds(&p.policy),
        watch_duration: p.policy.watch_duration.value,
        rollout_complete: health::rollout_complete(&p.workload),
        now: p.now,
    };
    let step = watcher.step(&p.ctx.client, s, &input).await;
    if step == HealthStep::Healthy {
        tracing::info!(workload = %p.key, "health watch ended without a breach: Healthy");
    }
    step
}

/// Evaluates the canary watch of the in-flight change of `s` once, over the canary pods
/// only, recording its baselines in `s` (the caller asks
/// [`kerf_decide::pass::canary_watch_due`] first). A breach carries `details.canary` and
/// `details.pods`, so its `rolled_back` event says that only the canary was restored.
pub async fn evaluate_canary(
    p: &Pass<'_>,
    watcher: &Watcher,
    s: &mut RightsizingRecommendationStatus,
) -> HealthStep {
    let pods = canary_pods(p, s);
    let input = WatchInput {
        namespace: &p.key.namespace,
        pods: &pods,
        thresholds: watcher.thresholds(&p.policy),
        watch_duration: p.policy.watch_duration.value,
        rollout_complete: false,
        now: p.now,
    };
    match watcher.step_canary(&p.ctx.client, s, &input).await {
        HealthStep::Breach(mut b) => {
            let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
            b.details
                .insert(wk::DETAIL_CANARY.to_owned(), "true".to_owned());
            b.details
                .insert(wk::DETAIL_PODS.to_owned(), names.join(","));
            b.message = format!("canary pods {}: {}", names.join(", "), b.message);
            HealthStep::Breach(b)
        }
        // The canary's own step records that it passed.
        HealthStep::Healthy => HealthStep::Idle,
        other => other,
    }
}

/// The pods of the canary of the change of `s`, as its next step names them: all of the
/// workload's pods when the change has no canary.
fn canary_pods(p: &Pass<'_>, s: &RightsizingRecommendationStatus) -> Vec<Arc<PodInfo>> {
    let Some(record) = s.change.as_ref().and_then(|c| c.canary.as_ref()) else {
        return p.all_pods.clone();
    };
    let live: Vec<&str> = p.pods.iter().map(|pod| pod.name.as_str()).collect();
    let names = kerf_decide::canary::present(record, &live);
    p.all_pods
        .iter()
        .filter(|pod| names.contains(&pod.name))
        .cloned()
        .collect()
}

/// Takes the baselines of the watch a step has just started, from the pods as they are at
/// the change (RB-03, RB-09): the next pass may already see the rollout's new pods. What
/// the evaluation finds is acted on by the next pass.
pub async fn start(p: &Pass<'_>, watcher: &Watcher, s: &mut RightsizingRecommendationStatus) {
    if kerf_decide::pass::watch_due(s, p.now) {
        evaluate(p, watcher, s).await;
    } else if kerf_decide::pass::canary_watch_due(s) {
        evaluate_canary(p, watcher, s).await;
    }
}

/// Rolls the change back after `breach` (RB-20 to RB-27). Every status change is written
/// through `writer` before the events are returned for recording.
pub async fn roll_back<W: StatusWriter>(
    p: &Pass<'_>,
    watcher: &Watcher,
    s: &mut RightsizingRecommendationStatus,
    breach: &Breach,
    writer: &mut W,
) -> Result<StepResult, KeyError> {
    p.ctx
        .metrics
        .executor
        .rollbacks
        .get_or_create(&crate::executor::metrics::ReasonLabel {
            reason: breach.reason.as_str().to_owned(),
        })
        .inc();
    let may_write = || p.may_write();
    let wrote = |object, answer| note(p, object, answer);
    let pods = canary_pods(p, s);
    if let Some(k) = s.change.as_mut().and_then(|c| c.canary.as_mut()) {
        k.stage = CanaryStage::RolledBack;
    }
    let rctx = rollback_ctx(p, &pods, &may_write, &wrote);
    let out = watcher.rollback(&rctx, s, breach, writer).await;
    Ok(settle(p, s, out.map_err(health_error)?))
}

/// Goes on with a rollback left in `RollingBack` (RB-28).
pub async fn resume<W: StatusWriter>(
    p: &Pass<'_>,
    watcher: &Watcher,
    s: &mut RightsizingRecommendationStatus,
    writer: &mut W,
) -> Result<StepResult, KeyError> {
    let may_write = || p.may_write();
    let wrote = |object, answer| note(p, object, answer);
    let pods = canary_pods(p, s);
    let rctx = rollback_ctx(p, &pods, &may_write, &wrote);
    let out = watcher.resume(&rctx, s, writer).await;
    Ok(settle(p, s, out.map_err(health_error)?))
}

/// Notes a rollback's write in the pass, as the executor's writes are.
fn note(p: &Pass<'_>, object: RollbackWrite, answer: Option<String>) {
    match object {
        RollbackWrite::Workload => p.wrote_workload(answer),
        RollbackWrite::Pod(name) => p.wrote_pod(&name, answer),
        RollbackWrite::Hpa(name) => p.wrote_hpa(&name, answer),
    }
}

/// What a rollback acts on: `pods` are the workload's pods, or the canary's alone while
/// a canary is rolled back.
fn rollback_ctx<'a>(
    p: &'a Pass<'_>,
    pods: &'a [Arc<PodInfo>],
    may_write: &'a (dyn Fn() -> bool + Send + Sync),
    wrote: &'a (dyn Fn(RollbackWrite, Option<String>) + Send + Sync),
) -> RollbackCtx<'a> {
    RollbackCtx {
        client: &p.ctx.client,
        workload: workload_id(&p.workload),
        event_workload: event_workload(&p.workload),
        pods,
        hpas: &p.hpas,
        may_write,
        wrote,
        metrics: p.metrics(),
        now: p.now,
    }
}

/// The events of a rollback pass (already in `pendingEvents` and written), whether it
/// finished, and when to retry one that did not.
fn settle(p: &Pass<'_>, s: &RightsizingRecommendationStatus, out: RollbackOutcome) -> StepResult {
    match out {
        RollbackOutcome::Done { events } => StepResult {
            events,
            finished: s
                .change
                .as_ref()
                .is_some_and(|c| c.state == ChangeState::RolledBack),
            wake_at: None,
        },
        RollbackOutcome::Retry { at, events, error } => {
            tracing::warn!(workload = %p.key, %error, retry_at = %kerf_decide::duration::Rfc3339(at), "rollback not finished; retrying");
            StepResult {
                events,
                finished: false,
                wake_at: Some(at),
            }
        }
    }
}
