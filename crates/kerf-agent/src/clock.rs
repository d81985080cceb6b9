//! Time as the agent's I/O code sees it. Decision code never reads the clock: it takes
//! `now` as an argument, and the shell gets `now` from the [`Clock`] in its context.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Duration, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// A shared clock, as the runtime context holds it.
pub type SharedClock = Arc<dyn Clock>;

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to: for tests and in-process accelerated runs.
#[derive(Clone, Debug)]
pub struct TestClock {
    now: Arc<Mutex<DateTime<Utc>>>,
}

impl TestClock {
    /// A clock standing at `start`.
    pub fn new(start: DateTime<Utc>) -> TestClock {
        TestClock {
            now: Arc::new(Mutex::new(start)),
        }
    }

    /// Moves the clock forward (or back, with a negative duration).
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        *now += by;
    }

    /// Sets the clock to `to`.
    pub fn set(&self, to: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = to;
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_clock_moves_only_when_told() {
        let start = DateTime::parse_from_rfc3339("2025-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let clock = TestClock::new(start);
        let shared: SharedClock = Arc::new(clock.clone());
        assert_eq!(shared.now(), start);
        clock.advance(Duration::seconds(90));
        assert_eq!(shared.now(), start + Duration::seconds(90));
        clock.set(start);
        assert_eq!(shared.now(), start);
    }
}
