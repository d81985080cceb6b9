//! Pods: the slim form and the index by controlling owner.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kerf_api::{ResourceRequirements, ResourceValues, WorkloadKind};
use serde::Deserialize;

use super::types::{Change, ChangeSet, Interner, ResizePolicy, Stamp, Uid, Version, WorkloadKey};
use super::wire::{ResizePolicyWire, ResourcesWire, slim_meta, time, wire_resource};

/// A pod as the watch decodes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct PodWire {
    /// Metadata without managedFields.
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    spec: PodSpecWire,
    status: PodStatusWire,
}
wire_resource!(PodWire, Pod);

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PodSpecWire {
    node_name: Option<String>,
    containers: Vec<PodContainerWire>,
    init_containers: Vec<PodContainerWire>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PodContainerWire {
    name: String,
    resources: ResourcesWire,
    resize_policy: Vec<ResizePolicyWire>,
    restart_policy: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PodStatusWire {
    phase: Option<String>,
    qos_class: Option<String>,
    conditions: Vec<PodConditionWire>,
    container_statuses: Vec<ContainerStatusWire>,
    init_container_statuses: Vec<ContainerStatusWire>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PodConditionWire {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    reason: Option<String>,
    message: Option<String>,
    last_transition_time: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ContainerStatusWire {
    name: String,
    ready: bool,
    restart_count: u32,
    resources: Option<ResourcesWire>,
    last_state: LastStateWire,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct LastStateWire {
    terminated: Option<TerminatedWire>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct TerminatedWire {
    reason: Option<String>,
    /// Kept as text: a malformed time reads as unknown instead of failing the pod.
    finished_at: Option<String>,
}

/// The controlling owner of a pod or ReplicaSet.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerRef {
    /// Kind (`ReplicaSet`, `StatefulSet`, `DaemonSet`, ...).
    pub kind: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// UID (interned: the pods of one owner share it).
    pub uid: Arc<str>,
}

/// The label the Deployment controller puts on the pods of a ReplicaSet.
pub const LABEL_POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The label the StatefulSet and DaemonSet controllers put on a pod: its revision.
pub const LABEL_CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";

/// A pod resize condition (`PodResizePending`, `PodResizeInProgress`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResizeCondition {
    /// Reason (`Infeasible`, `Deferred`, `Error`), if any.
    pub reason: Option<String>,
    /// Message.
    pub message: Option<String>,
    /// When the condition last changed.
    pub since: Option<DateTime<Utc>>,
}

/// What a pod's container is given in its spec. The pods of one template have the same, so
/// the cache keeps one copy for all of them ([`Interner::share`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ContainerSpec {
    /// Name.
    pub name: Arc<str>,
    /// True for a restartable init container (sidecar).
    pub sidecar: bool,
    /// Spec requests.
    pub requests: ResourceValues,
    /// Spec limits.
    pub limits: ResourceValues,
    /// Resize policy.
    pub resize_policy: ResizePolicy,
}

/// A pod's container: its spec (shared, read through `Deref`) and its status.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodContainer {
    /// The spec, shared with the pods that have the same.
    spec: Arc<ContainerSpec>,
    /// The resources the kubelet reports as actuated (`status.containerStatuses[].resources`):
    /// read them with [`PodContainer::status_resources`].
    actuated: Actuated,
    /// Restart count.
    pub restart_count: u32,
    /// Ready.
    pub ready: bool,
    /// `lastState.terminated.reason` (`OOMKilled`, `Error`, ...), interned.
    pub last_terminated_reason: Option<Arc<str>>,
    /// `lastState.terminated.finishedAt`: when the last termination happened, if known.
    pub last_terminated_at: Option<DateTime<Utc>>,
}

impl std::ops::Deref for PodContainer {
    type Target = ContainerSpec;

    fn deref(&self) -> &ContainerSpec {
        &self.spec
    }
}

/// What the kubelet reports as actuated for a container. Once a resize settled it equals
/// the spec, so that case keeps no copy (the cache's cost per pod, docs/benchmarks.md).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Actuated {
    /// `status.containerStatuses[].resources` absent.
    Unreported,
    /// Equal to the container's spec requests and limits.
    AsSpec,
    /// Other values (a resize not yet actuated).
    Other(Box<ResourceRequirements>),
}

impl Actuated {
    fn new(reported: Option<ResourceRequirements>, spec: &PodContainerWire) -> Actuated {
        match reported {
            None => Actuated::Unreported,
            Some(r)
                if r.requests == spec.resources.requests && r.limits == spec.resources.limits =>
            {
                Actuated::AsSpec
            }
            Some(r) => Actuated::Other(Box::new(r)),
        }
    }
}

impl PodContainer {
    /// The resources the kubelet reports as actuated (`status.containerStatuses[].resources`),
    /// `None` when it reports none.
    pub fn status_resources(&self) -> Option<Cow<'_, ResourceRequirements>> {
        match &self.actuated {
            Actuated::Unreported => None,
            Actuated::AsSpec => Some(Cow::Owned(ResourceRequirements {
                requests: self.requests.clone(),
                limits: self.limits.clone(),
            })),
            Actuated::Other(r) => Some(Cow::Borrowed(r)),
        }
    }
}

/// Pod phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PodPhase {
    /// Pending.
    Pending,
    /// Running.
    Running,
    /// Succeeded.
    Succeeded,
    /// Failed.
    Failed,
    /// Unknown or absent.
    #[default]
    Unknown,
}

impl PodPhase {
    fn parse(s: Option<&str>) -> PodPhase {
        match s {
            Some("Pending") => PodPhase::Pending,
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            _ => PodPhase::Unknown,
        }
    }
}

/// The fields of a pod that decisions, the executor and the health watch read: what is the
/// pod's own (its name, UID, node, times), and the rest as a [`PodShape`] that the pods
/// agreeing on it share, read through `Deref`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodInfo {
    /// Name.
    pub name: Box<str>,
    /// UID.
    pub uid: Uid,
    /// resourceVersion.
    pub resource_version: Version,
    /// Node.
    pub node_name: Option<Arc<str>>,
    /// Last transition of the Ready condition ([`PodInfo::ready_since`]).
    ready_since: Stamp,
    /// Creation time ([`PodInfo::created`]).
    created: Stamp,
    /// The rest, shared with the pods that have the same.
    shape: Arc<PodShape>,
}

/// What the pods of a workload usually have in common: their template's containers, their
/// owner, their phase and readiness, and each container's restarts, last termination and
/// actuated resources. A running workload whose pods agree keeps one (docs/benchmarks.md,
/// "Cache cost per pod"); a pod that differs (a restart, a resize under way) has its own.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodShape {
    /// Namespace.
    pub namespace: Arc<str>,
    /// The `pod-template-hash` label (interned: the pods of a ReplicaSet share it). No
    /// other label is kept: passes read none.
    pub template_hash: Option<Arc<str>>,
    /// The `controller-revision-hash` label (interned).
    pub revision_hash: Option<Arc<str>>,
    /// Controlling owner.
    pub owner: Option<Arc<OwnerRef>>,
    /// Phase.
    pub phase: PodPhase,
    /// QoS class (`Guaranteed`, `Burstable`, `BestEffort`).
    pub qos_class: Option<Arc<str>>,
    /// Ready condition is True.
    pub ready: bool,
    /// Set while the pod terminates.
    pub deletion_timestamp: Option<DateTime<Utc>>,
    /// `PodResizePending`, if present (boxed: most pods have none).
    pub resize_pending: Option<Box<ResizeCondition>>,
    /// `PodResizeInProgress`, if present (boxed).
    pub resize_in_progress: Option<Box<ResizeCondition>>,
    /// Containers, then restartable init containers.
    pub containers: Box<[PodContainer]>,
}

impl std::ops::Deref for PodInfo {
    type Target = PodShape;

    fn deref(&self) -> &PodShape {
        &self.shape
    }
}

impl PodInfo {
    /// Last transition of the Ready condition.
    pub fn ready_since(&self) -> Option<DateTime<Utc>> {
        self.ready_since.get()
    }

    /// Creation time.
    pub fn created(&self) -> Option<DateTime<Utc>> {
        self.created.get()
    }

    /// The names of the restartable init containers (sidecars), for
    /// [`crate::executor::resize::resize_body`].
    pub fn sidecars(&self) -> Vec<&str> {
        self.containers
            .iter()
            .filter(|c| c.sidecar)
            .map(|c| &*c.name)
            .collect()
    }

    /// The requests and limits of each container's spec, by container name.
    pub fn spec_resources(&self) -> Vec<(String, ResourceRequirements)> {
        self.containers
            .iter()
            .map(|c| {
                let r = ResourceRequirements {
                    requests: c.requests.clone(),
                    limits: c.limits.clone(),
                };
                (c.name.to_string(), r)
            })
            .collect()
    }

    /// Converts the wire form.
    pub fn from_wire(w: PodWire, interner: &mut Interner) -> PodInfo {
        let m = w.metadata;
        let cond = |t: &str| w.status.conditions.iter().find(|c| c.type_ == t);
        let resize = |t: &str| {
            cond(t).filter(|c| c.status == "True").map(|c| {
                Box::new(ResizeCondition {
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    since: c.last_transition_time,
                })
            })
        };
        let ready_cond = cond("Ready");
        let mut containers = Vec::with_capacity(w.spec.containers.len());
        for (c, sidecar) in w.spec.containers.iter().map(|c| (c, false)).chain(
            w.spec
                .init_containers
                .iter()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"))
                .map(|c| (c, true)),
        ) {
            let statuses = if sidecar {
                &w.status.init_container_statuses
            } else {
                &w.status.container_statuses
            };
            containers.push(pod_container(c, sidecar, statuses, interner));
        }
        let shape = PodShape {
            namespace: interner.intern(m.namespace.as_deref().unwrap_or_default()),
            owner: controller_owner(&m, interner).map(|o| interner.share(o)),
            phase: PodPhase::parse(w.status.phase.as_deref()),
            qos_class: w.status.qos_class.as_deref().map(|q| interner.intern(q)),
            ready: ready_cond.is_some_and(|c| c.status == "True"),
            deletion_timestamp: time(m.deletion_timestamp.as_ref()),
            resize_pending: resize(kerf_api::wellknown::POD_CONDITION_RESIZE_PENDING),
            resize_in_progress: resize(kerf_api::wellknown::POD_CONDITION_RESIZE_IN_PROGRESS),
            template_hash: label(&m, LABEL_POD_TEMPLATE_HASH, interner),
            revision_hash: label(&m, LABEL_CONTROLLER_REVISION_HASH, interner),
            containers: containers.into_boxed_slice(),
        };
        PodInfo {
            name: m.name.as_deref().unwrap_or_default().into(),
            uid: Uid::new(m.uid.as_deref().unwrap_or_default()),
            resource_version: Version::new(m.resource_version.as_deref().unwrap_or_default()),
            node_name: w
                .spec
                .node_name
                .as_deref()
                .map(|n| interner.intern_node_name(n)),
            ready_since: Stamp::new(ready_cond.and_then(|c| c.last_transition_time)),
            created: Stamp::new(time(m.creation_timestamp.as_ref())),
            shape: interner.share(shape),
        }
    }

    /// The workload this pod belongs to, as far as the pod alone tells: a ReplicaSet
    /// owner is read as Deployment `<rs name minus -<pod-template-hash>>`, the name the
    /// Deployment controller gives its ReplicaSets.
    pub fn workload_hint(&self) -> Option<WorkloadKey> {
        let owner = self.owner.as_ref()?;
        let (kind, name) = match &*owner.kind {
            "ReplicaSet" => {
                let hash = self.template_hash.as_deref()?;
                let name = owner.name.strip_suffix(hash)?.strip_suffix('-')?;
                (WorkloadKind::Deployment, name)
            }
            other => (WorkloadKind::parse(other)?, &*owner.name),
        };
        Some(WorkloadKey::new(&self.namespace, kind, name))
    }
}

/// The label `key` of `m`, interned.
fn label(m: &ObjectMeta, key: &str, interner: &mut Interner) -> Option<Arc<str>> {
    let value = m.labels.as_ref()?.get(key)?;
    Some(interner.intern(value))
}

fn pod_container(
    c: &PodContainerWire,
    sidecar: bool,
    statuses: &[ContainerStatusWire],
    interner: &mut Interner,
) -> PodContainer {
    let status = statuses.iter().find(|s| s.name == c.name);
    let spec = ContainerSpec {
        name: interner.intern(&c.name),
        sidecar,
        requests: c.resources.requests.clone(),
        limits: c.resources.limits.clone(),
        resize_policy: ResizePolicy::from_wire(&c.resize_policy),
    };
    PodContainer {
        spec: interner.share(spec),
        actuated: Actuated::new(
            status
                .and_then(|s| s.resources.as_ref())
                .map(|r| ResourceRequirements {
                    requests: r.requests.clone(),
                    limits: r.limits.clone(),
                }),
            c,
        ),
        restart_count: status.map_or(0, |s| s.restart_count),
        last_terminated_reason: status
            .and_then(|s| s.last_state.terminated.as_ref())
            .and_then(|t| t.reason.as_deref())
            .map(|r| interner.intern(r)),
        last_terminated_at: status
            .and_then(|s| s.last_state.terminated.as_ref())
            .and_then(|t| t.finished_at.as_deref())
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc)),
        ready: status.is_some_and(|s| s.ready),
    }
}

/// The controlling owner reference of an object, interned.
pub fn controller_owner(m: &ObjectMeta, interner: &mut Interner) -> Option<OwnerRef> {
    let owners = m.owner_references.as_deref().unwrap_or_default();
    owners
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| OwnerRef {
            kind: interner.intern(&o.kind),
            name: interner.intern(&o.name),
            uid: interner.intern(&o.uid),
        })
}

type OwnerKey = (Arc<str>, Arc<str>, Arc<str>);

/// Pods by namespace and name, and by controlling owner (namespace, kind, name). Both
/// indexes hold the same shared pods, not copies of their names: the table by name hashes
/// a pod's own namespace and name, the owner index keeps its pods sorted by name.
#[derive(Debug, Default)]
pub struct PodIndex {
    pods: ByName,
    by_owner: HashMap<OwnerKey, Vec<Arc<PodInfo>>>,
}

/// Pods by namespace and name, keyed by the pods' own fields.
#[derive(Debug, Default)]
struct ByName {
    table: HashTable<Arc<PodInfo>>,
    hasher: RandomState,
}

impl ByName {
    fn hash(hasher: &RandomState, namespace: &str, name: &str) -> u64 {
        hasher.hash_one((namespace, name))
    }

    fn get(&self, namespace: &str, name: &str) -> Option<&Arc<PodInfo>> {
        let hash = Self::hash(&self.hasher, namespace, name);
        self.table
            .find(hash, |p| *p.namespace == *namespace && *p.name == *name)
    }

    /// Stores `pod`, returning the pod of its name it replaced.
    fn insert(&mut self, pod: Arc<PodInfo>) -> Option<Arc<PodInfo>> {
        let Self { table, hasher } = self;
        let hash = Self::hash(hasher, &pod.namespace, &pod.name);
        let entry = table.entry(
            hash,
            |p| p.namespace == pod.namespace && p.name == pod.name,
            |p| Self::hash(hasher, &p.namespace, &p.name),
        );
        match entry {
            Entry::Occupied(mut e) => Some(std::mem::replace(e.get_mut(), pod)),
            Entry::Vacant(e) => {
                e.insert(pod);
                None
            }
        }
    }

    fn remove(&mut self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        let hash = Self::hash(&self.hasher, namespace, name);
        let found = self
            .table
            .find_entry(hash, |p| *p.namespace == *namespace && *p.name == *name);
        found.ok().map(|e| e.remove().0)
    }
}

impl PodIndex {
    /// Adds or replaces a pod. An update that changes none of the fields kept (a status
    /// heartbeat, a new resourceVersion alone) is stored without a change notification:
    /// nothing a pass reads moved.
    pub fn upsert(&mut self, pod: PodInfo, changes: &mut ChangeSet) {
        let pod = Arc::new(pod);
        if let Some(old) = self.pods.get(&pod.namespace, &pod.name).cloned() {
            if same_but_version(&old, &pod) {
                self.link(&pod);
                self.pods.insert(pod);
                return;
            }
            self.unlink(&old, changes);
        }
        self.link(&pod);
        note(&pod, changes);
        self.pods.insert(pod);
    }

    /// Removes a pod.
    pub fn remove(&mut self, namespace: &str, name: &str, changes: &mut ChangeSet) {
        if let Some(old) = self.pods.remove(namespace, name) {
            self.unlink(&old, changes);
        }
    }

    /// Replaces every pod (after a relist); only the workloads of pods that came, went or
    /// changed are notified.
    pub fn replace(&mut self, pods: Vec<PodInfo>, changes: &mut ChangeSet) {
        let old = std::mem::take(&mut self.pods);
        self.by_owner.clear();
        self.refill(old, pods, changes);
    }

    /// Replaces the pods of `namespace` (after a relist of that namespace alone); the pods
    /// of other namespaces stay. Only the workloads of pods that came, went or changed are
    /// notified.
    pub fn replace_in(&mut self, namespace: &str, pods: Vec<PodInfo>, changes: &mut ChangeSet) {
        let mut old = ByName::default();
        self.pods.table.retain(|p| {
            let inside = *p.namespace == *namespace;
            if inside {
                old.insert(p.clone());
            }
            !inside
        });
        self.by_owner.retain(|(ns, _, _), _| **ns != *namespace);
        self.refill(old, pods, changes);
    }

    /// Stores `pods` in place of `old`, which the index no longer holds.
    fn refill(&mut self, mut old: ByName, pods: Vec<PodInfo>, changes: &mut ChangeSet) {
        for p in pods {
            match old.remove(&p.namespace, &p.name) {
                Some(before) if same_but_version(&before, &p) => {}
                Some(before) => {
                    note(&before, changes);
                    note(&p, changes);
                }
                None => note(&p, changes),
            }
            let p = Arc::new(p);
            self.link(&p);
            self.pods.insert(p);
        }
        for gone in old.table {
            note(&gone, changes);
        }
    }

    /// Puts `pod` into its owner's list, in the place of the pod of that name if any.
    fn link(&mut self, pod: &Arc<PodInfo>) {
        let Some(o) = &pod.owner else {
            return;
        };
        let list = self
            .by_owner
            .entry((pod.namespace.clone(), o.kind.clone(), o.name.clone()))
            .or_default();
        match list.binary_search_by(|p| p.name.cmp(&pod.name)) {
            Ok(i) => list[i] = pod.clone(),
            Err(i) => list.insert(i, pod.clone()),
        }
    }

    fn unlink(&mut self, old: &PodInfo, changes: &mut ChangeSet) {
        note(old, changes);
        if let Some(o) = &old.owner {
            let k = (old.namespace.clone(), o.kind.clone(), o.name.clone());
            if let Some(list) = self.by_owner.get_mut(&k) {
                list.retain(|p| p.name != old.name);
                if list.is_empty() {
                    self.by_owner.remove(&k);
                }
            }
        }
    }

    /// One pod.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        self.pods.get(namespace, name).cloned()
    }

    /// The pods whose controlling owner is `kind`/`name` in `namespace`, by name.
    pub fn owned_by(&self, namespace: &str, kind: &str, name: &str) -> Vec<Arc<PodInfo>> {
        let key: OwnerKey = (namespace.into(), kind.into(), name.into());
        self.by_owner.get(&key).cloned().unwrap_or_default()
    }

    /// Number of pods.
    pub fn len(&self) -> usize {
        self.pods.table.len()
    }

    /// True when no pod is cached.
    pub fn is_empty(&self) -> bool {
        self.pods.table.is_empty()
    }
}

/// Whether `new` differs from `old` in its resourceVersion at most.
fn same_but_version(old: &PodInfo, new: &PodInfo) -> bool {
    let PodInfo {
        name,
        uid,
        resource_version: _,
        node_name,
        ready_since,
        created,
        shape,
    } = new;
    old.name == *name
        && old.uid == *uid
        && old.node_name == *node_name
        && old.ready_since == *ready_since
        && old.created == *created
        && (Arc::ptr_eq(&old.shape, shape) || old.shape == *shape)
}

fn note(pod: &PodInfo, changes: &mut ChangeSet) {
    if let Some(k) = pod.workload_hint() {
        changes.insert(Change::Workload(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, rv: &str, cpu: &str) -> PodInfo {
        let wire: PodWire = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "a", "uid": format!("uid-{name}"),
                "resourceVersion": rv,
                "labels": {"app": "web", "pod-template-hash": "abc12"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web-abc12", "uid": "rs-uid", "controller": true}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "app",
                "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .expect("pod");
        PodInfo::from_wire(wire, &mut Interner::default())
    }

    fn with_status(resources: Option<serde_json::Value>) -> PodInfo {
        let mut status = serde_json::json!({"name": "app", "ready": true, "restartCount": 0});
        if let Some(r) = resources {
            status["resources"] = r;
        }
        let wire: PodWire = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "a", "uid": "u", "resourceVersion": "1"},
            "spec": {"containers": [{"name": "app", "resources": {
                "requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}}]},
            "status": {"phase": "Running", "containerStatuses": [status]},
        }))
        .expect("pod");
        PodInfo::from_wire(wire, &mut Interner::default())
    }

    #[test]
    fn the_pods_of_one_template_share_their_container_spec_and_owner_until_none_is_left() {
        let wire = |name: &str, cpu: &str| -> PodWire {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "a", "resourceVersion": "1",
                    "uid": "3f2c1d9e-8b7a-4c6d-9e0f-1a2b3c4d5e6f",
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "name": "web-abc12", "uid": "rs-uid", "controller": true}]},
                "spec": {"containers": [{"name": "app",
                    "resources": {"requests": {"cpu": cpu}}}]},
            }))
            .expect("pod")
        };
        let mut interner = Interner::default();
        let a = PodInfo::from_wire(wire("web-abc12-a", "100m"), &mut interner);
        let b = PodInfo::from_wire(wire("web-abc12-b", "100m"), &mut interner);
        let c = PodInfo::from_wire(wire("web-abc12-c", "200m"), &mut interner);
        assert!(Arc::ptr_eq(&a.containers[0].spec, &b.containers[0].spec));
        assert!(!Arc::ptr_eq(&a.containers[0].spec, &c.containers[0].spec));
        assert_eq!(c.containers[0].requests.cpu, Some("200m".into()));
        let (owner_a, owner_c) = (
            a.owner.clone().expect("owner"),
            c.owner.clone().expect("owner"),
        );
        assert!(Arc::ptr_eq(&owner_a, &owner_c));
        assert_eq!(a.uid.to_string(), "3f2c1d9e-8b7a-4c6d-9e0f-1a2b3c4d5e6f");
        let spec = Arc::downgrade(&a.containers[0].spec);
        drop((a, b));
        interner.prune();
        assert!(spec.upgrade().is_none(), "a spec no pod has is forgotten");
        drop((c, owner_a, owner_c));
        interner.prune();
        assert!(interner.is_empty(), "nothing is kept once no pod is");
    }

    #[test]
    fn pods_that_agree_share_one_shape_and_shapes_no_pod_holds_do_not_pile_up() {
        let mut interner = Interner::default();
        let wire = |name: &str, cpu: &str| -> PodWire {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "a", "uid": name},
                "spec": {"nodeName": name, "containers": [{"name": "app",
                    "resources": {"requests": {"cpu": cpu}}}]},
                "status": {"phase": "Running"},
            }))
            .expect("pod")
        };
        let a = PodInfo::from_wire(wire("a", "100m"), &mut interner);
        let b = PodInfo::from_wire(wire("b", "100m"), &mut interner);
        assert!(
            Arc::ptr_eq(&a.shape, &b.shape),
            "own name, uid and node; one shape"
        );
        assert_eq!((&*a.name, b.node_name.as_deref()), ("a", Some("b")));
        // A pod that changes shape at every event, with no relist to prune at.
        let mut most = 0;
        for i in 1..=10_000 {
            let pod = PodInfo::from_wire(wire("c", &format!("{i}m")), &mut interner);
            most = most.max(interner.count::<PodShape>());
            drop(pod);
        }
        assert!(most <= 2 * 1024 + 1, "{most} shapes held at once");
        assert_eq!(a.containers[0].requests.cpu, Some("100m".into()));
        assert!(Arc::ptr_eq(&a.shape, &b.shape));
    }

    #[test]
    fn actuated_resources_read_as_reported_whether_kept_as_the_spec_or_apart() {
        let q = |s: &str| Some(kerf_api::Quantity::from(s));
        let none = with_status(None);
        assert!(none.containers[0].status_resources().is_none());
        let same = with_status(Some(serde_json::json!({
            "requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}})));
        assert_eq!(same.containers[0].actuated, Actuated::AsSpec);
        let got = same.containers[0].status_resources().expect("reported");
        assert_eq!(
            (&got.requests.cpu, &got.limits.memory),
            (&q("100m"), &q("256Mi"))
        );
        let other = with_status(Some(serde_json::json!({
            "requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}})));
        let got = other.containers[0].status_resources().expect("reported");
        assert_eq!(got.requests.cpu, q("50m"));
        assert_eq!(other.containers[0].requests.cpu, q("100m"));
    }

    #[test]
    fn an_update_of_the_resource_version_alone_is_stored_without_a_notification() {
        let mut index = PodIndex::default();
        let mut changes = ChangeSet::new();
        index.upsert(pod("web-abc12-x", "1", "100m"), &mut changes);
        assert_eq!(changes.len(), 1, "a new pod notifies its workload");
        let mut changes = ChangeSet::new();
        index.upsert(pod("web-abc12-x", "2", "100m"), &mut changes);
        assert!(changes.is_empty(), "{changes:?}");
        let owned = index.owned_by("a", "ReplicaSet", "web-abc12");
        assert_eq!(owned.len(), 1);
        assert_eq!(
            owned[0].resource_version.to_string(),
            "2",
            "the owner index holds the newest"
        );
        index.upsert(pod("web-abc12-x", "3", "200m"), &mut changes);
        assert_eq!(changes.len(), 1, "a changed request notifies");
    }

    #[test]
    fn a_relist_notifies_only_pods_that_came_went_or_changed_and_keeps_owners_by_name() {
        let mut index = PodIndex::default();
        // Lists pods b and a at the given resourceVersions, with the same request.
        let relist = |index: &mut PodIndex, versions: [&str; 2]| {
            let mut changes = ChangeSet::new();
            let pods = ["web-abc12-b", "web-abc12-a"]
                .into_iter()
                .zip(versions)
                .map(|(name, version)| pod(name, version, "100m"))
                .collect();
            index.replace(pods, &mut changes);
            changes
        };
        relist(&mut index, ["1", "1"]);
        let mut changes = relist(&mut index, ["5", "6"]);
        assert!(changes.is_empty(), "{changes:?}");
        let names: Vec<String> = index
            .owned_by("a", "ReplicaSet", "web-abc12")
            .iter()
            .map(|p| p.name.to_string())
            .collect();
        assert_eq!(names, ["web-abc12-a", "web-abc12-b"]);
        index.replace(vec![pod("web-abc12-a", "7", "100m")], &mut changes);
        assert_eq!(changes.len(), 1, "the pod that went notifies");
        assert_eq!(index.owned_by("a", "ReplicaSet", "web-abc12").len(), 1);
        assert!(index.get("a", "web-abc12-b").is_none());
    }

    /// A cached pod is one allocation of 112 bytes with its reference counts (jemalloc's
    /// size class; 128 before its name became a `Box<str>` and its two times 8-byte
    /// stamps): 1.6 MB at 100,000 pods.
    #[test]
    fn a_cached_pod_takes_96_bytes_and_keeps_its_times() {
        assert!(
            std::mem::size_of::<PodInfo>() <= 96,
            "{}",
            std::mem::size_of::<PodInfo>()
        );
        let wire: PodWire = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-abc12-x", "namespace": "a", "uid": "u",
                "creationTimestamp": "2026-03-01T10:00:00Z"},
            "spec": {"containers": []},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-03-01T10:00:07.25Z"}]},
        }))
        .expect("pod");
        let p = PodInfo::from_wire(wire, &mut Interner::default());
        assert_eq!(&*p.name, "web-abc12-x");
        let at = |t: &str| Some(DateTime::parse_from_rfc3339(t).expect("time").to_utc());
        assert_eq!(p.created(), at("2026-03-01T10:00:00Z"));
        assert_eq!(p.ready_since(), at("2026-03-01T10:00:07.25Z"));
        let bare: PodWire = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "b"}, "spec": {"containers": []}, "status": {},
        }))
        .expect("pod");
        let p = PodInfo::from_wire(bare, &mut Interner::default());
        assert_eq!((p.created(), p.ready_since()), (None, None));
    }
}
