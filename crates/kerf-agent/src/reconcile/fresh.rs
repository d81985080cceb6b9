//! The reconciler's own writes to a workload, its pods and its HPAs, and whether the
//! caches show them yet: a pass over a workload waits until they do (the rule is
//! [`kerf_decide::pass::fresh`]; the rsr's own writes are the [`super::memory::WriteLedger`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use kerf_decide::pass::fresh::{OwnWrite, holds_back};

use crate::cache::{HpaInfo, PodInfo, WorkloadInfo, WorkloadKey};
use crate::context::Context;

/// The objects of one workload as the caches show them when its pass starts: read once,
/// then checked for the agent's own writes ([`ObjectWrites::holds_back`])
/// and made into the pass.
pub struct Snapshot {
    /// The workload, if the cache has it.
    pub workload: Option<Arc<WorkloadInfo>>,
    /// All its pods, terminating ones included.
    pub all_pods: Vec<Arc<PodInfo>>,
    /// The HPAs scaling it.
    pub hpas: Vec<Arc<HpaInfo>>,
}

impl Snapshot {
    /// Reads `key`'s workload, pods and HPAs from the caches.
    pub fn read(ctx: &Context, key: &WorkloadKey) -> Snapshot {
        Snapshot {
            workload: ctx.cache.workload(key),
            all_pods: ctx.cache.pods_of(key),
            hpas: ctx.cache.hpas_for(key),
        }
    }
}

/// An object of a workload the reconciler wrote.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Written {
    /// The workload itself (its template, a release, its managedFields).
    Workload,
    /// One of its pods (a resize, an eviction).
    Pod(String),
    /// One of its HPAs (a target).
    Hpa(String),
}

/// The writes of one pass, gathered while its step runs, and when the write limit has a
/// token for the write it held back, if it held one back.
#[derive(Debug, Default)]
pub struct PassWrites(
    Mutex<Vec<(Written, OwnWrite)>>,
    Mutex<Option<DateTime<Utc>>>,
);

impl PassWrites {
    /// Notes a write to `object` answered with `answer`, sent when the cache showed
    /// `replaced`.
    pub fn push(&self, object: Written, answer: Option<String>, replaced: &str, at: DateTime<Utc>) {
        let write = OwnWrite {
            answer,
            replaced: (!replaced.is_empty()).then(|| replaced.to_owned()),
            at,
        };
        let mut writes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        writes.push((object, write));
    }

    /// The writes noted so far.
    pub fn take(&self) -> Vec<(Written, OwnWrite)> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Notes that a write waits for the token due at `at`.
    pub fn token_due(&self, at: DateTime<Utc>) {
        *self.1.lock().unwrap_or_else(PoisonError::into_inner) = Some(at);
    }

    /// When the token of the write held back is due, if a write was held back.
    pub fn held_back(&self) -> Option<DateTime<Utc>> {
        *self.1.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The last write to each object of each workload that the caches did not show yet.
#[derive(Debug, Default)]
pub struct ObjectWrites {
    by_key: HashMap<WorkloadKey, Vec<(Written, OwnWrite)>>,
}

impl ObjectWrites {
    /// Gives back the room a burst of writes left ([`super::memory::shrink_sparse`]).
    pub fn shrink_sparse(&mut self) {
        super::memory::shrink_sparse(&mut self.by_key);
    }

    /// Records the writes of a pass over `key`; a later write to an object replaces the
    /// earlier one.
    pub fn record(&mut self, key: &WorkloadKey, writes: Vec<(Written, OwnWrite)>) {
        if writes.is_empty() {
            return;
        }
        let list = self.by_key.entry(key.clone()).or_default();
        for (object, write) in writes {
            list.retain(|(o, _)| *o != object);
            list.push((object, write));
        }
    }

    /// Takes out the writes of `key` (for a pass that runs on its own).
    pub fn take_key(&mut self, key: &WorkloadKey) -> ObjectWrites {
        ObjectWrites {
            by_key: self.by_key.remove_entry(key).into_iter().collect(),
        }
    }

    /// Puts back what [`ObjectWrites::take_key`] took, with what the pass added.
    pub fn extend(&mut self, other: ObjectWrites) {
        self.by_key.extend(other.by_key);
    }

    /// Whether `key` has writes the caches did not show yet.
    pub fn has(&self, key: &WorkloadKey) -> bool {
        self.by_key.contains_key(key)
    }

    /// When the last of `key`'s writes the caches do not show stops holding its passes
    /// back even unseen: the watch event of the write wakes the workload before, this is
    /// the cap.
    pub fn unseen_until(&self, key: &WorkloadKey) -> Option<DateTime<Utc>> {
        let list = self.by_key.get(key)?;
        list.iter()
            .map(|(_, w)| w.at + kerf_decide::pass::fresh::WRITE_VISIBLE_WITHIN)
            .max()
    }

    /// Whether `seen`, the caches as the pass read them, still lacks a write to `key`'s
    /// objects that holds its passes back at `now`; writes it shows (or that expired) are
    /// forgotten.
    pub fn holds_back(&mut self, key: &WorkloadKey, seen: &Snapshot, now: DateTime<Utc>) -> bool {
        let Some(list) = self.by_key.get_mut(key) else {
            return false;
        };
        let Snapshot {
            workload,
            all_pods: pods,
            hpas,
        } = seen;
        list.retain(|(object, write)| {
            let pod_version: Option<String>;
            let cached = match object {
                Written::Workload => workload.as_ref().map(|w| w.resource_version.as_str()),
                Written::Pod(name) => {
                    pod_version = pods
                        .iter()
                        .find(|p| *p.name == **name)
                        .map(|p| p.resource_version.to_string());
                    pod_version.as_deref()
                }
                Written::Hpa(name) => hpas
                    .iter()
                    .find(|h| h.name == *name)
                    .map(|h| h.resource_version.as_str()),
            };
            holds_back(write, cached, now)
        });
        if list.is_empty() {
            self.by_key.remove(key);
            return false;
        }
        true
    }
}
