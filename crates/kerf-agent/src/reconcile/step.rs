//! What carrying out a step of a pass yields: its events, whether the change finished,
//! and why it stopped ([`ActError`], [`KeyError`]); and the workload as the executor and
//! the events name it.

use kerf_api::ResourceRequirements;
use kerf_api::event::{Event, EventWorkload};
use kerf_api::rsr::ChangeRecord;

use crate::cache::{PodInfo, WorkloadInfo};
use crate::executor::resize::ResizeError;
use crate::executor::rollout;
use crate::executor::{WorkloadId, requirements_cover};
use crate::failpoints;
use crate::health::HealthError;
use crate::intent::IntentError;

/// Why a step of a change stopped.
#[derive(Debug, thiserror::Error)]
pub enum ActError {
    /// The lease is not held: no actuating write.
    #[error("not the leader")]
    NotLeader,
    /// A fail point stopped the step.
    #[error(transparent)]
    Failpoint(#[from] failpoints::Triggered),
    /// A resize failed (not Infeasible).
    #[error("resize: {0}")]
    Resize(#[from] ResizeError),
    /// The template apply or the release failed.
    #[error("template: {0}")]
    Apply(#[from] rollout::ApplyError),
    /// The coordinated HPA target could not be written.
    #[error("HPA: {0}")]
    Hpa(#[from] crate::executor::hpa::HpaError),
    /// The eviction of an outdated OnDelete pod failed (other than a refusal).
    #[error("eviction: {0}")]
    Evict(#[from] crate::executor::ondelete::EvictError),
}

impl ActError {
    /// A short, bounded name for metric labels and logs.
    pub fn category(&self) -> &'static str {
        match self {
            ActError::NotLeader => "not_leader",
            ActError::Failpoint(_) => "failpoint",
            ActError::Resize(e) => e.category(),
            ActError::Apply(e) => e.category(),
            ActError::Hpa(e) => e.category(),
            ActError::Evict(e) => e.category(),
        }
    }
}

/// What a step did, for the caller to record.
#[derive(Debug, Default)]
pub struct StepResult {
    /// Lifecycle events to emit (already added to `pendingEvents`).
    pub events: Vec<Event>,
    /// Whether the change became Applied, RolledBack or Released in this step (EV-18).
    pub finished: bool,
    /// When to look at the workload again (a rollback to retry, evicted pods).
    pub wake_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The workload identity the executor takes.
pub fn workload_id(w: &WorkloadInfo) -> WorkloadId {
    WorkloadId {
        namespace: w.key.namespace.to_string(),
        name: w.key.name.to_string(),
        uid: w.uid.clone(),
        kind: w.key.kind,
    }
}

/// The workload as events name it.
pub fn event_workload(w: &WorkloadInfo) -> EventWorkload {
    EventWorkload {
        namespace: w.key.namespace.to_string(),
        kind: w.key.kind.as_str().to_owned(),
        name: w.key.name.to_string(),
    }
}

/// Whether the template already holds every value of the change.
pub fn template_covers(change: &ChangeRecord, w: &WorkloadInfo) -> bool {
    change_covered(change, |name| {
        let t = w.containers.iter().find(|t| *t.name == *name)?;
        Some(ResourceRequirements {
            requests: t.requests.clone(),
            limits: t.limits.clone(),
        })
    })
}

/// Whether every container of the change that `have` finds holds the change's values (a
/// container `have` does not find counts as holding them).
fn change_covered(
    change: &ChangeRecord,
    have: impl Fn(&str) -> Option<ResourceRequirements>,
) -> bool {
    change
        .containers
        .iter()
        .all(|c| have(&c.name).is_none_or(|h| requirements_cover(&c.to, &h)))
}

/// Whether the pods show the change where it went in: every pod whose spec holds the
/// change's values also reports them in its status (a kubelet that reports none counts as
/// reporting its spec), with no resize pending or in progress.
pub fn pods_settled(change: &ChangeRecord, pods: &[std::sync::Arc<PodInfo>]) -> bool {
    pods.iter().all(|p| {
        let settled = p.resize_pending.is_none() && p.resize_in_progress.is_none();
        !pod_holds(change, p, false) || (settled && pod_holds(change, p, true))
    })
}

/// Whether the spec (or, with `status`, the status) of pod `p` holds the change's values.
fn pod_holds(change: &ChangeRecord, p: &PodInfo, status: bool) -> bool {
    change_covered(change, |name| {
        let pc = p.containers.iter().find(|pc| *pc.name == *name)?;
        Some(match (pc.status_resources(), status) {
            (Some(s), true) => s.into_owned(),
            _ => ResourceRequirements {
                requests: pc.requests.clone(),
                limits: pc.limits.clone(),
            },
        })
    })
}

/// Why a pass over one workload stopped.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A status write failed (409 included: read again next pass).
    #[error(transparent)]
    Intent(#[from] IntentError),
    /// An actuating step failed.
    #[error(transparent)]
    Act(#[from] ActError),
    /// The health watch or a rollback failed.
    #[error(transparent)]
    Health(#[from] HealthError),
}

impl KeyError {
    /// A short, bounded name for metric labels and logs.
    pub fn category(&self) -> &'static str {
        match self {
            KeyError::Intent(e) => e.category(),
            KeyError::Act(e) => e.category(),
            KeyError::Health(e) => e.category(),
        }
    }
}

/// A conflict of a rollback's status write is a conflict of the pass (read again soon).
pub fn health_error(e: HealthError) -> KeyError {
    match e {
        HealthError::Status(i) => KeyError::Intent(i),
        other => KeyError::Health(other),
    }
}

/// What the effect interpreter does after an effect.
pub enum Flow {
    /// The next effect of the plan.
    Next,
    /// Nothing more in this pass (no write token left: a later pass goes on).
    Stop,
    /// The rest of the plan is replaced by these effects.
    Replace(Vec<kerf_decide::plan::Effect>),
}
