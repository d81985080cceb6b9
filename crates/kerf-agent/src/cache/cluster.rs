//! HPAs, PDBs, nodes and namespaces.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kerf_api::vecmap::VecMap;
use kerf_api::{Quantity, WorkloadKind};
use serde::Deserialize;

use super::by_workload::{ByWorkload, workload_item};
use super::types::{Change, ChangeSet, Interner, WorkloadKey};
use super::wire::{slim_meta, wire_resource};

/// An HPA as the watch decodes it (autoscaling/v2).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct HpaWire {
    /// Metadata without managedFields.
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    spec: HpaSpecWire,
}
wire_resource!(HpaWire, HorizontalPodAutoscaler);

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct HpaSpecWire {
    scale_target_ref: TargetRefWire,
    min_replicas: Option<i32>,
    max_replicas: Option<i32>,
    metrics: Vec<MetricWire>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct TargetRefWire {
    kind: String,
    name: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MetricWire {
    #[serde(rename = "type")]
    type_: String,
    resource: Option<MetricSourceWire>,
    container_resource: Option<MetricSourceWire>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MetricSourceWire {
    name: String,
    container: Option<String>,
    target: MetricTargetWire,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MetricTargetWire {
    #[serde(rename = "type")]
    type_: String,
    average_utilization: Option<i32>,
    average_value: Option<Quantity>,
    value: Option<Quantity>,
}

/// A `Resource` or `ContainerResource` metric of an HPA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HpaResourceMetric {
    /// Position in `spec.metrics` (for a JSON patch path).
    pub index: usize,
    /// The container of a `ContainerResource` metric; `None` for `Resource`.
    pub container: Option<String>,
    /// `cpu`, `memory` or another resource name.
    pub resource: String,
    /// `Utilization`, `AverageValue` or `Value`.
    pub target_type: String,
    /// Target utilization in percent.
    pub average_utilization: Option<i32>,
    /// Target average value.
    pub average_value: Option<Quantity>,
    /// Target value.
    pub value: Option<Quantity>,
}

/// The fields of an HPA that HPA coordination reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HpaInfo {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: String,
    /// resourceVersion.
    pub resource_version: String,
    /// The scaled workload, if it is a kind Kerf manages.
    pub target: Option<WorkloadKey>,
    /// minReplicas.
    pub min_replicas: Option<i32>,
    /// maxReplicas.
    pub max_replicas: Option<i32>,
    /// Resource and ContainerResource metrics; other metrics are left out.
    pub resource_metrics: Vec<HpaResourceMetric>,
}

impl HpaInfo {
    /// Converts the wire form.
    pub fn from_wire(w: HpaWire, interner: &mut Interner) -> HpaInfo {
        let ns = interner.intern(w.metadata.namespace.as_deref().unwrap_or_default());
        let t = &w.spec.scale_target_ref;
        let target = WorkloadKind::parse(&t.kind).map(|kind| WorkloadKey {
            namespace: ns.clone(),
            kind,
            name: interner.intern(&t.name),
        });
        let mut resource_metrics: Vec<HpaResourceMetric> = w
            .spec
            .metrics
            .into_iter()
            .enumerate()
            .filter_map(|(index, m)| {
                let src = match m.type_.as_str() {
                    "Resource" => m.resource,
                    "ContainerResource" => m.container_resource,
                    _ => None,
                }?;
                Some(HpaResourceMetric {
                    index,
                    container: src.container,
                    resource: src.name,
                    target_type: src.target.type_,
                    average_utilization: src.target.average_utilization,
                    average_value: src.target.average_value,
                    value: src.target.value,
                })
            })
            .collect();
        // Collected in place from the wire list: without the rest of its room.
        resource_metrics.shrink_to_fit();
        HpaInfo {
            namespace: ns,
            name: w.metadata.name.unwrap_or_default(),
            resource_version: w.metadata.resource_version.unwrap_or_default(),
            target,
            min_replicas: w.spec.min_replicas,
            max_replicas: w.spec.max_replicas,
            resource_metrics,
        }
    }
}

/// HPAs by namespace and name, and by target workload.
pub type HpaIndex = ByWorkload<HpaInfo>;

workload_item!(HpaInfo, target);

/// A PDB as the watch decodes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct PdbWire {
    /// Metadata without managedFields.
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    spec: PdbSpecWire,
    status: PdbStatusWire,
}
wire_resource!(PdbWire, PodDisruptionBudget);

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PdbSpecWire {
    selector: Option<LabelSelector>,
    min_available: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PdbStatusWire {
    disruptions_allowed: i32,
    current_healthy: i32,
    desired_healthy: i32,
    expected_pods: i32,
}

/// The fields of a PDB that single-replica safety and evictions read.
#[derive(Clone, Debug, PartialEq)]
pub struct PdbInfo {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: String,
    /// Pod selector (`None` selects nothing).
    pub selector: Option<LabelSelector>,
    /// minAvailable.
    pub min_available: Option<IntOrString>,
    /// maxUnavailable.
    pub max_unavailable: Option<IntOrString>,
    /// status.disruptionsAllowed.
    pub disruptions_allowed: i32,
    /// status.currentHealthy.
    pub current_healthy: i32,
    /// status.desiredHealthy.
    pub desired_healthy: i32,
    /// status.expectedPods.
    pub expected_pods: i32,
}

impl PdbInfo {
    /// Converts the wire form.
    pub fn from_wire(w: PdbWire, interner: &mut Interner) -> PdbInfo {
        PdbInfo {
            namespace: interner.intern(w.metadata.namespace.as_deref().unwrap_or_default()),
            name: w.metadata.name.unwrap_or_default(),
            selector: w.spec.selector,
            min_available: w.spec.min_available,
            max_unavailable: w.spec.max_unavailable,
            disruptions_allowed: w.status.disruptions_allowed,
            current_healthy: w.status.current_healthy,
            desired_healthy: w.status.desired_healthy,
            expected_pods: w.status.expected_pods,
        }
    }
}

/// PDBs by namespace.
#[derive(Debug, Default)]
pub struct PdbIndex {
    by_namespace: HashMap<Arc<str>, BTreeMap<String, Arc<PdbInfo>>>,
}

impl PdbIndex {
    /// Adds or replaces a PDB.
    pub fn upsert(&mut self, p: PdbInfo, changes: &mut ChangeSet) {
        changes.insert(Change::Namespace(p.namespace.clone()));
        self.by_namespace
            .entry(p.namespace.clone())
            .or_default()
            .insert(p.name.clone(), Arc::new(p));
    }

    /// Removes a PDB.
    pub fn remove(&mut self, namespace: &Arc<str>, name: &str, changes: &mut ChangeSet) {
        if let Some(m) = self.by_namespace.get_mut(namespace)
            && m.remove(name).is_some()
        {
            changes.insert(Change::Namespace(namespace.clone()));
            if m.is_empty() {
                self.by_namespace.remove(namespace);
            }
        }
    }

    /// Replaces every PDB (after a relist).
    pub fn replace(&mut self, items: Vec<PdbInfo>, changes: &mut ChangeSet) {
        for ns in std::mem::take(&mut self.by_namespace).into_keys() {
            changes.insert(Change::Namespace(ns));
        }
        for p in items {
            self.upsert(p, changes);
        }
    }

    /// Replaces the PDBs of `namespace` (after a relist of that namespace alone); the PDBs
    /// of other namespaces stay.
    pub fn replace_in(&mut self, namespace: &str, items: Vec<PdbInfo>, changes: &mut ChangeSet) {
        if let Some((ns, _)) = self.by_namespace.remove_entry(namespace) {
            changes.insert(Change::Namespace(ns));
        }
        for p in items {
            self.upsert(p, changes);
        }
    }

    /// The PDBs of a namespace, by name.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<PdbInfo>> {
        self.by_namespace
            .get(namespace)
            .into_iter()
            .flat_map(|m| m.values().cloned())
            .collect()
    }
}

/// A node as the watch decodes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct NodeWire {
    /// Metadata without managedFields.
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    spec: NodeSpecWire,
    status: NodeStatusWire,
}
wire_resource!(NodeWire, Node);

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct NodeSpecWire {
    unschedulable: bool,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct NodeStatusWire {
    allocatable: kerf_api::ResourceValues,
    node_info: NodeSystemInfoWire,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct NodeSystemInfoWire {
    swap: Option<SwapWire>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct SwapWire {
    capacity: Option<i64>,
}

/// The fields of a node that the in-place rules read: its name, and the rest as a
/// [`NodeShape`] that the nodes agreeing on it share, read through `Deref`. 24 bytes, held
/// as such in [`NodeIndex`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// Name, interned with the node names of the pod watches: the pods on the node hold the
    /// same one (`PodInfo::node_name`).
    pub name: Arc<str>,
    /// The rest, shared with the nodes that have the same.
    shape: Arc<NodeShape>,
}

/// What the nodes of a pool have in common: their labels but the hostname (zone,
/// architecture, OS, instance type), their allocatable resources, swap, and whether they
/// take pods. Where the scope leaves few pods but the cluster has thousands of nodes, a
/// vector of labels for each node was most of the node cache (docs/benchmarks.md, "jemalloc
/// and a smaller binary"); a cordoned node or a swap node has a shape of its own.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeShape {
    /// Swap is on: `status.nodeInfo.swap.capacity` above 0, as the kubelet (and kerf-sim on
    /// its swap nodes) reports it. No label counts.
    pub swap: bool,
    /// spec.unschedulable.
    pub unschedulable: bool,
    /// Labels sorted by key, keys and values interned, without `kubernetes.io/hostname`
    /// when it is the node's name ([`NodeInfo::labels`] gives them all).
    labels: VecMap<Arc<str>, Arc<str>>,
    /// `kubernetes.io/hostname` is the node's name, and left out of `labels`.
    hostname_is_name: bool,
    /// Allocatable CPU.
    pub allocatable_cpu: Option<Quantity>,
    /// Allocatable memory.
    pub allocatable_memory: Option<Quantity>,
}

impl std::ops::Deref for NodeInfo {
    type Target = NodeShape;

    fn deref(&self) -> &NodeShape {
        &self.shape
    }
}

/// The label the kubelet sets to the node's hostname, usually its name.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

impl NodeInfo {
    /// Converts the wire form.
    pub fn from_wire(w: NodeWire, interner: &mut Interner) -> NodeInfo {
        let name = w.metadata.name.unwrap_or_default();
        let mut labels = w.metadata.labels.unwrap_or_default();
        let hostname_is_name = labels.get(HOSTNAME_LABEL) == Some(&name);
        if hostname_is_name {
            labels.remove(HOSTNAME_LABEL);
        }
        let labels = labels
            .into_iter()
            .map(|(k, v)| (interner.intern(&k), interner.intern(&v)))
            .collect();
        let swap = w
            .status
            .node_info
            .swap
            .and_then(|s| s.capacity)
            .is_some_and(|c| c > 0);
        let shape = NodeShape {
            swap,
            unschedulable: w.spec.unschedulable,
            labels,
            hostname_is_name,
            allocatable_cpu: w.status.allocatable.cpu,
            allocatable_memory: w.status.allocatable.memory,
        };
        NodeInfo {
            name: interner.intern_node_name(&name),
            shape: interner.share(shape),
        }
    }

    /// Every label of the node, sorted by key.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        let hostname = self
            .hostname_is_name
            .then_some((HOSTNAME_LABEL, &*self.name));
        let mut rest = self
            .shape
            .labels
            .iter()
            .map(|(k, v)| (&**k, &**v))
            .peekable();
        let mut hostname = hostname.into_iter().peekable();
        std::iter::from_fn(move || match (rest.peek(), hostname.peek()) {
            (Some(r), Some(h)) if r.0 < h.0 => rest.next(),
            (_, Some(_)) => hostname.next(),
            _ => rest.next(),
        })
    }
}

/// A namespace as the watch decodes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct NamespaceWire {
    /// Metadata without managedFields.
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
}
wire_resource!(NamespaceWire, Namespace);

/// A namespace's labels (for policy `namespaceSelector`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceInfo {
    /// Name.
    pub name: Arc<str>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

impl NamespaceInfo {
    /// Converts the wire form.
    pub fn from_wire(w: NamespaceWire, interner: &mut Interner) -> NamespaceInfo {
        NamespaceInfo {
            name: interner.intern(w.metadata.name.as_deref().unwrap_or_default()),
            labels: w.metadata.labels.unwrap_or_default(),
        }
    }
}

/// Whether an update leaves everything a pass reads of an object as it was (a status
/// heartbeat, a new resourceVersion, the agent's own status write): such an update is
/// stored without a change notification.
pub trait SameForPasses {
    /// True when `new` differs from `self` only in fields no pass reads.
    fn same_for_passes(&self, new: &Self) -> bool;
}

impl SameForPasses for NodeInfo {
    fn same_for_passes(&self, new: &Self) -> bool {
        self == new
    }
}

impl SameForPasses for NamespaceInfo {
    fn same_for_passes(&self, new: &Self) -> bool {
        self == new
    }
}

/// Cluster-scoped objects by name. Any change counts as [`Change::All`] for nodes;
/// a namespace change is [`Change::Namespace`]. An update that is the same for passes
/// ([`SameForPasses`]) counts as no change.
#[derive(Debug)]
pub struct NamedIndex<T> {
    items: BTreeMap<Arc<str>, Arc<T>>,
    scope: fn(&str) -> Change,
}

impl<T: SameForPasses> NamedIndex<T> {
    /// An index whose changes are reported by `scope` from the object's name.
    pub fn new(scope: fn(&str) -> Change) -> Self {
        NamedIndex {
            items: BTreeMap::new(),
            scope,
        }
    }

    /// Adds or replaces an object.
    pub fn upsert(&mut self, name: Arc<str>, item: T, changes: &mut ChangeSet) {
        let same = self
            .items
            .get(&name)
            .is_some_and(|old| old.same_for_passes(&item));
        if !same {
            changes.insert((self.scope)(&name));
        }
        self.items.insert(name, Arc::new(item));
    }

    /// Removes an object.
    pub fn remove(&mut self, name: &str, changes: &mut ChangeSet) {
        if self.items.remove(name).is_some() {
            changes.insert((self.scope)(name));
        }
    }

    /// Replaces every object (after a relist).
    pub fn replace(&mut self, items: Vec<(Arc<str>, T)>, changes: &mut ChangeSet) {
        let kept: std::collections::BTreeSet<Arc<str>> =
            items.iter().map(|(n, _)| n.clone()).collect();
        let gone: Vec<Arc<str>> = self
            .items
            .keys()
            .filter(|n| !kept.contains(*n))
            .cloned()
            .collect();
        for name in gone {
            self.remove(&name, changes);
        }
        for (name, item) in items {
            self.upsert(name, item, changes);
        }
    }

    /// One object.
    pub fn get(&self, name: &str) -> Option<Arc<T>> {
        self.items.get(name).cloned()
    }

    /// Every object, by name.
    pub fn all(&self) -> Vec<Arc<T>> {
        self.items.values().cloned().collect()
    }
}

/// The nodes by name, held by value in one sorted vector: 32 bytes each, their names shared
/// with their pods, where a map of shared records took about 120 (docs/benchmarks.md,
/// "Packed records"). A node
/// is read when a pass gathers the facts of a workload's pods, and a node watch event
/// comes seldom; any change of a node is [`Change::All`].
#[derive(Debug, Default)]
pub struct NodeIndex {
    nodes: Vec<NodeInfo>,
}

impl NodeIndex {
    fn find(&self, name: &str) -> Result<usize, usize> {
        self.nodes.binary_search_by(|n| (*n.name).cmp(name))
    }

    /// Adds or replaces a node.
    pub fn upsert(&mut self, node: NodeInfo, changes: &mut ChangeSet) {
        match self.find(&node.name) {
            Ok(i) => {
                if !self.nodes[i].same_for_passes(&node) {
                    changes.insert(Change::All);
                }
                self.nodes[i] = node;
            }
            Err(i) => {
                changes.insert(Change::All);
                self.nodes.insert(i, node);
            }
        }
    }

    /// Removes a node.
    pub fn remove(&mut self, name: &str, changes: &mut ChangeSet) {
        if let Ok(i) = self.find(name) {
            self.nodes.remove(i);
            changes.insert(Change::All);
            crate::room::shrink_sparse(&mut self.nodes);
        }
    }

    /// Replaces every node (after a relist); a name listed twice keeps its last.
    pub fn replace(&mut self, mut nodes: Vec<NodeInfo>, changes: &mut ChangeSet) {
        // Stable: of a name listed twice, the last comes last, and is the one kept.
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        nodes.reverse();
        nodes.dedup_by(|a, b| a.name == b.name);
        nodes.reverse();
        let same = nodes.len() == self.nodes.len()
            && nodes
                .iter()
                .zip(&self.nodes)
                .all(|(new, old)| new.name == old.name && old.same_for_passes(new));
        if !same {
            changes.insert(Change::All);
        }
        nodes.shrink_to_fit();
        self.nodes = nodes;
    }

    /// One node.
    pub fn get(&self, name: &str) -> Option<NodeInfo> {
        self.find(name).ok().map(|i| self.nodes[i].clone())
    }

    /// How many nodes it holds.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// Reports every node change as [`Change::All`].
pub fn node_scope(_: &str) -> Change {
    Change::All
}

/// Reports a namespace change as [`Change::Namespace`].
pub fn namespace_scope(name: &str) -> Change {
    Change::Namespace(name.into())
}
