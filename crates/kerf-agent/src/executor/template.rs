//! The apply body of a pod template change, shared by the rollout and the release
//! hand-over: which containers a template has, the values of a change restricted to some
//! resources, and the body that names only those fields (rules AP-19, AP-20).

use kerf_api::{Quantity, Resource};
use serde_json::{Value, json};

use super::resize::resources_json;
use super::{ContainerResources, WorkloadId};

/// The containers of a pod template that Kerf may change: `containers` and restartable
/// init containers (`restartPolicy: Always`, design D8).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TemplateContainers {
    /// `spec.containers[].name`.
    pub containers: Vec<String>,
    /// `spec.initContainers[].name` with `restartPolicy: Always`.
    pub sidecars: Vec<String>,
}

impl TemplateContainers {
    /// Reads them from a pod spec (`spec.template.spec` of a workload).
    pub fn of_pod_spec(spec: &Value) -> TemplateContainers {
        let names = |key: &str, sidecar_only: bool| -> Vec<String> {
            spec[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| !sidecar_only || c["restartPolicy"] == "Always")
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect()
        };
        TemplateContainers {
            containers: names("containers", false),
            sidecars: names("initContainers", true),
        }
    }
}

/// A planned apply: the body and what it covers.
#[derive(Clone, Debug, PartialEq)]
pub struct ApplyPlan {
    /// The apply body (JSON, which is YAML).
    pub body: Value,
    /// Containers whose values are in the body.
    pub containers: Vec<String>,
    /// Containers of the change that the template lacks.
    pub dropped: Vec<String>,
}

pub use kerf_decide::values::only;

/// The apply body of a change: only the CPU and memory values of `resources`, for the
/// containers of the change that the template has (rules AP-19, AP-20).
pub fn apply_body(
    workload: &WorkloadId,
    containers: &[ContainerResources],
    resources: &[Resource],
    template: &TemplateContainers,
) -> ApplyPlan {
    let mut main = Vec::new();
    let mut init = Vec::new();
    let mut applied = Vec::new();
    let mut dropped = Vec::new();
    for (name, r) in containers {
        let values = only(r, resources);
        let list = if template.containers.contains(name) {
            &mut main
        } else if template.sidecars.contains(name) {
            &mut init
        } else {
            dropped.push(name.clone());
            continue;
        };
        if values.is_empty() {
            continue;
        }
        list.push(json!({"name": name, "resources": resources_json(&values)}));
        applied.push(name.clone());
    }
    let mut pod_spec = serde_json::Map::new();
    if !main.is_empty() {
        pod_spec.insert("containers".into(), Value::Array(main));
    }
    if !init.is_empty() {
        pod_spec.insert("initContainers".into(), Value::Array(init));
    }
    let mut body = skeleton(workload);
    if !pod_spec.is_empty() {
        body["spec"] = json!({"template": {"spec": pod_spec}});
    }
    ApplyPlan {
        body,
        containers: applied,
        dropped,
    }
}

/// `apiVersion`, `kind` and `metadata` of a workload: an apply of only this owns nothing.
pub fn skeleton(workload: &WorkloadId) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": workload.kind.as_str(),
        "metadata": {"name": workload.name, "namespace": workload.namespace},
    })
}

/// A quantity as the template holds it.
pub(crate) fn quantity_at(v: &Value) -> Option<Quantity> {
    match v {
        Value::String(s) => Some(Quantity(s.clone())),
        Value::Number(n) => Some(Quantity(n.to_string())),
        _ => None,
    }
}
