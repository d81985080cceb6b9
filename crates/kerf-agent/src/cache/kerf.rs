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

fn strip_meta(obj: &mut DynamicObject) {
    obj.metadata.managed_fields = None;
    if let Some(a) = obj.metadata.annotations.as_mut() {
        a.remove(super::wire::LAST_APPLIED_ANNOTATION);
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
