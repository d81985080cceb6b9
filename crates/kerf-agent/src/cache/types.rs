//! Types shared by the slim caches: workload keys, change notifications, string interning
//! and the container shape.

use std::any::{Any, TypeId};
use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;
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

/// Shares repeated strings (namespaces, node names, container names, owner names) and the
/// parts of an object that other objects repeat (a pod's containers' spec, owner and shape:
/// see `cache::pods`). A watch keeps one for the objects it caches.
///
/// What no cached object holds any more is forgotten at each relist ([`Interner::prune`]),
/// and in between whenever a kind of value has doubled since it was last pruned: pods change
/// shape during a resize, and a watch may run for days without a relist.
#[derive(Debug, Default)]
pub struct Interner {
    strings: Shared<str>,
    /// One set per kind of shared part, by its type.
    parts: HashMap<TypeId, Box<dyn Parts>>,
    /// Node names, shared with the other watches' interners ([`NodeNames`]).
    node_names: NodeNames,
}

/// The node names of a set of caches, shared by the interners of the node watch and the
/// pod watches: a node and the pods on it hold one copy of its name. Where the scope
/// leaves a few pods on each of thousands of nodes, a copy per watch, each in its own
/// interner's table, was most of what the names cost (docs/benchmarks.md, "The cluster
/// around the scope").
#[derive(Clone, Debug, Default)]
pub struct NodeNames(Arc<std::sync::Mutex<Shared<str>>>);

impl NodeNames {
    fn with<R>(&self, f: impl FnOnce(&mut Shared<str>) -> R) -> R {
        f(&mut self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// How many names are held.
    pub fn len(&self) -> usize {
        self.with(|s| s.set.len())
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One kind of shared value, and how many were kept at its last prune.
#[derive(Debug)]
struct Shared<T: ?Sized> {
    set: HashSet<Arc<T>>,
    kept: usize,
}

impl<T: ?Sized> Default for Shared<T> {
    fn default() -> Self {
        Shared {
            set: HashSet::new(),
            kept: 0,
        }
    }
}

/// Below this many values a set is pruned only at relists.
const PRUNE_FLOOR: usize = 1024;

impl<T: ?Sized + Hash + Eq> Shared<T> {
    /// The shared copy of `value`, made with `make` when there is none.
    fn share<V: Borrow<T>>(&mut self, value: V, make: impl FnOnce(V) -> Arc<T>) -> Arc<T> {
        if let Some(found) = self.set.get(value.borrow()) {
            return found.clone();
        }
        if self.set.len() >= 2 * self.kept.max(PRUNE_FLOOR) {
            self.prune();
        }
        let new = make(value);
        self.set.insert(new.clone());
        new
    }

    fn prune(&mut self) {
        self.set.retain(|v| Arc::strong_count(v) > 1);
        self.kept = self.set.len();
    }
}

/// A set of shared parts of one type, whatever the type.
trait Parts: Any + Send + Sync + std::fmt::Debug {
    fn prune(&mut self);
    fn len(&self) -> usize;
    fn as_any(&mut self) -> &mut dyn Any;
}

impl<T: Hash + Eq + Send + Sync + std::fmt::Debug + 'static> Parts for Shared<T> {
    fn prune(&mut self) {
        Shared::prune(self);
    }

    fn len(&self) -> usize {
        self.set.len()
    }

    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}

impl Interner {
    /// An interner that keeps node names in `node_names`, with the other interners that
    /// share it.
    pub fn sharing_node_names(node_names: &NodeNames) -> Interner {
        Interner {
            node_names: node_names.clone(),
            ..Interner::default()
        }
    }

    /// The shared copy of `s`.
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        self.strings.share(s, Arc::from)
    }

    /// The shared copy of the node name `s`, the one the node and the pods on it hold.
    pub fn intern_node_name(&mut self, s: &str) -> Arc<str> {
        self.node_names.with(|names| names.share(s, Arc::from))
    }

    /// The shared copy of `value`: the objects that have an equal one get the same.
    pub fn share<T: Hash + Eq + Send + Sync + std::fmt::Debug + 'static>(
        &mut self,
        value: T,
    ) -> Arc<T> {
        let set = self
            .parts
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Box::new(Shared::<T>::default()));
        match set.as_any().downcast_mut::<Shared<T>>() {
            Some(set) => set.share(value, Arc::new),
            // The set under `T`'s id is always a `Shared<T>`.
            None => Arc::new(value),
        }
    }

    /// Forgets strings and shared parts no cached object uses any more. A part may hold
    /// another (a pod's shape holds its containers' spec): the parts are pruned twice, so
    /// that one held only by a part pruned in the first round goes in the second.
    pub fn prune(&mut self) {
        for _ in 0..2 {
            self.parts.values_mut().for_each(|p| p.prune());
        }
        self.strings.prune();
        self.node_names.with(Shared::prune);
    }

    /// How many strings are held.
    pub fn len(&self) -> usize {
        self.strings.set.len()
    }

    /// How many shared values of type `T` are held.
    pub fn count<T: 'static>(&self) -> usize {
        self.parts.get(&TypeId::of::<T>()).map_or(0, |p| p.len())
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.strings.set.is_empty() && self.parts.values().all(|p| p.len() == 0)
    }
}

/// A container's restart policy on resize, per resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
/// that order; other init containers are left out. Each is the interner's shared copy: the
/// workloads that run the same container (a sidecar, one image in several Deployments)
/// hold it once.
pub fn template_containers(
    containers: Vec<ContainerWire>,
    init_containers: Vec<ContainerWire>,
    interner: &mut Interner,
) -> Vec<Arc<TemplateContainer>> {
    let sidecars = init_containers
        .into_iter()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let mut shared: Vec<Arc<TemplateContainer>> = containers
        .into_iter()
        .map(|c| (c, false))
        .chain(sidecars.map(|c| (c, true)))
        .map(|(c, sidecar)| {
            let c = TemplateContainer::from_wire(c, sidecar, interner);
            interner.share(c)
        })
        .collect();
    // Kept for the workload's life: no room beyond its containers. (Collected from a
    // `Vec` of wire containers instead of this chain, the result would reuse that `Vec`'s
    // buffer and keep a wire container's room, about a kilobyte, for each 8-byte `Arc`.)
    shared.shrink_to_fit();
    shared
}

/// A time as the cache keeps it, in 8 bytes: nanoseconds since the epoch, or none. An
/// `Option<DateTime<Utc>>` takes 12 and leaves 4 more unused beside 8-byte fields; at
/// 100,000 pods two of them cost about 1.6 MB more (docs/benchmarks.md). Times before 1677
/// or after 2262 are kept as the nearest end of that range.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp(i64);

impl Stamp {
    /// No time.
    const NONE: i64 = i64::MIN;

    /// Keeps `time`.
    pub fn new(time: Option<chrono::DateTime<chrono::Utc>>) -> Stamp {
        Stamp(time.map_or(Self::NONE, |t| {
            t.timestamp_nanos_opt().unwrap_or(if t.timestamp() < 0 {
                Self::NONE + 1
            } else {
                i64::MAX
            })
        }))
    }

    /// The time kept.
    pub fn get(self) -> Option<chrono::DateTime<chrono::Utc>> {
        (self.0 != Self::NONE).then(|| chrono::DateTime::from_timestamp_nanos(self.0))
    }
}

impl std::fmt::Debug for Stamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// An object's UID as the cache keeps it: the API server gives a UUID, kept as its 16 bytes
/// (a pod's UID is its own, so interning would not share it); other text is kept as it is.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Uid {
    /// A UUID in its canonical lower-case hyphenated text.
    Uuid([u8; 16]),
    /// Any other text.
    Text(Box<str>),
}

impl Uid {
    /// The UID of `text`; reads back as exactly `text`.
    pub fn new(text: &str) -> Uid {
        let mut buf = uuid::Uuid::encode_buffer();
        match uuid::Uuid::try_parse(text) {
            Ok(u) if u.hyphenated().encode_lower(&mut buf) == text => Uid::Uuid(u.into_bytes()),
            _ => Uid::Text(text.into()),
        }
    }
}

impl std::fmt::Display for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Uid::Uuid(bytes) => uuid::Uuid::from_bytes(*bytes).hyphenated().fmt(f),
            Uid::Text(text) => f.write_str(text),
        }
    }
}

impl std::fmt::Debug for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

impl PartialEq<str> for Uid {
    fn eq(&self, other: &str) -> bool {
        match self {
            Uid::Uuid(bytes) => {
                let mut buf = uuid::Uuid::encode_buffer();
                uuid::Uuid::from_bytes(*bytes)
                    .hyphenated()
                    .encode_lower(&mut buf)
                    == other
            }
            Uid::Text(text) => **text == *other,
        }
    }
}

/// An object's resourceVersion as the cache keeps it. The text is opaque to clients, but the
/// API server writes a decimal number (etcd's revision): that is kept as the number, any
/// other text as it is. Reads back as exactly the text it was made from.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Version {
    /// A decimal number without leading zeros.
    Number(u64),
    /// Any other text.
    Text(Box<str>),
}

impl Version {
    /// The resourceVersion `text`.
    pub fn new(text: &str) -> Version {
        let canonical = !text.starts_with('0') || text == "0";
        match text.parse::<u64>() {
            Ok(n) if canonical && text.bytes().all(|b| b.is_ascii_digit()) => Version::Number(n),
            _ => Version::Text(text.into()),
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Version::Number(n) => n.fmt(f),
            Version::Text(text) => f.write_str(text),
        }
    }
}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

#[cfg(test)]
mod id_tests {
    use super::{Stamp, Uid, Version};

    #[test]
    fn uids_and_versions_read_back_as_the_text_they_were_made_from() {
        for text in [
            "3f2c1d9e-8b7a-4c6d-9e0f-1a2b3c4d5e6f",
            "3F2C1D9E-8B7A-4C6D-9E0F-1A2B3C4D5E6F",
            "3f2c1d9e8b7a4c6d9e0f1a2b3c4d5e6f",
            "uid-web-1",
            "",
        ] {
            let uid = Uid::new(text);
            assert_eq!(uid.to_string(), text);
            assert!(uid == *text, "{text}");
        }
        assert!(matches!(
            Uid::new("3f2c1d9e-8b7a-4c6d-9e0f-1a2b3c4d5e6f"),
            Uid::Uuid(_)
        ));
        assert!(Uid::new("3f2c1d9e-8b7a-4c6d-9e0f-1a2b3c4d5e6f") != *"other");
        for text in [
            "0",
            "7",
            "123456789",
            "0012",
            "+5",
            "18446744073709551616",
            "abc",
            "",
        ] {
            assert_eq!(Version::new(text).to_string(), text);
        }
        assert_eq!(Version::new("123456789"), Version::Number(123_456_789));
        assert!(matches!(Version::new("0012"), Version::Text(_)));
    }

    #[test]
    fn a_stamp_keeps_a_time_to_the_nanosecond_and_the_far_ends_at_their_limits() {
        use chrono::{DateTime, TimeZone as _, Utc};
        let t = DateTime::parse_from_rfc3339("2026-03-01T10:00:07.123456789Z")
            .expect("time")
            .to_utc();
        assert_eq!(Stamp::new(Some(t)).get(), Some(t));
        assert_eq!(Stamp::new(None).get(), None);
        let epoch = Utc.timestamp_opt(0, 0).single();
        assert_eq!(Stamp::new(epoch).get(), epoch);
        // Out of the 64-bit nanosecond range: kept, at its nearest end, never as none.
        let far = Utc.with_ymd_and_hms(2400, 1, 1, 0, 0, 0).single();
        let early = Utc.with_ymd_and_hms(1600, 1, 1, 0, 0, 0).single();
        assert_eq!(
            Stamp::new(far).get(),
            Some(DateTime::from_timestamp_nanos(i64::MAX))
        );
        assert_eq!(
            Stamp::new(early).get(),
            Some(DateTime::from_timestamp_nanos(i64::MIN + 1))
        );
        assert_eq!(std::mem::size_of::<Stamp>(), 8);
    }
}
