//! Hub recommendations for workloads outside the agent's scope: each is reported to the
//! hub once as `skipped` `OutOfScope`, with no rsr and no Kubernetes Event (nothing is
//! written in a namespace outside the scope). What was reported is kept for the leader's
//! term: the same recommendation is not reported again, a new one for the workload is.
//!
//! With most of a large cluster outside the scope these reports can outnumber everything
//! else the agent sends, so at most a tenth of the outbox's bound of them wait in the
//! outbox at once: the rest are made as the hub takes those, and the outbox keeps its room
//! for the events of the workloads the agent manages (it drops its oldest when full). One
//! the outbox dropped is reported again.

use std::collections::{HashMap, HashSet, VecDeque};

use chrono::{DateTime, Utc};
use kerf_api::event::{Event, EventType, EventWorkload};
use kerf_api::wellknown::REASON_OUT_OF_SCOPE;
use uuid::Uuid;

use crate::outbox::DeliveryReport;
use crate::rsr_sync::OutOfScope;

/// The out-of-scope recommendations reported, each kept as a 64-bit hash of its workload
/// and recommendation id: with most of a large cluster outside the scope these are most of
/// the hub's list, and a hash is a small part of the key and id it stands for. Two that
/// shared a hash would be reported once between them; among 10,000 recommendations the
/// chance of that is about 3 in 10^12.
#[derive(Debug)]
pub struct Reported {
    reported: HashSet<u64>,
    /// Found by the last mirroring and not reported yet, in the list's order.
    waiting: VecDeque<OutOfScope>,
    /// The reports in the outbox, by event id, with the hash each stands for.
    in_outbox: HashMap<Uuid, u64>,
    /// Most reports in the outbox at once.
    limit: usize,
}

/// The hash [`Reported`] keeps for `o`.
fn id_of(o: &OutOfScope) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    (&o.workload, &o.recommendation_id).hash(&mut h);
    h.finish()
}

impl Reported {
    /// Nothing reported yet; at most a tenth of `outbox_max_events` (and at least one)
    /// reports in the outbox at once.
    pub fn new(outbox_max_events: usize) -> Reported {
        Reported {
            reported: HashSet::new(),
            waiting: VecDeque::new(),
            in_outbox: HashMap::new(),
            limit: (outbox_max_events / 10).max(1),
        }
    }

    /// Takes what a whole mirroring `found` outside the scope: those not reported yet wait
    /// for their report, and as many as the outbox has room for are given to `emit`, one
    /// at a time (`emit` says whether the outbox took it). Those it no longer found are
    /// forgotten, so a recommendation that comes back out of scope is reported again.
    pub fn take_new(
        &mut self,
        found: Vec<OutOfScope>,
        now: DateTime<Utc>,
        emit: impl FnMut(Event) -> bool,
    ) {
        let seen: HashSet<u64> = found.iter().map(id_of).collect();
        self.reported.retain(|id| seen.contains(id));
        let reported = &self.reported;
        // Collected in place, the queue has the room of everything found until the
        // reports are out (`emit_waiting` gives it back): at 9,000 workloads outside the
        // scope, about 800 KB (docs/benchmarks.md).
        self.waiting = found
            .into_iter()
            .filter(|o| !reported.contains(&id_of(o)))
            .collect();
        self.emit_waiting(now, emit);
    }

    /// Gives `emit` the waiting reports the outbox has room for.
    pub fn emit_waiting(&mut self, now: DateTime<Utc>, mut emit: impl FnMut(Event) -> bool) {
        while self.in_outbox.len() < self.limit {
            let Some(o) = self.waiting.pop_front() else {
                break;
            };
            let event = event(&o, now);
            let (event_id, id) = (event.id, id_of(&o));
            if emit(event) {
                self.reported.insert(id);
                self.in_outbox.insert(event_id, id);
            }
        }
        super::memory::shrink_sparse(&mut self.waiting);
        super::memory::shrink_sparse(&mut self.in_outbox);
    }

    /// Takes a delivery report in: the reports it settles leave the outbox, and one the
    /// outbox dropped is reported again after the next mirroring. True when room was made.
    pub fn settled(&mut self, report: &DeliveryReport) -> bool {
        let before = self.in_outbox.len();
        match report {
            DeliveryReport::Acked(ids) => ids.iter().for_each(|i| {
                self.in_outbox.remove(i);
            }),
            DeliveryReport::Rejected { id, .. } => {
                self.in_outbox.remove(id);
            }
            DeliveryReport::Dropped(ids) => {
                for i in ids {
                    if let Some(id) = self.in_outbox.remove(i) {
                        self.reported.remove(&id);
                    }
                }
            }
        }
        self.in_outbox.len() < before
    }

    /// How many reports wait for room in the outbox.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

/// The `skipped` `OutOfScope` event of `o` at `now`.
pub fn event(o: &OutOfScope, now: DateTime<Utc>) -> Event {
    let key = &o.workload;
    let workload = EventWorkload {
        namespace: key.namespace.to_string(),
        kind: key.kind.as_str().to_owned(),
        name: key.name.to_string(),
    };
    let message = format!(
        "outside the agent's scope: {}; no rsr is made and nothing is changed",
        o.why
    );
    let mut event = Event::new(
        Uuid::new_v4(),
        EventType::Skipped,
        now,
        workload,
        REASON_OUT_OF_SCOPE,
    )
    .with_message(&message);
    event.recommendation_id = Some(o.recommendation_id.clone());
    event
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::WorkloadKey;
    use kerf_api::WorkloadKind;

    fn found(name: &str, rec: &str) -> OutOfScope {
        OutOfScope {
            workload: WorkloadKey::new("b", WorkloadKind::Deployment, name),
            recommendation_id: rec.to_owned(),
            why: "namespace \"b\" is not in scope.namespaces (a)".to_owned(),
        }
    }

    fn take(reported: &mut Reported, found: Vec<OutOfScope>, now: DateTime<Utc>) -> Vec<Event> {
        let mut events = Vec::new();
        reported.take_new(found, now, |e| {
            events.push(e);
            true
        });
        events
    }

    // rule: EV-48, EV-51
    #[test]
    fn an_out_of_scope_recommendation_is_reported_once() {
        let now: DateTime<Utc> = "2026-12-05T04:00:00Z".parse().expect("time");
        let mut reported = Reported::new(10_000);
        let first = take(&mut reported, vec![found("web", "r1")], now);
        assert_eq!(first.len(), 1);
        let e = &first[0];
        assert_eq!(e.type_, EventType::Skipped);
        assert_eq!(e.reason, REASON_OUT_OF_SCOPE);
        assert_eq!(e.recommendation_id.as_deref(), Some("r1"));
        assert_eq!(e.workload.namespace, "b");
        assert!(
            e.message
                .as_deref()
                .is_some_and(|m| m.contains("scope.namespaces")),
            "{e:?}"
        );
        assert!(e.validate().is_ok(), "{e:?}");
        // The same recommendation on the next mirrorings: nothing more.
        for _ in 0..3 {
            assert!(take(&mut reported, vec![found("web", "r1")], now).is_empty());
        }
        // A new recommendation for the workload is reported.
        assert_eq!(take(&mut reported, vec![found("web", "r2")], now).len(), 1);
        // One that went away and came back is reported again.
        assert!(take(&mut reported, Vec::new(), now).is_empty());
        assert_eq!(take(&mut reported, vec![found("web", "r2")], now).len(), 1);
    }

    // rule: EV-05 (a report the full outbox dropped is made again)
    #[test]
    fn a_tenth_of_the_outbox_holds_reports_at_once_and_a_dropped_one_is_reported_again() {
        let now: DateTime<Utc> = "2026-12-05T04:00:00Z".parse().expect("time");
        let mut reported = Reported::new(30);
        let all = || {
            (0..10)
                .map(|i| found(&format!("w{i}"), "r"))
                .collect::<Vec<_>>()
        };
        let first = take(&mut reported, all(), now);
        assert_eq!(first.len(), 3, "a tenth of 30 in the outbox");
        assert_eq!(reported.waiting(), 7);
        // The next mirroring finds the same: nothing more while the outbox holds three.
        assert!(take(&mut reported, all(), now).is_empty());
        // The hub takes two, the outbox drops one: three more go, and the dropped one
        // waits for the next mirroring.
        assert!(reported.settled(&DeliveryReport::Acked(vec![first[0].id, first[1].id])));
        assert!(reported.settled(&DeliveryReport::Dropped(vec![first[2].id])));
        let mut more = Vec::new();
        reported.emit_waiting(now, |e| {
            more.push(e);
            true
        });
        let names = |events: &[Event]| -> Vec<String> {
            events.iter().map(|e| e.workload.name.clone()).collect()
        };
        assert_eq!(names(&more), ["w3", "w4", "w5"]);
        let ids: Vec<Uuid> = more.iter().map(|e| e.id).collect();
        assert!(reported.settled(&DeliveryReport::Acked(ids)));
        let rest = take(&mut reported, all(), now);
        assert_eq!(
            names(&rest),
            ["w2", "w6", "w7"],
            "the dropped one again, in order"
        );
        // An event the outbox did not take is not counted as reported.
        let mut refused = Reported::new(30);
        refused.take_new(vec![found("x", "r")], now, |_| false);
        assert_eq!(take(&mut refused, vec![found("x", "r")], now).len(), 1);
    }

    /// Once the reports of a wave are out, the queue they waited in keeps no room for
    /// them.
    #[test]
    fn the_queue_of_waiting_reports_gives_its_room_back_once_they_are_out() {
        let now: DateTime<Utc> = "2026-12-05T04:00:00Z".parse().expect("time");
        let mut reported = Reported::new(10_000);
        let wave: Vec<OutOfScope> = (0..5_000).map(|i| found(&format!("w{i}"), "r")).collect();
        let mut out = Vec::new();
        reported.take_new(wave, now, |e| {
            out.push(e.id);
            true
        });
        assert_eq!(out.len(), 1_000, "a tenth of the outbox's bound");
        while !out.is_empty() {
            assert!(reported.settled(&DeliveryReport::Acked(std::mem::take(&mut out))));
            reported.emit_waiting(now, |e| {
                out.push(e.id);
                true
            });
        }
        assert_eq!(reported.waiting(), 0);
        assert!(
            reported.waiting.capacity() <= 64,
            "{}",
            reported.waiting.capacity()
        );
        assert!(
            reported.in_outbox.capacity() <= 64,
            "{}",
            reported.in_outbox.capacity()
        );
    }
}
