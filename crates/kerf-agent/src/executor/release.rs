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
    /// The field name in a container's `resources`.
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

/// Step 3: the JSON patch that removes the `managedFields` entries of `kerf-released`, and
/// those of `kerf` once it owns no CPU or memory field, from the object as read; `None` when
/// there is none. Its first op tests `metadata.resourceVersion`, so a write in between
/// fails the patch (409 or 422) instead of removing the wrong entry. The values stay, owned
/// by nobody, and the next apply from Git takes them without a conflict.
pub fn ghost_removal(live: &DynamicObject) -> Option<Value> {
    let kerf_done = fields_of(live, FIELD_MANAGER).is_empty();
    let entries: Vec<_> = live.metadata.managed_fields.iter().flatten().collect();
    let ghosts: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| match e.manager.as_deref() {
            Some(FIELD_MANAGER_RELEASED) => true,
            Some(FIELD_MANAGER) => kerf_done,
            _ => false,
        })
        .map(|(i, _)| i)
        .collect();
    if ghosts.is_empty() {
        return None;
    }
    let rv = live.metadata.resource_version.clone().unwrap_or_default();
    let mut ops = vec![serde_json::json!(
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv}
    )];
    if ghosts.len() == entries.len() {
        // An empty list would keep the entries (a client that does not know managedFields
        // sends none); one empty entry resets them, as the API server documents.
        ops.push(serde_json::json!(
            {"op": "replace", "path": "/metadata/managedFields", "value": [{}]}
        ));
        return Some(Value::Array(ops));
    }
    // Highest index first, so each removal leaves the lower indices in place.
    ops.extend(ghosts.iter().rev().map(
        |i| serde_json::json!({"op": "remove", "path": format!("/metadata/managedFields/{i}")}),
    ));
    Some(Value::Array(ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn live(managers: &[(&str, Value)]) -> DynamicObject {
        let mf: Vec<Value> = managers
            .iter()
            .map(|(m, f)| json!({"manager": m, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": f}))
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "resourceVersion": "7", "managedFields": mf},
        }))
        .unwrap()
    }

    fn cpu_owned() -> Value {
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}":
            {"f:resources": {"f:requests": {"f:cpu": {}}}}}}}}})
    }

    #[test]
    fn ghost_removal_tests_the_version_and_removes_released_entries_from_the_end() {
        let l = live(&[
            ("kerf-released", json!({})),
            ("kubectl", json!({})),
            ("kerf", json!({})),
        ]);
        let ops = ghost_removal(&l).unwrap();
        assert_eq!(
            ops,
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "remove", "path": "/metadata/managedFields/2"},
                {"op": "remove", "path": "/metadata/managedFields/0"},
            ])
        );
    }

    #[test]
    fn ghost_removal_leaves_kerf_while_it_owns_a_resource_field() {
        let l = live(&[("kerf", cpu_owned()), ("kubectl", json!({}))]);
        assert!(ghost_removal(&l).is_none());
        let l = live(&[("kerf", cpu_owned()), ("kerf-released", json!({}))]);
        assert_eq!(
            ghost_removal(&l).unwrap()[1],
            json!({"op": "remove", "path": "/metadata/managedFields/1"})
        );
    }

    #[test]
    fn ghost_removal_of_every_entry_resets_them() {
        let l = live(&[("kerf-released", json!({}))]);
        assert_eq!(
            ghost_removal(&l).unwrap()[1],
            json!({"op": "replace", "path": "/metadata/managedFields", "value": [{}]})
        );
    }
}
