//! Passes over many workloads at once: each pass gets the part of the reconciler's
//! [`Memory`] that belongs to its workload, runs with up to `reconcile.concurrency` others,
//! and puts that part back when it ends. A workload is in one pass at a time: a round
//! holds each key once, and the next round starts when this one ended.

use std::collections::BTreeSet;

use super::memory::{Attempts, Memory, ReportLedger, Schedule, WriteLedger};
use crate::cache::{CacheSet, WorkloadKey};

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
    for (at, keys) in timers {
        memory.schedule.timers.entry(at).or_default().extend(keys);
    }
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
