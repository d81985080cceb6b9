//! Hub recommendations for workloads outside the agent's scope: each is reported to the
//! hub once as `skipped` `OutOfScope`, with no rsr and no Kubernetes Event (nothing is
//! written in a namespace outside the scope). What was reported is kept for the leader's
//! term: the same recommendation is not reported again, a new one for the workload is.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use kerf_api::event::{Event, EventType, EventWorkload};
use kerf_api::wellknown::REASON_OUT_OF_SCOPE;
use uuid::Uuid;

use crate::rsr_sync::OutOfScope;

/// The out-of-scope recommendations reported, each kept as a 64-bit hash of its workload
/// and recommendation id: with most of a large cluster outside the scope these are most of
/// the hub's list, and a hash is a small part of the key and id it stands for. Two that
/// shared a hash would be reported once between them; among 10,000 recommendations the
/// chance of that is about 3 in 10^12.
#[derive(Debug, Default)]
pub struct Reported(HashSet<u64>);

/// The hash [`Reported`] keeps for `o`.
fn id_of(o: &OutOfScope) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    (&o.workload, &o.recommendation_id).hash(&mut h);
    h.finish()
}

impl Reported {
    /// Gives `emit` the event to send for each recommendation a whole mirroring `found`
    /// outside the scope that was not reported yet, one at a time (the outbox takes each
    /// before the next is made). Those it no longer found are forgotten, so a
    /// recommendation that comes back out of scope is reported again.
    pub fn take_new(
        &mut self,
        found: Vec<OutOfScope>,
        now: DateTime<Utc>,
        mut emit: impl FnMut(Event),
    ) {
        let mut seen = HashSet::with_capacity(found.len());
        for o in found {
            let id = id_of(&o);
            if !self.0.contains(&id) {
                emit(event(&o, now));
            }
            seen.insert(id);
        }
        self.0 = seen;
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
        reported.take_new(found, now, |e| events.push(e));
        events
    }

    #[test]
    fn an_out_of_scope_recommendation_is_reported_once() {
        let now: DateTime<Utc> = "2026-12-05T04:00:00Z".parse().expect("time");
        let mut reported = Reported::default();
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
}
