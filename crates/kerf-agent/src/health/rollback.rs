//! The rollback of a breached change (rules RB-20 to RB-30, RB-35 to RB-37, readings 15,
//! 16, design D25).
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

use std::future::Future;
use std::sync::{Arc, PoisonError};

use chrono::{DateTime, Duration, Utc};
use kerf_api::event::{Event, EventContainer, EventType, EventWorkload};
use kerf_api::rsr::{
    ChangeRecord, ChangeState, ContainerChange, HpaChange, Phase, RightsizingRecommendationStatus,
};
use kerf_api::wellknown as wk;
use kerf_api::{Condition, ConditionStatus, Resource, Strategy};
use kerf_decide::duration::Rfc3339;
use kerf_decide::health::{Breach, restore_hpa, restore_values, rollback_record};
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::{HealthError, Watcher};
use crate::cache::{HpaInfo, PodInfo};
use crate::executor::hpa::{HpaError, MetricSource, write_hpa_target};
use crate::executor::resize::{ResizeError, resize_pod};
use crate::executor::rollout::{ApplyError, apply_template};
use crate::executor::template::only;
use crate::executor::{ContainerResources, WorkloadId, requirements_cover};
use crate::intent::{self, IntentError};

/// Failed attempts after which `failed RollbackError` is recorded (reading 15).
pub const FAILED_AFTER_ATTEMPTS: u32 = 3;
/// First retry delay of a failed restore.
pub const RETRY_BASE: Duration = Duration::seconds(1);
/// Longest retry delay of a failed restore.
pub const RETRY_MAX: Duration = Duration::minutes(5);

/// Writes rsr status with the resourceVersion precondition (design D25).
pub trait StatusWriter: Send {
    /// Replaces the status; a no-op when it equals what the API server holds.
    fn write(
        &mut self,
        status: &RightsizingRecommendationStatus,
    ) -> impl Future<Output = Result<(), IntentError>> + Send;
}

/// A [`StatusWriter`] over one rsr.
#[derive(Clone, Debug)]
pub struct RsrWriter {
    /// The rsr API of the namespace.
    pub api: Api<DynamicObject>,
    /// The rsr's name.
    pub name: String,
    /// The resourceVersion the next write requires.
    pub resource_version: String,
    /// The spec as read (sent along, see [`intent::write_status`]).
    pub spec: Option<Value>,
    /// The status as the API server holds it.
    pub last: RightsizingRecommendationStatus,
}

impl StatusWriter for RsrWriter {
    async fn write(&mut self, status: &RightsizingRecommendationStatus) -> Result<(), IntentError> {
        if *status == self.last {
            return Ok(());
        }
        let rv = intent::write_status(
            &self.api,
            &self.name,
            &self.resource_version,
            self.spec.as_ref(),
            status,
        )
        .await?;
        self.resource_version = rv;
        self.last = status.clone();
        Ok(())
    }
}

/// What a rollback acts on.
pub struct RollbackCtx<'a> {
    /// The Kubernetes client.
    pub client: &'a kube::Client,
    /// The workload.
    pub workload: WorkloadId,
    /// The workload as events name it.
    pub event_workload: EventWorkload,
    /// The workload's pods (the slim pod cache).
    pub pods: &'a [Arc<PodInfo>],
    /// The HPAs scaling the workload.
    pub hpas: &'a [Arc<HpaInfo>],
    /// The local lease check, before every actuating write.
    pub may_write: &'a (dyn Fn() -> bool + Send + Sync),
    /// Told of each write and the resourceVersion of its answer, so later passes wait
    /// until the caches show it.
    pub wrote: &'a (dyn Fn(RollbackWrite, Option<String>) + Send + Sync),
    /// Counters of the actuating calls (`rollback`).
    pub metrics: &'a crate::executor::metrics::ExecutorMetrics,
    /// The time.
    pub now: DateTime<Utc>,
}

/// An object a rollback wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RollbackWrite {
    /// The workload's pod template.
    Workload,
    /// A pod, by name (a resize).
    Pod(String),
    /// An HPA, by name (its target).
    Hpa(String),
}

/// How a rollback pass ended. `events` are in `pendingEvents` already: record them (outbox
/// and Kubernetes Event) after the status write, as every lifecycle event.
#[derive(Clone, Debug, PartialEq)]
pub enum RollbackOutcome {
    /// The values are restored; the change is `RolledBack`.
    Done {
        /// Events to record.
        events: Vec<Event>,
    },
    /// The restore failed; try again at `at` (call [`Watcher::resume`]).
    Retry {
        /// When to try again.
        at: DateTime<Utc>,
        /// Events to record (`failed RollbackError` once the round of retries is spent).
        events: Vec<Event>,
        /// What failed.
        error: String,
    },
}

impl Watcher {
    /// Rolls `status.change` back after `breach` (rules RB-20 to RB-27, RB-35): marks the
    /// rsr `RolledBack` first (written through `writer`), then restores. A change that is
    /// not `Applied` is left alone.
    pub async fn rollback<W: StatusWriter>(
        &self,
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
        self.resume(ctx, status, writer).await
    }

    /// Continues the rollback of a change in state `RollingBack` from status alone (after
    /// a restart, or a retry): restores the resources `lastRollback` names.
    pub async fn resume<W: StatusWriter>(
        &self,
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
        if let Some(at) = self.retry_not_due(&change.id, ctx.now) {
            // A pass woken by anything else before the retry is due restores nothing, so a
            // refused restore is retried with backoff, not on every status update.
            return Ok(RollbackOutcome::Retry {
                at,
                events: Vec::new(),
                error: format!("the next restore attempt is due at {}", Rfc3339(at)),
            });
        }
        let mut events: Vec<Event> = change
            .pending_events
            .iter()
            .filter(|e| e.type_ == EventType::RolledBack)
            .cloned()
            .collect();
        match restore_values_with_strategy(ctx, &change, &restore).await {
            Ok(()) => {
                if let Some(c) = status.change.as_mut() {
                    c.state = ChangeState::RolledBack;
                }
                writer.write(status).await?;
                self.attempts_of(&change.id, |a| *a = Attempts::default());
                Ok(RollbackOutcome::Done { events })
            }
            Err(RestoreError::NotLeader) => Err(HealthError::NotLeader),
            Err(RestoreError::Failed(message)) => {
                let at = ctx.now;
                let n = self.attempts_of(&change.id, |a| {
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
        }
    }

    fn attempts_of(&self, change_id: &str, f: impl FnOnce(&mut Attempts)) -> u32 {
        let mut map = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        let a = map.entry(change_id.to_owned()).or_default();
        f(a);
        a.failed
    }

    /// When the next restore attempt of `change_id` is due, if that is after `now`.
    fn retry_not_due(&self, change_id: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let map = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(change_id)
            .and_then(|a| a.next)
            .filter(|next| now < *next)
    }
}

/// The failed restore attempts of one change, kept in memory: a restarted agent retries at
/// once and counts again.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Attempts {
    /// Failed attempts so far.
    failed: u32,
    /// When the next attempt is due.
    next: Option<DateTime<Utc>>,
}

/// The retry delay after `attempts` failures: doubling from [`RETRY_BASE`] up to
/// [`RETRY_MAX`].
pub fn backoff(attempts: u32) -> Duration {
    let shift = attempts.saturating_sub(1).min(16);
    (RETRY_BASE * (1i32 << shift)).min(RETRY_MAX)
}

/// The first status write of a rollback (RB-20, RB-21).
fn mark_rolled_back(
    status: &mut RightsizingRecommendationStatus,
    change: &ChangeRecord,
    breach: &Breach,
    event: &Event,
    now: DateTime<Utc>,
) {
    if let Some(c) = status.change.as_mut() {
        c.state = ChangeState::RollingBack;
    }
    status.phase = Some(Phase::RolledBack);
    status.live = None;
    status.last_rollback = Some(rollback_record(change, breach.reason, &breach.restore, now));
    crate::status::set_condition(
        &mut status.conditions,
        Condition {
            type_: wk::CONDITION_HEALTH_WATCH.to_owned(),
            status: ConditionStatus::False,
            reason: breach.reason.as_str().to_owned(),
            message: breach.message.clone(),
            last_transition_time: now,
            observed_generation: None,
        },
    );
    intent::add_pending(status, event);
}

/// The `rolled_back` event (RB-25 to RB-27, EV-59): Warning on Kubernetes, the reason of
/// the signal, the replaced and the restored values, the numbers and `watchDuration`.
pub fn rolled_back_event(change: &ChangeRecord, ctx: &RollbackCtx<'_>, breach: &Breach) -> Event {
    let head = (
        intent::event_id(change.event_ids.rolled_back.as_ref()),
        EventType::RolledBack,
    );
    let workload = ctx.event_workload.clone();
    let mut e = intent::change_event(change, head, workload, breach.reason.as_str(), ctx.now);
    e.strategy = Some(change.strategy.as_str().to_owned());
    e.resources = breach.restore.clone();
    e.containers = restore_values(change, &breach.restore)
        .into_iter()
        .map(|c: ContainerChange| EventContainer {
            name: c.name,
            from: only(&c.from, &breach.restore),
            to: only(&c.to, &breach.restore),
        })
        .collect();
    e.details = breach.details.clone();
    if let Some(h) = restore_hpa(change, &breach.restore) {
        intent::insert_hpa_details(&mut e, &h);
    }
    e.with_message(&crate::event_text::rolled_back(
        change,
        &breach.restore,
        &breach.message,
    ))
}

/// The `action` label of the calls of a rollback.
const ROLLBACK_ACTION: &str = "rollback";

enum RestoreError {
    NotLeader,
    Failed(String),
}

/// Restores `restore` with the strategy that carried the change (RB-22, RB-23, RB-24).
async fn restore_values_with_strategy(
    ctx: &RollbackCtx<'_>,
    change: &ChangeRecord,
    restore: &[Resource],
) -> Result<(), RestoreError> {
    let back: Vec<ContainerResources> = restore_values(change, restore)
        .into_iter()
        .map(|c| (c.name, only(&c.to, restore)))
        .collect();
    if back.is_empty() {
        return Ok(());
    }
    match change.strategy {
        Strategy::InPlace => resize_back(ctx, &back).await,
        Strategy::Rollout | Strategy::Deferred => {
            let hpa = restore_hpa(change, restore);
            let before = hpa
                .as_ref()
                .filter(|h| h.order == kerf_api::rsr::HpaOrder::Before);
            if let Some(h) = before {
                hpa_back(ctx, h).await?;
            }
            template_back(ctx, &back, restore).await?;
            if let Some(h) = hpa
                .as_ref()
                .filter(|h| h.order == kerf_api::rsr::HpaOrder::After)
            {
                hpa_back(ctx, h).await?;
            }
            Ok(())
        }
    }
}

/// Resizes every pod still at the change's values back (RB-22); pods already back, or
/// gone, are skipped, so a resumed rollback sends only what is missing.
async fn resize_back(
    ctx: &RollbackCtx<'_>,
    back: &[ContainerResources],
) -> Result<(), RestoreError> {
    for pod in ctx.pods.iter().filter(|p| p.deletion_timestamp.is_none()) {
        let wanted: Vec<ContainerResources> = back
            .iter()
            .filter(|(name, want)| {
                pod.containers.iter().any(|c| {
                    *c.name == **name
                        && !requirements_cover(
                            want,
                            &kerf_api::ResourceRequirements {
                                requests: c.requests.clone(),
                                limits: c.limits.clone(),
                            },
                        )
                })
            })
            .cloned()
            .collect();
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
            Ok(sent) => (ctx.wrote)(RollbackWrite::Pod(pod.name.clone()), sent.resource_version),
            Err(ResizeError::PodGone { .. } | ResizeError::NothingToSend { .. }) => {}
            Err(e) => return Err(RestoreError::Failed(format!("pod {}: {e}", pod.name))),
        }
    }
    Ok(())
}

/// Applies the old values to the pod template (RB-23).
async fn template_back(
    ctx: &RollbackCtx<'_>,
    back: &[ContainerResources],
    restore: &[Resource],
) -> Result<(), RestoreError> {
    if !(ctx.may_write)() {
        return Err(RestoreError::NotLeader);
    }
    let res = apply_template(ctx.client.clone(), &ctx.workload, back, restore).await;
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
async fn hpa_back(ctx: &RollbackCtx<'_>, h: &HpaChange) -> Result<(), RestoreError> {
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
