//! Backoff with full jitter and the `Retry-After` header: pure functions of their inputs.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// Exponential backoff with full jitter: the n-th delay is uniform in
/// `[0, min(max, base * 2^n)]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The first ceiling.
    pub base: Duration,
    /// The largest ceiling.
    pub max: Duration,
    attempt: u32,
}

impl Backoff {
    /// A backoff at its first attempt.
    pub fn new(base: Duration, max: Duration) -> Backoff {
        Backoff {
            base,
            max,
            attempt: 0,
        }
    }

    /// The ceiling of the next delay, without jitter.
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(30)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The next delay: uniform in `[0, ceiling]` for `unit` uniform in `[0, 1)`.
    pub fn next_with(&mut self, unit: f64) -> Duration {
        let delay = self.ceiling().mul_f64(unit.clamp(0.0, 1.0));
        self.attempt = self.attempt.saturating_add(1);
        delay
    }

    /// The next delay with a random jitter.
    pub fn next_delay(&mut self) -> Duration {
        self.next_with(fastrand::f64())
    }

    /// Attempts made since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// Reads a `Retry-After` value: delay seconds or an HTTP date (taken relative to `now`).
/// A date in the past is a zero delay; anything else unreadable is `None`.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let date = DateTime::parse_from_rfc2822(value).ok()?;
    Some(
        (date.with_timezone(&Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_jitter_stays_under_an_exponential_ceiling() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        assert_eq!(b.next_with(1.0), Duration::from_millis(100));
        assert_eq!(b.next_with(1.0), Duration::from_millis(200));
        assert_eq!(b.next_with(0.5), Duration::from_millis(200));
        assert_eq!(b.next_with(1.0), Duration::from_millis(800));
        assert_eq!(b.next_with(1.0), Duration::from_secs(1));
        assert_eq!(b.next_with(0.0), Duration::ZERO);
        for _ in 0..100 {
            assert!(b.next_delay() <= Duration::from_secs(1));
        }
        b.reset();
        assert_eq!(b.ceiling(), Duration::from_millis(100));
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = DateTime::parse_from_rfc3339("2015-10-21T07:28:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
    }
}
