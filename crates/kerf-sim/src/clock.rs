//! The simulated clock shared by the kubelet, the controllers and the dev hub.
//!
//! Three modes: real time, accelerated time (sim time runs `factor` times faster than real
//! time) and a manual clock that only moves when [`Clock::advance`] is called.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::sync::watch;

/// A cheaply cloneable handle on the simulated clock.
#[derive(Clone)]
pub struct Clock {
    inner: Arc<Inner>,
}

enum Inner {
    Real,
    Accelerated {
        factor: f64,
        real_start: Instant,
        sim_start: DateTime<Utc>,
    },
    Manual {
        now: Mutex<DateTime<Utc>>,
        tick: watch::Sender<DateTime<Utc>>,
    },
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.inner {
            Inner::Real => f.write_str("Clock::Real"),
            Inner::Accelerated { factor, .. } => write!(f, "Clock::Accelerated({factor})"),
            Inner::Manual { .. } => write!(f, "Clock::Manual({})", self.now()),
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::real()
    }
}

impl Clock {
    /// Wall-clock time.
    pub fn real() -> Self {
        Self {
            inner: Arc::new(Inner::Real),
        }
    }

    /// Sim time starting now and running `factor` times faster than real time. A factor that
    /// is not a positive finite number is treated as 1.
    pub fn accelerated(factor: f64) -> Self {
        let factor = if factor.is_finite() && factor > 0.0 {
            factor
        } else {
            1.0
        };
        Self {
            inner: Arc::new(Inner::Accelerated {
                factor,
                real_start: Instant::now(),
                sim_start: Utc::now(),
            }),
        }
    }

    /// A clock frozen at `start` that moves only through [`Clock::advance`].
    pub fn manual(start: DateTime<Utc>) -> Self {
        let (tick, _) = watch::channel(start);
        Self {
            inner: Arc::new(Inner::Manual {
                now: Mutex::new(start),
                tick,
            }),
        }
    }

    /// The current sim time.
    pub fn now(&self) -> DateTime<Utc> {
        match &*self.inner {
            Inner::Real => Utc::now(),
            Inner::Accelerated {
                factor,
                real_start,
                sim_start,
            } => {
                let elapsed = real_start.elapsed().mul_f64(*factor);
                *sim_start + chrono::Duration::from_std(elapsed).unwrap_or(chrono::Duration::MAX)
            }
            Inner::Manual { now, .. } => *now.lock().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// Moves a manual clock forward by `d` and wakes its sleepers. No effect on the other
    /// modes.
    pub fn advance(&self, d: Duration) {
        if let Inner::Manual { now, tick } = &*self.inner {
            let mut guard = now.lock().unwrap_or_else(PoisonError::into_inner);
            *guard += chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX);
            tick.send_replace(*guard);
        }
    }

    /// How long a span of sim time lasts in real time (zero for a manual clock, whose time
    /// does not pass by itself).
    pub fn to_real(&self, d: Duration) -> Duration {
        match &*self.inner {
            Inner::Real => d,
            Inner::Accelerated { factor, .. } => d.div_f64(*factor),
            Inner::Manual { .. } => Duration::ZERO,
        }
    }

    /// Sleeps for `d` of sim time.
    pub async fn sleep(&self, d: Duration) {
        match &*self.inner {
            Inner::Real | Inner::Accelerated { .. } => tokio::time::sleep(self.to_real(d)).await,
            Inner::Manual { tick, .. } => {
                let deadline =
                    self.now() + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX);
                let mut rx = tick.subscribe();
                while *rx.borrow_and_update() < deadline {
                    if rx.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_on_advance() {
        let start = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let clock = Clock::manual(start);
        assert_eq!(clock.now(), start);
        clock.advance(Duration::from_secs(90));
        assert_eq!(clock.now(), start + chrono::Duration::seconds(90));
    }

    #[tokio::test]
    async fn manual_sleep_wakes_when_advanced_past_deadline() {
        let clock = Clock::manual(Utc::now());
        let sleeper = {
            let clock = clock.clone();
            tokio::spawn(async move { clock.sleep(Duration::from_secs(10)).await })
        };
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_secs(5));
        tokio::time::timeout(Duration::from_secs(1), sleeper)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn accelerated_clock_runs_faster_than_real_time() {
        let clock = Clock::accelerated(100.0);
        let before = clock.now();
        let real = Instant::now();
        clock.sleep(Duration::from_secs(2)).await;
        assert!(real.elapsed() < Duration::from_millis(500));
        assert!(clock.now() - before >= chrono::Duration::seconds(2));
    }
}
