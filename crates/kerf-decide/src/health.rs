//! The health watch of a change (rollback document, design §7, D23, D24): pure verdicts.
//!
//! After a change is applied the agent watches the workload for `watchDuration`. Three
//! signals can roll the change back: OOM kills and container restarts (from pod status,
//! counted from baselines taken at the change, see [`baselines`]) and the CPU throttling
//! ratio (from PromQL or the kubelet's cAdvisor metrics, see [`promql`] and [`cadvisor`]).
//! [`evaluate`] turns the counts and samples into a [`HealthVerdict`]; [`restore`] builds
//! the values a rollback puts back. Nothing here reads a clock or does I/O: `now` is an
//! argument.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use kerf_api::Resource;
use kerf_api::policy::Strategy;
use kerf_api::wellknown as wk;

use crate::duration::format_go_duration;
use crate::effective::{EffectivePolicy, Ratio};

pub mod baselines;
pub mod cadvisor;
pub mod promql;
pub mod restore;

pub use baselines::{
    ContainerCounters, Counts, DEFAULT_BASELINE_CAP, LastTermination, PodCounters, WatchBaselines,
    complete_baselines, count_since, count_within, take_baselines,
};
pub use cadvisor::{CadvisorError, CfsCounters, CfsKey, parse_cadvisor, sample_from_scrapes};
pub use promql::{PodMatch, ThrottlingQueries, throttling_queries, throttling_window};
pub use restore::{restore_hpa, restore_values, rollback_record};

/// Default of the agent setting `health.throttlingDelay`: throttling counts from two
/// minutes after the change (rule RB-14, reading 8).
pub const DEFAULT_THROTTLING_DELAY: Duration = Duration::minutes(2);

/// The fewest CFS periods a throttling window must hold before its ratio is acted on
/// (rule RB-15).
pub const MIN_CFS_PERIODS: u64 = 300;

/// The thresholds of one watch: the effective `spec.guardrails.rollback` values plus the
/// agent's throttling delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// OOM kills that roll memory back (`oomKills`, default 1).
    pub oom_kills: u32,
    /// Restarts that roll back every touched resource (`restarts`, default 3).
    pub restarts: u32,
    /// Throttled share of CFS periods that rolls CPU back (`throttlingRatio`, default 0.25).
    pub throttling_ratio: Ratio,
    /// Time after the change before throttling counts (`health.throttlingDelay`, default 2m).
    pub throttling_delay: Duration,
}

impl Thresholds {
    /// The thresholds of an effective policy, with the agent's throttling delay.
    pub fn from_policy(policy: &EffectivePolicy, throttling_delay: Duration) -> Thresholds {
        Thresholds {
            oom_kills: policy.oom_kills.value,
            restarts: policy.restarts.value,
            throttling_ratio: policy.throttling_ratio.value,
            throttling_delay,
        }
    }
}

/// The state of one watch, read from rsr status (`watch`, `change`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchState {
    /// When the change was applied and the watch started.
    pub start: DateTime<Utc>,
    /// The strategy that carried the change: anything but in-place waits for the rollout.
    pub strategy: Strategy,
    /// When the rollout completed (all pods updated and available), for rollout and OnDelete.
    pub rollout_completed_at: Option<DateTime<Utc>>,
    /// `watchDuration` of the effective policy.
    pub watch_duration: Duration,
    /// The change was already rolled back: the watch ended with that rollback (RB-04).
    pub rolled_back: bool,
}

impl WatchState {
    /// When the watch ends: `watchDuration` after the start for in-place, after the rollout
    /// completes otherwise (design D23); `None` while the rollout still runs.
    pub fn end(&self) -> Option<DateTime<Utc>> {
        let from = if self.strategy.resizes_pods() {
            Some(self.start)
        } else {
            self.rollout_completed_at
        };
        from.map(|t| t + self.watch_duration)
    }
}

/// Throttling of one container over a window, summed over the workload's pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThrottlingSample {
    /// The container.
    pub container: String,
    /// CFS periods in the window.
    pub periods: u64,
    /// Periods in which the container was throttled.
    pub throttled_periods: u64,
    /// Where the window starts; it must not start before `start + throttlingDelay`.
    pub window_start: DateTime<Utc>,
}

impl ThrottlingSample {
    /// A sample from the two `increase(...)` results of a PromQL query; `None` for a
    /// negative, infinite or NaN value, or more throttled periods than periods.
    pub fn from_increase(
        container: &str,
        throttled: f64,
        periods: f64,
        window_start: DateTime<Utc>,
    ) -> Option<ThrottlingSample> {
        let whole = |v: f64| (v.is_finite() && v >= 0.0).then(|| v.round() as u64);
        let (throttled_periods, periods) = (whole(throttled)?, whole(periods)?);
        (throttled_periods <= periods).then(|| ThrottlingSample {
            container: container.to_owned(),
            periods,
            throttled_periods,
            window_start,
        })
    }

    /// The throttled share in parts per million, rounded down; `None` without periods.
    pub fn ratio(&self) -> Option<Ratio> {
        if self.periods == 0 || self.throttled_periods > self.periods {
            return None;
        }
        let ppm = u128::from(self.throttled_periods) * 1_000_000 / u128::from(self.periods);
        u32::try_from(ppm).ok().map(Ratio)
    }
}

/// The signal that fired a rollback.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BreachReason {
    /// `oomKills` reached.
    OomKills,
    /// `restarts` reached.
    Restarts,
    /// `throttlingRatio` reached.
    Throttling,
}

impl BreachReason {
    /// The order in which signals are checked when several reach their threshold at the
    /// same evaluation: the order of the rollback document's table.
    pub const ORDER: [BreachReason; 3] = [
        BreachReason::OomKills,
        BreachReason::Restarts,
        BreachReason::Throttling,
    ];

    /// The `rolled_back` reason and HealthWatch condition reason.
    pub fn as_str(self) -> &'static str {
        match self {
            BreachReason::OomKills => wk::REASON_OOM_KILLS,
            BreachReason::Restarts => wk::REASON_RESTARTS,
            BreachReason::Throttling => wk::REASON_THROTTLING,
        }
    }
}

/// What the watch says at one evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthVerdict {
    /// The watch runs; `until` is its end, `None` while a rollout still runs.
    Watching {
        /// When the watch ends.
        until: Option<DateTime<Utc>>,
    },
    /// `watchDuration` passed without a breach (RB-19).
    Healthy,
    /// The watch already ended with a rollback of this change (RB-04): nothing more to do.
    Ended,
    /// A signal reached its threshold: roll back.
    Breach(Breach),
}

impl HealthVerdict {
    /// The reason of the HealthWatch condition (design D5); `None` for [`HealthVerdict::Ended`],
    /// whose condition already holds the rollback reason.
    pub fn condition_reason(&self) -> Option<&'static str> {
        match self {
            HealthVerdict::Watching { .. } => Some(wk::CONDITION_REASON_WATCHING),
            HealthVerdict::Healthy => Some(wk::CONDITION_REASON_HEALTHY),
            HealthVerdict::Ended => None,
            HealthVerdict::Breach(b) => Some(b.reason.as_str()),
        }
    }
}

/// A breached threshold: what to restore and what the `rolled_back` event says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breach {
    /// The signal.
    pub reason: BreachReason,
    /// Resources to restore, CPU first.
    pub restore: Vec<Resource>,
    /// Event details: the breached measure and `watchDuration` (EV-59, RB-27).
    pub details: BTreeMap<String, String>,
    /// A human message naming the measure and the threshold.
    pub message: String,
}

/// Evaluates the watch at `now` (rules RB-03 to RB-16, RB-19, reading 1).
///
/// `touched` are the resources the change touched; `counts` the OOM kills and restarts
/// since the baselines that pod status does not place after the watch's end
/// ([`count_within`]); `throttling` one sample per container (empty: no metrics endpoint
/// and no cAdvisor fallback, so throttling never fires). Signals are checked in
/// [`BreachReason::ORDER`]; the first to reach its threshold (`>=`) wins.
///
/// Once the end has passed, the watch ends Healthy unless OOM kills or restarts inside it
/// reach their thresholds: an agent that was down at the end sees them only now, and
/// still rolls back (RB-03, RB-19). Throttling is not read after the end.
pub fn evaluate(
    watch: &WatchState,
    touched: &[Resource],
    counts: Counts,
    throttling: &[ThrottlingSample],
    thresholds: &Thresholds,
    now: DateTime<Utc>,
) -> HealthVerdict {
    if watch.rolled_back {
        return HealthVerdict::Ended;
    }
    let end = watch.end();
    let ctx = Ctx {
        watch,
        touched,
        thresholds,
        now,
    };
    if end.is_some_and(|end| now >= end) {
        return [BreachReason::OomKills, BreachReason::Restarts]
            .into_iter()
            .find_map(|reason| ctx.check(reason, counts, &[]))
            .map_or(HealthVerdict::Healthy, HealthVerdict::Breach);
    }
    BreachReason::ORDER
        .into_iter()
        .find_map(|reason| ctx.check(reason, counts, throttling))
        .map_or(
            HealthVerdict::Watching { until: end },
            HealthVerdict::Breach,
        )
}

struct Ctx<'a> {
    watch: &'a WatchState,
    touched: &'a [Resource],
    thresholds: &'a Thresholds,
    now: DateTime<Utc>,
}

impl Ctx<'_> {
    fn touches(&self, r: Resource) -> bool {
        self.touched.contains(&r)
    }

    fn check(
        &self,
        reason: BreachReason,
        counts: Counts,
        throttling: &[ThrottlingSample],
    ) -> Option<Breach> {
        match reason {
            BreachReason::OomKills => self.oom_kills(counts.oom_kills),
            BreachReason::Restarts => self.restarts(counts.restarts),
            BreachReason::Throttling => self.throttling(throttling),
        }
    }

    fn window(&self) -> String {
        format_go_duration(self.watch.watch_duration)
    }

    fn breach(
        &self,
        reason: BreachReason,
        restore: Vec<Resource>,
        key: &str,
        value: String,
    ) -> Breach {
        let mut details = BTreeMap::new();
        details.insert(key.to_owned(), value);
        details.insert(wk::DETAIL_WATCH_DURATION.to_owned(), self.window());
        Breach {
            reason,
            restore,
            details,
            message: String::new(),
        }
    }

    /// RB-05: only when the change touched memory; restores memory only.
    fn oom_kills(&self, n: u64) -> Option<Breach> {
        let threshold = self.thresholds.oom_kills;
        if !self.touches(Resource::Memory) || n < u64::from(threshold) {
            return None;
        }
        let nouns = ["OOM kill", "OOM kills"];
        let b = self.breach(
            BreachReason::OomKills,
            vec![Resource::Memory],
            wk::DETAIL_OOM_KILLS,
            n.to_string(),
        );
        Some(self.counted(b, n, nouns, threshold))
    }

    /// RB-06, RB-07: when CPU or memory was touched; restores every touched resource.
    fn restarts(&self, n: u64) -> Option<Breach> {
        let threshold = self.thresholds.restarts;
        let restore: Vec<Resource> = Resource::ALL
            .into_iter()
            .filter(|r| self.touches(*r))
            .collect();
        if restore.is_empty() || n < u64::from(threshold) {
            return None;
        }
        let nouns = ["container restart", "container restarts"];
        let b = self.breach(
            BreachReason::Restarts,
            restore,
            wk::DETAIL_RESTARTS,
            n.to_string(),
        );
        Some(self.counted(b, n, nouns, threshold))
    }

    /// A breach of a counted threshold, with its message: `n` of the thing (named in the
    /// singular and the plural) within the window.
    fn counted(&self, mut b: Breach, n: u64, nouns: [&str; 2], threshold: u32) -> Breach {
        let noun = if n == 1 { nouns[0] } else { nouns[1] };
        b.message = format!(
            "{n} {noun} within {} after change (threshold {threshold})",
            self.window()
        );
        b
    }

    /// RB-08, RB-12, RB-14, RB-15, RB-16: when CPU was touched, from a window that starts
    /// no earlier than `start + throttlingDelay` and holds at least 300 periods; restores
    /// CPU only. The worst container among those over the threshold is reported.
    fn throttling(&self, samples: &[ThrottlingSample]) -> Option<Breach> {
        if !self.touches(Resource::Cpu) {
            return None;
        }
        let counts_from = self.watch.start + self.thresholds.throttling_delay;
        if self.now < counts_from {
            return None;
        }
        let threshold = self.thresholds.throttling_ratio;
        let (sample, ratio) = samples
            .iter()
            .filter(|s| s.window_start >= counts_from && s.periods >= MIN_CFS_PERIODS)
            .filter_map(|s| s.ratio().map(|r| (s, r)))
            .filter(|(_, r)| *r >= threshold)
            .max_by_key(|(s, r)| (*r, std::cmp::Reverse(s.container.clone())))?;
        let mut b = self.breach(
            BreachReason::Throttling,
            vec![Resource::Cpu],
            wk::DETAIL_THROTTLING_RATIO,
            ratio.to_string(),
        );
        b.message = format!(
            "throttling ratio {ratio} of container {} over {} CFS periods within {} after change (threshold {threshold})",
            sample.container,
            sample.periods,
            self.window()
        );
        Some(b)
    }
}
