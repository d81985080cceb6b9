//! Deployments, StatefulSets, DaemonSets and the ReplicaSet -> Deployment map.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kerf_api::WorkloadKind;
use kerf_api::vecmap::VecMap;
use serde::Deserialize;

use super::pods::{OwnerRef, controller_owner};
use super::types::{
    Change, ChangeSet, Interner, TemplateContainer, WorkloadKey, template_containers,
};
use super::wire::{ContainerWire, slim_meta, time, wire_resource};

macro_rules! workload_wire {
    ($name:ident, $full:ty, $kind:expr) => {
        /// The wire form of a workload of one kind.
        #[derive(Clone, Debug, Default, Deserialize)]
        #[serde(default)]
        pub struct $name {
            /// Metadata without managedFields.
            #[serde(deserialize_with = "slim_meta")]
            pub metadata: ObjectMeta,
            spec: WorkloadSpecWire,
            status: WorkloadStatusWire,
        }
        wire_resource!($name, $full);

        impl $name {
            /// Converts into the slim form.
            pub fn into_info(self, interner: &mut Interner) -> WorkloadInfo {
                WorkloadInfo::from_parts($kind, self.metadata, self.spec, self.status, interner)
            }
        }
    };
}
workload_wire!(DeploymentWire, Deployment, WorkloadKind::Deployment);
workload_wire!(StatefulSetWire, StatefulSet, WorkloadKind::StatefulSet);
workload_wire!(DaemonSetWire, DaemonSet, WorkloadKind::DaemonSet);

/// Spec fields of the three kinds together: each kind fills the ones it has.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WorkloadSpecWire {
    replicas: Option<i32>,
    strategy: Option<StrategyWire>,
    update_strategy: Option<StrategyWire>,
    template: TemplateWire,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct StrategyWire {
    #[serde(rename = "type")]
    type_: Option<String>,
    rolling_update: Option<RollingWire>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RollingWire {
    max_surge: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
    partition: Option<i32>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct TemplateWire {
    metadata: TemplateMetaWire,
    spec: TemplateSpecWire,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct TemplateMetaWire {
    labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct TemplateSpecWire {
    containers: Vec<ContainerWire>,
    init_containers: Vec<ContainerWire>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WorkloadStatusWire {
    observed_generation: Option<i64>,
    replicas: Option<i32>,
    updated_replicas: Option<i32>,
    ready_replicas: Option<i32>,
    available_replicas: Option<i32>,
    current_revision: Option<String>,
    update_revision: Option<String>,
    desired_number_scheduled: Option<i32>,
    updated_number_scheduled: Option<i32>,
    number_ready: Option<i32>,
    number_available: Option<i32>,
    conditions: Vec<WorkloadCondition>,
}

/// A workload status condition (`Progressing`, `Available`, `ReplicaFailure`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WorkloadCondition {
    /// Type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Reason (`ProgressDeadlineExceeded`, `NewReplicaSetAvailable`, ...).
    pub reason: Option<String>,
    /// Message.
    pub message: Option<String>,
    /// Last transition.
    pub last_transition_time: Option<DateTime<Utc>>,
}

/// How the workload's controller replaces pods.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UpdateStrategy {
    /// `RollingUpdate`, `Recreate` or `OnDelete`; `None` means the API default
    /// (`RollingUpdate`).
    pub type_: Option<String>,
    /// maxSurge as written.
    pub max_surge: Option<IntOrString>,
    /// maxUnavailable as written.
    pub max_unavailable: Option<IntOrString>,
    /// StatefulSet partition.
    pub partition: Option<i32>,
}

/// The status fields of the three kinds together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadStatus {
    /// observedGeneration.
    pub observed_generation: Option<i64>,
    /// replicas.
    pub replicas: Option<i32>,
    /// updatedReplicas.
    pub updated_replicas: Option<i32>,
    /// readyReplicas.
    pub ready_replicas: Option<i32>,
    /// availableReplicas.
    pub available_replicas: Option<i32>,
    /// StatefulSet currentRevision.
    pub current_revision: Option<String>,
    /// StatefulSet updateRevision.
    pub update_revision: Option<String>,
    /// DaemonSet desiredNumberScheduled.
    pub desired_number_scheduled: Option<i32>,
    /// DaemonSet updatedNumberScheduled.
    pub updated_number_scheduled: Option<i32>,
    /// DaemonSet numberReady.
    pub number_ready: Option<i32>,
    /// DaemonSet numberAvailable.
    pub number_available: Option<i32>,
    /// Progressing, Available and ReplicaFailure conditions.
    pub conditions: Vec<WorkloadCondition>,
}

/// The fields of a workload that decisions and the executor read.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadInfo {
    /// Namespace, kind and name.
    pub key: WorkloadKey,
    /// UID.
    pub uid: String,
    /// resourceVersion.
    pub resource_version: String,
    /// metadata.generation.
    pub generation: Option<i64>,
    /// Creation time.
    pub created: Option<DateTime<Utc>>,
    /// Labels.
    pub labels: VecMap<String, String>,
    /// Annotations, without kubectl's last-applied copy.
    pub annotations: VecMap<String, String>,
    /// spec.replicas (absent for DaemonSets).
    pub replicas: Option<i32>,
    /// strategy (Deployment) or updateStrategy (StatefulSet, DaemonSet).
    pub strategy: UpdateStrategy,
    /// Labels of the pod template.
    pub template_labels: VecMap<String, String>,
    /// Containers and restartable init containers of the pod template.
    pub containers: Vec<Arc<TemplateContainer>>,
    /// Status.
    pub status: WorkloadStatus,
}

const KEPT_CONDITIONS: [&str; 3] = ["Progressing", "Available", "ReplicaFailure"];

/// The conditions a pass reads, with no room beyond them: the wire list grew by doubling as
/// it was decoded, and a filter collected from it would keep its buffer.
fn kept_conditions(conditions: Vec<WorkloadCondition>) -> Vec<WorkloadCondition> {
    let mut kept: Vec<WorkloadCondition> = conditions
        .into_iter()
        .filter(|c| KEPT_CONDITIONS.contains(&c.type_.as_str()))
        .collect();
    kept.shrink_to_fit();
    kept
}

impl WorkloadInfo {
    fn from_parts(
        kind: WorkloadKind,
        m: ObjectMeta,
        spec: WorkloadSpecWire,
        st: WorkloadStatusWire,
        interner: &mut Interner,
    ) -> WorkloadInfo {
        let strategy = spec.strategy.or(spec.update_strategy).unwrap_or_default();
        let rolling = strategy.rolling_update.unwrap_or_default();
        WorkloadInfo {
            key: WorkloadKey {
                namespace: interner.intern(m.namespace.as_deref().unwrap_or_default()),
                kind,
                name: interner.intern(m.name.as_deref().unwrap_or_default()),
            },
            uid: m.uid.unwrap_or_default(),
            resource_version: m.resource_version.unwrap_or_default(),
            generation: m.generation,
            created: time(m.creation_timestamp.as_ref()),
            labels: m.labels.unwrap_or_default().into(),
            annotations: m.annotations.unwrap_or_default().into(),
            replicas: spec.replicas,
            strategy: UpdateStrategy {
                type_: strategy.type_,
                max_surge: rolling.max_surge,
                max_unavailable: rolling.max_unavailable,
                partition: rolling.partition,
            },
            template_labels: spec.template.metadata.labels.into(),
            containers: template_containers(
                spec.template.spec.containers,
                spec.template.spec.init_containers,
                interner,
            ),
            status: WorkloadStatus {
                observed_generation: st.observed_generation,
                replicas: st.replicas,
                updated_replicas: st.updated_replicas,
                ready_replicas: st.ready_replicas,
                available_replicas: st.available_replicas,
                current_revision: st.current_revision,
                update_revision: st.update_revision,
                desired_number_scheduled: st.desired_number_scheduled,
                updated_number_scheduled: st.updated_number_scheduled,
                number_ready: st.number_ready,
                number_available: st.number_available,
                conditions: kept_conditions(st.conditions),
            },
        }
    }

    /// A condition by type.
    pub fn condition(&self, type_: &str) -> Option<&WorkloadCondition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// Workloads of the three kinds by key.
#[derive(Debug, Default)]
pub struct WorkloadIndex {
    items: BTreeMap<WorkloadKey, Arc<WorkloadInfo>>,
}

impl WorkloadIndex {
    /// Adds or replaces a workload.
    pub fn upsert(&mut self, w: WorkloadInfo, changes: &mut ChangeSet) {
        changes.insert(Change::Workload(w.key.clone()));
        self.items.insert(w.key.clone(), Arc::new(w));
    }

    /// Removes a workload.
    pub fn remove(&mut self, key: &WorkloadKey, changes: &mut ChangeSet) {
        if self.items.remove(key).is_some() {
            changes.insert(Change::Workload(key.clone()));
        }
    }

    /// Replaces every workload of `kind` (after a relist of that kind).
    pub fn replace_kind(
        &mut self,
        kind: WorkloadKind,
        items: Vec<WorkloadInfo>,
        changes: &mut ChangeSet,
    ) {
        let old: Vec<WorkloadKey> = self
            .items
            .keys()
            .filter(|k| k.kind == kind)
            .cloned()
            .collect();
        for k in old {
            self.remove(&k, changes);
        }
        for w in items {
            self.upsert(w, changes);
        }
    }

    /// Replaces the workloads of `kind` in `namespace` (after a relist of that kind in that
    /// namespace alone); the workloads of other namespaces and kinds stay.
    pub fn replace_kind_in(
        &mut self,
        kind: WorkloadKind,
        namespace: &str,
        items: Vec<WorkloadInfo>,
        changes: &mut ChangeSet,
    ) {
        let old: Vec<WorkloadKey> = self
            .items
            .keys()
            .filter(|k| k.kind == kind && *k.namespace == *namespace)
            .cloned()
            .collect();
        for k in old {
            self.remove(&k, changes);
        }
        for w in items {
            self.upsert(w, changes);
        }
    }

    /// One workload.
    pub fn get(&self, key: &WorkloadKey) -> Option<Arc<WorkloadInfo>> {
        self.items.get(key).cloned()
    }

    /// Every workload, in key order.
    pub fn all(&self) -> Vec<Arc<WorkloadInfo>> {
        self.items.values().cloned().collect()
    }

    /// Number of workloads.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when no workload is cached.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// A ReplicaSet as the watch decodes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ReplicaSetWire {
    /// Metadata without managedFields.
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
}
wire_resource!(ReplicaSetWire, ReplicaSet);

/// What the agent keeps of a ReplicaSet: its owning Deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaSetInfo {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// Controlling owner (a Deployment, usually).
    pub owner: Option<OwnerRef>,
    /// The `pod-template-hash` label.
    pub pod_template_hash: Option<String>,
    /// The `deployment.kubernetes.io/revision` annotation.
    pub revision: Option<String>,
}

impl ReplicaSetInfo {
    /// Converts the wire form.
    pub fn from_wire(w: ReplicaSetWire, interner: &mut Interner) -> ReplicaSetInfo {
        let m = w.metadata;
        ReplicaSetInfo {
            namespace: interner.intern(m.namespace.as_deref().unwrap_or_default()),
            name: interner.intern(m.name.as_deref().unwrap_or_default()),
            owner: controller_owner(&m, interner),
            pod_template_hash: m
                .labels
                .as_ref()
                .and_then(|l| l.get("pod-template-hash").cloned()),
            revision: m
                .annotations
                .as_ref()
                .and_then(|a| a.get("deployment.kubernetes.io/revision").cloned()),
        }
    }

    fn deployment(&self) -> Option<&Arc<str>> {
        self.owner
            .as_ref()
            .filter(|o| &*o.kind == "Deployment")
            .map(|o| &o.name)
    }
}

/// Namespace and name.
type NsName = (Arc<str>, Arc<str>);

/// ReplicaSets by namespace and name, and by owning Deployment (their names sorted: a
/// Deployment has one or a few, and a one-entry B-tree set would take a whole node of
/// eleven slots).
#[derive(Debug, Default)]
pub struct ReplicaSetIndex {
    items: HashMap<NsName, Arc<ReplicaSetInfo>>,
    by_deployment: HashMap<NsName, Vec<Arc<str>>>,
}

impl ReplicaSetIndex {
    /// Adds or replaces a ReplicaSet.
    pub fn upsert(&mut self, rs: ReplicaSetInfo, changes: &mut ChangeSet) {
        self.remove(&rs.namespace.clone(), &rs.name.clone(), changes);
        if let Some(d) = rs.deployment() {
            changes.insert(Change::Workload(WorkloadKey {
                namespace: rs.namespace.clone(),
                kind: WorkloadKind::Deployment,
                name: d.clone(),
            }));
            let names = self
                .by_deployment
                .entry((rs.namespace.clone(), d.clone()))
                .or_default();
            if let Err(i) = names.binary_search(&rs.name) {
                names.insert(i, rs.name.clone());
            }
        }
        self.items
            .insert((rs.namespace.clone(), rs.name.clone()), Arc::new(rs));
    }

    /// Removes a ReplicaSet.
    pub fn remove(&mut self, namespace: &Arc<str>, name: &Arc<str>, changes: &mut ChangeSet) {
        let Some(old) = self.items.remove(&(namespace.clone(), name.clone())) else {
            return;
        };
        if let Some(d) = old.deployment() {
            changes.insert(Change::Workload(WorkloadKey {
                namespace: namespace.clone(),
                kind: WorkloadKind::Deployment,
                name: d.clone(),
            }));
            let k = (namespace.clone(), d.clone());
            if let Some(set) = self.by_deployment.get_mut(&k) {
                set.retain(|n| n != name);
                if set.is_empty() {
                    self.by_deployment.remove(&k);
                }
            }
        }
    }

    /// Replaces every ReplicaSet (after a relist).
    pub fn replace(&mut self, items: Vec<ReplicaSetInfo>, changes: &mut ChangeSet) {
        let old: Vec<_> = self.items.keys().cloned().collect();
        for (ns, name) in old {
            self.remove(&ns, &name, changes);
        }
        for rs in items {
            self.upsert(rs, changes);
        }
    }

    /// Replaces the ReplicaSets of `namespace` (after a relist of that namespace alone);
    /// the ReplicaSets of other namespaces stay.
    pub fn replace_in(
        &mut self,
        namespace: &str,
        items: Vec<ReplicaSetInfo>,
        changes: &mut ChangeSet,
    ) {
        let old: Vec<_> = self
            .items
            .keys()
            .filter(|(ns, _)| **ns == *namespace)
            .cloned()
            .collect();
        for (ns, name) in old {
            self.remove(&ns, &name, changes);
        }
        for rs in items {
            self.upsert(rs, changes);
        }
    }

    /// The Deployment that owns ReplicaSet `name` (what the webhook needs).
    pub fn deployment_of(&self, namespace: &str, name: &str) -> Option<Arc<str>> {
        self.items
            .get(&(Arc::from(namespace), Arc::from(name)))
            .and_then(|rs| rs.deployment().cloned())
    }

    /// One ReplicaSet.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ReplicaSetInfo>> {
        self.items
            .get(&(Arc::from(namespace), Arc::from(name)))
            .cloned()
    }

    /// The ReplicaSets a Deployment owns, by name.
    pub fn of_deployment(&self, namespace: &str, deployment: &str) -> Vec<Arc<ReplicaSetInfo>> {
        let ns: Arc<str> = namespace.into();
        self.by_deployment
            .get(&(ns.clone(), Arc::from(deployment)))
            .into_iter()
            .flatten()
            .filter_map(|n| self.items.get(&(ns.clone(), n.clone())).cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(name: &str, sidecar_cpu: &str) -> DeploymentWire {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "a", "uid": format!("uid-{name}"),
                "resourceVersion": "1"},
            "spec": {"replicas": 2, "template": {"spec": {
                "containers": [{"name": "app", "image": format!("registry/{name}:1"),
                    "resources": {"requests": {"cpu": "100m"}}}],
                "initContainers": [{"name": "proxy", "image": "registry/proxy:1",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": sidecar_cpu}}}]}}},
            "status": {"conditions": [
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Paused", "status": "False"}]},
        }))
        .expect("deployment")
    }

    #[test]
    fn workloads_that_run_the_same_container_hold_it_once_and_keep_no_spare_room() {
        let mut interner = Interner::default();
        let web = deployment("web", "50m").into_info(&mut interner);
        let api = deployment("api", "50m").into_info(&mut interner);
        let batch = deployment("batch", "80m").into_info(&mut interner);
        let names = |w: &WorkloadInfo| -> Vec<(String, bool)> {
            w.containers
                .iter()
                .map(|c| (c.name.to_string(), c.sidecar))
                .collect()
        };
        assert_eq!(names(&web), [("app".into(), false), ("proxy".into(), true)]);
        // The lists keep no room beyond what they hold.
        assert_eq!(web.containers.capacity(), web.containers.len());
        let kept: Vec<&str> = web
            .status
            .conditions
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(kept, ["Progressing", "Available"]);
        assert_eq!(web.status.conditions.capacity(), 2);
        // The sidecar is the same container in web and api: one copy.
        assert!(Arc::ptr_eq(&web.containers[1], &api.containers[1]));
        // Each app container runs its own image: apart.
        assert!(!Arc::ptr_eq(&web.containers[0], &api.containers[0]));
        assert_eq!(api.containers[0].image.as_deref(), Some("registry/api:1"));
        // A sidecar with other requests is another container.
        assert!(!Arc::ptr_eq(&web.containers[1], &batch.containers[1]));
        assert_eq!(interner.count::<TemplateContainer>(), 5);
        drop((web, api, batch));
        interner.prune();
        assert_eq!(interner.count::<TemplateContainer>(), 0);
    }

    fn replica_set(name: &str, deployment: &str) -> ReplicaSetInfo {
        let wire: ReplicaSetWire = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "a", "uid": format!("uid-{name}"),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": deployment, "uid": format!("uid-{deployment}"),
                    "controller": true}]},
        }))
        .expect("replica set");
        ReplicaSetInfo::from_wire(wire, &mut Interner::default())
    }

    #[test]
    fn a_deployments_replica_sets_are_found_by_name_in_order_until_removed() {
        let mut index = ReplicaSetIndex::default();
        let mut changes = ChangeSet::new();
        for (rs, d) in [
            ("web-b", "web"),
            ("web-a", "web"),
            ("api-a", "api"),
            ("web-b", "web"),
        ] {
            index.upsert(replica_set(rs, d), &mut changes);
        }
        let names = |index: &ReplicaSetIndex, d: &str| -> Vec<String> {
            index
                .of_deployment("a", d)
                .iter()
                .map(|rs| rs.name.to_string())
                .collect()
        };
        assert_eq!(names(&index, "web"), ["web-a", "web-b"]);
        assert_eq!(names(&index, "api"), ["api-a"]);
        assert!(changes.contains(&Change::Workload(WorkloadKey::new(
            "a",
            WorkloadKind::Deployment,
            "web"
        ))));
        index.remove(&"a".into(), &"web-a".into(), &mut changes);
        assert_eq!(names(&index, "web"), ["web-b"]);
        index.remove(&"a".into(), &"web-b".into(), &mut changes);
        assert!(names(&index, "web").is_empty());
        assert!(
            !index
                .by_deployment
                .contains_key(&("a".into(), "web".into()))
        );
    }
}
