//! How long a failed watch waits before it tries again: from 800 ms, doubling, at most
//! [`WATCH_BACKOFF_MAX`] (with up to a quarter of jitter added), back to the start after
//! two minutes without a failure. The cap keeps a watch within seconds of a returning API
//! server without retrying more than a few times a minute during an outage.

use std::time::Duration;

use kube::runtime::utils::{Backoff, ResetTimerBackoff};

/// First wait.
pub const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(800);
/// Longest wait before the jitter.
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// A watch that has not failed for this long starts again from [`WATCH_BACKOFF_MIN`].
const RESET_AFTER: Duration = Duration::from_secs(120);

/// Exponential backoff with jitter.
#[derive(Clone, Debug)]
pub struct Exponential {
    next: Duration,
}

impl Default for Exponential {
    fn default() -> Self {
        Exponential {
            next: WATCH_BACKOFF_MIN,
        }
    }
}

impl Iterator for Exponential {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let base = self.next;
        self.next = (base * 2).min(WATCH_BACKOFF_MAX);
        let jitter = base.mul_f64(fastrand::f64() / 4.0);
        Some(base + jitter)
    }
}

impl Backoff for Exponential {
    fn reset(&mut self) {
        self.next = WATCH_BACKOFF_MIN;
    }
}

/// The backoff of one watch.
pub fn watch_backoff() -> ResetTimerBackoff<Exponential> {
    ResetTimerBackoff::new(Exponential::default(), RESET_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_and_start_over_after_a_reset() {
        let mut b = Exponential::default();
        let waits: Vec<Duration> = b.by_ref().take(8).collect();
        for (w, base) in waits.iter().zip([800u64, 1600, 3200, 6400, 10_000, 10_000]) {
            let base = Duration::from_millis(base);
            assert!(*w >= base && *w <= base + base / 4, "{w:?} for {base:?}");
        }
        assert!(waits.iter().all(|w| *w <= WATCH_BACKOFF_MAX * 5 / 4));
        b.reset();
        assert!(b.next().is_some_and(|w| w < Duration::from_secs(1)));
    }
}
