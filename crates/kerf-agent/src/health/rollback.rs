//! The rollback's parts that hold no I/O (rules RB-20, RB-21, RB-25 to RB-27, reading 15):
//! what a rollback acts on ([`RollbackCtx`]), its first status write
//! ([`mark_rolled_back`]), its `rolled_back` event, and the memory of failed restores with
//! their backoff. The rollback step itself, mark first, restore, `RolledBack`, is
//! `reconcile::rollback_step`; its writes are carried out by the effect interpreter.
//!
//! Nothing here checks a freeze window, a pause, the hub or single-replica safety: a
//! rollback never waits for them. After [`FAILED_AFTER_ATTEMPTS`] failed restores the
//! change's `failed RollbackError` event is recorded once.

use std::future::Future;
use std::sync::{Arc, PoisonError};

use chrono::{DateTime, Duration, Utc};
use kerf_api::event::{Event, EventContainer, EventType, EventWorkload};
use kerf_api::rsr::{
    ChangeRecord, ChangeState, ContainerChange, Phase, RightsizingRecommendationStatus,
};
use kerf_api::wellknown as wk;
use kerf_api::{Condition, ConditionStatus};
use kerf_decide::health::{Breach, restore_hpa, restore_values, rollback_record};

use super::Watcher;
use crate::cache::{HpaInfo, PodInfo};
use crate::executor::WorkloadId;
use crate::executor::metrics::ExecutorMetrics;
use crate::executor::template::only;
use crate::intent::{self, IntentError};

/// Failed attempts after which `failed RollbackError` is recorded (reading 15).
pub const FAILED_AFTER_ATTEMPTS: u32 = 3;
/// First retry delay of a failed restore.
pub const RETRY_BASE: Duration = Duration::seconds(1);
/// Longest retry delay of a failed restore.
pub const RETRY_MAX: Duration = Duration::minutes(5);

/// Writes rsr status with the resourceVersion precondition (design D25). The agent's one
/// writer is the pass's (`reconcile::writer::Writer`, over [`intent::write_status`]); a
/// rollback writes through it so its status writes come in order with its restores.
pub trait StatusWriter: Send {
    /// Replaces the status; a no-op when it equals what the API server holds.
    fn write(
        &mut self,
        status: &RightsizingRecommendationStatus,
    ) -> impl Future<Output = Result<(), IntentError>> + Send;
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
    pub metrics: &'a ExecutorMetrics,
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
    /// The restore failed; try again at `at` (`reconcile::rollback_step::resume`).
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
    /// Updates the failed restore attempts of `change_id` with `f`; gives how many failed.
    pub fn attempts_of(&self, change_id: &str, f: impl FnOnce(&mut Attempts)) -> u32 {
        let mut map = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        let a = map.entry(change_id.to_owned()).or_default();
        f(a);
        a.failed
    }

    /// Makes every restore attempt due now, keeping the failures counted (the API server
    /// answers again after an outage).
    pub fn retry_now(&self) {
        let mut map = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        for a in map.values_mut() {
            a.next = None;
        }
    }

    /// When the next restore attempt of `change_id` is due, if that is after `now`.
    pub fn retry_not_due(&self, change_id: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let map = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(change_id)
            .and_then(|a| a.next)
            .filter(|next| now < *next)
    }
}

/// The failed restore attempts of one change, kept in memory: a restarted agent retries at
/// once and counts again.
#[derive(Clone, Copy, Debug, Default)]
pub struct Attempts {
    /// Failed attempts so far.
    pub failed: u32,
    /// When the next attempt is due.
    pub next: Option<DateTime<Utc>>,
}

/// The retry delay after `attempts` failures: doubling from [`RETRY_BASE`] up to
/// [`RETRY_MAX`].
pub fn backoff(attempts: u32) -> Duration {
    let shift = attempts.saturating_sub(1).min(16);
    (RETRY_BASE * (1i32 << shift)).min(RETRY_MAX)
}

/// The first status write of a rollback (RB-20, RB-21).
pub fn mark_rolled_back(
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
    kerf_decide::status::set_condition(
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
    e.with_message(&kerf_decide::status::text::rolled_back(
        change,
        &breach.restore,
        &breach.message,
    ))
}

/// The `action` label of the calls of a rollback.
pub const ROLLBACK_ACTION: &str = "rollback";

/// Why a restore did not finish.
pub enum RestoreError {
    /// The lease was lost: no write.
    NotLeader,
    /// A write failed; retried with backoff.
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::ThrottlingSource;

    #[test]
    fn an_api_return_makes_every_restore_due_and_keeps_the_failures_counted() {
        let w = Watcher::with_source(ThrottlingSource::Off, Duration::minutes(5));
        let now = Utc::now();
        for id in ["a", "b"] {
            for _ in 0..4 {
                w.attempts_of(id, |a| {
                    a.failed += 1;
                    a.next = Some(now + backoff(a.failed));
                });
            }
        }
        assert_eq!(w.retry_not_due("a", now), Some(now + backoff(4)));
        w.retry_now();
        assert_eq!(w.retry_not_due("a", now), None);
        assert_eq!(w.retry_not_due("b", now), None);
        // The count stands: the round of retries ends where it would have.
        assert_eq!(w.attempts_of("a", |_| {}), 4);
    }
}
