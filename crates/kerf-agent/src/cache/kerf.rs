//! RightsizingPolicies and RightsizingRecommendations. Both are watched as `DynamicObject`
//! and converted one object at a time (design D3): a malformed object never stops the
//! watch; it is kept with its conversion error so the reconciler can set `Valid=False`
//! naming the field.

use std::collections::BTreeMap;
use std::sync::Arc;

use kerf_api::wellknown::{LABEL_WORKLOAD_KIND, LABEL_WORKLOAD_NAME};
use kerf_api::{RightsizingPolicy, RightsizingRecommendation, WorkloadKind};
use kube::api::DynamicObject;
use serde::de::DeserializeOwned;

use super::by_workload::{ByWorkload, workload_item};
use super::types::{Interner, WorkloadKey};

/// Why an object did not convert to its typed form.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConversionError {
    /// Path of the offending field (`spec.guardrails.cooldown`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// Converts one part (`spec`, `status`) of a dynamic object, naming the field on error.
fn convert_part<T: DeserializeOwned>(
    data: &mut serde_json::Value,
    part: &str,
) -> Result<Option<T>, ConversionError> {
    let Some(v) = data.get_mut(part).map(serde_json::Value::take) else {
        return Ok(None);
    };
    serde_path_to_error::deserialize(v).map(Some).map_err(|e| {
        let path = e.path().to_string();
        ConversionError {
            field: if path == "." {
                part.to_owned()
            } else {
                format!("{part}.{path}")
            },
            message: e.into_inner().to_string(),
        }
    })
}

/// Leaves out of a watched object's metadata what the cache does not keep (managedFields,
/// kubectl's last-applied copy) and the room its lists grew into while they were decoded
/// (a JSON list's length is not known before its end).
fn strip_meta(obj: &mut DynamicObject) {
    let m = &mut obj.metadata;
    m.managed_fields = None;
    if let Some(a) = m.annotations.as_mut() {
        a.remove(super::wire::LAST_APPLIED_ANNOTATION);
    }
    if let Some(o) = m.owner_references.as_mut() {
        o.shrink_to_fit();
    }
    if let Some(f) = m.finalizers.as_mut() {
        f.shrink_to_fit();
    }
}

/// A RightsizingPolicy as cached.
#[derive(Clone, Debug)]
pub struct PolicyEntry {
    /// Name.
    pub name: Arc<str>,
    /// metadata.generation.
    pub generation: Option<i64>,
    /// resourceVersion.
    pub resource_version: String,
    /// The typed policy, or why it did not convert.
    pub policy: Result<RightsizingPolicy, ConversionError>,
}

impl PolicyEntry {
    /// Converts a watched object.
    pub fn from_dynamic(mut obj: DynamicObject, interner: &mut Interner) -> PolicyEntry {
        strip_meta(&mut obj);
        let name = interner.intern(obj.metadata.name.as_deref().unwrap_or_default());
        let spec = convert_part(&mut obj.data, "spec").and_then(|s| {
            s.ok_or_else(|| ConversionError {
                field: "spec".into(),
                message: "missing".into(),
            })
        });
        let policy = spec.and_then(|spec| {
            let status = convert_part(&mut obj.data, "status")?;
            Ok(RightsizingPolicy {
                metadata: obj.metadata.clone(),
                spec,
                status,
            })
        });
        PolicyEntry {
            name,
            generation: obj.metadata.generation,
            resource_version: obj.metadata.resource_version.clone().unwrap_or_default(),
            policy,
        }
    }
}

type PolicyRead<'a> = (
    &'a Option<BTreeMap<String, String>>,
    &'a Option<BTreeMap<String, String>>,
    &'a kerf_api::policy::RightsizingPolicySpec,
);

/// What passes read of a policy: its labels, annotations and spec, or its conversion error.
fn read_by_passes(e: &PolicyEntry) -> Result<PolicyRead<'_>, &ConversionError> {
    e.policy
        .as_ref()
        .map(|p| (&p.metadata.labels, &p.metadata.annotations, &p.spec))
}

impl super::cluster::SameForPasses for PolicyEntry {
    /// Passes read a policy's name, labels and spec (or its conversion error), never its
    /// status: the agent's own status writes change nothing for them.
    fn same_for_passes(&self, new: &Self) -> bool {
        self.name == new.name && read_by_passes(self) == read_by_passes(new)
    }
}

/// A RightsizingRecommendation as cached.
#[derive(Clone, Debug)]
pub struct RsrEntry {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: String,
    /// metadata.generation.
    pub generation: Option<i64>,
    /// resourceVersion (the precondition of intent writes, design D25).
    pub resource_version: String,
    /// The workload, from the labels of design D4 (or `spec.workloadRef` without them).
    pub workload: Option<WorkloadKey>,
    /// The typed rsr, or why it did not convert.
    pub rsr: Result<RightsizingRecommendation, ConversionError>,
}

impl RsrEntry {
    /// Converts a watched object. The cached metadata leaves out the labels: the workload
    /// they name is `workload`, and nothing else reads them from the cache (each label map
    /// is a B-tree node of about 540 bytes, for every rsr).
    pub fn from_dynamic(mut obj: DynamicObject, interner: &mut Interner) -> RsrEntry {
        strip_meta(&mut obj);
        let namespace = interner.intern(obj.metadata.namespace.as_deref().unwrap_or_default());
        let labels = obj.metadata.labels.take().unwrap_or_default();
        let name = obj.metadata.name.clone().unwrap_or_default();
        let generation = obj.metadata.generation;
        let resource_version = obj.metadata.resource_version.clone().unwrap_or_default();
        let rsr = convert_part(&mut obj.data, "spec")
            .and_then(|s| {
                s.ok_or_else(|| ConversionError {
                    field: "spec".into(),
                    message: "missing".into(),
                })
            })
            .and_then(|spec| {
                let status = convert_part(&mut obj.data, "status")?;
                Ok(RightsizingRecommendation {
                    metadata: std::mem::take(&mut obj.metadata),
                    spec,
                    status,
                })
            });
        let workload = workload_from_labels(&labels)
            .or_else(|| {
                let r = &rsr.as_ref().ok()?.spec.workload_ref;
                Some((r.kind, r.name.clone()))
            })
            .map(|(kind, name)| WorkloadKey {
                namespace: namespace.clone(),
                kind,
                name: interner.intern(&name),
            });
        RsrEntry {
            name,
            generation,
            resource_version,
            namespace,
            workload,
            rsr,
        }
    }
}

fn workload_from_labels(labels: &BTreeMap<String, String>) -> Option<(WorkloadKind, String)> {
    let kind = WorkloadKind::parse(labels.get(LABEL_WORKLOAD_KIND)?)?;
    Some((kind, labels.get(LABEL_WORKLOAD_NAME)?.clone()))
}

/// rsrs by namespace and name, and by workload (design D4).
pub type RsrIndex = ByWorkload<RsrEntry>;

workload_item!(RsrEntry, workload);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_rsr_keeps_its_owner_without_the_room_its_decoding_grew_into() {
        // Decoded from text as a watch decodes it: a list's room doubles as it is read.
        let text = serde_json::json!({
            "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingRecommendation",
            "metadata": {"name": "deployment-web", "namespace": "shop", "uid": "u1",
                "resourceVersion": "7",
                "labels": {LABEL_WORKLOAD_KIND: "Deployment", LABEL_WORKLOAD_NAME: "web"},
                "finalizers": ["kerf.getkerf.dev/release"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": "web", "uid": "w1"}]},
            "spec": {"workloadRef": {"kind": "Deployment", "name": "web"},
                "recommendationID": "r1", "containers": []},
        })
        .to_string();
        let obj: DynamicObject = serde_json::from_str(&text).expect("rsr");
        let entry = RsrEntry::from_dynamic(obj, &mut Interner::default());
        let rsr = entry.rsr.expect("converts");
        let owners = rsr.metadata.owner_references.expect("owner kept");
        assert_eq!(owners[0].name, "web");
        assert_eq!(owners.capacity(), 1);
        assert_eq!(rsr.metadata.finalizers.expect("kept").capacity(), 1);
        assert_eq!(entry.workload.expect("workload").name.as_ref(), "web");
    }
}
