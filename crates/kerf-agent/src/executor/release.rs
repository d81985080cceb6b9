//! The pure part of the release hand-over (design section 13): which CPU and memory fields
//! `kerf` owns, read from its managedFields entry, and the two apply bodies that hand the
//! released ones over to `kerf-released` and drop them from `kerf`.
//!
//! Conformance 10 shows why two steps: an apply as `kerf` that just leaves the fields out
//! deletes them where `kerf` is their only owner. Conformance 09 shows the hand-over keeps
//! them.

use std::collections::BTreeMap;

use kerf_api::wellknown::{FIELD_MANAGER, FIELD_MANAGER_RELEASED};
use kerf_api::{Quantity, Resource, ResourceRequirements};
use kube::api::DynamicObject;
use serde_json::Value;

use super::WorkloadId;
use super::template::{TemplateContainers, apply_body, quantity_at};

/// Requests or limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// `resources.requests`.
    Requests,
    /// `resources.limits`.
    Limits,
}

impl Side {
    /// The field name.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Requests => "requests",
            Side::Limits => "limits",
        }
    }
}

/// One CPU or memory field of a template container that a manager owns.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnedField {
    /// `containers` or `initContainers`.
    pub list: String,
    /// Container name.
    pub container: String,
    /// Requests or limits.
    pub side: Side,
    /// CPU or memory.
    pub resource: Resource,
}

impl OwnedField {
    /// `container/requests.cpu`.
    pub fn label(&self) -> String {
        format!(
            "{}/{}.{}",
            self.container,
            self.side.as_str(),
            self.resource
        )
    }
}

/// The CPU and memory fields of the template's containers in a `fieldsV1` tree.
pub fn owned_fields(fields_v1: &Value) -> Vec<OwnedField> {
    let mut out = Vec::new();
    let pod_spec = &fields_v1["f:spec"]["f:template"]["f:spec"];
    for list in ["containers", "initContainers"] {
        let Some(items) = pod_spec[format!("f:{list}")].as_object() else {
            continue;
        };
        for (key, item) in items {
            let Some(name) = container_key(key) else {
                continue;
            };
            for side in [Side::Requests, Side::Limits] {
                for resource in Resource::ALL {
                    let f = &item["f:resources"][format!("f:{}", side.as_str())]
                        [format!("f:{resource}")];
                    if f.is_object() {
                        out.push(OwnedField {
                            list: list.to_owned(),
                            container: name.clone(),
                            side,
                            resource,
                        });
                    }
                }
            }
        }
    }
    out
}

/// The container name of a `k:{"name":"app"}` key.
fn container_key(key: &str) -> Option<String> {
    let json: Value = serde_json::from_str(key.strip_prefix("k:")?).ok()?;
    json["name"].as_str().map(str::to_owned)
}

/// The fields `manager` owns through Apply on the main resource (not a subresource).
pub fn fields_of(live: &DynamicObject, manager: &str) -> Vec<OwnedField> {
    let entries = live.metadata.managed_fields.iter().flatten();
    entries
        .filter(|e| e.manager.as_deref() == Some(manager))
        .filter(|e| e.operation.as_deref() == Some("Apply"))
        .filter(|e| e.subresource.as_deref().is_none_or(str::is_empty))
        .filter_map(|e| e.fields_v1.as_ref())
        .flat_map(|f| owned_fields(&f.0))
        .collect()
}

/// The live value of an owned field in the template.
pub fn live_value(live: &DynamicObject, f: &OwnedField) -> Option<Quantity> {
    let list = live.data["spec"]["template"]["spec"][f.list.as_str()].as_array()?;
    let c = list.iter().find(|c| c["name"] == f.container.as_str())?;
    quantity_at(&c["resources"][f.side.as_str()][f.resource.as_str()])
}

/// The two steps of a release.
#[derive(Clone, Debug, PartialEq)]
pub struct ReleasePlan {
    /// Step 1, applied as `kerf-released`: the released fields with their live values.
    pub handover: Value,
    /// Step 2, applied as `kerf`: only the fields `kerf` keeps.
    pub keep: Value,
    /// The released fields (`container/requests.cpu`).
    pub released: Vec<String>,
    /// The fields `kerf` keeps.
    pub kept: Vec<String>,
}

/// Plans the release of `resources` from `kerf`'s ownership on the live workload.
pub fn plan_release(
    workload: &WorkloadId,
    live: &DynamicObject,
    resources: &[Resource],
) -> ReleasePlan {
    let mut owned = fields_of(live, FIELD_MANAGER);
    owned.sort();
    owned.dedup();
    let (give, keep): (Vec<OwnedField>, Vec<OwnedField>) = owned
        .into_iter()
        .filter(|f| live_value(live, f).is_some())
        .partition(|f| resources.contains(&f.resource));
    // `kerf-released` keeps what earlier releases (of other resources) gave it: an apply
    // that left those out would delete them where it is their only owner.
    let mut handover: Vec<OwnedField> = fields_of(live, FIELD_MANAGER_RELEASED)
        .into_iter()
        .filter(|f| live_value(live, f).is_some())
        .chain(give.iter().cloned())
        .collect();
    handover.sort();
    handover.dedup();
    let template = TemplateContainers::of_pod_spec(&live.data["spec"]["template"]["spec"]);
    let body = |fields: &[OwnedField]| {
        let values = values_of(live, fields);
        apply_body(workload, &values, &Resource::ALL, &template).body
    };
    ReleasePlan {
        handover: body(&handover),
        keep: body(&keep),
        released: give.iter().map(OwnedField::label).collect(),
        kept: keep.iter().map(OwnedField::label).collect(),
    }
}

/// The live values of `fields`, grouped by container.
fn values_of(live: &DynamicObject, fields: &[OwnedField]) -> Vec<(String, ResourceRequirements)> {
    let mut by_container: BTreeMap<String, ResourceRequirements> = BTreeMap::new();
    for f in fields {
        let entry = by_container.entry(f.container.clone()).or_default();
        let side = match f.side {
            Side::Requests => &mut entry.requests,
            Side::Limits => &mut entry.limits,
        };
        side.set(f.resource, live_value(live, f));
    }
    by_container.into_iter().collect()
}
