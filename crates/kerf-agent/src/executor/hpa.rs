//! The coordinated HPA target (design D22): a JSON patch that tests the old utilization
//! target and replaces it, under the field manager `kerf-hpa` (conformance 16).
//!
//! A lower target is written before the template patch, a higher one after the rollout
//! completes; the rollback and leaving auto-patch write the old target back the same way
//! (rule RB-24). The test operation makes a write fail with 422 when someone else changed
//! the target meanwhile, so Kerf never overwrites a target it did not set.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kerf_api::Resource;
use kerf_api::wellknown::FIELD_MANAGER_HPA;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::error::{ErrorClass, message_of};

/// The kind of an HPA metric Kerf coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetricSource {
    /// `type: Resource` (pod sums).
    Resource,
    /// `type: ContainerResource` (one container).
    ContainerResource,
}

impl MetricSource {
    /// The field of the metric that holds its target.
    pub fn field(self) -> &'static str {
        match self {
            MetricSource::Resource => "resource",
            MetricSource::ContainerResource => "containerResource",
        }
    }
}

/// A CPU or memory utilization target of an HPA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HpaTarget {
    /// Index in `spec.metrics`.
    pub index: usize,
    /// Resource or ContainerResource.
    pub source: MetricSource,
    /// CPU or memory.
    pub resource: Resource,
    /// The container of a ContainerResource metric.
    pub container: Option<String>,
    /// `target.averageUtilization`, in percent.
    pub average_utilization: i32,
}

/// The JSON pointer of a target's `averageUtilization`.
pub fn target_path(index: usize, source: MetricSource) -> String {
    format!(
        "/spec/metrics/{index}/{}/target/averageUtilization",
        source.field()
    )
}

/// The JSON patch that writes `new` where `old` stands: `test` then `replace`.
pub fn target_patch(
    index: usize,
    source: MetricSource,
    old: i32,
    new: i32,
) -> Result<json_patch::Patch, HpaError> {
    let path = target_path(index, source);
    serde_json::from_value(json!([
        {"op": "test", "path": path, "value": old},
        {"op": "replace", "path": path, "value": new},
    ]))
    .map_err(|e| HpaError::Invalid {
        message: e.to_string(),
    })
}

/// The CPU and memory utilization targets of an HPA.
pub fn utilization_targets(hpa: &HorizontalPodAutoscaler) -> Vec<HpaTarget> {
    let metrics = hpa.spec.as_ref().and_then(|s| s.metrics.as_ref());
    let mut out = Vec::new();
    for (index, m) in metrics.into_iter().flatten().enumerate() {
        let found = match (m.type_.as_str(), &m.resource, &m.container_resource) {
            ("Resource", Some(r), _) => Some((MetricSource::Resource, &r.name, &r.target, None)),
            ("ContainerResource", _, Some(c)) => Some((
                MetricSource::ContainerResource,
                &c.name,
                &c.target,
                Some(c.container.clone()),
            )),
            _ => None,
        };
        let Some((source, name, target, container)) = found else {
            continue;
        };
        let resource = match name.as_str() {
            "cpu" => Resource::Cpu,
            "memory" => Resource::Memory,
            _ => continue,
        };
        if let (Some(u), "Utilization") = (target.average_utilization, target.type_.as_str()) {
            out.push(HpaTarget {
                index,
                source,
                resource,
                container,
                average_utilization: u,
            });
        }
    }
    out
}

/// A target write the API server accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HpaWritten {
    /// The HPA.
    pub name: String,
    /// The target before.
    pub from: i32,
    /// The target now.
    pub to: i32,
    /// The HPA's resourceVersion in the answer: a pass waits until its cache shows it.
    pub resource_version: Option<String>,
}

/// Why a target write failed.
#[derive(Debug, thiserror::Error)]
pub enum HpaError {
    /// 422: the test failed (the target is no longer `old`) or the patch is invalid.
    #[error("HPA target changed or patch invalid: {message}")]
    Invalid {
        /// The server's message.
        message: String,
    },
    /// 404: the HPA is gone.
    #[error("HPA {name} not found")]
    NotFound {
        /// The HPA.
        name: String,
    },
    /// 403.
    #[error("HPA patch forbidden: {message}")]
    Forbidden {
        /// The server's message.
        message: String,
    },
    /// Anything else: retried with backoff.
    #[error("HPA patch failed: {source}")]
    Transient {
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

super::metrics::action_error!(HpaError {
    Invalid => "invalid",
    NotFound => "not_found",
    Forbidden => "forbidden",
    Transient => "transient",
});

/// Writes `new` as the target at `index` if it still is `old`, under `kerf-hpa`. The
/// restore on rollback or on leaving auto-patch is the same call with the values swapped
/// (rule RB-24).
pub async fn write_hpa_target(
    client: kube::Client,
    namespace: &str,
    name: &str,
    index: usize,
    source: MetricSource,
    old: i32,
    new: i32,
) -> Result<HpaWritten, HpaError> {
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(client, namespace);
    let patch = target_patch(index, source, old, new)?;
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER_HPA.to_owned()),
        ..PatchParams::default()
    };
    match api.patch(name, &params, &Patch::Json::<()>(patch)).await {
        Ok(h) => Ok(HpaWritten {
            name: name.to_owned(),
            from: old,
            to: new,
            resource_version: h.metadata.resource_version,
        }),
        Err(err) => {
            let message = message_of(&err);
            Err(match ErrorClass::of(&err) {
                ErrorClass::Invalid => HpaError::Invalid { message },
                ErrorClass::NotFound => HpaError::NotFound {
                    name: name.to_owned(),
                },
                ErrorClass::Forbidden | ErrorClass::Infeasible => HpaError::Forbidden { message },
                _ => HpaError::Transient { source: err },
            })
        }
    }
}
