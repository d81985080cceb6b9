//! The watch loops that feed the indexes.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use kerf_api::{RightsizingPolicy, RightsizingRecommendation, WorkloadKind};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;

use super::CacheSet;
use super::cluster::{HpaInfo, NamespaceInfo, NodeInfo, PdbInfo};
use super::kerf::{PolicyEntry, RsrEntry};
use super::metrics::CacheMetrics;
use super::pods::PodInfo;
use super::relist::relist;
use super::types::{ChangeSet, Interner};
use super::workloads::{ReplicaSetInfo, WorkloadInfo};

/// How one watched kind lands in its index.
struct Ops<W, T> {
    name: &'static str,
    convert: fn(W, &mut Interner) -> T,
    upsert: fn(&CacheSet, T, &mut ChangeSet),
    remove: fn(&CacheSet, T, &mut ChangeSet),
    /// Stores what one watch listed in place of what it had listed before: the whole
    /// index for a watch over the cluster, the entries of its namespace alone for a watch
    /// of one namespace (`Some`).
    replace: fn(&CacheSet, Option<&str>, Vec<T>, &mut ChangeSet),
}

impl<W, T> Clone for Ops<W, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W, T> Copy for Ops<W, T> {}

/// Where one watch loop lists, and how many watches of its kind have not listed yet.
struct Target<W> {
    api: Api<W>,
    /// The namespace watched, `None` for the whole cluster.
    namespace: Option<Arc<str>>,
    unlisted: Unlisted,
}

/// The watches of one kind that have not listed yet, shared by them: the kind counts as
/// synced once the last one lists, so with one watch per namespace every namespace has
/// been listed before the agent acts.
#[derive(Clone, Debug)]
struct Unlisted(Arc<AtomicUsize>);

impl Unlisted {
    /// `watches` watches, none listed.
    fn new(watches: usize) -> Unlisted {
        Unlisted(Arc::new(AtomicUsize::new(watches)))
    }

    /// Records that one of the watches listed for the first time (each calls this once);
    /// true when it was the last of them.
    fn first_listed(&self) -> bool {
        self.0.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

/// Counts a watch loop in `watches_active` while it lives, aborted or not.
struct Active(CacheMetrics);

impl Active {
    fn new(metrics: CacheMetrics) -> Active {
        metrics.watches_active.inc();
        Active(metrics)
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.watches_active.dec();
    }
}

/// Runs one watch until the runtime stops: a listing replaces what the watch listed
/// before (its namespace's part of the index, or the whole index), events update the
/// index, and every update's changes are published.
async fn drive<W, T>(cache: CacheSet, target: Target<W>, ops: Ops<W, T>, metrics: CacheMetrics)
where
    W: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let stream = watcher::watcher(target.api.clone(), watcher::Config::default())
        .backoff(super::backoff::watch_backoff());
    let mut stream = std::pin::pin!(stream);
    let mut interner = Interner::sharing_node_names(cache.node_names());
    let mut buffer: Vec<T> = Vec::new();
    let mut listed = false;
    let _active = Active::new(metrics.clone());
    while let Some(ev) = stream.next().await {
        let mut changes = ChangeSet::new();
        match ev {
            Ok(Event::Init) => buffer.clear(),
            Ok(Event::InitApply(w)) => buffer.push((ops.convert)(w, &mut interner)),
            Ok(Event::InitDone) => {
                let items = std::mem::take(&mut buffer);
                (ops.replace)(&cache, target.namespace.as_deref(), items, &mut changes);
                interner.prune();
                if !std::mem::replace(&mut listed, true) && target.unlisted.first_listed() {
                    cache.mark_synced(ops.name);
                }
                let namespace = target.namespace.as_deref();
                tracing::debug!(watch = ops.name, namespace, "watch listed");
            }
            Ok(Event::Apply(w)) => {
                (ops.upsert)(&cache, (ops.convert)(w, &mut interner), &mut changes)
            }
            Ok(Event::Delete(w)) => {
                (ops.remove)(&cache, (ops.convert)(w, &mut interner), &mut changes)
            }
            Err(e) => {
                metrics.watch_errors.inc();
                tracing::warn!(watch = ops.name, error = %e, "watch failed; retrying");
            }
        }
        cache.publish(changes);
    }
}

/// How the watch of one workload kind lands in the workload index.
fn workload_ops<W>(
    name: &'static str,
    kind: WorkloadKind,
    convert: fn(W, &mut Interner) -> WorkloadInfo,
) -> Ops<W, WorkloadInfo> {
    Ops {
        name,
        convert,
        upsert: |c, w, ch| c.inner.workloads.write().upsert(w, ch),
        remove: |c, w, ch| c.inner.workloads.write().remove(&w.key, ch),
        replace: match kind {
            WorkloadKind::Deployment => {
                |c, ns, v, ch| relist_workloads(c, WorkloadKind::Deployment, ns, v, ch)
            }
            WorkloadKind::StatefulSet => {
                |c, ns, v, ch| relist_workloads(c, WorkloadKind::StatefulSet, ns, v, ch)
            }
            WorkloadKind::DaemonSet => {
                |c, ns, v, ch| relist_workloads(c, WorkloadKind::DaemonSet, ns, v, ch)
            }
        },
    }
}

/// Stores the workloads of `kind` one watch listed: every one of that kind, or those of
/// namespace `ns`.
fn relist_workloads(
    cache: &CacheSet,
    kind: WorkloadKind,
    ns: Option<&str>,
    items: Vec<WorkloadInfo>,
    changes: &mut ChangeSet,
) {
    let mut index = cache.inner.workloads.write();
    match ns {
        Some(ns) => index.replace_kind_in(kind, ns, items, changes),
        None => index.replace_kind(kind, items, changes),
    }
}

/// Starts every watch of [`super::WATCHES`]: the namespaced kinds once per namespace of
/// `namespaces`, or once over the cluster when it is empty; nodes, namespaces and
/// RightsizingPolicies always over the cluster.
pub(super) fn start_all(
    cache: &CacheSet,
    client: Client,
    metrics: CacheMetrics,
    namespaces: &[String],
) -> JoinSet<()> {
    let mut namespaces: Vec<Arc<str>> = namespaces.iter().map(|n| Arc::from(n.as_str())).collect();
    namespaces.sort();
    namespaces.dedup();
    let watches = Watches {
        cache,
        client,
        metrics,
        namespaces,
    };
    let mut set = JoinSet::new();
    watches.pods(&mut set);
    watches.workloads(&mut set);
    watches.cluster(&mut set);
    watches.kerf(&mut set);
    set
}

/// What every watch loop is started with.
struct Watches<'a> {
    cache: &'a CacheSet,
    client: Client,
    metrics: CacheMetrics,
    /// The namespaces the namespaced kinds are watched in; empty: the whole cluster.
    namespaces: Vec<Arc<str>>,
}

impl Watches<'_> {
    /// Spawns the one watch of a kind over the whole cluster.
    fn spawn_cluster<W, T>(&self, set: &mut JoinSet<()>, ops: Ops<W, T>, api: Api<W>)
    where
        W: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        T: Send + 'static,
    {
        let target = Target {
            api,
            namespace: None,
            unlisted: Unlisted::new(1),
        };
        let task = drive(self.cache.clone(), target, ops, self.metrics.clone());
        set.spawn(task);
    }

    /// Spawns the watches of a namespaced kind: one per namespace of the scope, or one
    /// over the cluster. `api` gives the API of a namespace (`None`: every namespace).
    fn spawn_namespaced<W, T>(
        &self,
        set: &mut JoinSet<()>,
        ops: Ops<W, T>,
        api: impl Fn(Option<&str>) -> Api<W>,
    ) where
        W: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        T: Send + 'static,
    {
        if self.namespaces.is_empty() {
            return self.spawn_cluster(set, ops, api(None));
        }
        let unlisted = Unlisted::new(self.namespaces.len());
        for ns in &self.namespaces {
            let target = Target {
                api: api(Some(ns)),
                namespace: Some(ns.clone()),
                unlisted: unlisted.clone(),
            };
            let task = drive(self.cache.clone(), target, ops, self.metrics.clone());
            set.spawn(task);
        }
    }

    /// Spawns the watches of a namespaced built-in kind (see [`Self::spawn_namespaced`]).
    fn spawn_typed<W, T>(&self, set: &mut JoinSet<()>, ops: Ops<W, T>)
    where
        W: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
        T: Send + 'static,
    {
        self.spawn_namespaced(set, ops, |ns| match ns {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        });
    }

    /// The API of a built-in kind over the whole cluster.
    fn all<W: Resource<DynamicType = ()>>(&self) -> Api<W> {
        Api::all(self.client.clone())
    }

    /// Pods and their ReplicaSets.
    fn pods(&self, set: &mut JoinSet<()>) {
        use super::pods::PodWire;
        use super::workloads::ReplicaSetWire;
        let pods = Ops::<PodWire, PodInfo> {
            name: "pods",
            convert: PodInfo::from_wire,
            upsert: |c, p, ch| c.inner.pods.write().upsert(p, ch),
            remove: |c, p, ch| c.inner.pods.write().remove(&p.namespace, &p.name, ch),
            replace: |c, ns, v, ch| relist(&mut *c.inner.pods.write(), ns, v, ch),
        };
        self.spawn_typed(set, pods);
        let rs = Ops::<ReplicaSetWire, ReplicaSetInfo> {
            name: "replicasets",
            convert: ReplicaSetInfo::from_wire,
            upsert: |c, r, ch| c.inner.replicasets.write().upsert(r, ch),
            remove: |c, r, ch| {
                c.inner
                    .replicasets
                    .write()
                    .remove(&r.namespace, &r.name, ch)
            },
            replace: |c, ns, v, ch| relist(&mut *c.inner.replicasets.write(), ns, v, ch),
        };
        self.spawn_typed(set, rs);
    }

    /// Deployments, StatefulSets and DaemonSets.
    fn workloads(&self, set: &mut JoinSet<()>) {
        use super::workloads::{DaemonSetWire, DeploymentWire, StatefulSetWire};
        let d = workload_ops(
            "deployments",
            WorkloadKind::Deployment,
            DeploymentWire::into_info,
        );
        self.spawn_typed(set, d);
        let s = workload_ops(
            "statefulsets",
            WorkloadKind::StatefulSet,
            StatefulSetWire::into_info,
        );
        self.spawn_typed(set, s);
        let ds = workload_ops(
            "daemonsets",
            WorkloadKind::DaemonSet,
            DaemonSetWire::into_info,
        );
        self.spawn_typed(set, ds);
    }

    /// HPAs, PDBs, nodes and namespaces.
    fn cluster(&self, set: &mut JoinSet<()>) {
        use super::cluster::{HpaWire, NamespaceWire, NodeWire, PdbWire};
        let hpa = Ops::<HpaWire, HpaInfo> {
            name: "horizontalpodautoscalers",
            convert: HpaInfo::from_wire,
            upsert: |c, h, ch| c.inner.hpas.write().upsert(h, ch),
            remove: |c, h, ch| c.inner.hpas.write().remove(&h.namespace, &h.name, ch),
            replace: |c, ns, v, ch| relist(&mut *c.inner.hpas.write(), ns, v, ch),
        };
        self.spawn_typed(set, hpa);
        let pdb = Ops::<PdbWire, PdbInfo> {
            name: "poddisruptionbudgets",
            convert: PdbInfo::from_wire,
            upsert: |c, p, ch| c.inner.pdbs.write().upsert(p, ch),
            remove: |c, p, ch| c.inner.pdbs.write().remove(&p.namespace, &p.name, ch),
            replace: |c, ns, v, ch| relist(&mut *c.inner.pdbs.write(), ns, v, ch),
        };
        self.spawn_typed(set, pdb);
        let nodes = Ops::<NodeWire, NodeInfo> {
            name: "nodes",
            convert: NodeInfo::from_wire,
            upsert: |c, n, ch| c.inner.nodes.write().upsert(n, ch),
            remove: |c, n, ch| c.inner.nodes.write().remove(&n.name, ch),
            replace: |c, _, v, ch| c.inner.nodes.write().replace(v, ch),
        };
        self.spawn_cluster(set, nodes, self.all());
        let ns = Ops::<NamespaceWire, NamespaceInfo> {
            name: "namespaces",
            convert: NamespaceInfo::from_wire,
            upsert: |c, n, ch| c.inner.namespaces.write().upsert(n.name.clone(), n, ch),
            remove: |c, n, ch| c.inner.namespaces.write().remove(&n.name, ch),
            replace: |c, _, v, ch| {
                let v = v.into_iter().map(|n| (n.name.clone(), n)).collect();
                c.inner.namespaces.write().replace(v, ch)
            },
        };
        self.spawn_cluster(set, ns, self.all());
    }

    /// Kerf's own resources: RightsizingPolicies and rsrs.
    fn kerf(&self, set: &mut JoinSet<()>) {
        let policies = Ops::<DynamicObject, PolicyEntry> {
            name: "rightsizingpolicies",
            convert: PolicyEntry::from_dynamic,
            upsert: |c, p, ch| c.inner.policies.write().upsert(p.name.clone(), p, ch),
            remove: |c, p, ch| c.inner.policies.write().remove(&p.name, ch),
            replace: |c, _, v, ch| {
                let v = v.into_iter().map(|p| (p.name.clone(), p)).collect();
                c.inner.policies.write().replace(v, ch)
            },
        };
        let ar = ApiResource::erase::<RightsizingPolicy>(&());
        self.spawn_cluster(set, policies, Api::all_with(self.client.clone(), &ar));
        let rsrs = Ops::<DynamicObject, RsrEntry> {
            name: "rightsizingrecommendations",
            convert: RsrEntry::from_dynamic,
            upsert: |c, r, ch| c.inner.rsrs.write().upsert(r, ch),
            remove: |c, r, ch| c.inner.rsrs.write().remove(&r.namespace, &r.name, ch),
            replace: |c, ns, v, ch| relist(&mut *c.inner.rsrs.write(), ns, v, ch),
        };
        let ar = ApiResource::erase::<RightsizingRecommendation>(&());
        self.spawn_namespaced(set, rsrs, |ns| match ns {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_watched_per_namespace_is_synced_once_every_namespace_has_listed() {
        let unlisted = Unlisted::new(3);
        let watches = [unlisted.clone(), unlisted.clone(), unlisted];
        assert!(!watches[1].first_listed());
        assert!(!watches[0].first_listed());
        assert!(watches[2].first_listed(), "the last one to list");
    }

    #[test]
    fn a_kind_watched_over_the_cluster_is_synced_once_its_watch_has_listed() {
        assert!(Unlisted::new(1).first_listed());
    }
}
