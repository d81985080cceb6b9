//! The bounded history of store events that watches replay from a resourceVersion; a
//! watch from before the oldest kept event gets 410 Expired.

use std::collections::VecDeque;

use tokio::sync::broadcast;

use super::{ApiError, Store, StoreEvent};

/// Events kept for watch replay.
const DEFAULT_HISTORY: usize = 20_000;

/// The kept events, oldest first.
#[derive(Debug)]
pub(super) struct History {
    events: VecDeque<StoreEvent>,
    limit: usize,
    /// Every event with an RV above this is in `events`.
    start: u64,
}

impl Default for History {
    fn default() -> Self {
        History {
            events: VecDeque::new(),
            limit: DEFAULT_HISTORY,
            start: 0,
        }
    }
}

impl History {
    /// Records an event, dropping the oldest beyond the limit.
    pub(super) fn push(&mut self, ev: StoreEvent) {
        self.events.push_back(ev);
        self.trim();
    }

    fn set_limit(&mut self, n: usize) {
        self.limit = n.max(1);
        self.trim();
    }

    fn trim(&mut self) {
        while self.events.len() > self.limit {
            if let Some(e) = self.events.pop_front() {
                self.start = e.resource_version;
            }
        }
    }

    /// The kept events of `resource` after `rv`; Err(410 Expired) when `rv` is older than
    /// the history.
    fn since(&self, resource: &str, rv: u64) -> Result<Vec<StoreEvent>, ApiError> {
        if rv < self.start {
            return Err(ApiError::new(
                410,
                "Expired",
                format!("too old resource version: {rv} ({})", self.start + 1),
                None,
            ));
        }
        Ok(self
            .events
            .iter()
            .filter(|e| e.resource_version > rv && e.resource == resource)
            .cloned()
            .collect())
    }
}

impl Store {
    /// Limits the watch history to `n` events (older watches get 410 Gone).
    pub fn set_history_limit(&self, n: usize) {
        self.lock().history.set_limit(n);
    }

    /// The events of `resource` after `rv` still in history, and a receiver for everything
    /// after them; Err(410 Expired) when `rv` is older than the history.
    pub fn watch_from(
        &self,
        resource: &str,
        rv: u64,
    ) -> Result<(Vec<StoreEvent>, broadcast::Receiver<StoreEvent>), ApiError> {
        let inner = self.lock();
        let events = inner.history.since(resource, rv)?;
        Ok((events, self.tx.subscribe()))
    }

    /// The oldest RV a watch may start from.
    pub fn history_start(&self) -> u64 {
        self.lock().history.start
    }
}
