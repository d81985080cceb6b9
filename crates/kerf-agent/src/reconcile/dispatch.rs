//! Passes over many workloads at once: each pass gets the part of the reconciler's
//! [`Memory`] that belongs to its workload, runs with up to `reconcile.concurrency` others,
//! and puts that part back when it ends. The [`Queue`] hands out the workloads: a slot
//! that frees takes the next ready workload at once (no pass waits for another's), and a
//! workload is in one pass at a time: one that turns dirty during its pass gets the next
//! pass after this one ends.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::Hash;

use super::memory::{Attempts, Memory, ReportLedger, Schedule, WriteLedger};
use crate::cache::{CacheSet, WorkloadKey};

/// How many ranks of urgency the [`Queue`] keeps apart (0 first).
const RANKS: usize = 4;

/// The workloads waiting for a pass, ranked by urgency, and those in one.
#[derive(Debug)]
pub struct Queue<K> {
    /// Ready keys, one lane per rank; a lane keeps the order keys came in.
    lanes: [VecDeque<K>; RANKS],
    /// The keys in a lane.
    queued: HashSet<K>,
    /// The keys in a pass.
    running: HashSet<K>,
    /// Keys that turned dirty during their pass, with their rank.
    again: HashMap<K, u8>,
    /// The number of passes at once.
    limit: usize,
}

impl<K: Clone + Eq + Hash> Queue<K> {
    /// Gives back the room a burst of keys left (the first pass over every workload
    /// queues them all): see [`super::memory::shrink_sparse`].
    pub fn shrink_sparse(&mut self) {
        for lane in &mut self.lanes {
            super::memory::shrink_sparse(lane);
        }
        super::memory::shrink_sparse(&mut self.queued);
        super::memory::shrink_sparse(&mut self.running);
        super::memory::shrink_sparse(&mut self.again);
    }

    /// An empty queue of `limit` slots (at least one).
    pub fn new(limit: usize) -> Queue<K> {
        Queue {
            lanes: Default::default(),
            queued: HashSet::new(),
            running: HashSet::new(),
            again: HashMap::new(),
            limit: limit.max(1),
        }
    }

    /// Marks `key` for a pass of urgency `rank` (0 first; higher ranks count as the
    /// last). A key already waiting keeps its place; a key in a pass gets another one
    /// after it.
    pub fn push(&mut self, key: K, rank: u8) {
        let rank = rank.min(u8::try_from(RANKS - 1).unwrap_or(0));
        if self.running.contains(&key) {
            let r = self.again.entry(key).or_insert(rank);
            *r = (*r).min(rank);
        } else if self.queued.insert(key.clone()) {
            self.lanes[usize::from(rank)].push_back(key);
        }
    }

    /// The next key to start a pass of, when a slot is free and a key is ready; the key
    /// counts as in a pass until [`Queue::done`].
    pub fn start(&mut self) -> Option<K> {
        if self.running.len() >= self.limit {
            return None;
        }
        let key = self.lanes.iter_mut().find_map(VecDeque::pop_front)?;
        self.queued.remove(&key);
        self.running.insert(key.clone());
        Some(key)
    }

    /// Ends the pass of `key`; if it turned dirty meanwhile it is ready again.
    pub fn done(&mut self, key: &K) {
        self.running.remove(key);
        if let Some(rank) = self.again.remove(key) {
            self.push(key.clone(), rank);
        }
    }

    /// Drops the mark of a trigger that came during `key`'s pass: it gets no pass after
    /// this one (it backs off and its timer brings it back).
    pub fn forget_again(&mut self, key: &K) {
        self.again.remove(key);
    }

    /// The number of passes running.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// The number of keys waiting for a slot.
    pub fn ready(&self) -> usize {
        self.queued.len()
    }

    /// Takes every key waiting for a slot out of the queue (keys in a pass stay, and so
    /// does a mark to run them again).
    pub fn take_ready(&mut self) -> Vec<K> {
        self.queued.clear();
        self.lanes.iter_mut().flat_map(std::mem::take).collect()
    }

    /// The keys in a pass.
    pub fn running_keys(&self) -> HashSet<K> {
        self.running.clone()
    }
}

/// A delivery report for events no ledger entry in the reconciler's memory names while
/// passes ran: they may be reports those passes hold or sent. It waits until each of
/// those passes ended.
pub struct HeldReport {
    /// The ids not yet matched.
    pub report: crate::outbox::DeliveryReport,
    /// The workloads whose passes ran when it came and have not ended yet.
    pub waiting: HashSet<crate::cache::WorkloadKey>,
}

/// Splits `report` into the ids `known` names and the others.
pub fn split_report(
    report: crate::outbox::DeliveryReport,
    known: impl Fn(&uuid::Uuid) -> bool,
) -> (
    Option<crate::outbox::DeliveryReport>,
    Option<crate::outbox::DeliveryReport>,
) {
    use crate::outbox::DeliveryReport as R;
    let part = |ids: Vec<uuid::Uuid>, make: fn(Vec<uuid::Uuid>) -> R| {
        let (a, b): (Vec<_>, Vec<_>) = ids.into_iter().partition(|id| known(id));
        let some = |v: Vec<uuid::Uuid>| (!v.is_empty()).then(|| make(v));
        (some(a), some(b))
    };
    match report {
        R::Acked(ids) => part(ids, R::Acked),
        R::Dropped(ids) => part(ids, R::Dropped),
        r @ R::Rejected { .. } => match &r {
            R::Rejected { id, .. } if known(id) => (Some(r), None),
            _ => (None, Some(r)),
        },
    }
}

/// Starts a pass (made by `start`) into `running` for every ready key while a slot is
/// free.
pub fn fill<K, F>(
    queue: &mut Queue<K>,
    running: &mut futures::stream::FuturesUnordered<F>,
    mut start: impl FnMut(K) -> F,
) where
    K: Clone + Eq + Hash,
{
    while let Some(key) = queue.start() {
        running.push(start(key));
    }
}

/// The ids of the changes the rsrs of `key` hold: the failure counts kept under them
/// belong to this workload's pass.
pub fn change_ids(cache: &CacheSet, key: &WorkloadKey) -> BTreeSet<String> {
    cache
        .rsrs_for(key)
        .iter()
        .filter_map(|e| e.rsr.as_ref().ok()?.status.as_ref()?.change.as_ref())
        .map(|c| c.id.clone())
        .collect()
}

/// Takes out of `memory` what the pass of `key` reads and writes. The acknowledged event
/// ids are copied (a pass only reads them); timers and backoff stay (the dispatcher keeps
/// them).
pub fn take(memory: &mut Memory, key: &WorkloadKey, change_ids: &BTreeSet<String>) -> Memory {
    let Memory {
        schedule: _,
        reports,
        writes,
        objects,
        attempts,
    } = memory;
    let ReportLedger {
        in_flight,
        acked_reports,
        acked_ids,
    } = reports;
    let mine: Vec<uuid::Uuid> = in_flight
        .iter()
        .filter(|(_, f)| &f.key == key)
        .map(|(id, _)| *id)
        .collect();
    let WriteLedger {
        superseded,
        invalid,
    } = writes;
    let Attempts {
        failures,
        refused_evictions,
    } = attempts;
    Memory {
        schedule: Schedule::default(),
        reports: ReportLedger {
            in_flight: mine
                .iter()
                .filter_map(|id| in_flight.remove_entry(id))
                .collect(),
            acked_reports: acked_reports.remove_entry(key).into_iter().collect(),
            acked_ids: acked_ids.clone(),
        },
        writes: WriteLedger {
            superseded: superseded.remove_entry(key).into_iter().collect(),
            invalid: invalid.remove_entry(key).into_iter().collect(),
        },
        objects: objects.take_key(key),
        attempts: Attempts {
            failures: change_ids
                .iter()
                .filter_map(|id| failures.remove_entry(id))
                .collect(),
            refused_evictions: {
                let (mine, rest) = std::mem::take(refused_evictions)
                    .into_iter()
                    .partition(|(id, _)| change_ids.contains(id));
                *refused_evictions = rest;
                mine
            },
        },
    }
}

/// Puts back what a pass took with [`take`] and what it added.
pub fn put_back(memory: &mut Memory, part: Memory) {
    let Memory {
        schedule,
        reports,
        writes,
        objects,
        attempts,
    } = part;
    memory.objects.extend(objects);
    let Schedule {
        timers,
        requeued,
        backoff,
    } = schedule;
    memory.schedule.timers.extend(timers);
    memory.schedule.requeued.extend(requeued);
    memory.schedule.backoff.extend(backoff);
    // The acknowledged ids were a copy: the shared list is the one kept.
    let ReportLedger {
        in_flight,
        acked_reports,
        acked_ids: _,
    } = reports;
    memory.reports.in_flight.extend(in_flight);
    for (key, acked) in acked_reports {
        memory
            .reports
            .acked_reports
            .entry(key)
            .or_default()
            .extend(acked);
    }
    let WriteLedger {
        superseded,
        invalid,
    } = writes;
    memory.writes.superseded.extend(superseded);
    memory.writes.invalid.extend(invalid);
    let Attempts {
        failures,
        refused_evictions,
    } = attempts;
    memory.attempts.failures.extend(failures);
    memory.attempts.refused_evictions.extend(refused_evictions);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::InFlight;
    use crate::reconcile::fresh::Written;
    use kerf_api::WorkloadKind;

    fn key(name: &str) -> WorkloadKey {
        WorkloadKey::new("a", WorkloadKind::Deployment, name)
    }

    fn in_flight(k: &WorkloadKey) -> InFlight {
        let candidate =
            kerf_decide::dedup::Candidate::new(kerf_api::EventType::Skipped, "Tolerance", None)
                .expect("candidate");
        InFlight {
            key: k.clone(),
            candidate,
            values: Default::default(),
            policy_hash: "h".into(),
        }
    }

    #[test]
    fn a_slot_that_frees_takes_the_next_ready_key_while_another_pass_still_runs() {
        use futures::FutureExt;
        use futures::future::BoxFuture;
        use futures::stream::{FuturesUnordered, StreamExt};
        // Slot count 2; the pass of "a" never ends (its sender is never used).
        let (_hold, blocked) = tokio::sync::oneshot::channel::<()>();
        let mut blocked = Some(blocked);
        let mut queue = Queue::new(2);
        for k in ["a", "b", "c", "d", "e"] {
            queue.push(k, 2);
        }
        let mut running: FuturesUnordered<BoxFuture<'static, &'static str>> =
            FuturesUnordered::new();
        let mut ended = Vec::new();
        for _ in 0..4 {
            fill(&mut queue, &mut running, |k| match (k, blocked.take()) {
                ("a", Some(rx)) => async move {
                    let _ = rx.await;
                    "a"
                }
                .boxed(),
                (k, _) => async move { k }.boxed(),
            });
            assert_eq!(queue.running(), 2, "a slot is idle while a key is ready");
            // The next pass to end is ready now: nothing waits for "a".
            let Some(Some(k)) = running.next().now_or_never() else {
                panic!("no pass ended while {} keys were ready", queue.ready());
            };
            queue.done(&k);
            ended.push(k);
        }
        assert_eq!(ended, ["b", "c", "d", "e"]);
        assert_eq!(queue.running(), 1, "only the pass of a still runs");
        assert!(running.next().now_or_never().is_none());
    }

    #[test]
    fn a_workload_dirty_during_its_pass_gets_one_more_pass_after_it() {
        let mut queue = Queue::new(4);
        queue.push("a", 2);
        assert_eq!(queue.start(), Some("a"));
        queue.push("a", 2);
        queue.push("a", 2);
        queue.push("b", 2);
        // "a" is in a pass: it is not started twice at once.
        assert_eq!(queue.start(), Some("b"));
        assert_eq!(queue.start(), None);
        queue.done(&"a");
        assert_eq!(queue.start(), Some("a"));
        assert_eq!(queue.start(), None, "one more pass, not one per trigger");
        queue.done(&"a");
        assert_eq!(queue.start(), None);
        // A workload that backs off after its pass drops the trigger that came during it.
        queue.push("b", 2);
        queue.forget_again(&"b");
        queue.done(&"b");
        assert_eq!(queue.start(), None);
    }

    #[test]
    fn urgent_keys_start_first_and_ranks_keep_their_order() {
        let mut queue = Queue::new(8);
        queue.push("idle-1", 2);
        queue.push("watching", 1);
        queue.push("idle-2", 7);
        queue.push("in-flight", 0);
        queue.push("idle-1", 0);
        let order: Vec<_> = std::iter::from_fn(|| queue.start()).collect();
        assert_eq!(order, ["in-flight", "watching", "idle-1", "idle-2"]);
    }

    #[test]
    fn a_report_splits_into_the_ids_the_ledger_names_and_the_others() {
        use crate::outbox::DeliveryReport as R;
        let (known, other) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        let is_known = |id: &uuid::Uuid| *id == known;
        let (now, later) = split_report(R::Acked(vec![known, other]), is_known);
        assert_eq!(now, Some(R::Acked(vec![known])));
        assert_eq!(later, Some(R::Acked(vec![other])));
        let (now, later) = split_report(R::Dropped(vec![other]), is_known);
        assert_eq!((now, later), (None, Some(R::Dropped(vec![other]))));
        let rejected = R::Rejected {
            id: known,
            message: "bad".into(),
        };
        let (now, later) = split_report(rejected.clone(), is_known);
        assert_eq!((now, later), (Some(rejected), None));
    }

    fn shared() -> Memory {
        let mut m = Memory::default();
        for name in ["x", "y"] {
            let k = key(name);
            m.reports
                .in_flight
                .insert(uuid::Uuid::new_v4(), in_flight(&k));
            m.reports
                .acked_reports
                .insert(k.clone(), vec![in_flight(&k)]);
            m.writes.replaced(&k, vec![format!("{name}-1")]);
            m.writes.invalid.insert(k.clone(), format!("{name} bad"));
            let write = kerf_decide::pass::fresh::OwnWrite {
                answer: Some("7".into()),
                replaced: None,
                at: chrono::DateTime::UNIX_EPOCH,
            };
            m.objects.record(&k, vec![(Written::Workload, write)]);
            m.attempts.failures.insert(format!("change-{name}"), 2);
            m.attempts
                .refused_evictions
                .insert((format!("change-{name}"), "pod".into()));
        }
        m.reports.acked_ids.push(uuid::Uuid::new_v4());
        m
    }

    #[test]
    fn a_pass_takes_only_its_own_workload_and_puts_everything_back() {
        let mut m = shared();
        let x = key("x");
        let ids = BTreeSet::from(["change-x".to_owned()]);
        let part = take(&mut m, &x, &ids);
        // The part holds x's entries only; the shared memory keeps y's.
        assert!(part.reports.in_flight.values().all(|f| f.key == x));
        assert_eq!(part.reports.in_flight.len(), 1);
        assert_eq!(part.reports.acked_reports.len(), 1);
        assert_eq!(
            part.writes.invalid.get(&x).map(String::as_str),
            Some("x bad")
        );
        assert_eq!(part.attempts.failures.get("change-x"), Some(&2));
        assert_eq!(part.attempts.refused_evictions.len(), 1);
        assert_eq!(part.reports.acked_ids, m.reports.acked_ids);
        assert!(m.reports.in_flight.values().all(|f| f.key == key("y")));
        assert!(!m.writes.superseded.contains_key(&x));
        assert!(!m.attempts.failures.contains_key("change-x"));
        assert_eq!(m.attempts.refused_evictions.len(), 1);
        assert!(part.objects.has(&x) && !part.objects.has(&key("y")));
        assert!(!m.objects.has(&x) && m.objects.has(&key("y")));

        let mut part = part;
        part.attempts.failures.remove("change-x");
        part.schedule.requeued.insert(x.clone());
        part.schedule.wake_at(chrono::DateTime::UNIX_EPOCH, &x);
        put_back(&mut m, part);
        assert_eq!(m.reports.in_flight.len(), 2);
        assert_eq!(m.reports.acked_reports.len(), 2);
        assert!(m.writes.stale(&x, "x-1"));
        assert_eq!(m.writes.invalid.len(), 2);
        assert!(m.objects.has(&x) && m.objects.has(&key("y")));
        // What the pass removed stays removed; what it scheduled is kept.
        assert!(!m.attempts.failures.contains_key("change-x"));
        assert_eq!(m.attempts.refused_evictions.len(), 2);
        assert!(m.schedule.requeued.contains(&x));
        assert_eq!(m.schedule.next_timer(), Some(chrono::DateTime::UNIX_EPOCH));
    }
}
