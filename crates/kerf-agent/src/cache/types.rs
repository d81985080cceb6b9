//! Types shared by the slim caches: workload keys, change notifications, string interning
//! and the container shape.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use kerf_api::vecmap::VecMap;
use kerf_api::{ResourceValues, WorkloadKind};

use super::wire::{ContainerWire, ResizePolicyWire};

/// Identifies a workload: namespace, kind and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadKey {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Kind.
    pub kind: WorkloadKind,
    /// Name.
    pub name: Arc<str>,
}

impl WorkloadKey {
    /// A key from its parts.
    pub fn new(namespace: &str, kind: WorkloadKind, name: &str) -> WorkloadKey {
        WorkloadKey {
            namespace: namespace.into(),
            kind,
            name: name.into(),
        }
    }
}

impl std::fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.namespace, self.kind, self.name)
    }
}

/// What changed in the caches, for the reconciler.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Change {
    /// Something one workload's decision reads: the workload, its pods, its HPA, its rsr.
    Workload(WorkloadKey),
    /// Something every workload of a namespace may read: a PDB, the namespace's labels.
    Namespace(Arc<str>),
    /// Something every workload may read (nodes, policies), or changes were missed (a
    /// receiver that lagged behind should treat that as `All` too).
    All,
}

/// The changes one cache update caused, sent once the write lock is released.
pub type ChangeSet = BTreeSet<Change>;

/// Shares repeated strings (namespaces, node names, container names, owner names).
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
}

impl Interner {
    /// The shared copy of `s`.
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(found) = self.strings.get(s) {
            return found.clone();
        }
        let new: Arc<str> = s.into();
        self.strings.insert(new.clone());
        new
    }

    /// Forgets strings no cached object uses any more.
    pub fn prune(&mut self) {
        self.strings.retain(|s| Arc::strong_count(s) > 1);
    }

    /// How many strings are held.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// True when no string is held.
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }
}

/// A container's restart policy on resize, per resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResizePolicy {
    /// CPU: true for `RestartContainer`.
    pub cpu_restart: bool,
    /// Memory: true for `RestartContainer`.
    pub memory_restart: bool,
}

impl ResizePolicy {
    /// Reads a container's `resizePolicy` list (absent entries mean `NotRequired`).
    pub fn from_wire(list: &[ResizePolicyWire]) -> ResizePolicy {
        let restart = |r: &str| {
            list.iter()
                .any(|p| p.resource_name == r && p.restart_policy == "RestartContainer")
        };
        ResizePolicy {
            cpu_restart: restart("cpu"),
            memory_restart: restart("memory"),
        }
    }
}

/// A container of a pod template: what decisions and the JVM heuristic read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateContainer {
    /// Name.
    pub name: Arc<str>,
    /// True for a restartable init container (sidecar).
    pub sidecar: bool,
    /// Image.
    pub image: Option<String>,
    /// Command.
    pub command: Vec<String>,
    /// Args.
    pub args: Vec<String>,
    /// Literal environment values only (`valueFrom` is never read).
    pub env: VecMap<String, String>,
    /// Requests.
    pub requests: ResourceValues,
    /// Limits.
    pub limits: ResourceValues,
    /// Resize policy.
    pub resize_policy: ResizePolicy,
}

impl TemplateContainer {
    /// Converts a container; `sidecar` marks restartable init containers.
    pub fn from_wire(c: ContainerWire, sidecar: bool, interner: &mut Interner) -> Self {
        TemplateContainer {
            name: interner.intern(&c.name),
            sidecar,
            resize_policy: ResizePolicy::from_wire(&c.resize_policy),
            image: c.image,
            command: c.command,
            args: c.args,
            env: c
                .env
                .into_iter()
                .filter_map(|e| e.value.map(|v| (e.name, v)))
                .collect(),
            requests: c.resources.requests,
            limits: c.resources.limits,
        }
    }
}

/// The containers and restartable init containers of a pod template or pod spec, in
/// that order; other init containers are left out.
pub fn template_containers(
    containers: Vec<ContainerWire>,
    init_containers: Vec<ContainerWire>,
    interner: &mut Interner,
) -> Vec<TemplateContainer> {
    let sidecars = init_containers
        .into_iter()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let all: Vec<(ContainerWire, bool)> = containers
        .into_iter()
        .map(|c| (c, false))
        .chain(sidecars.map(|c| (c, true)))
        .collect();
    all.into_iter()
        .map(|(c, sidecar)| TemplateContainer::from_wire(c, sidecar, interner))
        .collect()
}
