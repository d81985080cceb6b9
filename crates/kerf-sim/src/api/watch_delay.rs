//! Late watch delivery: each watch stream hands its live events to the client a random
//! time after they happened, within the configured range, and never out of order. A real
//! API server's watch cache delivers late and unevenly (several milliseconds to seconds
//! under load, and each watch on its own schedule), so a client that acts on its caches
//! right after a write can see its own write late, or see one kind of object change
//! before another; this lets kerf-sim show those races.
//!
//! The range is `SimConfig::watch_delay` (`kerf-sim serve --watch-delay 50ms..400ms`).
//! An empty range (`d..d`, the default `0s..0s`) is a fixed delay of `d`; zero delivers at
//! once, as before.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Duration;

use tokio::time::Instant;

/// No delay: events go out as they happen.
pub const NONE: Range<Duration> = Duration::ZERO..Duration::ZERO;

/// Parses `50ms..400ms` (a range) or `200ms` (a fixed delay). Units: `us`, `ms`, `s`, `m`.
pub fn parse_range(s: &str) -> Result<Range<Duration>, String> {
    let (lo, hi) = match s.split_once("..") {
        Some((lo, hi)) => (parse_duration(lo)?, parse_duration(hi)?),
        None => {
            let d = parse_duration(s)?;
            (d, d)
        }
    };
    if hi < lo {
        return Err(format!("{s:?}: the end of the range is before its start"));
    }
    Ok(lo..hi)
}

/// Parses one duration such as `50ms`, `1.5s` or `0`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{s:?}: a duration needs a unit (us, ms, s, m)"))?;
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: {num:?} is not a number"))?;
    let secs = match unit {
        "us" | "µs" => n / 1_000_000.0,
        "ms" => n / 1_000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (us, ms, s, m)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

/// Events waiting for their delivery time, in the order they happened.
pub struct Delayed<T> {
    range: Range<Duration>,
    queue: VecDeque<(Instant, T)>,
    rng: u64,
}

impl<T> Delayed<T> {
    /// An empty queue delaying by `range`.
    pub fn new(range: Range<Duration>) -> Self {
        // Seeded per watch, so watches jitter independently; never zero (xorshift).
        let seed = uuid::Uuid::new_v4().as_u128() as u64 | 1;
        Delayed {
            range,
            queue: VecDeque::new(),
            rng: seed,
        }
    }

    /// Whether events are delivered at once (no delay configured).
    pub fn is_immediate(&self) -> bool {
        self.range.end.is_zero()
    }

    /// Whether no event is waiting.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Queues an event that happened at `now`: due a random time within the range later,
    /// but not before the event queued before it.
    pub fn push(&mut self, now: Instant, item: T) {
        let mut due = now + self.sample();
        if let Some((last, _)) = self.queue.back() {
            due = due.max(*last);
        }
        self.queue.push_back((due, item));
    }

    /// When the next event is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.queue.front().map(|(due, _)| *due)
    }

    /// The next event if it is due at `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<T> {
        match self.queue.front() {
            Some((due, _)) if *due <= now => self.queue.pop_front().map(|(_, item)| item),
            _ => None,
        }
    }

    /// A delay within the range (its start when the range is empty).
    fn sample(&mut self) -> Duration {
        let Range { start, end } = self.range;
        if end <= start {
            return start;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let span = (end - start).as_nanos() as u64;
        start + Duration::from_nanos(self.rng % (span + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_and_a_fixed_delay_parse() {
        assert_eq!(
            parse_range("50ms..400ms"),
            Ok(Duration::from_millis(50)..Duration::from_millis(400))
        );
        assert_eq!(
            parse_range("1.5s"),
            Ok(Duration::from_millis(1500)..Duration::from_millis(1500))
        );
        assert_eq!(parse_range("0"), Ok(NONE));
        assert!(parse_range("400ms..50ms").is_err());
        assert!(parse_range("50").is_err());
        assert!(parse_range("50h").is_err());
    }

    #[test]
    fn delays_stay_within_the_range_and_keep_the_order() {
        let range = Duration::from_millis(50)..Duration::from_millis(400);
        let mut d = Delayed::new(range.clone());
        let t0 = Instant::now();
        for i in 0..200u32 {
            d.push(t0 + Duration::from_millis(u64::from(i)), i);
        }
        let mut last_due = t0;
        let mut spread = std::collections::HashSet::new();
        for i in 0..200u32 {
            let due = d.next_due().expect("queued");
            let happened = t0 + Duration::from_millis(u64::from(i));
            assert!(
                due >= last_due,
                "event {i} would overtake the one before it"
            );
            assert!(due >= happened + range.start, "event {i} is early");
            spread.insert(due.duration_since(t0).as_millis() / 50);
            assert_eq!(d.pop_due(due), Some(i));
            last_due = due;
        }
        assert!(spread.len() > 3, "delays do not jitter: {spread:?}");
        assert!(d.pop_due(last_due + range.end).is_none());
    }

    #[test]
    fn nothing_is_handed_out_before_it_is_due() {
        let mut d = Delayed::new(Duration::from_millis(100)..Duration::from_millis(100));
        let t0 = Instant::now();
        d.push(t0, "a");
        assert!(!d.is_immediate());
        assert_eq!(d.pop_due(t0 + Duration::from_millis(99)), None);
        assert_eq!(d.pop_due(t0 + Duration::from_millis(100)), Some("a"));
        assert!(Delayed::<()>::new(NONE).is_immediate());
    }
}
