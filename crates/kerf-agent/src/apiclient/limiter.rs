//! The client-side limit on actuating writes: a token bucket kept as the time its next
//! free token arrives (GCRA), so a burst goes out at once and the rest follow at the rate.
//! Time is passed in to [`Bucket`]; [`WriteLimiter`] reads tokio's clock.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How many writes may go out at once and at what rate after that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRate {
    /// Writes per second once the burst is spent (at least 1).
    pub per_second: u32,
    /// Writes that may go out at once (at least 1).
    pub burst: u32,
}

/// The bucket, as a pure state machine over elapsed time.
#[derive(Clone, Debug)]
pub struct Bucket {
    interval: Duration,
    burst_span: Duration,
    /// When the bucket would have given out every reserved token at the rate.
    tat: Duration,
}

impl Bucket {
    /// A full bucket.
    pub fn new(rate: WriteRate) -> Bucket {
        let interval = Duration::from_secs(1) / rate.per_second.max(1);
        Bucket {
            interval,
            burst_span: interval * rate.burst.max(1),
            tat: Duration::ZERO,
        }
    }

    /// Reserves one write at `now` (time since any fixed origin); returns how long the
    /// caller waits before sending it. Reservations queue in the order they were made.
    pub fn reserve(&mut self, now: Duration) -> Duration {
        self.tat = self.tat.max(now) + self.interval;
        self.tat.saturating_sub(now + self.burst_span)
    }
}

/// The shared limiter of one agent.
#[derive(Debug)]
pub struct WriteLimiter {
    bucket: Mutex<Bucket>,
    origin: tokio::time::Instant,
}

impl WriteLimiter {
    /// A limiter with a full bucket.
    pub fn new(rate: WriteRate) -> WriteLimiter {
        WriteLimiter {
            bucket: Mutex::new(Bucket::new(rate)),
            origin: tokio::time::Instant::now(),
        }
    }

    /// Waits until one more actuating write may go out.
    pub async fn acquire(&self) {
        let wait = {
            let mut b = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
            b.reserve(self.origin.elapsed())
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_second: u32, burst: u32) -> WriteRate {
        WriteRate { per_second, burst }
    }

    #[test]
    fn a_burst_goes_at_once_and_the_rest_at_the_rate() {
        let mut b = Bucket::new(rate(10, 3));
        let waits: Vec<Duration> = (0..6).map(|_| b.reserve(Duration::ZERO)).collect();
        let ms = |n| Duration::from_millis(n);
        assert_eq!(waits, [ms(0), ms(0), ms(0), ms(100), ms(200), ms(300)]);
    }

    #[test]
    fn no_window_of_one_second_holds_more_than_burst_plus_rate() {
        let mut b = Bucket::new(rate(5, 4));
        // 1,000 writes asked for within the first 2 s: the times they go out.
        let sent: Vec<Duration> = (0..1000u32)
            .map(|i| {
                let now = Duration::from_millis(u64::from(i % 2000));
                now + b.reserve(now)
            })
            .collect();
        let mut sorted = sent.clone();
        sorted.sort();
        for (i, start) in sorted.iter().enumerate() {
            let within = sorted[i..]
                .iter()
                .take_while(|t| **t < *start + Duration::from_secs(1))
                .count();
            assert!(
                within <= 4 + 5,
                "{within} writes in one second from {start:?}"
            );
        }
        let last = sorted.last().copied().unwrap_or_default();
        // 4 at once, then 5 a second: the 1,000th goes out after 199.2 s.
        assert_eq!(last, Duration::from_millis(199_200));
    }

    #[test]
    fn an_idle_bucket_refills_only_up_to_the_burst() {
        let mut b = Bucket::new(rate(2, 2));
        assert_eq!(b.reserve(Duration::ZERO), Duration::ZERO);
        let later = Duration::from_secs(60);
        assert_eq!(b.reserve(later), Duration::ZERO);
        assert_eq!(b.reserve(later), Duration::ZERO);
        assert_eq!(b.reserve(later), Duration::from_millis(500));
    }
}
