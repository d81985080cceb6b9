//! Wire forms: serde structs that decode a watched object straight into the few fields the
//! agent reads. Every other field of the JSON (managedFields, most of the spec and status)
//! is skipped while decoding and never allocated.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kerf_api::ResourceValues;
use serde::{Deserialize, Deserializer};

/// The annotation `kubectl apply` writes: a full copy of the object, never kept.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The metadata fields the agent reads. `managedFields` is not among them.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MetaWire {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerWire>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct OwnerWire {
    api_version: String,
    kind: String,
    name: String,
    uid: String,
    controller: Option<bool>,
}

/// Decodes `metadata` without `managedFields` and without the last-applied annotation.
pub fn slim_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = MetaWire::deserialize(d)?;
    let annotations = m.annotations.map(|mut a| {
        a.remove(LAST_APPLIED_ANNOTATION);
        a
    });
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        generation: m.generation,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        labels: m.labels,
        annotations,
        owner_references: m.owner_references.map(|o| {
            o.into_iter()
                .map(|o| OwnerReference {
                    api_version: o.api_version,
                    kind: o.kind,
                    name: o.name,
                    uid: o.uid,
                    controller: o.controller,
                    block_owner_deletion: None,
                })
                .collect()
        }),
        ..ObjectMeta::default()
    })
}

/// Implements `kube::Resource` for a wire struct with a `metadata: ObjectMeta` field,
/// taking the API coordinates from the matching k8s-openapi type.
macro_rules! wire_resource {
    ($wire:ty, $full:ty) => {
        impl kube::Resource for $wire {
            type DynamicType = ();
            type Scope = <$full as k8s_openapi::Resource>::Scope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as k8s_openapi::Resource>::KIND.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as k8s_openapi::Resource>::GROUP.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as k8s_openapi::Resource>::VERSION.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as k8s_openapi::Resource>::URL_PATH_SEGMENT.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use wire_resource;

/// Requests and limits of a container, CPU and memory only.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ResourcesWire {
    /// Requests.
    pub requests: ResourceValues,
    /// Limits.
    pub limits: ResourceValues,
}

/// One entry of a container's `resizePolicy`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResizePolicyWire {
    /// `cpu` or `memory`.
    pub resource_name: String,
    /// `NotRequired` or `RestartContainer`.
    pub restart_policy: String,
}

/// A literal environment variable; `valueFrom` is never read (design D7).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct EnvWire {
    /// Name.
    pub name: String,
    /// Literal value; absent for `valueFrom`.
    pub value: Option<String>,
}

/// A container as a pod spec or pod template holds it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerWire {
    /// Name.
    pub name: String,
    /// Image.
    pub image: Option<String>,
    /// Command.
    pub command: Vec<String>,
    /// Args.
    pub args: Vec<String>,
    /// Environment.
    pub env: Vec<EnvWire>,
    /// Requests and limits.
    pub resources: ResourcesWire,
    /// Resize policy.
    pub resize_policy: Vec<ResizePolicyWire>,
    /// `Always` on an init container makes it a sidecar.
    pub restart_policy: Option<String>,
}

/// A `metav1.Time` as chrono, dropping the wrapper.
pub fn time(t: Option<&Time>) -> Option<DateTime<Utc>> {
    t.and_then(|t| {
        let nanos = u32::try_from(t.0.subsec_nanosecond()).unwrap_or(0);
        DateTime::from_timestamp(t.0.as_second(), nanos)
    })
}
