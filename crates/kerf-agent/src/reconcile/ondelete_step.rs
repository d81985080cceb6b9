//! Replacing the outdated pods of an OnDelete StatefulSet after a rollout patched its
//! template (design section 6, rules AP-52..AP-61).
//!
//! Every pass of an OnDelete StatefulSet gathers its outdated pods: the pure
//! [`kerf_decide::ondelete::plan`] picks them, highest ordinal first, at most
//! `onDelete.maxPodDeletesPerRun`, only when every pod has been Ready for
//! `onDelete.settle`. [`kerf_decide::pass::next_step`] evicts them only for an applied
//! rollout whose template the controller has seen, with no breach (AP-58) and no freeze or
//! pause. Each pod goes through the eviction API; a refusal (429) records
//! `blocked PodDisruptionBudget` with `details.pod` once per change and pod, and the pod
//! is tried again [`kerf_decide::plan::EVICTION_REFUSAL_RETRY`] later.

use kerf_api::rsr::RightsizingRecommendationStatus;
use kerf_api::wellknown as wk;
use kerf_decide::pass::Outdated;

use super::facts::pod_facts;
use super::memory::Attempts;
use super::pass::{Pass, is_on_delete};
use super::step::{ActError, Flow, StepResult};
use crate::executor::ondelete::{EvictOutcome, evict_pod};
use kerf_decide::facts::PodFacts;
use kerf_decide::ondelete::{self, OnDeleteInput};

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
    // Terminating pods count here: a replacement under way holds the next eviction.
    let pods: Vec<PodFacts> = c.all_pods.iter().map(|p| pod_facts(p)).collect();
    let input = OnDeleteInput {
        replicas: u32::try_from(w.replicas.unwrap_or(1)).unwrap_or(0),
        update_revision,
        pods: &pods,
        max_deletes_per_run: settings.max_pod_deletes_per_run.max(1),
        settle: chrono::Duration::from_std(settings.settle).unwrap_or_default(),
        now: c.now,
    };
    let outdated = ondelete::outdated(&input);
    tracing::debug!(workload = %w.key, ?outdated, "outdated OnDelete pods");
    outdated
}

/// Evicts `pod`, an outdated pod of the change of `s` (AP-59): one call to the eviction
/// API. A refusal (AP-60) adds a `blocked PodDisruptionBudget` event to `out` (kept once per
/// change and pod by [`first_refusals`]) and ends the plan until `retry_at` (AP-61).
pub async fn evict(
    s: &RightsizingRecommendationStatus,
    c: &Pass<'_>,
    pod: &str,
    retry_at: chrono::DateTime<chrono::Utc>,
    out: &mut StepResult,
) -> Result<Flow, ActError> {
    let Some(change) = &s.change else {
        return Ok(Flow::Stop);
    };
    if !c.may_write() {
        return Err(ActError::NotLeader);
    }
    let res = evict_pod(c.ctx.client.clone(), &c.workload.key.namespace, pod).await;
    c.metrics().observe("evict", &res);
    match res? {
        EvictOutcome::Evicted { pod } => {
            c.wrote_pod(&pod, None);
            tracing::info!(workload = %c.workload.key, %pod, "outdated OnDelete pod evicted");
        }
        EvictOutcome::Gone { .. } => {}
        EvictOutcome::Refused { pod, message } => {
            out.wake_at = Some(retry_at);
            let message = format!("eviction of pod {pod} refused: {message}");
            let mut e = c.blocked_event(change, wk::REASON_POD_DISRUPTION_BUDGET, &message);
            e.resources = change.resources.clone();
            e.details = ondelete::refusal_details(&pod);
            out.events.push(e);
            return Ok(Flow::Stop);
        }
    }
    Ok(Flow::Next)
}

/// Keeps the `blocked PodDisruptionBudget` events of `out` that are the first for their
/// change and pod (AP-60: a pod refused again is not reported again).
pub fn first_refusals(
    s: &RightsizingRecommendationStatus,
    out: &mut StepResult,
    attempts: &mut Attempts,
) {
    let Some(change) = &s.change else { return };
    out.events.retain(|e| {
        let pod = e
            .details
            .get(kerf_api::wellknown::DETAIL_POD)
            .cloned()
            .unwrap_or_default();
        attempts.refused_evictions.insert((change.id.clone(), pod))
    });
}
