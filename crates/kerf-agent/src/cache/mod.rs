//! Slim in-memory caches fed by watches.
//!
//! Every watched kind is decoded straight into a wire struct holding only the fields
//! decisions read (never a whole k8s-openapi object, never `managedFields`), converted to
//! a slim form with shared strings, and kept in an index: pods by owner, ReplicaSets by
//! Deployment, rsrs by workload (design D4), HPAs by target, PDBs by namespace. Each
//! update reports which workloads it touched on a broadcast channel for the reconciler.

mod backoff;
pub mod by_workload;
pub mod cluster;
pub mod kerf;
pub mod metrics;
pub mod pods;
mod relist;
mod sinks;
pub mod types;
pub mod wire;
pub mod workloads;

use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kerf_api::WorkloadKind;
use tokio::sync::{broadcast, watch};

pub use backoff::watch_backoff;
pub use cluster::{HpaInfo, NamespaceInfo, NodeInfo, PdbInfo};
pub use kerf::{ConversionError, PolicyEntry, RsrEntry};
pub use pods::{PodContainer, PodInfo, PodPhase};
pub use types::{Change, ChangeSet, Interner, NodeNames, WorkloadKey};
pub use workloads::{ReplicaSetInfo, WorkloadInfo};

use cluster::{HpaIndex, NamedIndex, NodeIndex, PdbIndex, namespace_scope, node_scope};
use kerf::RsrIndex;
use pods::PodIndex;
use workloads::{ReplicaSetIndex, WorkloadIndex};

/// Names of the watches; the caches count as synced once each has listed once.
pub const WATCHES: [&str; 11] = [
    "pods",
    "replicasets",
    "deployments",
    "statefulsets",
    "daemonsets",
    "horizontalpodautoscalers",
    "poddisruptionbudgets",
    "nodes",
    "namespaces",
    "rightsizingpolicies",
    "rightsizingrecommendations",
];

/// Capacity of the change channel; a receiver that falls further behind gets `Lagged`
/// and should treat it as [`Change::All`].
pub const CHANGE_CHANNEL_CAPACITY: usize = 4096;

/// A lock that shrugs off poisoning: the indexes stay consistent between statements.
#[derive(Debug, Default)]
pub struct Locked<T>(RwLock<T>);

impl<T> Locked<T> {
    fn new(v: T) -> Self {
        Locked(RwLock::new(v))
    }

    /// Reads the index.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes the index.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Debug)]
struct Inner {
    pods: Locked<PodIndex>,
    replicasets: Locked<ReplicaSetIndex>,
    workloads: Locked<WorkloadIndex>,
    hpas: Locked<HpaIndex>,
    pdbs: Locked<PdbIndex>,
    nodes: Locked<NodeIndex>,
    namespaces: Locked<NamedIndex<NamespaceInfo>>,
    policies: Locked<NamedIndex<PolicyEntry>>,
    rsrs: Locked<RsrIndex>,
    /// The node names the watches' interners share.
    node_names: types::NodeNames,
    changes: broadcast::Sender<Change>,
    synced: watch::Sender<BTreeSet<&'static str>>,
}

/// The caches of the agent: cheap to clone, shared by every component.
#[derive(Clone, Debug)]
pub struct CacheSet {
    inner: Arc<Inner>,
}

impl Default for CacheSet {
    fn default() -> Self {
        CacheSet::new()
    }
}

impl CacheSet {
    /// Empty caches, not synced. [`CacheSet::start`] feeds them from watches; tests fill
    /// them through the `apply_*` methods.
    pub fn new() -> CacheSet {
        CacheSet {
            inner: Arc::new(Inner {
                pods: Locked::default(),
                replicasets: Locked::default(),
                workloads: Locked::default(),
                hpas: Locked::default(),
                pdbs: Locked::default(),
                nodes: Locked::default(),
                namespaces: Locked::new(NamedIndex::new(namespace_scope)),
                policies: Locked::new(NamedIndex::new(node_scope)),
                rsrs: Locked::default(),
                node_names: types::NodeNames::default(),
                changes: broadcast::channel(CHANGE_CHANNEL_CAPACITY).0,
                synced: watch::channel(BTreeSet::new()).0,
            }),
        }
    }

    /// Starts the watches of [`WATCHES`] on `client`; each runs until the runtime stops
    /// and resumes by itself after errors. With `namespaces` empty each kind has one watch
    /// over the cluster. Otherwise the namespaced kinds (pods, ReplicaSets, workloads,
    /// HPAs, PDBs, rsrs) have one watch per namespace listed, and none in other
    /// namespaces; nodes, namespaces and RightsizingPolicies are cluster-scoped and still
    /// watched over the cluster. A kind counts as synced once every one of its watches
    /// has listed. The scope's selectors narrow no watch: a workload that loses the
    /// workload selector's label must stay cached to be wound down, pods and ReplicaSets
    /// do not carry their workload's labels, and a namespace may match the namespace
    /// selector after any relabelling.
    pub fn start(
        &self,
        client: kube::Client,
        metrics: metrics::CacheMetrics,
        namespaces: &[String],
    ) -> tokio::task::JoinSet<()> {
        sinks::start_all(self, client, metrics, namespaces)
    }

    /// Subscribes to change notifications.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.inner.changes.subscribe()
    }

    /// Records that watch `name` has listed once.
    pub fn mark_synced(&self, name: &'static str) {
        self.inner.synced.send_if_modified(|s| s.insert(name));
    }

    /// Whether every watch has listed once.
    pub fn is_synced(&self) -> bool {
        WATCHES
            .iter()
            .all(|w| self.inner.synced.borrow().contains(w))
    }

    /// Waits until every watch has listed once.
    pub async fn wait_synced(&self) {
        let mut rx = self.inner.synced.subscribe();
        // The sender lives as long as `self`, so this cannot fail while we hold it.
        let _ = rx.wait_for(|s| WATCHES.iter().all(|w| s.contains(w))).await;
    }

    pub(crate) fn publish(&self, changes: ChangeSet) {
        for c in changes {
            // No receiver is fine: nobody is reconciling yet.
            let _ = self.inner.changes.send(c);
        }
    }

    fn update<T>(&self, lock: &Locked<T>, f: impl FnOnce(&mut T, &mut ChangeSet)) {
        let mut changes = ChangeSet::new();
        f(&mut lock.write(), &mut changes);
        self.publish(changes);
    }

    // ---- writes (watches, tests) ------------------------------------------------------

    /// Adds or replaces a pod.
    pub fn apply_pod(&self, p: PodInfo) {
        self.update(&self.inner.pods, |i, c| i.upsert(p, c));
    }

    /// Removes a pod.
    pub fn delete_pod(&self, namespace: &str, name: &str) {
        self.update(&self.inner.pods, |i, c| i.remove(namespace, name, c));
    }

    /// Adds or replaces a ReplicaSet.
    pub fn apply_replicaset(&self, rs: ReplicaSetInfo) {
        self.update(&self.inner.replicasets, |i, c| i.upsert(rs, c));
    }

    /// Adds or replaces a workload.
    pub fn apply_workload(&self, w: WorkloadInfo) {
        self.update(&self.inner.workloads, |i, c| i.upsert(w, c));
    }

    /// Removes a workload.
    pub fn delete_workload(&self, key: &WorkloadKey) {
        self.update(&self.inner.workloads, |i, c| i.remove(key, c));
    }

    /// Adds or replaces an HPA.
    pub fn apply_hpa(&self, h: HpaInfo) {
        self.update(&self.inner.hpas, |i, c| i.upsert(h, c));
    }

    /// Adds or replaces a PDB.
    pub fn apply_pdb(&self, p: PdbInfo) {
        self.update(&self.inner.pdbs, |i, c| i.upsert(p, c));
    }

    /// Adds or replaces a node.
    pub fn apply_node(&self, n: NodeInfo) {
        self.update(&self.inner.nodes, |i, c| i.upsert(n, c));
    }

    /// Adds or replaces a namespace.
    pub fn apply_namespace(&self, n: NamespaceInfo) {
        self.update(&self.inner.namespaces, |i, c| {
            i.upsert(n.name.clone(), n, c)
        });
    }

    /// Adds or replaces a policy.
    pub fn apply_policy(&self, p: PolicyEntry) {
        self.update(&self.inner.policies, |i, c| i.upsert(p.name.clone(), p, c));
    }

    /// Adds or replaces an rsr.
    pub fn apply_rsr(&self, r: RsrEntry) {
        self.update(&self.inner.rsrs, |i, c| i.upsert(r, c));
    }

    /// Removes an rsr.
    pub fn delete_rsr(&self, namespace: &str, name: &str) {
        self.update(&self.inner.rsrs, |i, c| {
            i.remove(&namespace.into(), name, c)
        });
    }

    // ---- reads ------------------------------------------------------------------------

    /// One workload.
    pub fn workload(&self, key: &WorkloadKey) -> Option<Arc<WorkloadInfo>> {
        self.inner.workloads.read().get(key)
    }

    /// Every workload, in key order.
    pub fn workloads(&self) -> Vec<Arc<WorkloadInfo>> {
        self.inner.workloads.read().all()
    }

    /// The number of cached workloads.
    pub fn workload_count(&self) -> usize {
        self.inner.workloads.read().len()
    }

    /// The pods of a workload: for a Deployment, the pods of every ReplicaSet it owns.
    pub fn pods_of(&self, key: &WorkloadKey) -> Vec<Arc<PodInfo>> {
        let pods = self.inner.pods.read();
        match key.kind {
            WorkloadKind::Deployment => {
                let sets = self
                    .inner
                    .replicasets
                    .read()
                    .of_deployment(&key.namespace, &key.name);
                sets.iter()
                    .flat_map(|rs| pods.owned_by(&key.namespace, "ReplicaSet", &rs.name))
                    .collect()
            }
            kind => pods.owned_by(&key.namespace, kind.as_str(), &key.name),
        }
    }

    /// One pod.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        self.inner.pods.read().get(namespace, name)
    }

    /// The Deployment owning ReplicaSet `name` (the webhook's owner lookup).
    pub fn deployment_of_replicaset(&self, namespace: &str, name: &str) -> Option<Arc<str>> {
        self.inner.replicasets.read().deployment_of(namespace, name)
    }

    /// The ReplicaSets of a Deployment.
    pub fn replicasets_of(&self, namespace: &str, deployment: &str) -> Vec<Arc<ReplicaSetInfo>> {
        self.inner
            .replicasets
            .read()
            .of_deployment(namespace, deployment)
    }

    /// The HPAs scaling a workload.
    pub fn hpas_for(&self, key: &WorkloadKey) -> Vec<Arc<HpaInfo>> {
        self.inner.hpas.read().for_workload(key)
    }

    /// The PDBs of a namespace.
    pub fn pdbs_in(&self, namespace: &str) -> Vec<Arc<PdbInfo>> {
        self.inner.pdbs.read().in_namespace(namespace)
    }

    /// The node names the watches' interners share ([`NodeNames`]).
    pub fn node_names(&self) -> &NodeNames {
        &self.inner.node_names
    }

    /// One node.
    pub fn node(&self, name: &str) -> Option<NodeInfo> {
        self.inner.nodes.read().get(name)
    }

    /// One namespace.
    pub fn namespace(&self, name: &str) -> Option<Arc<NamespaceInfo>> {
        self.inner.namespaces.read().get(name)
    }

    /// Every policy, by name (converted or not).
    pub fn policies(&self) -> Vec<Arc<PolicyEntry>> {
        self.inner.policies.read().all()
    }

    /// The rsrs of a workload (normally one).
    pub fn rsrs_for(&self, key: &WorkloadKey) -> Vec<Arc<RsrEntry>> {
        self.inner.rsrs.read().for_workload(key)
    }

    /// The rsr `namespace/name`.
    pub fn rsr(&self, namespace: &str, name: &str) -> Option<Arc<RsrEntry>> {
        self.inner.rsrs.read().get(namespace, name)
    }

    /// Every rsr.
    pub fn rsrs(&self) -> Vec<Arc<RsrEntry>> {
        self.inner.rsrs.read().all()
    }
}
