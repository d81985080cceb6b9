//! The bounded event buffer: pure data, no I/O and no clock.

use std::collections::{HashSet, VecDeque};

use kerf_api::event::Event;
use uuid::Uuid;

#[derive(Clone, Debug)]
struct Entry {
    event: Event,
    size: usize,
}

/// What a push did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pushed {
    /// Whether the event is now buffered (false for an id already buffered).
    pub added: bool,
    /// Ids dropped to make room, oldest first (rule EV-05).
    pub dropped: Vec<Uuid>,
}

/// Events waiting for the hub, oldest first, bounded by count and serialized bytes.
#[derive(Clone, Debug)]
pub struct Buffer {
    entries: VecDeque<Entry>,
    ids: HashSet<Uuid>,
    bytes: usize,
    max_events: usize,
    max_bytes: usize,
}

impl Buffer {
    /// An empty buffer with these bounds (each at least 1).
    pub fn new(max_events: usize, max_bytes: usize) -> Buffer {
        Buffer {
            entries: VecDeque::new(),
            ids: HashSet::new(),
            bytes: 0,
            max_events: max_events.max(1),
            max_bytes: max_bytes.max(1),
        }
    }

    /// Events buffered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Serialized bytes buffered.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether an event with this id is buffered.
    pub fn contains(&self, id: &Uuid) -> bool {
        self.ids.contains(id)
    }

    /// Adds an event of `size` serialized bytes at the end, dropping the oldest events
    /// until both bounds hold. An id already buffered is not added twice.
    pub fn push(&mut self, event: Event, size: usize) -> Pushed {
        if self.ids.contains(&event.id) {
            return Pushed::default();
        }
        self.ids.insert(event.id);
        self.bytes += size;
        self.entries.push_back(Entry { event, size });
        let mut dropped = Vec::new();
        while self.entries.len() > self.max_events || self.bytes > self.max_bytes {
            let Some(old) = self.entries.pop_front() else {
                break;
            };
            self.forget(&old);
            dropped.push(old.event.id);
        }
        let added = self
            .entries
            .back()
            .is_some_and(|e| !dropped.contains(&e.event.id));
        Pushed { added, dropped }
    }

    fn forget(&mut self, entry: &Entry) {
        self.ids.remove(&entry.event.id);
        self.bytes -= entry.size;
    }

    /// The oldest events, at most `max_events` of them and `max_bytes` together (at least
    /// one event when any is buffered).
    pub fn batch(&self, max_events: usize, max_bytes: usize) -> Vec<Event> {
        let mut out = Vec::new();
        let mut bytes = 0;
        for e in &self.entries {
            if !out.is_empty() && (out.len() >= max_events || bytes + e.size > max_bytes) {
                break;
            }
            bytes += e.size;
            out.push(e.event.clone());
        }
        out
    }

    /// Removes the events with these ids (acknowledged or refused); returns how many.
    pub fn remove(&mut self, ids: &HashSet<Uuid>) -> Vec<Event> {
        let mut removed = Vec::new();
        // Each entry goes round once, in order, in the queue's own storage: a second queue as
        // long as the first would take as much memory again at every acknowledgement.
        for _ in 0..self.entries.len() {
            let Some(e) = self.entries.pop_front() else {
                break;
            };
            if ids.contains(&e.event.id) {
                removed.push(e);
            } else {
                self.entries.push_back(e);
            }
        }
        for e in &removed {
            self.ids.remove(&e.event.id);
            self.bytes -= e.size;
        }
        // A wave of events (the reports of a first pass) leaves its room behind otherwise.
        crate::room::shrink_sparse(&mut self.entries);
        crate::room::shrink_sparse(&mut self.ids);
        removed.into_iter().map(|e| e.event).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::event::{EventType, EventWorkload};

    fn event(n: u128) -> Event {
        let workload = EventWorkload {
            namespace: "a".into(),
            kind: "Deployment".into(),
            name: "web".into(),
        };
        let at = "2026-12-05T04:00:00Z".parse().expect("time");
        Event::new(Uuid::from_u128(n), EventType::Skipped, at, workload, "Test")
    }

    // rule: EV-04 (what the hub has not acknowledged stays buffered, in order)
    #[test]
    fn removing_acknowledged_events_keeps_the_rest_in_order_in_the_same_storage() {
        let mut buffer = Buffer::new(100, 1 << 20);
        for n in 1..=6 {
            assert!(buffer.push(event(n), 10).added);
        }
        let capacity = buffer.entries.capacity();
        let acked: HashSet<Uuid> = [2, 5, 9].into_iter().map(Uuid::from_u128).collect();
        let removed: Vec<u128> = buffer
            .remove(&acked)
            .iter()
            .map(|e| e.id.as_u128())
            .collect();
        assert_eq!(removed, [2, 5]);
        let left: Vec<u128> = buffer
            .batch(10, 1 << 20)
            .iter()
            .map(|e| e.id.as_u128())
            .collect();
        assert_eq!(left, [1, 3, 4, 6]);
        assert_eq!((buffer.len(), buffer.bytes()), (4, 40));
        assert!(!buffer.contains(&Uuid::from_u128(2)) && buffer.contains(&Uuid::from_u128(3)));
        assert_eq!(buffer.entries.capacity(), capacity, "no second queue");
    }

    /// Once the hub has taken a wave of events, the queue keeps no room for it, and what
    /// the hub has not taken stays, in order.
    // rule: EV-04
    #[test]
    fn the_queue_gives_back_the_room_of_a_wave_once_the_hub_took_it() {
        let mut buffer = Buffer::new(10_000, 1 << 30);
        for n in 1..=2_000 {
            assert!(buffer.push(event(n), 10).added);
        }
        let acked: HashSet<Uuid> = (1..=1_990).map(Uuid::from_u128).collect();
        assert_eq!(buffer.remove(&acked).len(), 1_990);
        assert_eq!(buffer.len(), 10);
        assert!(
            buffer.entries.capacity() <= 64,
            "{}",
            buffer.entries.capacity()
        );
        assert!(buffer.ids.capacity() <= 64, "{}", buffer.ids.capacity());
        let left: Vec<u128> = buffer
            .batch(20, 1 << 20)
            .iter()
            .map(|e| e.id.as_u128())
            .collect();
        assert_eq!(left, (1_991..=2_000).collect::<Vec<u128>>());
    }
}
