//! Collections that give back the room a burst left them: hash maps, vectors and queues
//! never shrink on their own (the reconciler's ledgers, the outbox, the reports waiting
//! for it).

use std::collections::{HashMap, HashSet};

/// A collection whose room can be given back.
pub trait Room {
    /// Entries held.
    fn held(&self) -> usize;
    /// Entries it has room for.
    fn room(&self) -> usize;
    /// Keeps room for what it holds only.
    fn shrink(&mut self);
}

/// Implements [`Room`] for a std collection through its own `len`, `capacity` and
/// `shrink_to_fit`.
macro_rules! room {
    ($([$($params:tt)*] $collection:ty),* $(,)?) => {$(
        impl<$($params)*> Room for $collection {
            fn held(&self) -> usize {
                self.len()
            }
            fn room(&self) -> usize {
                self.capacity()
            }
            fn shrink(&mut self) {
                self.shrink_to_fit();
            }
        }
    )*};
}

room!(
    [K: Eq + std::hash::Hash, V] HashMap<K, V>,
    [K: Eq + std::hash::Hash] HashSet<K>,
    [T] Vec<T>,
    [T] std::collections::VecDeque<T>,
);

/// Below this much room a collection keeps it.
const ROOM_FLOOR: usize = 64;

/// Gives back the room of a collection that holds under a quarter of it. Hash maps and
/// vectors never shrink on their own: a burst (the first pass over every workload, a wave
/// of reports waiting for the hub) would leave its room behind for the agent's life. A
/// collection shrunk here has room for about what it holds, so it is shrunk again only
/// after it grows and empties again.
pub fn shrink_sparse(c: &mut impl Room) {
    if c.room() > ROOM_FLOOR && c.held() * 4 < c.room() {
        c.shrink();
    }
}
