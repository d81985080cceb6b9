//! One pass over one workload, as gathered once from the caches: the workload, its pods
//! and HPAs ([`super::fresh::Snapshot`]), the effective policy at one `now` ([`Seen`]), then the facts
//! of a decision ([`Pass`]). Every step of the pass reads this and nothing else from the
//! caches.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use kerf_api::event::{Event, EventType};
use kerf_api::rsr::{
    ChangeRecord, HpaChange, RightsizingRecommendationSpec, RightsizingRecommendationStatus,
};
use kerf_decide::effective::EffectivePolicy;
use kerf_decide::facts::Facts;
use kerf_decide::pass::WorkloadState;

use super::facts::{self, Objects, Sources};
use super::fresh::{PassWrites, Snapshot, Written};
use super::step::{event_workload, pods_settled, template_covers};
use crate::cache::cluster::HpaResourceMetric;
use crate::cache::{HpaInfo, PodInfo, WorkloadInfo, WorkloadKey};
use crate::context::Context;
use crate::executor::metrics::ExecutorMetrics;
use crate::health::Watcher;
use crate::hub::HubState;

/// What a pass has read before it decides: the workload, its pods and HPAs, the effective
/// policy, at one `now`. The health watch reads this; the facts of the decision are made
/// after it ([`Pass::new`]), from the status as the watch left it.
pub struct Seen<'a> {
    /// The shared context (client, lease, metrics, settings).
    pub ctx: &'a Context,
    /// The hub's state (pauses, approvals).
    pub hub: &'a HubState,
    /// The workload's key.
    pub key: &'a WorkloadKey,
    /// The workload.
    pub workload: Arc<WorkloadInfo>,
    /// All its pods, terminating ones included.
    pub all_pods: Vec<Arc<PodInfo>>,
    /// Its pods that run: not terminating, not finished.
    pub pods: Vec<Arc<PodInfo>>,
    /// The HPAs scaling it.
    pub hpas: Vec<Arc<HpaInfo>>,
    /// The effective policy.
    pub policy: EffectivePolicy,
    /// The time of the pass.
    pub now: DateTime<Utc>,
    /// The health watch's evaluator (its memory of OOM kills, scrapes and failed restores).
    pub watcher: &'a Watcher,
    /// Whether the workload is in the agent's scope; a workload outside it only winds
    /// down ([`Seen::leave_scope`]).
    pub in_scope: bool,
}

impl<'a> Seen<'a> {
    /// The pass of `workload` over the objects of `snapshot`, at `now`.
    pub fn new(
        ctx: &'a Context,
        hub: &'a HubState,
        key: &'a WorkloadKey,
        workload: Arc<WorkloadInfo>,
        snapshot: Snapshot,
        now: DateTime<Utc>,
        watcher: &'a Watcher,
    ) -> Seen<'a> {
        let policies = facts::policies(&ctx.cache);
        let policy = facts::policy_for(&workload, &ctx.cache, &policies, hub, &ctx.settings);
        let pods = facts::live_pods(&snapshot.all_pods);
        Seen {
            ctx,
            hub,
            key,
            workload,
            all_pods: snapshot.all_pods,
            pods,
            hpas: snapshot.hpas,
            policy,
            now,
            watcher,
            in_scope: true,
        }
    }

    /// The pass of a workload that left the agent's scope: every mode off
    /// ([`EffectivePolicy::outside_scope`]), so its applied change is released, and only
    /// the steps that finish what the agent did are carried out.
    pub fn leave_scope(&mut self) {
        self.in_scope = false;
        self.policy = self.policy.clone().outside_scope();
    }
}

/// The facts of one pass: what it has read, and the facts of a decision made from it.
pub struct Pass<'a> {
    /// What the pass has read.
    pub seen: Seen<'a>,
    /// The facts of a decision.
    pub facts: Facts,
    /// The writes the step made to the workload, its pods and HPAs.
    pub writes: PassWrites,
}

impl<'a> std::ops::Deref for Pass<'a> {
    type Target = Seen<'a>;

    fn deref(&self) -> &Seen<'a> {
        &self.seen
    }
}

impl<'a> Pass<'a> {
    /// Makes the facts of a decision, once, from what `seen` read and the rsr's `spec` and
    /// `status` (as the health watch left it).
    pub fn new(
        seen: Seen<'a>,
        spec: &RightsizingRecommendationSpec,
        status: &RightsizingRecommendationStatus,
    ) -> Pass<'a> {
        let webhook_problem = seen.ctx.webhook_certificate.borrow().clone();
        let src = Sources {
            cache: &seen.ctx.cache,
            hub: seen.hub,
            settings: &seen.ctx.settings,
            resize_subresource: seen.ctx.resize_subresource,
            webhook_certificate_problem: webhook_problem.as_deref(),
        };
        let objects = Objects {
            pods: &seen.pods,
            hpas: &seen.hpas,
        };
        let facts = facts::gather(src, &seen.workload, objects, spec, status, seen.now);
        Pass {
            seen,
            facts,
            writes: PassWrites::default(),
        }
    }

    /// A `blocked` event of this workload about `change`, for `reason`, saying `message`.
    pub fn blocked_event(&self, change: &ChangeRecord, reason: &str, message: &str) -> Event {
        let workload = event_workload(&self.workload);
        let mut e = Event::new(
            uuid::Uuid::new_v4(),
            EventType::Blocked,
            self.now,
            workload,
            reason,
        )
        .with_message(message);
        e.recommendation_id = Some(change.recommendation_id.clone());
        e
    }

    /// Notes a write to the workload itself, answered with `answer`.
    pub fn wrote_workload(&self, answer: Option<String>) {
        self.wrote(Written::Workload, answer, &self.workload.resource_version);
    }

    /// Notes a write to the pod `name`, answered with `answer` (none for an eviction).
    pub fn wrote_pod(&self, name: &str, answer: Option<String>) {
        let pod = self.all_pods.iter().find(|p| *p.name == *name);
        let replaced = pod.map(|p| p.resource_version.to_string());
        self.wrote(
            Written::Pod(name.to_owned()),
            answer,
            replaced.as_deref().unwrap_or_default(),
        );
    }

    /// Notes a write to the HPA `name`, answered with `answer`.
    pub fn wrote_hpa(&self, name: &str, answer: Option<String>) {
        let hpa = self.hpas.iter().find(|h| h.name == name);
        let replaced = hpa.map_or("", |h| h.resource_version.as_str());
        self.wrote(Written::Hpa(name.to_owned()), answer, replaced);
    }

    /// Notes a write to `object`, which replaced `replaced`, answered with `answer`.
    fn wrote(&self, object: Written, answer: Option<String>, replaced: &str) {
        self.writes
            .push(object, answer, replaced, self.ctx.clock.now());
    }

    /// Whether this replica may make an actuating write now (design D25).
    pub fn may_write(&self) -> bool {
        self.ctx.may_write()
    }

    /// Takes a token of the write limit for one actuating write of this workload. Without
    /// one the step sends nothing more: the pass ends and its workload is looked at again
    /// when the token reserved for it is due (the pass never waits holding its slot).
    pub fn write_token(&self) -> bool {
        match self.ctx.limiter.take_for(&self.key.to_string()) {
            Ok(()) => true,
            Err(wait) => {
                let wait = chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
                let at = self.now.checked_add_signed(wait).unwrap_or(self.now);
                self.writes.token_due(at);
                false
            }
        }
    }

    /// Counters of the actuating calls.
    pub fn metrics(&self) -> &ExecutorMetrics {
        &self.ctx.metrics.executor
    }

    /// The workload's controller status as the steps read it, for the change of `s`.
    pub fn workload_state(&self, s: &RightsizingRecommendationStatus) -> WorkloadState {
        let w = &self.workload;
        WorkloadState {
            kind: w.key.kind,
            on_delete: is_on_delete(w),
            generation: w.generation,
            observed_generation: w.status.observed_generation,
            replicas: w.replicas,
            status_replicas: w.status.replicas,
            updated_replicas: w.status.updated_replicas,
            desired_number_scheduled: w.status.desired_number_scheduled,
            updated_number_scheduled: w.status.updated_number_scheduled,
            template_covers_change: s.change.as_ref().is_some_and(|c| template_covers(c, w)),
            pods_settled: s
                .change
                .as_ref()
                .is_none_or(|c| pods_settled(c, &self.pods)),
            rollout_complete: crate::health::rollout_complete(w),
            hpa_target: s
                .change
                .as_ref()
                .and_then(|c| c.hpa.as_ref())
                .and_then(|h| current_target(&self.hpas, h)),
        }
    }
}

/// Whether `w` is an OnDelete StatefulSet.
pub fn is_on_delete(w: &WorkloadInfo) -> bool {
    w.key.kind == kerf_api::WorkloadKind::StatefulSet
        && w.strategy.type_.as_deref() == Some("OnDelete")
}

/// The utilization metric of `h`'s resource in the HPA `info`.
pub fn hpa_metric<'a>(info: &'a HpaInfo, h: &HpaChange) -> Option<&'a HpaResourceMetric> {
    info.resource_metrics
        .iter()
        .find(|m| m.resource == h.resource.as_str() && m.target_type == "Utilization")
}

/// The target utilization `h`'s HPA has now for its resource, if the HPA and the metric
/// are there.
fn current_target(hpas: &[Arc<HpaInfo>], h: &HpaChange) -> Option<i32> {
    let info = hpas.iter().find(|i| i.name == h.name)?;
    hpa_metric(info, h)?.average_utilization
}
