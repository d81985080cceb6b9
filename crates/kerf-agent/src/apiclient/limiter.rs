//! The client-side limit on actuating writes: a token bucket kept as the time its next
//! free token arrives (GCRA), so a burst goes out at once and the rest follow at the rate.
//! Time is passed in to [`Bucket`] and [`Tokens`]; [`WriteLimiter`] reads tokio's clock.
//!
//! A reconcile pass does not wait for a token: it takes one before a write
//! ([`WriteLimiter::take_for`]), and when none is free it gets a token reserved for it at a
//! later time, ends, and comes back then. The client layer lets a write with a token taken
//! this way go at once (or less than one interval later, when the write before it went
//! late); any other actuating write takes its own token and waits for it.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How long a token reserved for a holder that did not come back for it is kept.
const HELD_FOR: Duration = Duration::from_secs(60);

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

/// The bucket with the tokens passes took ahead of their writes, as a pure state machine
/// over elapsed time. Two buckets of the same rate: `queue` hands out the tokens (to passes
/// ahead of time), `sent` paces the writes as they reach the client, so a pass that comes
/// back late for its token and one on time for the next never send closer than the rate
/// allows.
#[derive(Clone, Debug)]
pub struct Tokens {
    queue: Bucket,
    sent: Bucket,
    /// Tokens taken by passes whose write has not reached the client layer yet.
    prepaid: u32,
    /// Per holder, when the token reserved for it comes due.
    held: HashMap<String, Duration>,
    /// When reservations nobody came back for were last dropped.
    pruned: Duration,
}

impl Tokens {
    /// A full bucket, no token taken.
    pub fn new(rate: WriteRate) -> Tokens {
        Tokens {
            queue: Bucket::new(rate),
            sent: Bucket::new(rate),
            prepaid: 0,
            held: HashMap::new(),
            pruned: Duration::ZERO,
        }
    }

    /// Takes a token for one write of `holder` at `now`: `Ok` when the write may go now;
    /// otherwise a token is reserved for `holder` (once: asking again before it is due
    /// reserves nothing more) and the answer is how long until it is due.
    pub fn take(&mut self, holder: &str, now: Duration) -> Result<(), Duration> {
        self.prune(now);
        if let Some(due) = self.held.get(holder).copied() {
            if due > now {
                return Err(due - now);
            }
            self.held.remove(holder);
            self.prepaid = self.prepaid.saturating_add(1);
            return Ok(());
        }
        let wait = self.queue.reserve(now);
        if wait.is_zero() {
            self.prepaid = self.prepaid.saturating_add(1);
            return Ok(());
        }
        self.held.insert(holder.to_owned(), now + wait);
        Err(wait)
    }

    /// One actuating write reaches the client layer at `now`; returns how long it waits
    /// before it goes. A write with a token taken by [`Tokens::take`] goes at once unless
    /// the write before it went late (then it waits less than one interval); any other
    /// (a rollback, an eviction, an HPA target) takes a token of the queue too, which moves
    /// the reserved tokens one interval on, but does not wait behind them.
    pub fn send(&mut self, now: Duration) -> Duration {
        if self.prepaid > 0 {
            self.prepaid -= 1;
        } else {
            let _ = self.queue.reserve(now);
        }
        self.sent.reserve(now)
    }

    /// Drops, at most every [`HELD_FOR`], the reservations due longer than that ago (a
    /// change withdrawn or finished meanwhile): their tokens are spent.
    fn prune(&mut self, now: Duration) {
        if now < self.pruned + HELD_FOR {
            return;
        }
        self.pruned = now;
        self.held.retain(|_, due| *due + HELD_FOR > now);
    }
}

/// The shared limiter of one agent.
#[derive(Debug)]
pub struct WriteLimiter {
    tokens: Mutex<Tokens>,
    origin: tokio::time::Instant,
}

impl WriteLimiter {
    /// A limiter with a full bucket.
    pub fn new(rate: WriteRate) -> WriteLimiter {
        WriteLimiter {
            tokens: Mutex::new(Tokens::new(rate)),
            origin: tokio::time::Instant::now(),
        }
    }

    /// Takes a token for one write of `holder` now (see [`Tokens::take`]); the error is
    /// how long until the token reserved for it is due.
    pub fn take_for(&self, holder: &str) -> Result<(), Duration> {
        let mut t = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        t.take(holder, self.origin.elapsed())
    }

    /// Waits until one more actuating write may go out (at once for a write whose token
    /// was taken with [`WriteLimiter::take_for`]).
    pub async fn acquire(&self) {
        let wait = {
            let mut t = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
            t.send(self.origin.elapsed())
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

    /// Asserts no window of one second from a write holds more than `most` of the
    /// (sorted) times `sent`.
    fn assert_at_most_per_second(sent: &[Duration], most: usize) {
        for (i, start) in sent.iter().enumerate() {
            let within = sent[i..]
                .iter()
                .take_while(|t| **t < *start + Duration::from_secs(1))
                .count();
            assert!(
                within <= most,
                "{within} writes in one second from {start:?}"
            );
        }
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
        assert_at_most_per_second(&sorted, 4 + 5);
        let last = sorted.last().copied().unwrap_or_default();
        // 4 at once, then 5 a second: the 1,000th goes out after 199.2 s.
        assert_eq!(last, Duration::from_millis(199_200));
    }

    #[test]
    fn a_pass_without_a_token_gets_one_reserved_and_comes_back_for_it() {
        let mut t = Tokens::new(rate(1, 1));
        let s = Duration::from_secs;
        assert_eq!(t.take("a", s(0)), Ok(()));
        assert_eq!(
            t.send(s(0)),
            Duration::ZERO,
            "the token taken lets the write go"
        );
        // No token for b or c: each gets its own, one second apart.
        assert_eq!(t.take("b", s(0)), Err(s(1)));
        assert_eq!(t.take("c", s(0)), Err(s(2)));
        // Asking again before it is due reserves nothing more.
        assert_eq!(
            t.take("b", Duration::from_millis(500)),
            Err(Duration::from_millis(500))
        );
        assert_eq!(t.take("d", s(0)), Err(s(3)));
        assert_eq!(t.take("b", s(1)), Ok(()));
        assert_eq!(t.send(s(1)), Duration::ZERO);
        assert_eq!(t.take("c", s(2)), Ok(()));
        assert_eq!(t.send(s(2)), Duration::ZERO, "c's token");
        // A write without a token taken waits for its own, but not behind d's reservation.
        assert_eq!(t.send(s(2)), s(1));
        assert_eq!(t.take("d", s(3)), Ok(()));
    }

    #[test]
    fn a_token_claimed_on_time_after_one_claimed_late_still_keeps_the_rate() {
        let mut t = Tokens::new(rate(1, 1));
        let ms = Duration::from_millis;
        assert_eq!(t.take("a", ms(0)), Ok(()));
        assert_eq!(t.take("b", ms(0)), Err(ms(1000)));
        // a's write reaches the client half a second late, b comes back on time.
        assert_eq!(t.send(ms(500)), ms(0));
        assert_eq!(t.take("b", ms(1000)), Ok(()));
        assert_eq!(t.send(ms(1000)), ms(500), "one second after a's write");
    }

    #[test]
    fn tokens_taken_ahead_never_raise_the_rate() {
        let mut t = Tokens::new(rate(5, 2));
        let mut sent = Vec::new();
        // 50 holders each asking every 100 ms for 20 s; each write goes when allowed.
        for tick in 0..200u64 {
            let now = Duration::from_millis(tick * 100);
            for h in 0..50 {
                if t.take(&format!("h{h}"), now).is_ok() {
                    assert_eq!(t.send(now), Duration::ZERO);
                    sent.push(now);
                }
            }
        }
        assert_at_most_per_second(&sent, 2 + 5);
        assert!(
            sent.len() >= 95,
            "the rate is used: {} writes in 20 s",
            sent.len()
        );
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
