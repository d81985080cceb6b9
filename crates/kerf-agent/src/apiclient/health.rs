//! Whether the API server answers, as the agent's own requests see it: the last answer
//! decides (a refused connection or a 502/503/504 marks it down, any other answer up), and
//! a request left without an answer for [`HANG_AFTER`] marks it down while it waits.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use std::time::Instant;
use tokio::sync::watch;

/// A request without an answer for this long counts as an outage.
pub const HANG_AFTER: Duration = Duration::from_secs(10);

/// How a request ended, as far as the server's availability goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered (any status but 502, 503 and 504).
    Answered,
    /// No connection, a broken one, or a 502/503/504.
    Unavailable,
}

impl Outcome {
    /// The outcome of an HTTP status.
    pub fn of_status(status: u16) -> Outcome {
        if matches!(status, 502..=504) {
            Outcome::Unavailable
        } else {
            Outcome::Answered
        }
    }
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    in_flight: BTreeMap<u64, Instant>,
}

/// The API server's availability; cheap to clone.
#[derive(Clone, Debug)]
pub struct ApiHealth {
    state: Arc<Mutex<State>>,
    up: watch::Sender<bool>,
}

impl Default for ApiHealth {
    fn default() -> Self {
        ApiHealth {
            state: Arc::default(),
            up: watch::channel(true).0,
        }
    }
}

/// A request on its way; dropping it without [`Pending::finish`] (a cancelled request)
/// forgets it.
#[derive(Debug)]
pub struct Pending {
    health: ApiHealth,
    id: u64,
}

impl Pending {
    /// Records how the request ended.
    pub fn finish(self, outcome: Outcome) {
        self.health.up.send_if_modified(|up| {
            let now_up = outcome == Outcome::Answered;
            let changed = *up != now_up;
            *up = now_up;
            changed
        });
        if outcome == Outcome::Unavailable {
            tracing::debug!("API server unavailable");
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.health.lock().in_flight.remove(&self.id);
    }
}

impl ApiHealth {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a request going out.
    pub fn start(&self) -> Pending {
        let mut s = self.lock();
        let id = s.next_id;
        s.next_id = s.next_id.wrapping_add(1);
        s.in_flight.insert(id, Instant::now());
        Pending {
            health: self.clone(),
            id,
        }
    }

    /// Whether the API server answers: its last answer was not an outage and no request
    /// has waited longer than [`HANG_AFTER`].
    pub fn is_up(&self) -> bool {
        self.is_up_at(Instant::now())
    }

    /// [`ApiHealth::is_up`] at `now`.
    pub fn is_up_at(&self, now: Instant) -> bool {
        if !*self.up.borrow() {
            return false;
        }
        let oldest = self.lock().in_flight.values().min().copied();
        oldest.is_none_or(|t| now.saturating_duration_since(t) < HANG_AFTER)
    }

    /// Follows whether the last answer was not an outage.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.up.subscribe()
    }

    /// Why the API server counts as down, for the readiness answer; `None` while it is up.
    pub fn outage(&self) -> Option<&'static str> {
        if !*self.up.borrow() {
            Some("API server unavailable")
        } else if !self.is_up() {
            Some("API server not answering")
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_answer_decides() {
        let h = ApiHealth::default();
        assert!(h.is_up());
        h.start().finish(Outcome::of_status(503));
        assert!(!h.is_up());
        assert_eq!(h.outage(), Some("API server unavailable"));
        h.start().finish(Outcome::of_status(404));
        assert!(h.is_up());
        h.start().finish(Outcome::Unavailable);
        assert!(!h.is_up());
        h.start().finish(Outcome::of_status(200));
        assert_eq!(h.outage(), None);
    }

    #[test]
    fn a_request_without_an_answer_marks_the_server_down_while_it_waits() {
        let h = ApiHealth::default();
        // The request is recorded as sent between `before` and `after`.
        let before = Instant::now();
        let hanging = h.start();
        let after = Instant::now();
        assert!(h.is_up_at(before + HANG_AFTER - Duration::from_millis(1)));
        assert!(!h.is_up_at(after + HANG_AFTER));
        drop(hanging);
        assert!(h.is_up_at(after + HANG_AFTER * 2));
    }
}
