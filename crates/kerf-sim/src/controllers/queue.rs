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
