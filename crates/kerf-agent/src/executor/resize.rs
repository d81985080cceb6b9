//! In-place resize of one pod through the `pods/resize` subresource.
//!
//! The body is a strategic merge patch of `spec.containers[].resources` holding only the
//! CPU and memory values the change sets. A value the change leaves out is not sent, so a
//! limit removal is never sent (rule AP-17, design D9): [`left_out`] names what running pods
//! keep. The answer is classified as design D17 and D19 say.

use k8s_openapi::api::core::v1::Pod;
use kerf_api::{Resource, ResourceRequirements, ResourceValues};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Map, Value, json};

use super::error::{ErrorClass, is_rbac_denial, message_of};
use super::{ContainerResources, container};

/// How often a resize answered with 409 is re-read and sent again.
pub const CONFLICT_RETRIES: usize = 3;

/// A resize the API server accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResizeSent {
    /// The pod.
    pub pod: String,
    /// The pod's `metadata.generation` after the resize, which the kubelet reports back
    /// as `status.observedGeneration` once it has seen it.
    pub generation: Option<i64>,
    /// The pod's resourceVersion in the answer: a pass waits until its cache shows it.
    pub resource_version: Option<String>,
}

/// A value of the change that a resize does not send, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    /// Container name.
    pub container: String,
    /// The resource whose limit stays.
    pub resource: Resource,
    /// What running pods keep, for the event message.
    pub message: String,
}

/// Why a resize was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum ResizeError {
    /// 403 from the PodResizeValidator: the node can never fit the values. The change
    /// falls back to a rollout at once (design D17, rule AP-08).
    #[error("resize infeasible: {message}")]
    Infeasible {
        /// The server's message, for the fallback event.
        message: String,
    },
    /// Any other 403 (RBAC, quota, a webhook): `failed ResizeError`, retried with backoff,
    /// no fallback (design D17).
    #[error("resize forbidden: {message}")]
    Forbidden {
        /// The server's message.
        message: String,
        /// Whether the message is an RBAC denial (log the missing permission).
        rbac: bool,
    },
    /// 404 or 405 on the subresource: the cluster has no `pods/resize`; in-place changes
    /// are `blocked UnsupportedNode` (design D19).
    #[error("cluster has no pods/resize: {message}")]
    NoResizeSubresource {
        /// The server's message.
        message: String,
    },
    /// 422: the resize is invalid (a QoS change, a limit removal).
    #[error("resize invalid: {message}")]
    Invalid {
        /// The server's message.
        message: String,
    },
    /// 409 after every re-read and retry.
    #[error("resize conflict: {message}")]
    Conflict {
        /// The server's message.
        message: String,
    },
    /// The pod is gone (404 on the re-read after a conflict).
    #[error("pod {pod} not found")]
    PodGone {
        /// The pod.
        pod: String,
    },
    /// The change sets no CPU or memory value for any container: nothing was sent.
    #[error("nothing to resize on pod {pod}")]
    NothingToSend {
        /// The pod.
        pod: String,
    },
    /// Anything else: retried with backoff.
    #[error("resize failed: {source}")]
    Transient {
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

super::metrics::action_error!(ResizeError {
    Infeasible => "infeasible",
    Forbidden => "forbidden",
    NoResizeSubresource => "no_resize_subresource",
    Invalid => "invalid",
    Conflict => "conflict",
    PodGone => "pod_gone",
    NothingToSend => "nothing_to_send",
    Transient => "transient",
});

impl ResizeError {
    /// Whether the resize is tried again later with backoff (and ends `failed ResizeError`
    /// once the retries are spent, rule EV-13).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ResizeError::Forbidden { .. }
                | ResizeError::Conflict { .. }
                | ResizeError::Transient { .. }
        )
    }

    /// Reads a failed resize call.
    pub fn from_kube(err: kube::Error) -> ResizeError {
        let message = message_of(&err);
        match ErrorClass::of(&err) {
            ErrorClass::Infeasible => ResizeError::Infeasible { message },
            ErrorClass::Forbidden => {
                let rbac = is_rbac_denial(&message);
                ResizeError::Forbidden { message, rbac }
            }
            ErrorClass::NotFound | ErrorClass::MethodNotAllowed => {
                ResizeError::NoResizeSubresource { message }
            }
            ErrorClass::Invalid => ResizeError::Invalid { message },
            ErrorClass::Conflict => ResizeError::Conflict { message },
            ErrorClass::TooManyRequests | ErrorClass::Transient => {
                ResizeError::Transient { source: err }
            }
        }
    }
}

/// The strategic merge patch of a resize: `spec.containers[{name, resources}]` with only
/// the CPU and memory values the change sets, and the same under `spec.initContainers` for
/// the containers `sidecars` names (restartable init containers, resized in place since
/// Kubernetes 1.33; design D8). Never a `null` (a removal).
pub fn resize_body(containers: &[ContainerResources], sidecars: &[&str]) -> Value {
    let mut main = Vec::new();
    let mut init = Vec::new();
    for (name, r) in containers.iter().filter(|(_, r)| !r.is_empty()) {
        let entry = json!({"name": name, "resources": resources_json(r)});
        if sidecars.contains(&name.as_str()) {
            init.push(entry);
        } else {
            main.push(entry);
        }
    }
    let mut spec = Map::new();
    if !main.is_empty() {
        spec.insert("containers".to_owned(), Value::Array(main));
    }
    if !init.is_empty() {
        spec.insert("initContainers".to_owned(), Value::Array(init));
    }
    json!({ "spec": spec })
}

/// The `resources` object of a container with the values `r` sets.
pub fn resources_json(r: &ResourceRequirements) -> Value {
    let mut out = Map::new();
    for (key, values) in [("requests", &r.requests), ("limits", &r.limits)] {
        if !values.is_empty() {
            out.insert(key.to_owned(), values_json(values));
        }
    }
    Value::Object(out)
}

fn values_json(v: &ResourceValues) -> Value {
    let mut out = Map::new();
    for r in Resource::ALL {
        if let Some(q) = v.get(r) {
            out.insert(r.as_str().to_owned(), Value::String(q.0.clone()));
        }
    }
    Value::Object(out)
}

/// The limits a pod keeps because a resize cannot remove them (rule AP-17): a limit the
/// pod has now and the change has none for. New pods get the removal through the webhook
/// or a rollout.
pub fn left_out(current: &[ContainerResources], target: &[ContainerResources]) -> Vec<LeftOut> {
    let mut out = Vec::new();
    for (name, want) in target {
        let Some(now) = container(current, name) else {
            continue;
        };
        for r in Resource::ALL {
            if let (Some(limit), None) = (now.limits.get(r), want.limits.get(r)) {
                out.push(LeftOut {
                    container: name.clone(),
                    resource: r,
                    message: format!(
                        "container {name}: the {r} limit {limit} stays on running pods (a resize cannot remove a limit); new pods get the removal"
                    ),
                });
            }
        }
    }
    out
}

/// Resizes one pod: PATCH `pods/{pod}/resize` with [`resize_body`] (`sidecars` names the
/// pod's restartable init containers), field manager `kerf`.
/// A 409 is answered by re-reading the pod and sending again, [`CONFLICT_RETRIES`] times.
pub async fn resize_pod(
    client: kube::Client,
    namespace: &str,
    pod: &str,
    containers: &[ContainerResources],
    sidecars: &[&str],
) -> Result<ResizeSent, ResizeError> {
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let body = resize_body(containers, sidecars);
    if body["spec"].as_object().is_none_or(Map::is_empty) {
        return Err(ResizeError::NothingToSend {
            pod: pod.to_owned(),
        });
    }
    let params = PatchParams {
        field_manager: Some(kerf_api::wellknown::FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let mut attempt = 0;
    loop {
        match api
            .patch_subresource("resize", pod, &params, &Patch::Strategic(&body))
            .await
        {
            Ok(p) => {
                return Ok(ResizeSent {
                    pod: pod.to_owned(),
                    generation: p.metadata.generation,
                    resource_version: p.metadata.resource_version,
                });
            }
            Err(err) => {
                let err = ResizeError::from_kube(err);
                log_error(namespace, pod, &err);
                if !matches!(err, ResizeError::Conflict { .. }) || attempt >= CONFLICT_RETRIES {
                    return Err(err);
                }
                attempt += 1;
                reread(&api, pod).await?;
            }
        }
    }
}

async fn reread(api: &Api<Pod>, pod: &str) -> Result<(), ResizeError> {
    match api.get_opt(pod).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(ResizeError::PodGone {
            pod: pod.to_owned(),
        }),
        Err(source) => Err(ResizeError::Transient { source }),
    }
}

fn log_error(namespace: &str, pod: &str, err: &ResizeError) {
    if let ResizeError::Forbidden {
        message,
        rbac: true,
    } = err
    {
        tracing::error!(
            namespace,
            pod,
            permission = "patch pods/resize",
            message = %message,
            "resize denied by RBAC: the agent's role lacks patch on pods/resize"
        );
    } else {
        tracing::warn!(namespace, pod, category = err.category(), error = %err, "resize not accepted");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_never_holds_a_null() {
        let r = ResourceRequirements {
            requests: ResourceValues {
                cpu: Some("150m".into()),
                memory: None,
            },
            limits: ResourceValues::default(),
        };
        let body = resize_body(&[("app".into(), r)], &[]);
        assert_eq!(
            body,
            json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "150m"}}}]}})
        );
    }
}
