//! The work queue of a controller loop, as an informer and work queue do it in
//! kube-controller-manager: each change is turned into the `namespace/name` keys of the
//! workloads it concerns (the object itself, or its owners through the store's uid index),
//! a burst of changes is coalesced into one set of keys, and only those are reconciled.
//! A full pass runs at start, after the loop fell behind the change stream, and as a
//! resync whose period grows with the cost of a full pass, so that a cluster at rest costs
//! next to nothing however many objects it holds.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

use crate::store::{StoreEvent, StoreEventType, StoredObject};

use super::Ctx;

/// A workload's `(namespace, name)`.
pub type Key = (String, String);

/// What a loop reconciles next.
#[derive(Debug, PartialEq, Eq)]
pub enum Work {
    /// Every object of the loop.
    All,
    /// Only these objects.
    Keys(BTreeSet<Key>),
}

/// A full resync waits at least this many times what the last full pass took.
const RESYNC_COST_FACTOR: u32 = 100;

/// How a loop maps a change to the keys of its own objects.
#[derive(Debug, Clone, Copy)]
pub struct Routing {
    /// The resource key of the loop's own objects (e.g. `deployments.apps`).
    pub primary: &'static str,
    /// How many owner hops lead from a dependent to the loop's object (a pod is two hops
    /// from its Deployment).
    pub owner_depth: usize,
    /// Resources whose change means a full pass (e.g. nodes for DaemonSets).
    pub full_on: &'static [&'static str],
    /// Resources whose Modified events concern no object of the loop (only their creation
    /// and deletion do).
    pub ignore_modified: &'static [&'static str],
}

fn key_of(obj: &StoredObject) -> Key {
    (
        obj.namespace().unwrap_or_default().to_string(),
        obj.name().to_string(),
    )
}

fn owner_uids(obj: &StoredObject) -> Vec<String> {
    obj.owner_uids()
        .into_iter()
        .flatten()
        .flatten()
        .map(str::to_string)
        .collect()
}

impl Routing {
    /// Adds the keys `ev` concerns to `keys`; false when it calls for a full pass.
    pub fn route(&self, ctx: &Ctx, ev: &StoreEvent, keys: &mut BTreeSet<Key>) -> bool {
        let resource = ev.resource.as_str();
        if self.full_on.contains(&resource) {
            return false;
        }
        if resource == self.primary {
            keys.insert(key_of(&ev.object));
            return true;
        }
        if ev.event_type == StoreEventType::Modified && self.ignore_modified.contains(&resource) {
            return true;
        }
        let mut frontier = owner_uids(&ev.object);
        for _ in 0..self.owner_depth {
            let mut next = Vec::new();
            for uid in frontier {
                match ctx.store.by_uid(&uid) {
                    Some((kind, owner)) if kind == self.primary => {
                        keys.insert(key_of(&owner));
                    }
                    Some((_, owner)) => next.extend(owner_uids(&owner)),
                    None => {}
                }
            }
            frontier = next;
        }
        true
    }
}

/// When the next full resync is due.
#[derive(Debug)]
pub struct Resync {
    min: Duration,
    due: Instant,
}

impl Resync {
    /// A resync at least every `min`.
    pub fn new(min: Duration) -> Resync {
        Resync {
            min,
            due: Instant::now() + min,
        }
    }

    /// Notes a full pass that ended now and took `cost`.
    pub fn done(&mut self, cost: Duration) {
        self.due = Instant::now() + self.min.max(cost * RESYNC_COST_FACTOR);
    }

    /// When the next full pass is due.
    pub fn due(&self) -> Instant {
        self.due
    }
}

/// Keys to look at again once `after` has passed (time alone changes their state).
#[derive(Debug, Default)]
pub struct Timed {
    keys: BTreeSet<Key>,
    due: Option<Instant>,
}

impl Timed {
    /// Adds keys, due `after` from now unless already due sooner.
    pub fn add(&mut self, keys: impl IntoIterator<Item = Key>, after: Duration) {
        let before = self.keys.len();
        self.keys.extend(keys);
        if self.keys.len() > before && self.due.is_none() {
            self.due = Some(Instant::now() + after);
        }
    }

    /// When the keys are due (None: no key waits).
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// Takes the waiting keys.
    pub fn take(&mut self) -> BTreeSet<Key> {
        self.due = None;
        std::mem::take(&mut self.keys)
    }

    /// Forgets every waiting key (a full pass looks at them all).
    pub fn clear(&mut self) {
        self.take();
    }
}

/// Waits for the next work: the keys of a burst of relevant changes, the timed keys or a
/// full resync when due. None once the store is gone.
pub async fn next_work(
    ctx: &Ctx,
    routing: &Routing,
    resources: &[&str],
    rx: &mut broadcast::Receiver<StoreEvent>,
    resync: &Resync,
    timed: &mut Timed,
) -> Option<Work> {
    let wake = timed.due().map_or(resync.due(), |t| t.min(resync.due()));
    let first = tokio::select! {
        r = rx.recv() => r,
        () = tokio::time::sleep_until(wake.into()) => {
            return Some(if Instant::now() >= resync.due() { Work::All } else { Work::Keys(timed.take()) });
        }
    };
    let mut keys = BTreeSet::new();
    let mut full = false;
    let mut take = |ev: &StoreEvent, keys: &mut BTreeSet<Key>| {
        if resources.contains(&ev.resource.as_str()) && !routing.route(ctx, ev, keys) {
            full = true;
        }
    };
    match first {
        Ok(ev) => take(&ev, &mut keys),
        Err(RecvError::Lagged(_)) => return Some(Work::All),
        Err(RecvError::Closed) => return None,
    }
    loop {
        match rx.try_recv() {
            Ok(ev) => take(&ev, &mut keys),
            Err(TryRecvError::Lagged(_)) => return Some(Work::All),
            Err(TryRecvError::Empty) => break,
            Err(TryRecvError::Closed) => return None,
        }
    }
    Some(if full { Work::All } else { Work::Keys(keys) })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::*;
    use crate::context::{SimConfig, SimContext};
    use crate::store::gvr;

    fn uid(v: &Value) -> String {
        v.pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }

    fn owned_by(kind: &str, name: &str, owner: &Value) -> Value {
        json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "ns",
            "ownerReferences": [{"uid": uid(owner), "controller": true}]}})
    }

    fn event(resource: &str, obj: &Value, t: StoreEventType) -> StoreEvent {
        StoreEvent {
            resource: resource.to_string(),
            event_type: t,
            object: Arc::new(StoredObject::new(obj)),
            resource_version: 1,
        }
    }

    /// A Deployment `web` with a ReplicaSet and a pod, in a context without controllers.
    fn cluster() -> anyhow::Result<(SimContext, Value)> {
        let ctx = SimContext::new(SimConfig::default());
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}});
        ctx.store.create(&gvr::NAMESPACES, ns, "t")?;
        let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns"}, "spec": {"template": {}}});
        let dep = ctx.store.create(&gvr::DEPLOYMENTS, dep, "t")?;
        let rs = ctx.store.create(
            &gvr::REPLICASETS,
            owned_by("ReplicaSet", "web-1", &dep),
            "t",
        )?;
        let pod = ctx
            .store
            .create(&gvr::PODS, owned_by("Pod", "web-1-a", &rs), "t")?;
        Ok((ctx, pod))
    }

    fn deployments() -> Routing {
        Routing {
            primary: "deployments.apps",
            owner_depth: 2,
            full_on: &["nodes"],
            ignore_modified: &["pods"],
        }
    }

    #[test]
    fn a_pod_created_or_deleted_reaches_its_deployment_through_its_replicaset() {
        let (ctx, pod) = cluster().unwrap();
        let web = ("ns".to_string(), "web".to_string());
        for t in [StoreEventType::Added, StoreEventType::Deleted] {
            let mut keys = BTreeSet::new();
            assert!(deployments().route(&ctx, &event("pods", &pod, t), &mut keys));
            assert_eq!(keys, BTreeSet::from([web.clone()]), "{t:?}");
        }
    }

    #[test]
    fn a_pod_status_change_does_not_wake_deployments_but_wakes_its_replicaset() {
        let (ctx, pod) = cluster().unwrap();
        let ev = event("pods", &pod, StoreEventType::Modified);
        let mut keys = BTreeSet::new();
        assert!(deployments().route(&ctx, &ev, &mut keys));
        assert!(keys.is_empty(), "{keys:?}");
        let replicasets = Routing {
            primary: "replicasets.apps",
            owner_depth: 1,
            full_on: &[],
            ignore_modified: &[],
        };
        assert!(replicasets.route(&ctx, &ev, &mut keys));
        assert_eq!(keys, BTreeSet::from([("ns".into(), "web-1".into())]));
    }

    #[test]
    fn an_own_object_is_its_key_and_a_full_pass_resource_asks_for_one() {
        let (ctx, _) = cluster().unwrap();
        let other = json!({"metadata": {"name": "api", "namespace": "ns", "uid": "x"}});
        let mut keys = BTreeSet::new();
        let ev = event("deployments.apps", &other, StoreEventType::Deleted);
        assert!(deployments().route(&ctx, &ev, &mut keys));
        assert_eq!(keys, BTreeSet::from([("ns".into(), "api".into())]));
        let node = json!({"metadata": {"name": "n1"}});
        let ev = event("nodes", &node, StoreEventType::Modified);
        assert!(!deployments().route(&ctx, &ev, &mut keys));
    }

    #[test]
    fn the_resync_waits_a_hundred_times_the_cost_of_a_full_pass() {
        let mut r = Resync::new(Duration::from_secs(1));
        r.done(Duration::from_millis(1));
        let soon = r.due().saturating_duration_since(Instant::now());
        assert!(soon <= Duration::from_secs(1), "{soon:?}");
        r.done(Duration::from_millis(500));
        let later = r.due().saturating_duration_since(Instant::now());
        assert!(later > Duration::from_secs(49), "{later:?}");
    }
}
