//! OnDelete StatefulSets: after a template patch, the agent replaces the outdated pods
//! itself (rules AP-52..AP-61).
//!
//! [`plan`] is pure: outdated pods highest ordinal first, at most `maxPodDeletesPerRun` per
//! run, only when every pod is Ready and has been for `settle`. The freeze, the pause and a
//! health breach (AP-58) hold an eviction in one place, `kerf_decide::pass::eviction_allowed`,
//! which `next_step` consults before this plan is acted on. [`evict_pod`] replaces a pod through the eviction API (policy/v1), never
//! a delete, so PodDisruptionBudgets apply; a 429 is a refusal to record as
//! `blocked PodDisruptionBudget` with `details.pod`, and the pod is tried again next run.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use k8s_openapi::api::core::v1::Pod;
use kerf_api::wellknown::DETAIL_POD;
use kube::Api;
use kube::api::PostParams;
use kube::core::Status;
use serde_json::json;

use super::error::{ErrorClass, message_of};

/// What the plan reads of one pod of the StatefulSet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StsPod {
    /// Pod name.
    pub name: String,
    /// Ordinal (the name's numeric suffix).
    pub ordinal: u32,
    /// `controller-revision-hash` label.
    pub revision: Option<String>,
    /// Ready condition is True.
    pub ready: bool,
    /// When the Ready condition last changed.
    pub ready_since: Option<DateTime<Utc>>,
    /// The pod is terminating.
    pub terminating: bool,
}

/// The inputs of [`plan`].
#[derive(Clone, Debug)]
pub struct OnDeleteInput<'a> {
    /// `spec.replicas`.
    pub replicas: u32,
    /// `status.updateRevision`.
    pub update_revision: &'a str,
    /// The StatefulSet's pods.
    pub pods: &'a [StsPod],
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
    let mut outdated: Vec<&StsPod> = input
        .pods
        .iter()
        .filter(|p| p.revision.as_deref() != Some(input.update_revision))
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
    outdated.sort_by_key(|p| std::cmp::Reverse(p.ordinal));
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

/// The ordinal of a StatefulSet pod name (`web-3` is 3).
pub fn ordinal_of(name: &str) -> Option<u32> {
    name.rsplit_once('-').and_then(|(_, n)| n.parse().ok())
}

/// Reads a pod into what the plan needs.
pub fn sts_pod(pod: &Pod) -> StsPod {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    StsPod {
        ordinal: ordinal_of(&name).unwrap_or(0),
        revision: pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("controller-revision-hash"))
            .cloned(),
        ready: ready.is_some_and(|c| c.status == "True"),
        ready_since: ready
            .and_then(|c| c.last_transition_time.as_ref())
            .and_then(|t| super::to_chrono(&t.0)),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        name,
    }
}

/// The answer to an eviction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvictOutcome {
    /// The eviction was accepted; the controller makes the pod again at the update revision.
    Evicted {
        /// The pod.
        pod: String,
    },
    /// The pod was already gone.
    Gone {
        /// The pod.
        pod: String,
    },
    /// 429: a PodDisruptionBudget refused or the API server held the eviction back (rules
    /// AP-60, EV-42). Record `blocked PodDisruptionBudget` with [`refusal_details`] and try
    /// again next run (rule AP-61).
    Refused {
        /// The pod.
        pod: String,
        /// The server's message.
        message: String,
    },
}

/// The `details` of the `blocked PodDisruptionBudget` event: the pod (rule EV-43).
pub fn refusal_details(pod: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(DETAIL_POD.to_owned(), pod.to_owned())])
}

/// Why an eviction failed (other than a refusal).
#[derive(Debug, thiserror::Error)]
pub enum EvictError {
    /// 403.
    #[error("eviction forbidden: {message}")]
    Forbidden {
        /// The server's message.
        message: String,
    },
    /// Anything else: retried with backoff.
    #[error("eviction failed: {source}")]
    Transient {
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

super::metrics::action_error!(EvictError {
    Forbidden => "forbidden",
    Transient => "transient",
});

/// The body of a policy/v1 Eviction of `pod`.
pub fn eviction_body(namespace: &str, pod: &str) -> serde_json::Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}})
}

/// How long an eviction may take. kube's client retries a 429 itself when its
/// `default_retry` is on (up to 15 times with growing backoff); past this the eviction
/// counts as held back by the API server, which is a refusal too (rule EV-42).
pub const EVICTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Evicts a pod: POST `pods/{pod}/eviction` with a policy/v1 Eviction (rule AP-59). A 429,
/// or no answer within [`EVICTION_TIMEOUT`], is [`EvictOutcome::Refused`]. A client built
/// with `default_retry = false` gets the 429 at once.
pub async fn evict_pod(
    client: kube::Client,
    namespace: &str,
    pod: &str,
) -> Result<EvictOutcome, EvictError> {
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let body = eviction_body(namespace, pod);
    let params = PostParams::default();
    let call = api.create_subresource::<_, Status>("eviction", pod, &params, &body);
    let Ok(answer) = tokio::time::timeout(EVICTION_TIMEOUT, call).await else {
        let message = format!(
            "the API server held the eviction back for {}s",
            EVICTION_TIMEOUT.as_secs()
        );
        return Ok(EvictOutcome::Refused {
            pod: pod.to_owned(),
            message,
        });
    };
    match answer {
        Ok(_) => Ok(EvictOutcome::Evicted {
            pod: pod.to_owned(),
        }),
        Err(err) => {
            let message = message_of(&err);
            match ErrorClass::of(&err) {
                ErrorClass::TooManyRequests => Ok(EvictOutcome::Refused {
                    pod: pod.to_owned(),
                    message,
                }),
                ErrorClass::NotFound => Ok(EvictOutcome::Gone {
                    pod: pod.to_owned(),
                }),
                ErrorClass::Forbidden | ErrorClass::Infeasible => {
                    Err(EvictError::Forbidden { message })
                }
                _ => Err(EvictError::Transient { source: err }),
            }
        }
    }
}
