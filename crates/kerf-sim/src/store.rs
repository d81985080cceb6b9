//! The in-memory object store behind the simulated API server: typed by [`Gvr`], one global
//! resourceVersion counter, a bounded event history for watches and a broadcast of every
//! change. The HTTP layer, the controllers and the kubelet all write through it.
//!
//! Each object version is kept once, as JSON text ([`StoredObject`]), shared by the store,
//! the history and the broadcast; readers that change objects get parsed copies.

pub mod defaults;
mod error;
pub mod fields;
mod gc;
pub mod gvr;
mod history;
mod index;
mod list;
mod object;
mod stored;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::sync::broadcast;

pub use error::{ApiError, Cause};
pub use gvr::Gvr;
use history::History;
use index::Indexes;
pub use list::{Page, PageQuery};
use object::{merge_for_write, prepare_create, same_content};
pub use stored::StoredObject;

/// The type of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreEventType {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted.
    Deleted,
}

impl StoreEventType {
    /// The watch event type name.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreEventType::Added => "ADDED",
            StoreEventType::Modified => "MODIFIED",
            StoreEventType::Deleted => "DELETED",
        }
    }
}

/// One change of one object.
#[derive(Debug, Clone)]
pub struct StoreEvent {
    /// Resource key, e.g. "pods", "deployments.apps".
    pub resource: String,
    /// What happened.
    pub event_type: StoreEventType,
    /// The object after the change (for deletes: as deleted, with the delete's RV), shared
    /// with the store, the watch history and every subscriber.
    pub object: Arc<StoredObject>,
    /// The RV of the change.
    pub resource_version: u64,
}

/// Changes a subscriber may fall behind by before it gets `Lagged` (a watch then ends with
/// 410 Expired). Slots share the stored objects; an overwritten slot keeps an old object
/// version (a few KiB of JSON) alive until it is reused.
const BROADCAST_CAPACITY: usize = 65_536;

/// Supplies the wall-clock time stamps written into objects.
pub type TimeSource = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

struct Inner {
    rv: u64,
    /// Per resource key, the objects by `namespace/name` (`/name` for cluster-scoped kinds),
    /// so that a namespace is a contiguous key range and lists come out in the API server's
    /// order.
    objects: HashMap<String, BTreeMap<String, Arc<StoredObject>>>,
    history: History,
    indexes: Indexes,
    kinds: BTreeMap<String, Gvr>,
    /// Left by the last unfiltered page for the next one of its walk.
    count_hint: Option<list::CountHint>,
}

/// The shared object store.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
    tx: broadcast::Sender<StoreEvent>,
    now: Arc<Mutex<TimeSource>>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

fn obj_key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or_default())
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// Formats a time as the API server does (RFC 3339, seconds, Z).
pub fn format_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl Store {
    /// An empty store knowing the built-in kinds.
    pub fn new() -> Store {
        let kinds = gvr::ALL.iter().map(|g| (g.key(), *g)).collect();
        let inner = Inner {
            rv: 1,
            objects: HashMap::new(),
            history: History::default(),
            indexes: Indexes::default(),
            kinds,
            count_hint: None,
        };
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        Store {
            inner: Arc::new(Mutex::new(inner)),
            tx,
            now: Arc::new(Mutex::new(Arc::new(Utc::now))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the time source for timestamps (e.g. a simulated clock).
    pub fn set_time_source(&self, now: TimeSource) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }

    /// The current time of the store's time source.
    pub fn now(&self) -> DateTime<Utc> {
        let f = self.now.lock().unwrap_or_else(|e| e.into_inner()).clone();
        f()
    }

    /// Registers a kind (CRD-defined kinds at run time).
    pub fn register_kind(&self, g: Gvr) {
        self.lock().kinds.insert(g.key(), g);
    }

    /// Removes a kind registered at run time.
    pub fn unregister_kind(&self, g: &Gvr) {
        self.lock().kinds.remove(&g.key());
    }

    /// Every known kind.
    pub fn kinds(&self) -> Vec<Gvr> {
        self.lock().kinds.values().copied().collect()
    }

    /// Finds a kind by group, version and plural resource name.
    pub fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<Gvr> {
        let inner = self.lock();
        inner
            .kinds
            .values()
            .find(|g| g.group == group && g.version == version && g.resource == resource)
            .copied()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// One object (a copy the caller may change).
    pub fn get(&self, gvr: &Gvr, namespace: Option<&str>, name: &str) -> Option<Value> {
        Some(self.get_stored(gvr, namespace, name)?.value())
    }

    /// The stored version of one object (shared, not parsed).
    pub fn get_stored(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<StoredObject>> {
        let ns = if gvr.namespaced { namespace } else { None };
        self.lock()
            .objects
            .get(&gvr.key())?
            .get(&obj_key(ns, name))
            .cloned()
    }

    /// The objects of `gvr` that name `owner_uid` among their ownerReferences (copies the
    /// caller may change), in key order.
    pub fn owned(&self, gvr: &Gvr, owner_uid: &str) -> Vec<Value> {
        let kind = gvr.key();
        let shared: Vec<Arc<StoredObject>> = {
            let inner = self.lock();
            let Some(map) = inner.objects.get(&kind) else {
                return Vec::new();
            };
            inner
                .indexes
                .owned(owner_uid, &kind)
                .filter_map(|key| map.get(key).cloned())
                .collect()
        };
        shared.iter().map(|o| o.value()).collect()
    }

    /// The resource key (e.g. `replicasets.apps`) and the stored version of the object with
    /// `uid`.
    pub fn by_uid(&self, uid: &str) -> Option<(String, Arc<StoredObject>)> {
        let inner = self.lock();
        let (kind, key) = inner.indexes.by_uid(uid)?;
        let obj = inner.objects.get(kind)?.get(key)?;
        Some((kind.clone(), Arc::clone(obj)))
    }

    /// A receiver of every change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<StoreEvent> {
        self.tx.subscribe()
    }

    /// Creates an object (fills uid, resourceVersion, creationTimestamp, generation, a name
    /// from generateName, the API defaults of its kind and a managedFields entry for
    /// `manager`; with an empty `manager` the object's managedFields are kept as given).
    pub fn create(&self, gvr: &Gvr, mut obj: Value, manager: &str) -> Result<Value, ApiError> {
        let now = format_time(self.now());
        let mut inner = self.lock();
        prepare_create(gvr, &mut obj, &now)?;
        defaults::apply(gvr, &mut obj);
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        let ns = if gvr.namespaced {
            meta_str(&obj, "namespace").map(str::to_string)
        } else {
            None
        };
        if let Some(ns) = &ns
            && !inner
                .objects
                .get(&gvr::NAMESPACES.key())
                .is_some_and(|m| m.contains_key(&obj_key(None, ns)))
        {
            return Err(ApiError::not_found(&gvr::NAMESPACES, ns));
        }
        let key = obj_key(ns.as_deref(), &name);
        if inner
            .objects
            .get(&gvr.key())
            .is_some_and(|m| m.contains_key(&key))
        {
            return Err(ApiError::already_exists(gvr, &name));
        }
        if !manager.is_empty() {
            fields::record_update(None, &mut obj, manager, None, &now);
        }
        commit(&self.tx, &mut inner, gvr, key, obj, StoreEventType::Added)
    }

    /// Replaces an object (409 on a stale resourceVersion when one is given; keeps status,
    /// bumps generation when anything but metadata and status changed).
    pub fn update(&self, gvr: &Gvr, obj: Value, manager: &str) -> Result<Value, ApiError> {
        self.write(gvr, obj, manager, None)
    }

    /// Replaces only `.status` of an object.
    pub fn update_status(&self, gvr: &Gvr, obj: Value, manager: &str) -> Result<Value, ApiError> {
        self.write(gvr, obj, manager, Some("status"))
    }

    /// Replaces an object through a subresource: `None` (main resource: status is kept),
    /// `Some("status")` (only status changes) or any other (the whole object is taken, e.g.
    /// `resize` after the caller limited the change). managedFields of the object are kept
    /// when `manager` is empty (used by server-side apply, which computes them itself).
    pub fn write(
        &self,
        gvr: &Gvr,
        mut obj: Value,
        manager: &str,
        subresource: Option<&str>,
    ) -> Result<Value, ApiError> {
        let now = format_time(self.now());
        let mut inner = self.lock();
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        let ns = if gvr.namespaced {
            meta_str(&obj, "namespace").map(str::to_string)
        } else {
            None
        };
        let key = obj_key(ns.as_deref(), &name);
        let Some(old) = inner
            .objects
            .get(&gvr.key())
            .and_then(|m| m.get(&key))
            .map(|o| o.value())
        else {
            return Err(ApiError::not_found(gvr, &name));
        };
        if let Some(rv) = meta_str(&obj, "resourceVersion")
            && !rv.is_empty()
            && Some(rv) != meta_str(&old, "resourceVersion")
        {
            return Err(ApiError::conflict(gvr, &name));
        }
        if subresource != Some("status") {
            defaults::apply(gvr, &mut obj);
        }
        let given_fields = obj.pointer("/metadata/managedFields").cloned();
        merge_for_write(gvr, &old, &mut obj, subresource);
        if !manager.is_empty() {
            let base = fields::rewritten_base(&old, given_fields.as_ref(), subresource);
            fields::record_update(Some(&base), &mut obj, manager, subresource, &now);
        } else if let Some(mf) = given_fields {
            obj["metadata"]["managedFields"] = mf;
        }
        if same_content(&old, &obj) {
            return Ok(old);
        }
        let finalizing = obj.pointer("/metadata/deletionTimestamp").is_some()
            && obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(|f| f.is_empty());
        if finalizing {
            return remove(&self.tx, &mut inner, gvr, &key, obj);
        }
        commit(
            &self.tx,
            &mut inner,
            gvr,
            key,
            obj,
            StoreEventType::Modified,
        )
    }

    /// Deletes an object (objects with finalizers get a deletionTimestamp instead); its
    /// dependents whose owners are all gone are deleted too (background propagation).
    pub fn delete(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let out = self.delete_one(gvr, namespace, name)?;
        self.collect_garbage();
        Ok(out)
    }

    fn delete_one(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let now = format_time(self.now());
        let out = {
            let mut inner = self.lock();
            let ns = if gvr.namespaced { namespace } else { None };
            let key = obj_key(ns, name);
            let Some(mut old) = inner
                .objects
                .get(&gvr.key())
                .and_then(|m| m.get(&key))
                .map(|o| o.value())
            else {
                return Err(ApiError::not_found(gvr, name));
            };
            let has_finalizers = old
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if has_finalizers {
                if old.pointer("/metadata/deletionTimestamp").is_some() {
                    return Ok(old);
                }
                old["metadata"]["deletionTimestamp"] = json!(now);
                old["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                return commit(
                    &self.tx,
                    &mut inner,
                    gvr,
                    key,
                    old,
                    StoreEventType::Modified,
                );
            }
            remove(&self.tx, &mut inner, gvr, &key, old)?
        };
        Ok(out)
    }
}

fn commit(
    tx: &broadcast::Sender<StoreEvent>,
    inner: &mut Inner,
    gvr: &Gvr,
    key: String,
    mut obj: Value,
    event_type: StoreEventType,
) -> Result<Value, ApiError> {
    inner.rv += 1;
    let rv = inner.rv;
    obj["metadata"]["resourceVersion"] = json!(rv.to_string());
    let stored = Arc::new(StoredObject::new(&obj));
    let kind = gvr.key();
    let old = inner
        .objects
        .entry(kind.clone())
        .or_default()
        .insert(key.clone(), Arc::clone(&stored));
    inner
        .indexes
        .replace(&kind, &key, old.as_deref(), Some(&stored));
    publish(tx, inner, gvr, event_type, stored, rv);
    Ok(obj)
}

fn remove(
    tx: &broadcast::Sender<StoreEvent>,
    inner: &mut Inner,
    gvr: &Gvr,
    key: &str,
    mut obj: Value,
) -> Result<Value, ApiError> {
    let kind = gvr.key();
    let old = inner.objects.get_mut(&kind).and_then(|m| m.remove(key));
    inner.indexes.replace(&kind, key, old.as_deref(), None);
    inner.rv += 1;
    let rv = inner.rv;
    obj["metadata"]["resourceVersion"] = json!(rv.to_string());
    let stored = Arc::new(StoredObject::new(&obj));
    publish(tx, inner, gvr, StoreEventType::Deleted, stored, rv);
    Ok(obj)
}

fn publish(
    tx: &broadcast::Sender<StoreEvent>,
    inner: &mut Inner,
    gvr: &Gvr,
    event_type: StoreEventType,
    object: Arc<StoredObject>,
    rv: u64,
) {
    let ev = StoreEvent {
        resource: gvr.key(),
        event_type,
        object,
        resource_version: rv,
    };
    inner.history.push(ev.clone());
    let _ = tx.send(ev);
}
