//! The in-memory object store behind the simulated API server: typed by [`Gvr`], one global
//! resourceVersion counter, a bounded event history for watches and a broadcast of every
//! change. The HTTP layer, the controllers and the kubelet all write through it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::api::fields;

/// A group/version/resource with its kind and scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gvr {
    /// API group, "" for the core group.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource name.
    pub resource: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl Gvr {
    /// The resource key used in events and errors: `pods`, `deployments.apps`.
    pub fn key(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether objects of this kind carry `metadata.generation`.
    pub fn has_generation(&self) -> bool {
        !matches!(
            self.resource,
            "configmaps" | "secrets" | "namespaces" | "nodes" | "events" | "leases"
        )
    }

    /// A Gvr for a kind defined at run time (a CRD); the strings are interned.
    pub fn dynamic(
        group: &str,
        version: &str,
        resource: &str,
        kind: &str,
        namespaced: bool,
    ) -> Gvr {
        Gvr {
            group: intern(group),
            version: intern(version),
            resource: intern(resource),
            kind: intern(kind),
            namespaced,
        }
    }
}

fn intern(s: &str) -> &'static str {
    static POOL: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = pool.get_or_insert_with(HashSet::new);
    if let Some(v) = pool.get(s) {
        return v;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    pool.insert(leaked);
    leaked
}

/// The built-in kinds.
pub mod gvr {
    use super::Gvr;

    const fn g(
        group: &'static str,
        version: &'static str,
        resource: &'static str,
        kind: &'static str,
        namespaced: bool,
    ) -> Gvr {
        Gvr {
            group,
            version,
            resource,
            kind,
            namespaced,
        }
    }
    /// v1 Pod.
    pub const PODS: Gvr = g("", "v1", "pods", "Pod", true);
    /// v1 Node.
    pub const NODES: Gvr = g("", "v1", "nodes", "Node", false);
    /// v1 Namespace.
    pub const NAMESPACES: Gvr = g("", "v1", "namespaces", "Namespace", false);
    /// v1 Event.
    pub const EVENTS: Gvr = g("", "v1", "events", "Event", true);
    /// v1 ConfigMap.
    pub const CONFIGMAPS: Gvr = g("", "v1", "configmaps", "ConfigMap", true);
    /// v1 Secret.
    pub const SECRETS: Gvr = g("", "v1", "secrets", "Secret", true);
    /// apps/v1 Deployment.
    pub const DEPLOYMENTS: Gvr = g("apps", "v1", "deployments", "Deployment", true);
    /// apps/v1 ReplicaSet.
    pub const REPLICASETS: Gvr = g("apps", "v1", "replicasets", "ReplicaSet", true);
    /// apps/v1 StatefulSet.
    pub const STATEFULSETS: Gvr = g("apps", "v1", "statefulsets", "StatefulSet", true);
    /// apps/v1 DaemonSet.
    pub const DAEMONSETS: Gvr = g("apps", "v1", "daemonsets", "DaemonSet", true);
    /// autoscaling/v2 HorizontalPodAutoscaler.
    pub const HPAS: Gvr = g(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        true,
    );
    /// policy/v1 PodDisruptionBudget.
    pub const PDBS: Gvr = g(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
    );
    /// coordination.k8s.io/v1 Lease.
    pub const LEASES: Gvr = g("coordination.k8s.io", "v1", "leases", "Lease", true);
    /// apiextensions.k8s.io/v1 CustomResourceDefinition.
    pub const CRDS: Gvr = g(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
    );
    /// admissionregistration.k8s.io/v1 MutatingWebhookConfiguration.
    pub const MUTATING_WEBHOOK_CONFIGURATIONS: Gvr = g(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        false,
    );
    /// Every built-in kind.
    pub const ALL: &[Gvr] = &[
        PODS,
        NODES,
        NAMESPACES,
        EVENTS,
        CONFIGMAPS,
        SECRETS,
        DEPLOYMENTS,
        REPLICASETS,
        STATEFULSETS,
        DAEMONSETS,
        HPAS,
        PDBS,
        LEASES,
        CRDS,
        MUTATING_WEBHOOK_CONFIGURATIONS,
    ];
}

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
    /// The object after the change (for deletes: as deleted, with the delete's RV).
    pub object: Value,
    /// The RV of the change.
    pub resource_version: u64,
}

/// An API error, rendered as a metav1 Status.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Status reason (NotFound, Conflict, Invalid, ...).
    pub reason: String,
    /// Status message.
    pub message: String,
    /// Status details.
    pub details: Option<Value>,
}

impl ApiError {
    /// A new error.
    pub fn new(
        code: u16,
        reason: &str,
        message: impl Into<String>,
        details: Option<Value>,
    ) -> ApiError {
        ApiError {
            code,
            reason: reason.into(),
            message: message.into(),
            details,
        }
    }
    /// 404 NotFound for a named object.
    pub fn not_found(gvr: &Gvr, name: &str) -> ApiError {
        Self::named(
            404,
            "NotFound",
            gvr,
            name,
            format!("{} \"{name}\" not found", gvr.key()),
        )
    }
    /// 409 AlreadyExists.
    pub fn already_exists(gvr: &Gvr, name: &str) -> ApiError {
        Self::named(
            409,
            "AlreadyExists",
            gvr,
            name,
            format!("{} \"{name}\" already exists", gvr.key()),
        )
    }
    /// 409 Conflict on a stale resourceVersion.
    pub fn conflict(gvr: &Gvr, name: &str) -> ApiError {
        let msg = format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            gvr.key()
        );
        Self::named(409, "Conflict", gvr, name, msg)
    }
    /// 400 BadRequest without details.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message, None)
    }
    /// 422 Invalid with causes `(reason, field, message)`; the message lists them.
    pub fn invalid(
        kind: &str,
        group: &str,
        name: &str,
        causes: &[(String, String, String)],
    ) -> ApiError {
        let kind_str = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let parts: Vec<String> = causes.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
        let joined = if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        };
        let message = format!("{kind_str} \"{name}\" is invalid: {joined}");
        let causes: Vec<Value> = causes
            .iter()
            .map(|(r, f, m)| json!({"reason": r, "message": format!("{f}: {m}").split_once(": ").map(|x| x.1.to_string()).unwrap_or_default(), "field": f}))
            .collect();
        let mut details = json!({"name": name, "kind": kind, "causes": causes});
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        ApiError::new(422, "Invalid", message, Some(details))
    }
    fn named(code: u16, reason: &str, gvr: &Gvr, name: &str, message: String) -> ApiError {
        let mut details = json!({"name": name, "kind": gvr.resource});
        if !gvr.group.is_empty() {
            details["group"] = json!(gvr.group);
        }
        ApiError::new(code, reason, message, Some(details))
    }
    /// The metav1 Status body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// Supplies the wall-clock time stamps written into objects.
pub type TimeSource = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// Events kept for watch replay.
const DEFAULT_HISTORY: usize = 20_000;

struct Inner {
    rv: u64,
    objects: HashMap<String, BTreeMap<String, Value>>,
    history: VecDeque<StoreEvent>,
    history_limit: usize,
    /// Every event with an RV above this is in `history`.
    history_start: u64,
    kinds: BTreeMap<String, Gvr>,
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
            history: VecDeque::new(),
            history_limit: DEFAULT_HISTORY,
            history_start: 0,
            kinds,
        };
        let (tx, _) = broadcast::channel(65_536);
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

    /// Limits the watch history to `n` events (older watches get 410 Gone).
    pub fn set_history_limit(&self, n: usize) {
        let mut inner = self.lock();
        inner.history_limit = n.max(1);
        trim_history(&mut inner);
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

    /// One object.
    pub fn get(&self, gvr: &Gvr, namespace: Option<&str>, name: &str) -> Option<Value> {
        let ns = if gvr.namespaced { namespace } else { None };
        self.lock()
            .objects
            .get(&gvr.key())?
            .get(&obj_key(ns, name))
            .cloned()
    }

    /// All objects of a kind (in one namespace, or all when None), sorted by namespace and
    /// name, with the store's current RV.
    pub fn list(&self, gvr: &Gvr, namespace: Option<&str>) -> (Vec<Value>, u64) {
        let inner = self.lock();
        let items = match inner.objects.get(&gvr.key()) {
            Some(m) => m
                .values()
                .filter(|o| {
                    namespace.is_none() || !gvr.namespaced || meta_str(o, "namespace") == namespace
                })
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        (items, inner.rv)
    }

    /// A receiver of every change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<StoreEvent> {
        self.tx.subscribe()
    }

    /// The events of `resource` after `rv` still in history, and a receiver for everything
    /// after them; Err(410 Expired) when `rv` is older than the history.
    pub fn watch_from(
        &self,
        resource: &str,
        rv: u64,
    ) -> Result<(Vec<StoreEvent>, broadcast::Receiver<StoreEvent>), ApiError> {
        let inner = self.lock();
        if rv < inner.history_start {
            return Err(ApiError::new(
                410,
                "Expired",
                format!(
                    "too old resource version: {rv} ({})",
                    inner.history_start + 1
                ),
                None,
            ));
        }
        let events = inner
            .history
            .iter()
            .filter(|e| e.resource_version > rv && e.resource == resource)
            .cloned()
            .collect();
        Ok((events, self.tx.subscribe()))
    }

    /// The oldest RV a watch may start from.
    pub fn history_start(&self) -> u64 {
        self.lock().history_start
    }

    /// Creates an object (fills uid, resourceVersion, creationTimestamp, generation, a name
    /// from generateName and a managedFields entry for `manager`; with an empty `manager`
    /// the object's managedFields are kept as given).
    pub fn create(&self, gvr: &Gvr, mut obj: Value, manager: &str) -> Result<Value, ApiError> {
        let now = format_time(self.now());
        let mut inner = self.lock();
        prepare_create(gvr, &mut obj, &now)?;
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
            .cloned()
        else {
            return Err(ApiError::not_found(gvr, &name));
        };
        if let Some(rv) = meta_str(&obj, "resourceVersion")
            && !rv.is_empty()
            && Some(rv) != meta_str(&old, "resourceVersion")
        {
            return Err(ApiError::conflict(gvr, &name));
        }
        let given_fields = obj.pointer("/metadata/managedFields").cloned();
        merge_for_write(gvr, &old, &mut obj, subresource);
        if !manager.is_empty() {
            fields::record_update(Some(&old), &mut obj, manager, subresource, &now);
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
                .cloned()
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

    /// Deletes every object whose ownerReferences all point to objects that no longer exist,
    /// and every object in a namespace that no longer exists.
    pub fn collect_garbage(&self) {
        let mut tried = HashSet::new();
        loop {
            let victims: Vec<_> = {
                let inner = self.lock();
                orphans(&inner)
                    .into_iter()
                    .filter(|v| !tried.contains(v))
                    .collect()
            };
            if victims.is_empty() {
                return;
            }
            for v in victims {
                let (g, ns, name) = &v;
                let _ = self.delete_one(g, ns.as_deref(), name);
                tried.insert(v);
            }
        }
    }
}

type Victim = (Gvr, Option<String>, String);

fn orphans(inner: &Inner) -> Vec<Victim> {
    let mut uids = HashSet::new();
    let ns_map = inner.objects.get(&gvr::NAMESPACES.key());
    for m in inner.objects.values() {
        for o in m.values() {
            if let Some(u) = meta_str(o, "uid") {
                uids.insert(u.to_string());
            }
        }
    }
    let mut out = Vec::new();
    for (key, m) in &inner.objects {
        let Some(g) = inner.kinds.get(key) else {
            continue;
        };
        for o in m.values() {
            let ns = meta_str(o, "namespace").filter(|_| g.namespaced);
            let ns_gone =
                ns.is_some_and(|ns| !ns_map.is_some_and(|n| n.contains_key(&obj_key(None, ns))));
            let owners = o
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array);
            let owner_gone = owners.is_some_and(|refs| {
                !refs.is_empty()
                    && refs.iter().all(|r| {
                        r.get("uid")
                            .and_then(Value::as_str)
                            .is_none_or(|u| !uids.contains(u))
                    })
            });
            if ns_gone || owner_gone {
                out.push((
                    *g,
                    ns.map(str::to_string),
                    meta_str(o, "name").unwrap_or_default().to_string(),
                ));
            }
        }
    }
    out
}

fn prepare_create(gvr: &Gvr, obj: &mut Value, now: &str) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not an object",
        ));
    }
    if obj.get("metadata").is_none_or(|m| !m.is_object()) {
        obj["metadata"] = json!({});
    }
    obj["apiVersion"] = json!(gvr.api_version());
    obj["kind"] = json!(gvr.kind);
    let meta = &mut obj["metadata"];
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        let Some(prefix) = meta.get("generateName").and_then(Value::as_str) else {
            let causes = [(
                "FieldValueRequired".to_string(),
                "metadata.name".to_string(),
                "Required value: name or generateName is required".to_string(),
            )];
            return Err(ApiError::invalid(gvr.kind, gvr.group, "", &causes));
        };
        meta["name"] = json!(format!("{prefix}{}", random_suffix()));
    }
    if !gvr.namespaced
        && let Some(m) = meta.as_object_mut()
    {
        m.remove("namespace");
    }
    meta["uid"] = json!(uuid::Uuid::new_v4().to_string());
    meta["creationTimestamp"] = json!(now);
    if let Some(m) = meta.as_object_mut() {
        m.remove("resourceVersion");
        m.remove("deletionTimestamp");
    }
    if gvr.has_generation() {
        meta["generation"] = json!(1);
    }
    Ok(())
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4().as_bytes()[..5]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// Fills the fields a write may not change from the stored object.
fn merge_for_write(gvr: &Gvr, old: &Value, obj: &mut Value, subresource: Option<&str>) {
    if !obj.is_object() {
        return;
    }
    if subresource == Some("status") {
        let status = obj.get("status").cloned();
        *obj = old.clone();
        match status {
            Some(s) => obj["status"] = s,
            None => {
                if let Some(m) = obj.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        return;
    }
    obj["apiVersion"] = json!(gvr.api_version());
    obj["kind"] = json!(gvr.kind);
    if obj.get("metadata").is_none_or(|m| !m.is_object()) {
        obj["metadata"] = json!({});
    }
    for f in [
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "managedFields",
        "namespace",
    ] {
        match old["metadata"].get(f) {
            Some(v) => obj["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = obj["metadata"].as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
    if subresource.is_none() && !is_statusless(gvr) {
        match old.get("status") {
            Some(s) => obj["status"] = s.clone(),
            None => {
                if let Some(m) = obj.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    // A binding (the scheduler setting spec.nodeName) does not bump the generation.
    if gvr.has_generation() && subresource != Some("binding") && spec_changed(old, obj) {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        obj["metadata"]["generation"] = json!(g + 1);
    }
}

fn is_statusless(gvr: &Gvr) -> bool {
    matches!(
        gvr.resource,
        "configmaps" | "secrets" | "events" | "leases" | "mutatingwebhookconfigurations"
    )
}

fn strip_meta(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    v
}

fn spec_changed(old: &Value, new: &Value) -> bool {
    strip_meta(old) != strip_meta(new)
}

fn same_content(old: &Value, new: &Value) -> bool {
    let norm = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            if let Some(Value::Array(mf)) = m.get_mut("managedFields") {
                for e in mf.iter_mut() {
                    if let Some(e) = e.as_object_mut() {
                        e.remove("time");
                    }
                }
            }
        }
        v
    };
    norm(old) == norm(new)
}

fn trim_history(inner: &mut Inner) {
    while inner.history.len() > inner.history_limit {
        if let Some(e) = inner.history.pop_front() {
            inner.history_start = e.resource_version;
        }
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
    inner
        .objects
        .entry(gvr.key())
        .or_default()
        .insert(key, obj.clone());
    publish(tx, inner, gvr, event_type, obj.clone(), rv);
    Ok(obj)
}

fn remove(
    tx: &broadcast::Sender<StoreEvent>,
    inner: &mut Inner,
    gvr: &Gvr,
    key: &str,
    mut obj: Value,
) -> Result<Value, ApiError> {
    if let Some(m) = inner.objects.get_mut(&gvr.key()) {
        m.remove(key);
    }
    inner.rv += 1;
    let rv = inner.rv;
    obj["metadata"]["resourceVersion"] = json!(rv.to_string());
    publish(tx, inner, gvr, StoreEventType::Deleted, obj.clone(), rv);
    Ok(obj)
}

fn publish(
    tx: &broadcast::Sender<StoreEvent>,
    inner: &mut Inner,
    gvr: &Gvr,
    event_type: StoreEventType,
    object: Value,
    rv: u64,
) {
    let ev = StoreEvent {
        resource: gvr.key(),
        event_type,
        object,
        resource_version: rv,
    };
    inner.history.push_back(ev.clone());
    trim_history(inner);
    let _ = tx.send(ev);
}
