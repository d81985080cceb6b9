//! The rollback of a breached change within a pass (rules RB-20 to RB-30, RB-35 to RB-37,
//! readings 15, 16, design D25): what the rollback writes comes from
//! [`kerf_decide::health::restore`], the restore writes are carried out by the effect
//! interpreter ([`super::interpret::restore`]).
//!
//! 1. Mark first: one status write with the resourceVersion precondition moves the change
//!    to `RollingBack`, the phase to `RolledBack`, clears `live` (so the webhook stops
//!    handing the values to new pods), records `lastRollback {time, reason, resources,
//!    changeId}` (what a resumed rollback restores, and what the pipeline's post-rollback
//!    cooldown reads), sets HealthWatch to the reason, and puts the `rolled_back` event in
//!    `pendingEvents` with the id the intent recorded.
//! 2. Restore only the breached resources with the strategy that carried the change (after
//!    a fallback that is rollout): in-place resizes the pods back; rollout and deferred
//!    apply the old template values; a coordinated HPA target goes back with them.
//! 3. The change moves to `RolledBack`.
//!
//! Nothing here checks a freeze window, a pause, the hub or single-replica safety: a
//! rollback never waits for them. A failed restore is retried with backoff; after
//! [`FAILED_AFTER_ATTEMPTS`] attempts the change's `failed RollbackError` event is recorded
//! once (its id is the one the intent recorded, so a repeat is the same event).

use std::sync::Arc;

use kerf_api::Resource;
use kerf_api::event::{Event, EventType};
use kerf_api::rsr::{CanaryStage, ChangeRecord, ChangeState, RightsizingRecommendationStatus};
use kerf_api::wellknown as wk;
use kerf_decide::duration::Rfc3339;
use kerf_decide::health::Breach;
use kerf_decide::health::restore::restore_writes;

use super::healthwatch::canary_pods;
use super::interpret;
use super::pass::Pass;
use super::step::{KeyError, StepResult, event_workload, health_error, workload_id};
use crate::cache::PodInfo;
use crate::health::rollback::{
    Attempts, FAILED_AFTER_ATTEMPTS, RestoreError, RollbackWrite, backoff, mark_rolled_back,
    rolled_back_event,
};
use crate::health::{HealthError, RollbackCtx, RollbackOutcome, StatusWriter, Watcher};
use crate::intent;

/// Rolls the change of the pass back after `breach` (RB-20 to RB-27). Every status change
/// is written through `writer` before the events are returned for recording.
pub async fn roll_back_pass<W: StatusWriter>(
    p: &Pass<'_>,
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
    let out = roll_back(p.watcher, &rctx, s, breach, writer).await;
    Ok(settle(p, s, out.map_err(health_error)?))
}

/// Goes on with a rollback left in `RollingBack` (RB-28).
pub async fn resume_pass<W: StatusWriter>(
    p: &Pass<'_>,
    s: &mut RightsizingRecommendationStatus,
    writer: &mut W,
) -> Result<StepResult, KeyError> {
    let may_write = || p.may_write();
    let wrote = |object, answer| note(p, object, answer);
    let pods = canary_pods(p, s);
    let rctx = rollback_ctx(p, &pods, &may_write, &wrote);
    let out = resume(p.watcher, &rctx, s, writer).await;
    Ok(settle(p, s, out.map_err(health_error)?))
}

/// Rolls `status.change` back after `breach` (rules RB-20 to RB-27, RB-35): marks the rsr
/// `RolledBack` first (written through `writer`), then restores. A change that is not
/// `Applied` (nor a canary in flight) is left alone.
pub async fn roll_back<W: StatusWriter>(
    watcher: &Watcher,
    ctx: &RollbackCtx<'_>,
    status: &mut RightsizingRecommendationStatus,
    breach: &Breach,
    writer: &mut W,
) -> Result<RollbackOutcome, HealthError> {
    // An in-flight change rolls back only through its canary (ctx.pods are its pods).
    let canary = |c: &ChangeRecord| c.state == ChangeState::Applying && c.canary.is_some();
    let Some(change) = status
        .change
        .clone()
        .filter(|c| c.state == ChangeState::Applied || canary(c))
    else {
        return Ok(RollbackOutcome::Done { events: Vec::new() });
    };
    if !(ctx.may_write)() {
        return Err(HealthError::NotLeader);
    }
    // The rolled_back id is recorded now, with the first write of the rollback (D25).
    let mut change = change;
    intent::allocate(&mut change.event_ids.rolled_back);
    if let Some(c) = status.change.as_mut() {
        c.event_ids.rolled_back = change.event_ids.rolled_back.clone();
    }
    let event = rolled_back_event(&change, ctx, breach);
    mark_rolled_back(status, &change, breach, &event, ctx.now);
    writer.write(status).await?;
    tracing::warn!(workload = %ctx.event_workload.name, namespace = %ctx.event_workload.namespace,
        change = %change.id, reason = breach.reason.as_str(), "health watch breached: rolling back");
    resume(watcher, ctx, status, writer).await
}

/// Continues the rollback of a change in state `RollingBack` from status alone (after a
/// restart, or a retry): restores the resources `lastRollback` names.
pub async fn resume<W: StatusWriter>(
    watcher: &Watcher,
    ctx: &RollbackCtx<'_>,
    status: &mut RightsizingRecommendationStatus,
    writer: &mut W,
) -> Result<RollbackOutcome, HealthError> {
    let Some(change) = status
        .change
        .clone()
        .filter(|c| c.state == ChangeState::RollingBack)
    else {
        return Ok(RollbackOutcome::Done { events: Vec::new() });
    };
    let restore: Vec<Resource> = status
        .last_rollback
        .as_ref()
        .filter(|r| r.change_id == change.id)
        .map_or_else(|| change.resources.clone(), |r| r.resources.clone());
    if let Some(at) = watcher.retry_not_due(&change.id, ctx.now) {
        // A pass woken by anything else before the retry is due restores nothing, so a
        // refused restore is retried with backoff, not on every status update.
        return Ok(RollbackOutcome::Retry {
            at,
            events: Vec::new(),
            error: format!("the next restore attempt is due at {}", Rfc3339(at)),
        });
    }
    let events: Vec<Event> = change
        .pending_events
        .iter()
        .filter(|e| e.type_ == EventType::RolledBack)
        .cloned()
        .collect();
    match interpret::restore(ctx, restore_writes(&change, &restore)).await {
        Ok(()) => {
            if let Some(c) = status.change.as_mut() {
                c.state = ChangeState::RolledBack;
            }
            writer.write(status).await?;
            watcher.attempts_of(&change.id, |a| *a = Attempts::default());
            Ok(RollbackOutcome::Done { events })
        }
        Err(RestoreError::NotLeader) => Err(HealthError::NotLeader),
        Err(RestoreError::Failed(message)) => {
            restore_failed(watcher, ctx, status, writer, &change, events, message).await
        }
    }
}

/// A failed restore: counted, retried with backoff, `failed RollbackError` recorded once
/// the round of retries is spent (reading 15).
async fn restore_failed<W: StatusWriter>(
    watcher: &Watcher,
    ctx: &RollbackCtx<'_>,
    status: &mut RightsizingRecommendationStatus,
    writer: &mut W,
    change: &ChangeRecord,
    mut events: Vec<Event>,
    message: String,
) -> Result<RollbackOutcome, HealthError> {
    let at = ctx.now;
    let n = watcher.attempts_of(&change.id, |a| {
        a.failed += 1;
        a.next = Some(at + backoff(a.failed));
    });
    tracing::warn!(change = %change.id, attempt = n, error = %message, "rollback restore failed; retrying");
    if n == FAILED_AFTER_ATTEMPTS {
        let mut change = change.clone();
        intent::allocate(&mut change.event_ids.failed);
        if let Some(c) = status.change.as_mut() {
            c.event_ids.failed = change.event_ids.failed.clone();
        }
        let e = intent::failed_event(
            &change,
            ctx.event_workload.clone(),
            wk::REASON_ROLLBACK_ERROR,
            &format!("rollback of change {} failed: {message}", change.id),
            ctx.now,
        );
        intent::add_pending(status, &e);
        writer.write(status).await?;
        events.push(e);
    } else {
        events.clear();
    }
    Ok(RollbackOutcome::Retry {
        at: ctx.now + backoff(n),
        events,
        error: message,
    })
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
            tracing::warn!(workload = %p.key, %error, retry_at = %Rfc3339(at), "rollback not finished; retrying");
            StepResult {
                events,
                finished: false,
                wake_at: Some(at),
            }
        }
    }
}
