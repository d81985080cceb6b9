//! OnDelete StatefulSets: which outdated pods the agent replaces in a run, after a
//! template patch (rules AP-52..AP-61).
//!
//! [`plan`]: outdated pods highest ordinal first, at most `maxPodDeletesPerRun` per run,
//! only when every pod is Ready and has been for `settle`; [`outdated`] is that plan as
//! [`crate::pass::next_step`] reads it. The freeze, the pause and a health breach (AP-58)
//! hold an eviction in one place, the pass's Evict step.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use kerf_api::wellknown::DETAIL_POD;

use crate::facts::PodFacts;
use crate::pass::Outdated;

/// The inputs of [`plan`].
#[derive(Clone, Debug)]
pub struct OnDeleteInput<'a> {
    /// `spec.replicas`.
    pub replicas: u32,
    /// `status.updateRevision`.
    pub update_revision: &'a str,
    /// The StatefulSet's pods, terminating ones included.
    pub pods: &'a [PodFacts],
    /// `onDelete.maxPodDeletesPerRun` (1 by default).
    pub max_deletes_per_run: u32,
    /// `onDelete.settle` (30s by default).
    pub settle: Duration,
    /// Now.
    pub now: DateTime<Utc>,
}

/// Why no pod is replaced in this run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// A pod is terminating (a replacement is under way).
    Terminating {
        /// The pod.
        pod: String,
    },
    /// Fewer pods than replicas exist.
    PodMissing {
        /// Pods wanted.
        expected: u32,
        /// Pods there.
        found: usize,
    },
    /// A pod is not Ready.
    NotReady {
        /// The pod.
        pod: String,
    },
    /// A pod has not been Ready for `settle` yet.
    Settling {
        /// The pod.
        pod: String,
        /// When it will have been Ready long enough.
        until: Option<DateTime<Utc>>,
    },
}

/// What to do in this run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OnDeletePlan {
    /// Every pod is of the update revision.
    Done,
    /// Evict these pods, in this order.
    Evict {
        /// Pod names, highest ordinal first.
        pods: Vec<String>,
    },
    /// Outdated pods remain, but none may be replaced now.
    Wait {
        /// Why.
        reason: WaitReason,
        /// How many pods are outdated.
        outdated: usize,
    },
}

/// The pods to replace in this run (rules AP-53, AP-54, AP-56).
pub fn plan(input: &OnDeleteInput<'_>) -> OnDeletePlan {
    let mut outdated: Vec<&PodFacts> = input
        .pods
        .iter()
        .filter(|p| p.revision_hash.as_deref() != Some(input.update_revision))
        .collect();
    if outdated.is_empty() {
        return OnDeletePlan::Done;
    }
    if let Some(reason) = blocked(input) {
        return OnDeletePlan::Wait {
            reason,
            outdated: outdated.len(),
        };
    }
    outdated.sort_by_key(|p| std::cmp::Reverse(p.ordinal().unwrap_or(0)));
    let take = usize::try_from(input.max_deletes_per_run).unwrap_or(usize::MAX);
    OnDeletePlan::Evict {
        pods: outdated
            .into_iter()
            .take(take)
            .map(|p| p.name.clone())
            .collect(),
    }
}

fn blocked(input: &OnDeleteInput<'_>) -> Option<WaitReason> {
    if let Some(p) = input.pods.iter().find(|p| p.terminating) {
        return Some(WaitReason::Terminating {
            pod: p.name.clone(),
        });
    }
    if input.pods.len() < usize::try_from(input.replicas).unwrap_or(usize::MAX) {
        return Some(WaitReason::PodMissing {
            expected: input.replicas,
            found: input.pods.len(),
        });
    }
    if let Some(p) = input.pods.iter().find(|p| !p.ready) {
        return Some(WaitReason::NotReady {
            pod: p.name.clone(),
        });
    }
    let unsettled = input
        .pods
        .iter()
        .find(|p| p.ready_since.is_none_or(|t| input.now - t < input.settle));
    unsettled.map(|p| WaitReason::Settling {
        pod: p.name.clone(),
        until: p.ready_since.map(|t| t + input.settle),
    })
}

pub use crate::facts::ordinal_of;

/// The `details` of the `blocked PodDisruptionBudget` event: the pod (rule EV-43).
pub fn refusal_details(pod: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(DETAIL_POD.to_owned(), pod.to_owned())])
}

/// The outdated pods as [`crate::pass::next_step`] reads them: none, some waiting (until
/// a pod has settled, if that is the wait), or some ready to go (AP-53..AP-57).
pub fn outdated(input: &OnDeleteInput<'_>) -> Outdated {
    match plan(input) {
        OnDeletePlan::Done => Outdated::None,
        OnDeletePlan::Wait { reason, .. } => Outdated::Waiting {
            until: match reason {
                WaitReason::Settling { until, .. } => until,
                _ => None,
            },
        },
        OnDeletePlan::Evict { pods } => Outdated::Ready(pods),
    }
}
