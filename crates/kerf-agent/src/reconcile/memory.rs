//! What the reconciler keeps between passes, one ledger per purpose: when to look at a
//! workload again ([`Schedule`]), which skips and blocks were sent and acknowledged
//! ([`ReportLedger`]), which rsr versions its own writes replaced ([`WriteLedger`]), which
//! writes to workloads, pods and HPAs the caches do not show yet ([`ObjectWrites`]), and
//! how often an action failed ([`Attempts`]). Everything else is rebuilt from status
//! after a restart.

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};
use uuid::Uuid;

pub use super::fresh::ObjectWrites;
use crate::cache::WorkloadKey;
use crate::outbox::DeliveryReport;

/// Timers, requeues and per-workload backoff.
#[derive(Debug, Default)]
pub struct Schedule {
    /// When a workload must be decided again: one entry per time and workload (a set of
    /// workloads per time would take a B-tree node of eleven keys for each of the
    /// thousands of times that only one workload waits for).
    pub timers: BTreeSet<(DateTime<Utc>, WorkloadKey)>,
    /// Workloads whose pass acted: their next step follows at once.
    pub requeued: BTreeSet<WorkloadKey>,
    /// Failures in a row and when to try again.
    pub backoff: HashMap<WorkloadKey, (u32, DateTime<Utc>)>,
}

impl Schedule {
    /// Decides `key` again at `at`.
    pub fn wake_at(&mut self, at: DateTime<Utc>, key: &WorkloadKey) {
        self.timers.insert((at, key.clone()));
    }

    /// The workloads whose timer is due at `now`, removed from the timers.
    pub fn take_due(&mut self, now: DateTime<Utc>) -> BTreeSet<WorkloadKey> {
        let until = now + chrono::Duration::milliseconds(1);
        let mut due = BTreeSet::new();
        while self.timers.first().is_some_and(|(at, _)| *at < until) {
            if let Some((_, key)) = self.timers.pop_first() {
                due.insert(key);
            }
        }
        due
    }

    /// The earliest timer.
    pub fn next_timer(&self) -> Option<DateTime<Utc>> {
        self.timers.first().map(|(at, _)| *at)
    }
}

/// A skip or block sent and not yet acknowledged.
#[derive(Clone, Debug)]
pub struct InFlight {
    /// The workload.
    pub key: WorkloadKey,
    /// The de-duplication key.
    pub candidate: kerf_decide::dedup::Candidate,
    /// The recommended values when sent.
    pub values: kerf_decide::dedup::RecommendedValues,
    /// The policy hash when sent.
    pub policy_hash: String,
}

/// Skips and blocks sent, and acknowledgements not yet recorded in status.
#[derive(Debug, Default)]
pub struct ReportLedger {
    /// Skips and blocks sent, by event id.
    pub in_flight: HashMap<Uuid, InFlight>,
    /// Skips and blocks acknowledged, waiting to be recorded in `status.reported`.
    pub acked_reports: HashMap<WorkloadKey, Vec<InFlight>>,
    /// Lifecycle event ids acknowledged, to drop from `pendingEvents`.
    pub acked_ids: Vec<Uuid>,
}

impl ReportLedger {
    /// Takes a delivery report in; returns the workloads whose status should record it.
    /// A skip or block dropped from a full outbox is forgotten, so the next pass of its
    /// workload sends it again; nothing is recorded for it.
    pub fn handle(&mut self, report: DeliveryReport) -> BTreeSet<WorkloadKey> {
        let mut keys = BTreeSet::new();
        let ids = match report {
            DeliveryReport::Acked(ids) => ids,
            DeliveryReport::Rejected { id, .. } => vec![id],
            DeliveryReport::Dropped(ids) => {
                for id in ids {
                    self.in_flight.remove(&id);
                }
                return keys;
            }
        };
        for id in ids {
            match self.in_flight.remove(&id) {
                Some(f) => {
                    keys.insert(f.key.clone());
                    self.acked_reports.entry(f.key.clone()).or_default().push(f);
                }
                None => self.acked_ids.push(id),
            }
        }
        keys
    }

    /// Whether a report of `candidate` for `key` waits for its acknowledgement.
    pub fn sent(&self, key: &WorkloadKey, candidate: &kerf_decide::dedup::Candidate) -> bool {
        self.in_flight
            .values()
            .any(|f| &f.key == key && &f.candidate == candidate)
    }
}

/// The reconciler's own rsr writes.
#[derive(Debug, Default)]
pub struct WriteLedger {
    /// resourceVersions of rsrs this reconciler has written over: a cache entry still at
    /// one of them is stale, and the watch brings the newer one.
    pub superseded: HashMap<WorkloadKey, BTreeSet<String>>,
    /// Last conversion error written for a malformed rsr.
    pub invalid: HashMap<WorkloadKey, String>,
}

impl WriteLedger {
    /// Whether the cache still shows a version of `key`'s rsr this reconciler replaced.
    /// A newer one ends the wait.
    pub fn stale(&mut self, key: &WorkloadKey, resource_version: &str) -> bool {
        match self.superseded.get(key) {
            Some(old) if old.contains(resource_version) => true,
            Some(_) => {
                self.superseded.remove(key);
                false
            }
            None => false,
        }
    }

    /// Records the versions a pass wrote over.
    pub fn replaced(&mut self, key: &WorkloadKey, versions: Vec<String>) {
        if !versions.is_empty() {
            self.superseded
                .entry(key.clone())
                .or_default()
                .extend(versions);
        }
    }
}

impl Memory {
    /// Gives back the room of the ledgers that a burst grew and that emptied since
    /// ([`shrink_sparse`]).
    pub fn shrink_sparse(&mut self) {
        shrink_sparse(&mut self.schedule.backoff);
        shrink_sparse(&mut self.reports.in_flight);
        shrink_sparse(&mut self.reports.acked_reports);
        shrink_sparse(&mut self.reports.acked_ids);
        shrink_sparse(&mut self.writes.superseded);
        shrink_sparse(&mut self.writes.invalid);
        self.objects.shrink_sparse();
        shrink_sparse(&mut self.attempts.failures);
        shrink_sparse(&mut self.attempts.refused_evictions);
    }
}

/// Failed attempts of actions.
#[derive(Debug, Default)]
pub struct Attempts {
    /// Failed attempts of an action's API call, by change id (see
    /// [`super::failure::record`]).
    pub failures: HashMap<String, u32>,
    /// OnDelete evictions refused and reported, by change id and pod.
    pub refused_evictions: HashSet<(String, String)>,
}

pub use crate::room::{Room, shrink_sparse};

/// The reconciler's ledgers.
#[derive(Debug, Default)]
pub struct Memory {
    /// When to look again.
    pub schedule: Schedule,
    /// Skips and blocks sent and acknowledged.
    pub reports: ReportLedger,
    /// Its own rsr writes.
    pub writes: WriteLedger,
    /// Its own writes to workloads, pods and HPAs.
    pub objects: ObjectWrites,
    /// Failed actions.
    pub attempts: Attempts,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::WorkloadKind;

    #[test]
    fn timers_fire_once_at_their_time_and_a_workload_may_wait_for_several() {
        let t0 = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::hours(1);
        let at = |s: i64| t0 + chrono::Duration::seconds(s);
        let a = WorkloadKey::new("ns", WorkloadKind::Deployment, "a");
        let b = WorkloadKey::new("ns", WorkloadKind::Deployment, "b");
        let mut s = Schedule::default();
        s.wake_at(at(30), &a);
        s.wake_at(at(10), &a);
        s.wake_at(at(10), &b);
        s.wake_at(at(10), &b);
        assert_eq!(s.next_timer(), Some(at(10)));
        assert!(s.take_due(at(9)).is_empty());
        assert_eq!(s.take_due(at(10)), BTreeSet::from([a.clone(), b.clone()]));
        // Each timer fires once; a's later one still waits.
        assert!(s.take_due(at(10)).is_empty());
        assert_eq!(s.next_timer(), Some(at(30)));
        assert_eq!(s.take_due(at(60)), BTreeSet::from([a]));
        assert_eq!(s.next_timer(), None);
    }

    #[test]
    fn a_ledger_gives_back_the_room_of_a_burst_once_it_has_emptied() {
        let key = |i: usize| WorkloadKey::new("ns", WorkloadKind::Deployment, &format!("w{i}"));
        let mut m = Memory::default();
        for i in 0..10_000 {
            m.writes.invalid.insert(key(i), "spec: missing".into());
        }
        let burst = m.writes.invalid.capacity();
        assert!(burst >= 10_000);
        // Ten entries left: the room follows them.
        m.writes.invalid.retain(|k, _| k.name.len() == 2);
        assert_eq!(m.writes.invalid.len(), 10);
        m.shrink_sparse();
        assert!(
            m.writes.invalid.capacity() < 64,
            "{}",
            m.writes.invalid.capacity()
        );
        assert_eq!(m.writes.invalid.len(), 10);
    }
}
