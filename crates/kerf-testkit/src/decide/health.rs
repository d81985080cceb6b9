//! The health watch's fixture: the start of a change and an in-place watch from it with
//! the built-in thresholds.

use chrono::{DateTime, Duration, TimeZone, Utc};
use kerf_api::policy::Strategy;
use kerf_decide::effective::EffectivePolicy;
use kerf_decide::health::{Thresholds, WatchState};

/// When the change was made.
#[allow(clippy::unwrap_used)]
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 1, 12, 0, 0).unwrap()
}

/// An in-place change watched for 30 minutes from [`t0`], not rolled back.
pub fn in_place() -> WatchState {
    WatchState {
        start: t0(),
        strategy: Strategy::InPlace,
        rollout_completed_at: None,
        watch_duration: Duration::minutes(30),
        rolled_back: false,
    }
}

/// The built-in thresholds with a throttling delay of two minutes.
pub fn thresholds() -> Thresholds {
    Thresholds::from_policy(&EffectivePolicy::builtin(), Duration::minutes(2))
}
