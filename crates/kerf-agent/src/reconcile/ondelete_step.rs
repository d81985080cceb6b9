//! Replacing the outdated pods of an OnDelete StatefulSet after a rollout patched its
//! template (design section 6, rules AP-52..AP-61).
//!
//! Runs in every pass of an applied rollout change whose template the cache shows: the
//! pure [`plan`](crate::executor::ondelete::plan) picks the outdated pods, highest ordinal
//! first, at most `onDelete.maxPodDeletesPerRun`, only when every pod has been Ready for
//! `onDelete.settle`, with no breach (a breached change is rolling back, not `Applied`)
//! and no freeze or pause. Each pod goes through the eviction API; a refusal (429) records
//! `blocked PodDisruptionBudget` with `details.pod` once per change and pod, and the pod
//! is tried again [`REFUSAL_RETRY`] later.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use kerf_api::WorkloadKind;
use kerf_api::event::{Event, EventType};
use kerf_api::rsr::{ChangeState, RightsizingRecommendationStatus};
use kerf_api::wellknown as wk;

use super::act::{self, ActError};
use crate::cache::{PodInfo, WorkloadInfo};
use crate::executor::ondelete::{
    self, EvictOutcome, OnDeleteInput, OnDeletePlan, StsPod, WaitReason, evict_pod,
};
use crate::settings::OnDeleteSettings;

/// How long after a refused eviction the pod is tried again (AP-61).
pub const REFUSAL_RETRY: chrono::Duration = chrono::Duration::seconds(5);

/// How soon a run that waits (for the controller, a replacement, settle) looks again,
/// besides the pod and workload updates that trigger a pass anyway.
pub const RECHECK: chrono::Duration = chrono::Duration::seconds(2);

/// What one run reads.
pub struct OnDeleteCtx<'a> {
    /// Kubernetes client.
    pub client: &'a kube::Client,
    /// The StatefulSet.
    pub workload: &'a WorkloadInfo,
    /// All its pods, terminating ones included.
    pub pods: &'a [Arc<PodInfo>],
    /// `onDelete` settings.
    pub settings: &'a OnDeleteSettings,
    /// A freeze window or the cluster-wide freeze is open.
    pub frozen: bool,
    /// Automation is paused at the hub.
    pub paused: bool,
    /// Whether this replica may write now.
    pub may_write: &'a (dyn Fn() -> bool + Send + Sync),
    /// Counters of the actuating calls.
    pub metrics: &'a crate::executor::metrics::ExecutorMetrics,
    /// Now.
    pub now: DateTime<Utc>,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct OnDeleteRun {
    /// `blocked PodDisruptionBudget` events to record.
    pub events: Vec<Event>,
    /// When to run again, if a timer is needed (settle, refusal).
    pub wake_at: Option<DateTime<Utc>>,
}

/// Whether `w` is an OnDelete StatefulSet.
pub fn is_on_delete(w: &WorkloadInfo) -> bool {
    w.key.kind == WorkloadKind::StatefulSet && w.strategy.type_.as_deref() == Some("OnDelete")
}

/// Whether the change of `s` has outdated OnDelete pods to replace: an applied rollout
/// whose template the StatefulSet's controller has seen.
pub fn due(s: &RightsizingRecommendationStatus, w: &WorkloadInfo) -> bool {
    is_on_delete(w)
        && w.status
            .observed_generation
            .zip(w.generation)
            .is_none_or(|(o, g)| o >= g)
        && s.change.as_ref().is_some_and(|c| {
            c.state == ChangeState::Applied
                && c.strategy != kerf_api::Strategy::InPlace
                && act::template_covers(c, w)
        })
}

/// Whether an applied rollout of an OnDelete StatefulSet waits for the controller to
/// observe the patched template.
pub fn waiting_for_controller(s: &RightsizingRecommendationStatus, w: &WorkloadInfo) -> bool {
    is_on_delete(w)
        && s.change.as_ref().is_some_and(|c| {
            c.state == ChangeState::Applied && c.strategy != kerf_api::Strategy::InPlace
        })
        && w.status
            .observed_generation
            .zip(w.generation)
            .is_some_and(|(o, g)| o < g)
}

fn sts_pod(p: &PodInfo) -> StsPod {
    StsPod {
        name: p.name.clone(),
        ordinal: ondelete::ordinal_of(&p.name).unwrap_or(0),
        revision: p.labels.get("controller-revision-hash").cloned(),
        ready: p.ready,
        ready_since: p.ready_since,
        terminating: p.deletion_timestamp.is_some(),
    }
}

/// Replaces the pods this run may replace (AP-52..AP-61).
pub async fn run(
    c: &OnDeleteCtx<'_>,
    s: &RightsizingRecommendationStatus,
    refused: &mut HashSet<(String, String)>,
) -> Result<OnDeleteRun, ActError> {
    let mut out = OnDeleteRun::default();
    let (Some(change), Some(update_revision)) = (&s.change, &c.workload.status.update_revision)
    else {
        return Ok(out);
    };
    let pods: Vec<StsPod> = c.pods.iter().map(|p| sts_pod(p)).collect();
    let input = OnDeleteInput {
        replicas: u32::try_from(c.workload.replicas.unwrap_or(1)).unwrap_or(0),
        update_revision,
        pods: &pods,
        max_deletes_per_run: c.settings.max_pod_deletes_per_run.max(1),
        settle: chrono::Duration::from_std(c.settings.settle).unwrap_or_default(),
        health_breach: false,
        frozen: c.frozen,
        paused: c.paused,
        now: c.now,
    };
    let names = match ondelete::plan(&input) {
        OnDeletePlan::Done => return Ok(out),
        OnDeletePlan::Wait { reason, outdated } => {
            tracing::debug!(workload = %c.workload.key, ?reason, outdated, "outdated OnDelete pods wait");
            out.wake_at = Some(match reason {
                WaitReason::Settling { until: Some(t), .. } => t,
                _ => c.now + RECHECK,
            });
            return Ok(out);
        }
        OnDeletePlan::Evict { pods } => pods,
    };
    out.wake_at = Some(c.now + RECHECK);
    for pod in names {
        if !(c.may_write)() {
            return Err(ActError::NotLeader);
        }
        let res = evict_pod(c.client.clone(), &c.workload.key.namespace, &pod).await;
        c.metrics.observe("evict", &res);
        match res? {
            EvictOutcome::Evicted { pod } => {
                tracing::info!(workload = %c.workload.key, %pod, "outdated OnDelete pod evicted");
            }
            EvictOutcome::Gone { .. } => {}
            EvictOutcome::Refused { pod, message } => {
                out.wake_at = Some(c.now + REFUSAL_RETRY);
                if refused.insert((change.id.clone(), pod.clone())) {
                    let mut e = Event::new(
                        uuid::Uuid::new_v4(),
                        EventType::Blocked,
                        c.now,
                        act::event_workload(c.workload),
                        wk::REASON_POD_DISRUPTION_BUDGET,
                    )
                    .with_message(&format!("eviction of pod {pod} refused: {message}"));
                    e.recommendation_id = Some(change.recommendation_id.clone());
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
