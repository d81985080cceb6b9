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

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use kerf_api::WorkloadKind;
use kerf_api::event::{Event, EventType, EventWorkload};
use kerf_api::wellknown::REASON_OUT_OF_SCOPE;
use uuid::Uuid;

use crate::hub::scoped::{OutsideScopeHandoff, OutsideScopeList};
use crate::outbox::DeliveryReport;
use crate::rsr_sync::OutOfScope;
use crate::scope::{Scope, Verdict};

/// What a whole mirroring found outside the scope.
#[derive(Debug, Default)]
pub struct Found {
    /// Workloads of the caches outside the scope, with a recommendation
    /// ([`crate::rsr_sync`]).
    pub cached: Vec<OutOfScope>,
    /// The recommendations the hub client left out of its latest list for namespaces
    /// outside `scope.namespaces` ([`crate::hub::scoped`]), if not taken yet: those the
    /// namespace list still leaves out are reported.
    pub listed: Arc<OutsideScopeHandoff>,
}

impl From<Vec<OutOfScope>> for Found {
    fn from(cached: Vec<OutOfScope>) -> Found {
        Found {
            cached,
            listed: Arc::default(),
        }
    }
}

/// The out-of-scope recommendations reported, each kept as a 64-bit hash of its workload
/// and recommendation id, in a sorted vector (8 bytes each, where a hash set took about
/// 16): with most of a large cluster outside the scope these are most of the hub's list,
/// and a hash is a small part of the key and id it stands for. Two that shared a hash
/// would be reported once between them; among 10,000 recommendations the chance of that is
/// about 3 in 10^12.
///
/// The hub client's list of those left out is taken once, when the hub's answer changed
/// it, and kept only until its reports are out: then the hashes alone say what was
/// reported, and a mirroring that brings no new list leaves them as they are.
#[derive(Debug)]
pub struct Reported {
    /// Reported of those the caches found.
    cached: Hashes,
    /// Reported of the hub client's list.
    listed_reported: Hashes,
    /// Found in the caches by the last mirroring and not reported yet, in its order.
    waiting: VecDeque<OutOfScope>,
    /// The hub list's recommendations left out, while some of them are not reported yet.
    listed: Option<Arc<OutsideScopeList>>,
    /// Those of `listed` not reported yet, by index, in the list's order: a report is made
    /// when the outbox has room for it, so the wave of a large cluster waits as 4 bytes
    /// each.
    waiting_listed: VecDeque<u32>,
    /// The outbox dropped a report of `listed`: the next mirroring reads `listed` again.
    listed_dropped: bool,
    /// The reports in the outbox, by event id, with the hash each stands for and whether
    /// it is one of `listed`.
    in_outbox: HashMap<Uuid, (u64, bool)>,
    /// Most reports in the outbox at once.
    limit: usize,
}

/// A set of hashes in a sorted vector.
#[derive(Debug, Default)]
struct Hashes(Vec<u64>);

impl Hashes {
    fn contains(&self, id: u64) -> bool {
        self.0.binary_search(&id).is_ok()
    }

    fn insert(&mut self, id: u64) {
        if let Err(i) = self.0.binary_search(&id) {
            self.0.insert(i, id);
        }
    }

    fn remove(&mut self, id: u64) {
        if let Ok(i) = self.0.binary_search(&id) {
            self.0.remove(i);
        }
    }

    /// Keeps those `seen` holds; `seen` is sorted.
    fn keep_seen(&mut self, seen: &[u64]) {
        self.0.retain(|id| seen.binary_search(id).is_ok());
    }
}

/// The hash [`Reported`] keeps for a recommendation of a workload.
fn hash_of(namespace: &str, kind: WorkloadKind, name: &str, recommendation_id: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    (namespace, kind, name, recommendation_id).hash(&mut h);
    h.finish()
}

/// The hash [`Reported`] keeps for `o`.
fn id_of(o: &OutOfScope) -> u64 {
    let w = &o.workload;
    hash_of(&w.namespace, w.kind, &w.name, &o.recommendation_id)
}

/// The index and hash of each recommendation of `listed` that `scope` leaves out.
fn listed_out<'a>(
    listed: &'a OutsideScopeList,
    scope: &'a Scope,
) -> impl Iterator<Item = (u32, u64)> + 'a {
    listed
        .iter()
        .enumerate()
        .filter(|(_, o)| scope.lists_out(o.namespace))
        .filter_map(|(i, o)| {
            let id = hash_of(o.namespace, o.kind, o.name, o.recommendation_id);
            Some((u32::try_from(i).ok()?, id))
        })
}

impl Reported {
    /// Nothing reported yet; at most a tenth of `outbox_max_events` (and at least one)
    /// reports in the outbox at once.
    pub fn new(outbox_max_events: usize) -> Reported {
        Reported {
            cached: Hashes::default(),
            listed_reported: Hashes::default(),
            waiting: VecDeque::new(),
            listed: None,
            waiting_listed: VecDeque::new(),
            listed_dropped: false,
            in_outbox: HashMap::new(),
            limit: (outbox_max_events / 10).max(1),
        }
    }

    /// Takes what a whole mirroring `found` outside `scope`: those not reported yet wait
    /// for their report, and as many as the outbox has room for are given to `emit`, one
    /// at a time (`emit` says whether the outbox took it). Those it no longer found are
    /// forgotten, so a recommendation that comes back out of scope is reported again; a
    /// mirroring with no new list from the hub leaves the list's as they are.
    pub fn take_new(
        &mut self,
        found: Found,
        scope: &Scope,
        now: DateTime<Utc>,
        emit: impl FnMut(Event) -> bool,
    ) {
        let Found { cached, listed } = found;
        let mut seen: Vec<u64> = cached.iter().map(id_of).collect();
        seen.sort_unstable();
        self.cached.keep_seen(&seen);
        drop(seen);
        let reported = &self.cached;
        // Collected in place, a queue has the room of everything found until the reports
        // are out (`emit_waiting` gives it back).
        self.waiting = cached
            .into_iter()
            .filter(|o| !reported.contains(id_of(o)))
            .collect();
        let fresh = listed.take();
        let read_list = fresh.is_some() || std::mem::take(&mut self.listed_dropped);
        if let Some(list) = fresh {
            let mut seen: Vec<u64> = listed_out(&list, scope).map(|(_, id)| id).collect();
            seen.sort_unstable();
            self.listed_reported.keep_seen(&seen);
            self.listed = Some(list);
        }
        if read_list {
            let reported = &self.listed_reported;
            self.waiting_listed = self
                .listed
                .as_deref()
                .map(|list| {
                    listed_out(list, scope)
                        .filter(|(_, id)| !reported.contains(*id))
                        .map(|(i, _)| i)
                        .collect()
                })
                .unwrap_or_default();
        }
        // Room for each waiting report once it is made, and no more.
        self.cached.0.reserve_exact(self.waiting.len());
        self.listed_reported
            .0
            .reserve_exact(self.waiting_listed.len());
        self.emit_waiting(scope, now, emit);
    }

    /// Gives `emit` the waiting reports the outbox has room for.
    pub fn emit_waiting(
        &mut self,
        scope: &Scope,
        now: DateTime<Utc>,
        mut emit: impl FnMut(Event) -> bool,
    ) {
        while self.in_outbox.len() < self.limit {
            let (event, id, of_list) = if let Some(o) = self.waiting.pop_front() {
                let w = &o.workload;
                let event = event(
                    [&w.namespace, &w.name, &o.recommendation_id],
                    w.kind,
                    &o.why,
                    now,
                );
                (event, id_of(&o), false)
            } else if let Some(i) = self.waiting_listed.pop_front() {
                let Some(o) = self.listed.as_deref().and_then(|l| l.get(i as usize)) else {
                    continue;
                };
                let Verdict::Out(why) = scope.verdict(o.namespace, None, None) else {
                    continue;
                };
                let event = event(
                    [o.namespace, o.name, o.recommendation_id],
                    o.kind,
                    &why,
                    now,
                );
                let id = hash_of(o.namespace, o.kind, o.name, o.recommendation_id);
                (event, id, true)
            } else {
                break;
            };
            let event_id = event.id;
            if emit(event) {
                if of_list {
                    self.listed_reported.insert(id);
                } else {
                    self.cached.insert(id);
                }
                self.in_outbox.insert(event_id, (id, of_list));
            }
        }
        if self.waiting.is_empty() {
            // The room reserved for the reports is used.
            crate::room::shrink_sparse(&mut self.cached.0);
        }
        if self.waiting_listed.is_empty() {
            crate::room::shrink_sparse(&mut self.listed_reported.0);
        }
        crate::room::shrink_sparse(&mut self.waiting);
        crate::room::shrink_sparse(&mut self.waiting_listed);
        crate::room::shrink_sparse(&mut self.in_outbox);
        self.drop_list_once_reported();
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
                    match self.in_outbox.remove(i) {
                        Some((id, true)) => {
                            self.listed_reported.remove(id);
                            self.listed_dropped = true;
                        }
                        Some((id, false)) => self.cached.remove(id),
                        None => {}
                    }
                }
            }
        }
        self.drop_list_once_reported();
        self.in_outbox.len() < before
    }

    /// Lets the hub client's list go once every report of it is made and settled: then
    /// nothing of it can be wanted again but through a new answer of the hub's.
    fn drop_list_once_reported(&mut self) {
        if self.listed.is_none() || !self.waiting_listed.is_empty() || self.listed_dropped {
            return;
        }
        if !self.in_outbox.values().any(|&(_, of_list)| of_list) {
            self.listed = None;
        }
    }

    /// How many reports wait for room in the outbox.
    pub fn waiting(&self) -> usize {
        self.waiting.len() + self.waiting_listed.len()
    }

    /// Whether the hub client's list of those left out is still held.
    pub fn holds_list(&self) -> bool {
        self.listed.is_some()
    }
}

/// The `skipped` `OutOfScope` event at `now` of the recommendation
/// `[namespace, name, recommendation id]` of a workload of `kind`, out of scope for `why`.
pub fn event(
    [namespace, name, recommendation_id]: [&str; 3],
    kind: WorkloadKind,
    why: &str,
    now: DateTime<Utc>,
) -> Event {
    let workload = EventWorkload {
        namespace: namespace.to_owned(),
        kind: kind.as_str().to_owned(),
        name: name.to_owned(),
    };
    let message =
        format!("outside the agent's scope: {why}; no rsr is made and nothing is changed");
    let mut event = Event::new(
        Uuid::new_v4(),
        EventType::Skipped,
        now,
        workload,
        REASON_OUT_OF_SCOPE,
    )
    .with_message(&message);
    event.recommendation_id = Some(recommendation_id.to_owned());
    event
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::WorkloadKey;

    fn found(name: &str, rec: &str) -> OutOfScope {
        OutOfScope {
            workload: WorkloadKey::new("b", WorkloadKind::Deployment, name),
            recommendation_id: rec.to_owned(),
            why: "namespace \"b\" is not in scope.namespaces (a)".to_owned(),
        }
    }

    fn scope() -> Scope {
        Scope {
            namespaces: vec!["a".to_owned()],
            ..Scope::default()
        }
    }

    fn take(reported: &mut Reported, found: impl Into<Found>, now: DateTime<Utc>) -> Vec<Event> {
        let mut events = Vec::new();
        reported.take_new(found.into(), &scope(), now, |e| {
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
        assert!(take(&mut reported, Found::default(), now).is_empty());
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
        reported.emit_waiting(&scope(), now, |e| {
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
        refused.take_new(vec![found("x", "r")].into(), &scope(), now, |_| false);
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
        reported.take_new(wave.into(), &scope(), now, |e| {
            out.push(e.id);
            true
        });
        assert_eq!(out.len(), 1_000, "a tenth of the outbox's bound");
        while !out.is_empty() {
            assert!(reported.settled(&DeliveryReport::Acked(std::mem::take(&mut out))));
            reported.emit_waiting(&scope(), now, |e| {
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

    fn listed(entries: &[(&str, &str, &str)]) -> Arc<OutsideScopeHandoff> {
        let mut list = crate::hub::scoped::OutsideScopeBuilder::default();
        for &(namespace, name, recommendation_id) in entries {
            list.push(crate::hub::scoped::OutsideScope {
                namespace,
                kind: WorkloadKind::StatefulSet,
                name,
                recommendation_id,
            })
            .expect("fits");
        }
        Arc::new(OutsideScopeHandoff::new(list.finish()))
    }

    /// Acks what `out` holds and takes what the room made brings, until nothing comes.
    fn ack_all(reported: &mut Reported, mut out: Vec<Event>, now: DateTime<Utc>) -> Vec<String> {
        let mut names = Vec::new();
        while !out.is_empty() {
            names.extend(out.iter().map(|e| e.workload.name.clone()));
            let ids = out.iter().map(|e| e.id).collect();
            assert!(reported.settled(&DeliveryReport::Acked(ids)));
            out.clear();
            reported.emit_waiting(&scope(), now, |e| {
                out.push(e);
                true
            });
        }
        names
    }

    // rule: EV-48, EV-51
    #[test]
    fn recommendations_the_hub_client_left_out_are_reported_once_after_those_of_the_caches() {
        let now: DateTime<Utc> = "2026-12-05T04:00:00Z".parse().expect("time");
        let mut reported = Reported::new(10_000);
        let list = listed(&[("b", "db", "r1"), ("a", "kept", "r2"), ("c", "cache", "r3")]);
        let found = || Found {
            cached: vec![found("web", "r0")],
            listed: list.clone(),
        };
        let first = take(&mut reported, found(), now);
        let seen: Vec<(&str, &str, &str, Option<&str>)> = first
            .iter()
            .map(|e| {
                let w = &e.workload;
                (
                    w.namespace.as_str(),
                    w.kind.as_str(),
                    w.name.as_str(),
                    e.recommendation_id.as_deref(),
                )
            })
            .collect();
        // "a" is in the namespace list: nothing is reported for it.
        assert_eq!(
            seen,
            [
                ("b", "Deployment", "web", Some("r0")),
                ("b", "StatefulSet", "db", Some("r1")),
                ("c", "StatefulSet", "cache", Some("r3")),
            ]
        );
        let message = first[2].message.as_deref().unwrap_or_default();
        assert!(
            message.contains("namespace \"c\" is not in scope.namespaces (a)"),
            "{message}"
        );
        assert!(first.iter().all(|e| e.validate().is_ok()), "{first:?}");
        // The list was taken: the next mirrorings bring it no more, and report nothing.
        assert!(list.take().is_none());
        assert!(take(&mut reported, found(), now).is_empty());
        // A new answer of the hub's with a new id for one of them: that one.
        let renewed = Found {
            cached: Vec::new(),
            listed: listed(&[("b", "db", "r1"), ("c", "cache", "r4")]),
        };
        let again = take(&mut reported, renewed, now);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].recommendation_id.as_deref(), Some("r4"));
    }

    /// A wave of left-out recommendations waits for the outbox as an index each, not as
    /// a report.
    #[test]
    fn left_out_recommendations_wait_for_the_outbox_as_indexes_into_the_list() {
        let now: DateTime<Utc> = "2026-12-05T04:00:00Z".parse().expect("time");
        let mut reported = Reported::new(300);
        let names: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
        let entries: Vec<(&str, &str, &str)> =
            names.iter().map(|n| ("b", n.as_str(), "r")).collect();
        let list = listed(&entries);
        let out = take(
            &mut reported,
            Found {
                cached: Vec::new(),
                listed: list.clone(),
            },
            now,
        );
        assert_eq!(out.len(), 30, "a tenth of the outbox's bound");
        assert_eq!(reported.waiting(), 70);
        assert_eq!(reported.waiting_listed.len(), 70);
        assert!(reported.waiting.is_empty());
        assert!(reported.holds_list());
        let names_out = ack_all(&mut reported, out, now);
        assert_eq!(names_out, names, "every one once, in the list's order");
        // What was reported is kept as one sorted hash each, with no room to spare.
        assert_eq!(reported.listed_reported.0.len(), 100);
        assert_eq!(reported.listed_reported.0.capacity(), 100);
        assert!(reported.listed_reported.0.is_sorted());
    }

    /// Once every report of the hub client's list is made and acked, the list is let go
    /// (nothing else holds it) and the hashes alone keep what was reported: later
    /// mirrorings report nothing again, a new answer reports what is new in it, and one
    /// that left the list and came back is reported again.
    // rule: EV-48, EV-51
    #[test]
    fn the_list_of_those_left_out_is_let_go_once_its_reports_are_out() {
        let now: DateTime<Utc> = "2026-12-05T04:00:00Z".parse().expect("time");
        let mut reported = Reported::new(30);
        let handoff = listed(&[("b", "db", "r1"), ("b", "mq", "r1"), ("c", "kv", "r1")]);
        let first = take(
            &mut reported,
            Found {
                cached: Vec::new(),
                listed: handoff.clone(),
            },
            now,
        );
        assert_eq!(first.len(), 3);
        assert!(
            reported.holds_list(),
            "held while its reports are in the outbox"
        );
        assert_eq!(ack_all(&mut reported, first, now), ["db", "mq", "kv"]);
        assert!(!reported.holds_list(), "let go once they are acked");
        for _ in 0..3 {
            let again = Found {
                cached: Vec::new(),
                listed: handoff.clone(),
            };
            assert!(take(&mut reported, again, now).is_empty());
        }
        // A new answer: "kv" left it, "mq" has a new id, "db" is as before.
        let renewed = listed(&[("b", "db", "r1"), ("b", "mq", "r2")]);
        let out = take(
            &mut reported,
            Found {
                cached: Vec::new(),
                listed: renewed,
            },
            now,
        );
        let ids: Vec<_> = out
            .iter()
            .map(|e| (e.workload.name.as_str(), e.recommendation_id.as_deref()))
            .collect();
        assert_eq!(ids, [("mq", Some("r2"))]);
        assert_eq!(ack_all(&mut reported, out, now), ["mq"]);
        assert!(!reported.holds_list());
        // "kv" comes back: it is reported again.
        let back = listed(&[("b", "db", "r1"), ("b", "mq", "r2"), ("c", "kv", "r1")]);
        let out = take(
            &mut reported,
            Found {
                cached: Vec::new(),
                listed: back,
            },
            now,
        );
        assert_eq!(ack_all(&mut reported, out, now), ["kv"]);
    }

    /// A report of the list that the outbox dropped keeps the list, though the hub client
    /// handed it over already, and is made again at the next mirroring.
    // rule: EV-05 (a report the full outbox dropped is made again)
    #[test]
    fn a_dropped_report_of_the_list_is_made_again_from_the_list_still_held() {
        let now: DateTime<Utc> = "2026-12-05T04:00:00Z".parse().expect("time");
        let mut reported = Reported::new(30);
        let handoff = listed(&[("b", "db", "r1"), ("b", "mq", "r1")]);
        let found = || Found {
            cached: Vec::new(),
            listed: handoff.clone(),
        };
        let first = take(&mut reported, found(), now);
        assert_eq!(first.len(), 2);
        assert!(reported.settled(&DeliveryReport::Acked(vec![first[0].id])));
        assert!(reported.settled(&DeliveryReport::Dropped(vec![first[1].id])));
        assert!(reported.holds_list(), "the dropped one is still to report");
        assert!(handoff.take().is_none(), "the hub client's copy was taken");
        let again = take(&mut reported, found(), now);
        assert_eq!(ack_all(&mut reported, again, now), ["mq"]);
        assert!(!reported.holds_list());
        assert!(take(&mut reported, found(), now).is_empty());
    }
}
