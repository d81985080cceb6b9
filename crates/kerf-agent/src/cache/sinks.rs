//! The watch loops that feed the indexes.

use std::fmt::Debug;

use futures::StreamExt;
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
use super::types::{ChangeSet, Interner};
use super::workloads::{ReplicaSetInfo, WorkloadInfo};

/// How one watched kind lands in its index.
struct Ops<W, T> {
    name: &'static str,
    convert: fn(W, &mut Interner) -> T,
    upsert: fn(&CacheSet, T, &mut ChangeSet),
    remove: fn(&CacheSet, T, &mut ChangeSet),
    replace: fn(&CacheSet, Vec<T>, &mut ChangeSet),
}

async fn drive<W, T>(cache: CacheSet, api: Api<W>, ops: Ops<W, T>, metrics: CacheMetrics)
where
    W: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let stream =
        watcher::watcher(api, watcher::Config::default()).backoff(super::backoff::watch_backoff());
    let mut stream = std::pin::pin!(stream);
    let mut interner = Interner::default();
    let mut buffer: Vec<T> = Vec::new();
    metrics.watches_active.inc();
    while let Some(ev) = stream.next().await {
        let mut changes = ChangeSet::new();
        match ev {
            Ok(Event::Init) => buffer.clear(),
            Ok(Event::InitApply(w)) => buffer.push((ops.convert)(w, &mut interner)),
            Ok(Event::InitDone) => {
                (ops.replace)(&cache, std::mem::take(&mut buffer), &mut changes);
                interner.prune();
                cache.mark_synced(ops.name);
                tracing::debug!(watch = ops.name, "watch listed");
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
    metrics.watches_active.dec();
}

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
            WorkloadKind::Deployment => |c, v, ch| {
                c.inner
                    .workloads
                    .write()
                    .replace_kind(WorkloadKind::Deployment, v, ch)
            },
            WorkloadKind::StatefulSet => |c, v, ch| {
                c.inner
                    .workloads
                    .write()
                    .replace_kind(WorkloadKind::StatefulSet, v, ch)
            },
            WorkloadKind::DaemonSet => |c, v, ch| {
                c.inner
                    .workloads
                    .write()
                    .replace_kind(WorkloadKind::DaemonSet, v, ch)
            },
        },
    }
}

/// Starts every watch of [`super::WATCHES`].
pub(super) fn start_all(cache: &CacheSet, client: Client, metrics: CacheMetrics) -> JoinSet<()> {
    let watches = Watches {
        cache,
        client,
        metrics,
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
}

impl Watches<'_> {
    fn cache(&self) -> CacheSet {
        self.cache.clone()
    }

    fn metrics(&self) -> CacheMetrics {
        self.metrics.clone()
    }

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
            replace: |c, v, ch| c.inner.pods.write().replace(v, ch),
        };
        set.spawn(drive(self.cache(), self.all(), pods, self.metrics()));
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
            replace: |c, v, ch| c.inner.replicasets.write().replace(v, ch),
        };
        set.spawn(drive(self.cache(), self.all(), rs, self.metrics()));
    }

    /// Deployments, StatefulSets and DaemonSets.
    fn workloads(&self, set: &mut JoinSet<()>) {
        use super::workloads::{DaemonSetWire, DeploymentWire, StatefulSetWire};
        let d = workload_ops(
            "deployments",
            WorkloadKind::Deployment,
            DeploymentWire::into_info,
        );
        set.spawn(drive(self.cache(), self.all(), d, self.metrics()));
        let s = workload_ops(
            "statefulsets",
            WorkloadKind::StatefulSet,
            StatefulSetWire::into_info,
        );
        set.spawn(drive(self.cache(), self.all(), s, self.metrics()));
        let ds = workload_ops(
            "daemonsets",
            WorkloadKind::DaemonSet,
            DaemonSetWire::into_info,
        );
        set.spawn(drive(self.cache(), self.all(), ds, self.metrics()));
    }

    /// HPAs, PDBs, nodes and namespaces.
    fn cluster(&self, set: &mut JoinSet<()>) {
        use super::cluster::{HpaWire, NamespaceWire, NodeWire, PdbWire};
        let hpa = Ops::<HpaWire, HpaInfo> {
            name: "horizontalpodautoscalers",
            convert: HpaInfo::from_wire,
            upsert: |c, h, ch| c.inner.hpas.write().upsert(h, ch),
            remove: |c, h, ch| c.inner.hpas.write().remove(&h.namespace, &h.name, ch),
            replace: |c, v, ch| c.inner.hpas.write().replace(v, ch),
        };
        set.spawn(drive(self.cache(), self.all(), hpa, self.metrics()));
        let pdb = Ops::<PdbWire, PdbInfo> {
            name: "poddisruptionbudgets",
            convert: PdbInfo::from_wire,
            upsert: |c, p, ch| c.inner.pdbs.write().upsert(p, ch),
            remove: |c, p, ch| c.inner.pdbs.write().remove(&p.namespace, &p.name, ch),
            replace: |c, v, ch| c.inner.pdbs.write().replace(v, ch),
        };
        set.spawn(drive(self.cache(), self.all(), pdb, self.metrics()));
        let nodes = Ops::<NodeWire, NodeInfo> {
            name: "nodes",
            convert: NodeInfo::from_wire,
            upsert: |c, n, ch| c.inner.nodes.write().upsert(n.name.clone(), n, ch),
            remove: |c, n, ch| c.inner.nodes.write().remove(&n.name, ch),
            replace: |c, v, ch| {
                let v = v.into_iter().map(|n| (n.name.clone(), n)).collect();
                c.inner.nodes.write().replace(v, ch)
            },
        };
        set.spawn(drive(self.cache(), self.all(), nodes, self.metrics()));
        let ns = Ops::<NamespaceWire, NamespaceInfo> {
            name: "namespaces",
            convert: NamespaceInfo::from_wire,
            upsert: |c, n, ch| c.inner.namespaces.write().upsert(n.name.clone(), n, ch),
            remove: |c, n, ch| c.inner.namespaces.write().remove(&n.name, ch),
            replace: |c, v, ch| {
                let v = v.into_iter().map(|n| (n.name.clone(), n)).collect();
                c.inner.namespaces.write().replace(v, ch)
            },
        };
        set.spawn(drive(self.cache(), self.all(), ns, self.metrics()));
    }

    /// Kerf's own resources: RightsizingPolicies and rsrs.
    fn kerf(&self, set: &mut JoinSet<()>) {
        let policies = Ops::<DynamicObject, PolicyEntry> {
            name: "rightsizingpolicies",
            convert: PolicyEntry::from_dynamic,
            upsert: |c, p, ch| c.inner.policies.write().upsert(p.name.clone(), p, ch),
            remove: |c, p, ch| c.inner.policies.write().remove(&p.name, ch),
            replace: |c, v, ch| {
                let v = v.into_iter().map(|p| (p.name.clone(), p)).collect();
                c.inner.policies.write().replace(v, ch)
            },
        };
        let ar = ApiResource::erase::<RightsizingPolicy>(&());
        let api = Api::all_with(self.client.clone(), &ar);
        set.spawn(drive(self.cache(), api, policies, self.metrics()));
        let rsrs = Ops::<DynamicObject, RsrEntry> {
            name: "rightsizingrecommendations",
            convert: RsrEntry::from_dynamic,
            upsert: |c, r, ch| c.inner.rsrs.write().upsert(r, ch),
            remove: |c, r, ch| c.inner.rsrs.write().remove(&r.namespace, &r.name, ch),
            replace: |c, v, ch| c.inner.rsrs.write().replace(v, ch),
        };
        let ar = ApiResource::erase::<RightsizingRecommendation>(&());
        let api = Api::all_with(self.client.clone(), &ar);
        set.spawn(drive(self.cache(), api, rsrs, self.metrics()));
    }
}
