//! The in-memory index the webhook answers from: live values per workload and the
//! Deployment that owns each ReplicaSet.
//!
//! The agent's caches feed it ([`SharedIndex::upsert_rsr`], [`SharedIndex::upsert_replicaset`]
//! and their `remove_` twins); the admission handler only reads it. Nothing here calls the
//! Kubernetes API. Quantities are parsed once, when an rsr is indexed, so answering a review
//! compares integers.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

use kerf_api::rsr::{ChangeState, LiveContainer, Phase};
use kerf_api::{Resource, ResourceRequirements, ResourceValues, RightsizingRecommendation};
use kerf_decide::quantity::parse;

use super::WebhookError;

pub use crate::executor::release::Side;

/// CPU and memory of requests and limits as integers (millicores, bytes), in the order
/// requests.cpu, requests.memory, limits.cpu, limits.memory. `None`: no value.
pub type ParsedValues = [Option<i64>; 4];

/// The slots of [`ParsedValues`]: which side and which resource each one holds.
pub const SLOTS: [(Side, Resource); 4] = [
    (Side::Requests, Resource::Cpu),
    (Side::Requests, Resource::Memory),
    (Side::Limits, Resource::Cpu),
    (Side::Limits, Resource::Memory),
];

/// Live values of one container, ready to compare and to patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveTarget {
    /// Container name.
    pub name: String,
    /// The template's values at the change: only a pod still at these is patched (D20).
    pub base: ParsedValues,
    /// The live values, parsed: a pod already at these is left alone.
    pub live: ParsedValues,
    /// The live requests as written in the rsr.
    pub requests: ResourceValues,
    /// The live limits as written in the rsr (a removed limit is absent).
    pub limits: ResourceValues,
}

/// Live values of one workload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadLive {
    /// Per container, in the rsr's order.
    pub containers: Vec<LiveTarget>,
}

impl WorkloadLive {
    /// The live values of the container called `name`.
    pub fn container(&self, name: &str) -> Option<&LiveTarget> {
        self.containers.iter().find(|c| c.name == name)
    }
}

/// Parses requests and limits into [`ParsedValues`].
pub fn parse_requirements(
    requests: &ResourceValues,
    limits: &ResourceValues,
) -> Result<ParsedValues, kerf_decide::quantity::QuantityError> {
    let mut out = [None; 4];
    for (slot, (side, resource)) in out.iter_mut().zip(SLOTS) {
        let values = match side {
            Side::Requests => requests,
            Side::Limits => limits,
        };
        *slot = values
            .get(resource)
            .map(|q| parse(resource, q))
            .transpose()?;
    }
    Ok(out)
}

fn target(c: &LiveContainer) -> Result<LiveTarget, WebhookError> {
    let invalid = |source| WebhookError::InvalidLiveValues {
        container: c.name.clone(),
        source,
    };
    let ResourceRequirements { requests, limits } = &c.base;
    Ok(LiveTarget {
        name: c.name.clone(),
        base: parse_requirements(requests, limits).map_err(invalid)?,
        live: parse_requirements(&c.requests, &c.limits).map_err(invalid)?,
        requests: c.requests.clone(),
        limits: c.limits.clone(),
    })
}

/// Whether the rsr's live values are to be handed to new pods: set, not empty, and the
/// change is neither rolled back nor released (nor rolling back).
fn is_live(rsr: &RightsizingRecommendation) -> bool {
    let Some(status) = &rsr.status else {
        return false;
    };
    let phase_ok = !matches!(status.phase, Some(Phase::RolledBack | Phase::Released));
    let change_ok = !status.change.as_ref().is_some_and(|c| {
        matches!(
            c.state,
            ChangeState::RollingBack | ChangeState::RolledBack | ChangeState::Released
        )
    });
    let has_live = status
        .live
        .as_ref()
        .is_some_and(|l| !l.containers.is_empty());
    phase_ok && change_ok && has_live
}

fn kind_slot(kind: kerf_api::WorkloadKind) -> usize {
    match kind {
        kerf_api::WorkloadKind::Deployment => 0,
        kerf_api::WorkloadKind::StatefulSet => 1,
        kerf_api::WorkloadKind::DaemonSet => 2,
    }
}

/// One namespace of the index.
#[derive(Debug, Default)]
struct NamespaceIndex {
    /// Live values by workload kind (slot of [`kind_slot`]) and name.
    live: [HashMap<String, Arc<WorkloadLive>>; 3],
    /// The workload each rsr (by name) describes.
    rsrs: HashMap<String, (kerf_api::WorkloadKind, String)>,
    /// ReplicaSet name -> owning Deployment name.
    replicasets: HashMap<String, String>,
}

impl NamespaceIndex {
    fn is_empty(&self) -> bool {
        self.rsrs.is_empty() && self.replicasets.is_empty()
    }
}

/// Live values by workload and ReplicaSet owners, by namespace. Pure data: build it with
/// the update methods, read it with [`LiveIndex::live_for`] and
/// [`LiveIndex::deployment_of`].
#[derive(Debug, Default)]
pub struct LiveIndex {
    namespaces: HashMap<String, NamespaceIndex>,
}

impl LiveIndex {
    /// Indexes an rsr (added or changed). Its workload gets live values when
    /// `status.live` is set and the phase is neither RolledBack nor Released (RB-21);
    /// otherwise whatever the rsr had indexed is dropped. An rsr whose live values do not
    /// parse is dropped too, and the error names the container.
    pub fn upsert_rsr(&mut self, rsr: &RightsizingRecommendation) -> Result<(), WebhookError> {
        let (Some(namespace), Some(name)) = (&rsr.metadata.namespace, &rsr.metadata.name) else {
            return Err(WebhookError::UnnamedRsr);
        };
        self.remove_rsr(namespace, name);
        if !is_live(rsr) {
            return Ok(());
        }
        let containers = rsr
            .status
            .iter()
            .filter_map(|s| s.live.as_ref())
            .flat_map(|l| &l.containers)
            .map(target)
            .collect::<Result<Vec<_>, _>>()?;
        let wref = &rsr.spec.workload_ref;
        let ns = self.namespaces.entry(namespace.clone()).or_default();
        ns.rsrs.insert(name.clone(), (wref.kind, wref.name.clone()));
        ns.live[kind_slot(wref.kind)]
            .insert(wref.name.clone(), Arc::new(WorkloadLive { containers }));
        Ok(())
    }

    /// Drops what the rsr `namespace/name` indexed (deleted, or no longer live).
    pub fn remove_rsr(&mut self, namespace: &str, name: &str) {
        let Some(ns) = self.namespaces.get_mut(namespace) else {
            return;
        };
        if let Some((kind, workload)) = ns.rsrs.remove(name) {
            ns.live[kind_slot(kind)].remove(&workload);
        }
        if ns.is_empty() {
            self.namespaces.remove(namespace);
        }
    }

    /// Drops the live values of a workload and the rsrs that gave them.
    pub fn remove_workload(&mut self, namespace: &str, kind: kerf_api::WorkloadKind, name: &str) {
        let Some(ns) = self.namespaces.get_mut(namespace) else {
            return;
        };
        ns.live[kind_slot(kind)].remove(name);
        ns.rsrs.retain(|_, (k, n)| !(*k == kind && n == name));
        if ns.is_empty() {
            self.namespaces.remove(namespace);
        }
    }

    /// Records the controlling Deployment of a ReplicaSet; `None` (a ReplicaSet without
    /// a Deployment) forgets it.
    pub fn upsert_replicaset(&mut self, namespace: &str, name: &str, deployment: Option<&str>) {
        match deployment {
            Some(d) => {
                let ns = self.namespaces.entry(namespace.to_owned()).or_default();
                ns.replicasets.insert(name.to_owned(), d.to_owned());
            }
            None => self.remove_replicaset(namespace, name),
        }
    }

    /// Forgets a ReplicaSet.
    pub fn remove_replicaset(&mut self, namespace: &str, name: &str) {
        let Some(ns) = self.namespaces.get_mut(namespace) else {
            return;
        };
        ns.replicasets.remove(name);
        if ns.is_empty() {
            self.namespaces.remove(namespace);
        }
    }

    /// The live values of a workload.
    pub fn live_for(
        &self,
        namespace: &str,
        kind: kerf_api::WorkloadKind,
        name: &str,
    ) -> Option<&Arc<WorkloadLive>> {
        self.namespaces.get(namespace)?.live[kind_slot(kind)].get(name)
    }

    /// The Deployment that owns a ReplicaSet.
    pub fn deployment_of(&self, namespace: &str, replicaset: &str) -> Option<&str> {
        self.namespaces
            .get(namespace)?
            .replicasets
            .get(replicaset)
            .map(String::as_str)
    }

    /// Number of workloads with live values.
    pub fn live_workloads(&self) -> usize {
        self.namespaces
            .values()
            .map(|ns| ns.live.iter().map(HashMap::len).sum::<usize>())
            .sum()
    }
}

/// The index shared between the caches (writers) and the webhook (reader). Cloning it
/// shares the same index.
#[derive(Clone, Debug, Default)]
pub struct SharedIndex {
    inner: Arc<RwLock<LiveIndex>>,
}

impl SharedIndex {
    /// An empty index.
    pub fn new() -> SharedIndex {
        SharedIndex::default()
    }

    /// Reads the index. Keep the guard only for a synchronous look-up.
    pub fn read(&self) -> RwLockReadGuard<'_, LiveIndex> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the index under one write lock (several updates seen at once).
    pub fn update<T>(&self, f: impl FnOnce(&mut LiveIndex) -> T) -> T {
        f(&mut self.inner.write().unwrap_or_else(PoisonError::into_inner))
    }

    /// See [`LiveIndex::upsert_rsr`].
    pub fn upsert_rsr(&self, rsr: &RightsizingRecommendation) -> Result<(), WebhookError> {
        self.update(|i| i.upsert_rsr(rsr))
    }

    /// See [`LiveIndex::remove_rsr`].
    pub fn remove_rsr(&self, namespace: &str, name: &str) {
        self.update(|i| i.remove_rsr(namespace, name));
    }

    /// See [`LiveIndex::upsert_replicaset`].
    pub fn upsert_replicaset(&self, namespace: &str, name: &str, deployment: Option<&str>) {
        self.update(|i| i.upsert_replicaset(namespace, name, deployment));
    }

    /// See [`LiveIndex::remove_replicaset`].
    pub fn remove_replicaset(&self, namespace: &str, name: &str) {
        self.update(|i| i.remove_replicaset(namespace, name));
    }

    /// Swaps in a whole new index (after a watch relisted).
    pub fn replace(&self, index: LiveIndex) {
        self.update(|i| *i = index);
    }
}
