//! Replacing the outdated pods of an OnDelete StatefulSet after a rollout patched its
//! template (design section 6, rules AP-52..AP-61).
//!
//! Every pass of an OnDelete StatefulSet gathers its outdated pods: the pure
//! [`plan`](crate::executor::ondelete::plan) picks them, highest ordinal first, at most
//! `onDelete.maxPodDeletesPerRun`, only when every pod has been Ready for
//! `onDelete.settle`. [`kerf_decide::pass::next_step`] evicts them only for an applied
//! rollout whose template the controller has seen, with no breach (AP-58) and no freeze or
//! pause. Each pod goes through the eviction API; a refusal (429) records
//! `blocked PodDisruptionBudget` with `details.pod` once per change and pod, and the pod
//! is tried again [`REFUSAL_RETRY`] later.

use kerf_api::rsr::RightsizingRecommendationStatus;
use kerf_api::wellknown as wk;
use kerf_decide::pass::Outdated;

use super::memory::Attempts;
use super::pass::{Pass, is_on_delete};
use super::step::{ActError, StepResult};
use crate::cache::PodInfo;
use crate::executor::ondelete::{
    self, EvictOutcome, OnDeleteInput, OnDeletePlan, StsPod, WaitReason, evict_pod,
};

/// How long after a refused eviction the pod is tried again (AP-61).
pub const REFUSAL_RETRY: chrono::Duration = chrono::Duration::seconds(5);

/// How soon a run that evicted looks again, besides the pod updates that trigger a pass.
pub const RECHECK: chrono::Duration = kerf_decide::pass::ON_DELETE_RECHECK;

fn sts_pod(p: &PodInfo) -> StsPod {
    StsPod {
        name: p.name.clone(),
        ordinal: ondelete::ordinal_of(&p.name).unwrap_or(0),
        revision: p.revision_hash.as_deref().map(str::to_owned),
        ready: p.ready,
        ready_since: p.ready_since,
        terminating: p.deletion_timestamp.is_some(),
    }
}

/// The outdated pods of an OnDelete StatefulSet as the pure replacement plan sees them
/// (highest ordinal first, at most `onDelete.maxPodDeletesPerRun`, every pod Ready for
/// `onDelete.settle`, AP-53..AP-57). The freeze, the pause and a breach are applied by
/// [`kerf_decide::pass::next_step`].
pub fn outdated(c: &Pass<'_>) -> Outdated {
    let w = &c.workload;
    let Some(update_revision) = w
        .status
        .update_revision
        .as_ref()
        .filter(|_| is_on_delete(w))
    else {
        return Outdated::None;
    };
    let settings = &c.ctx.settings.on_delete;
    let pods: Vec<StsPod> = c.all_pods.iter().map(|p| sts_pod(p)).collect();
    let input = OnDeleteInput {
        replicas: u32::try_from(w.replicas.unwrap_or(1)).unwrap_or(0),
        update_revision,
        pods: &pods,
        max_deletes_per_run: settings.max_pod_deletes_per_run.max(1),
        settle: chrono::Duration::from_std(settings.settle).unwrap_or_default(),
        now: c.now,
    };
    match ondelete::plan(&input) {
        OnDeletePlan::Done => Outdated::None,
        OnDeletePlan::Wait { reason, outdated } => {
            tracing::debug!(workload = %w.key, ?reason, outdated, "outdated OnDelete pods wait");
            let until = match reason {
                WaitReason::Settling { until, .. } => until,
                _ => None,
            };
            Outdated::Waiting { until }
        }
        OnDeletePlan::Evict { pods } => Outdated::Ready(pods),
    }
}

/// Evicts `names`, outdated pods of the change of `s` (AP-59..AP-61).
pub async fn evict(
    c: &Pass<'_>,
    s: &RightsizingRecommendationStatus,
    names: Vec<String>,
    attempts: &mut Attempts,
) -> Result<StepResult, ActError> {
    let mut out = StepResult::default();
    let Some(change) = &s.change else {
        return Ok(out);
    };
    out.wake_at = Some(c.now + RECHECK);
    for pod in names {
        if !c.may_write() {
            return Err(ActError::NotLeader);
        }
        let res = evict_pod(c.ctx.client.clone(), &c.workload.key.namespace, &pod).await;
        c.metrics().observe("evict", &res);
        match res? {
            EvictOutcome::Evicted { pod } => {
                c.wrote_pod(&pod, None);
                tracing::info!(workload = %c.workload.key, %pod, "outdated OnDelete pod evicted");
            }
            EvictOutcome::Gone { .. } => {}
            EvictOutcome::Refused { pod, message } => {
                out.wake_at = Some(c.now + REFUSAL_RETRY);
                if attempts
                    .refused_evictions
                    .insert((change.id.clone(), pod.clone()))
                {
                    let message = format!("eviction of pod {pod} refused: {message}");
                    let reason = wk::REASON_POD_DISRUPTION_BUDGET;
                    let mut e = c.blocked_event(change, reason, &message);
                    e.resources = change.resources.clone();
                    e.details = ondelete::refusal_details(&pod);
                    out.events.push(e);
                }
                break;
            }
        }
    }
    Ok(out)
}
