//! The health watch of an applied change and the rollback of a breached one, within a
//! pass over one workload (`docs/health-runtime.md`, rules RB-11, RB-19, RB-20 to RB-30,
//! design D11, D23, D25).
//!
//! Pod updates trigger a pass of their workload, so a breach of OOM kills or restarts is
//! acted on at the pod status update that shows it (RB-11). A rollback consults no freeze
//! window, pause or hub: its event is recorded like every lifecycle event and buffered by
//! the outbox until the hub takes it (RB-28, RB-30).

use chrono::{DateTime, Utc};
use kerf_api::ConditionStatus;
use kerf_api::rsr::{ChangeState, RightsizingRecommendationStatus};
use kerf_api::wellknown as wk;
use kerf_decide::effective::EffectivePolicy;

use super::Memory;
use super::act;
use super::key::KeyError;
use super::report::{EventRecorder, RsrRef};
use crate::cache::{WorkloadInfo, WorkloadKey};
use crate::health::{
    self, HealthError, HealthStep, RollbackCtx, RollbackOutcome, StatusWriter, WatchInput, Watcher,
};
use crate::runtime::Context;

/// What the watch of one workload reads.
pub(super) struct HealthCtx<'a> {
    /// The shared context (client, caches, lease).
    pub ctx: &'a Context,
    /// The reconciler's watcher.
    pub watcher: &'a Watcher,
    /// Where events go.
    pub recorder: &'a EventRecorder,
    /// The rsr events are recorded on.
    pub rsr: &'a RsrRef,
    /// The workload.
    pub workload: &'a WorkloadInfo,
    /// Its key.
    pub key: &'a WorkloadKey,
    /// The effective policy (thresholds, `watchDuration`).
    pub policy: &'a EffectivePolicy,
    /// The time.
    pub now: DateTime<Utc>,
}

/// Evaluates the watch of `s.change` when it is `Applied` and its watch runs, rolling back
/// on a breach, or resumes a change left in `RollingBack`. Every status change is written
/// through `writer` before the events are recorded. Returns whether the change was rolled
/// back in this pass (the next skip or block is reported again, EV-18).
pub(super) async fn watch_pass<W: StatusWriter>(
    h: &HealthCtx<'_>,
    memory: &mut Memory,
    s: &mut RightsizingRecommendationStatus,
    writer: &mut W,
) -> Result<bool, KeyError> {
    let Some(state) = s.change.as_ref().map(|c| c.state) else {
        return Ok(false);
    };
    let runs = state == ChangeState::Applied && watch_due(s, h.now);
    if state != ChangeState::RollingBack && !runs {
        return Ok(false);
    }
    let pods = h.ctx.cache.pods_of(h.key);
    let hpas = h.ctx.cache.hpas_for(h.key);
    let may_write = || h.ctx.may_write();
    let rctx = RollbackCtx {
        client: &h.ctx.client,
        workload: act::workload_id(h.workload),
        event_workload: act::event_workload(h.workload),
        pods: &pods,
        hpas: &hpas,
        may_write: &may_write,
        metrics: &h.ctx.metrics.executor,
        now: h.now,
    };
    if state == ChangeState::RollingBack {
        let out = h.watcher.resume(&rctx, s, writer).await;
        return settle(h, memory, s, out.map_err(key_error)?).await;
    }
    let input = WatchInput {
        namespace: &h.key.namespace,
        pods: &pods,
        thresholds: h.watcher.thresholds(h.policy),
        watch_duration: h.policy.watch_duration.value,
        rollout_complete: health::rollout_complete(h.workload),
        now: h.now,
    };
    let step = h.watcher.step(&h.ctx.client, s, &input).await;
    writer.write(s).await?;
    match step {
        HealthStep::Idle
        | HealthStep::Watching {
            recheck_at: None, ..
        } => Ok(false),
        HealthStep::Watching {
            recheck_at: Some(t),
            ..
        } => {
            memory.wake_at(t, h.key);
            Ok(false)
        }
        HealthStep::Healthy => {
            tracing::info!(workload = %h.key, "health watch ended without a breach: Healthy");
            Ok(false)
        }
        HealthStep::Breach(b) => {
            h.ctx
                .metrics
                .executor
                .rollbacks
                .get_or_create(&crate::executor::metrics::ReasonLabel {
                    reason: b.reason.as_str().to_owned(),
                })
                .inc();
            let out = h.watcher.rollback(&rctx, s, &b, writer).await;
            settle(h, memory, s, out.map_err(key_error)?).await
        }
    }
}

/// Records the events of a rollback pass (already in `pendingEvents` and written) and
/// schedules its retry.
async fn settle(
    h: &HealthCtx<'_>,
    memory: &mut Memory,
    s: &RightsizingRecommendationStatus,
    out: RollbackOutcome,
) -> Result<bool, KeyError> {
    match out {
        RollbackOutcome::Done { events } => {
            for e in &events {
                h.recorder.record(h.rsr, e).await;
            }
            Ok(s.change
                .as_ref()
                .is_some_and(|c| c.state == ChangeState::RolledBack))
        }
        RollbackOutcome::Retry { at, events, error } => {
            for e in &events {
                h.recorder.record(h.rsr, e).await;
            }
            tracing::warn!(workload = %h.key, %error, retry_at = %at, "rollback not finished; retrying");
            memory.wake_at(at, h.key);
            Ok(false)
        }
    }
}

/// Whether the watch is evaluated at `now`: it runs (no end yet, or before it), or it has
/// ended and HealthWatch does not say so yet (one last evaluation reports Healthy, RB-19).
/// A watch that ended and was reported is not evaluated again, so no throttling source is
/// asked about a change long since settled.
pub(super) fn watch_due(s: &RightsizingRecommendationStatus, now: DateTime<Utc>) -> bool {
    let Some(w) = &s.watch else {
        return false;
    };
    if w.end.is_none_or(|e| now < e) {
        return true;
    }
    !s.conditions.iter().any(|c| {
        c.type_ == wk::CONDITION_HEALTH_WATCH
            && c.status == ConditionStatus::True
            && c.reason == wk::CONDITION_REASON_HEALTHY
    })
}

/// A conflict of a rollback's status write is a conflict of the pass (read again soon).
fn key_error(e: HealthError) -> KeyError {
    match e {
        HealthError::Status(i) => KeyError::Intent(i),
        other => KeyError::Health(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::Condition;
    use kerf_api::rsr::WatchStatus;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn status(end: Option<&str>) -> RightsizingRecommendationStatus {
        RightsizingRecommendationStatus {
            watch: Some(WatchStatus {
                start: at("2026-01-01T00:00:00Z"),
                end: end.map(at),
                baselines: Default::default(),
                aggregated: None,
            }),
            ..Default::default()
        }
    }

    // rule: RB-19
    #[test]
    fn an_ended_watch_is_evaluated_once_more_until_healthy_is_reported() {
        let now = at("2026-01-01T00:10:00Z");
        assert!(watch_due(&status(None), now), "a rollout's watch runs");
        assert!(watch_due(&status(Some("2026-01-01T00:30:00Z")), now));
        let mut ended = status(Some("2026-01-01T00:05:00Z"));
        assert!(watch_due(&ended, now), "Healthy not reported yet");
        ended.conditions.push(Condition {
            type_: wk::CONDITION_HEALTH_WATCH.to_owned(),
            status: ConditionStatus::True,
            reason: wk::CONDITION_REASON_HEALTHY.to_owned(),
            message: String::new(),
            last_transition_time: now,
            observed_generation: None,
        });
        assert!(!watch_due(&ended, now));
        assert!(!watch_due(&RightsizingRecommendationStatus::default(), now));
    }
}
