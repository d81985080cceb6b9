//! The health watch of an applied change within a pass over one workload
//! (`docs/health-runtime.md`, rules RB-11, RB-19, design D11, D23): its evaluation before
//! the decision, and its start ([`start`]) as the planner's last effect of a change that
//! goes in. The rollback of a breached change is [`super::rollback_step`].
//!
//! Pod updates trigger a pass of their workload, so a breach of OOM kills or restarts is
//! acted on at the pod status update that shows it (RB-11).

use std::sync::Arc;

use kerf_api::rsr::RightsizingRecommendationStatus;
use kerf_api::wellknown as wk;

use super::pass::{Pass, Seen};
use crate::cache::PodInfo;
use crate::health::{self, HealthStep, WatchInput, Watcher};

/// Evaluates the watch of the applied change of `s` once (rules RB-03 to RB-17, RB-19),
/// recording its baselines and end in `s`. The caller asks
/// [`kerf_decide::pass::watch_due`] first.
pub async fn evaluate(
    p: &Seen<'_>,
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
    p: &Seen<'_>,
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
            let names: Vec<&str> = pods.iter().map(|p| &*p.name).collect();
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
pub(super) fn canary_pods(p: &Seen<'_>, s: &RightsizingRecommendationStatus) -> Vec<Arc<PodInfo>> {
    let Some(record) = s.change.as_ref().and_then(|c| c.canary.as_ref()) else {
        return p.all_pods.clone();
    };
    let live: Vec<&str> = p.pods.iter().map(|pod| &*pod.name).collect();
    let names = kerf_decide::canary::present(record, &live);
    p.all_pods
        .iter()
        .filter(|pod| names.iter().any(|n| **n == *pod.name))
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
