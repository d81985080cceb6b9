//! OnDelete StatefulSets: replacing an outdated pod (rules AP-59..AP-61). Which pods go,
//! and when, is `kerf_decide::ondelete`.
//!
//! [`evict_pod`] replaces a pod through the eviction API (policy/v1), never a delete, so
//! PodDisruptionBudgets apply; a 429 is a refusal to record as
//! `blocked PodDisruptionBudget` with `details.pod`, and the pod is tried again next run.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use kube::core::Status;
use serde_json::json;

use super::error::{ErrorClass, message_of};

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
    /// AP-60, EV-42). Record `blocked PodDisruptionBudget` with `kerf_decide::ondelete::refusal_details` and try
    /// again next run (rule AP-61).
    Refused {
        /// The pod.
        pod: String,
        /// The server's message.
        message: String,
    },
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
