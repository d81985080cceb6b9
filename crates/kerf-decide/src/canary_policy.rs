//! The canary a policy asks for (`apply.canary`): how many pods and for how long, parsed
//! from the policy with the problems a bad value gives. The canary's steps are
//! [`crate::canary`].

use chrono::Duration;
use kerf_api::policy::{Canary, CanaryPods};

use crate::duration::parse_go_duration;

/// How many pods a canary resizes first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CanarySize {
    /// A number of pods (at least 1).
    Pods(u32),
    /// A percentage of the targeted pods (1 to 100), rounded up.
    Percent(u8),
}

impl CanarySize {
    /// How many of `total` targeted pods the canary resizes first (at least 1).
    pub fn of(self, total: usize) -> usize {
        let n = match self {
            CanarySize::Pods(n) => usize::try_from(n).unwrap_or(usize::MAX),
            CanarySize::Percent(p) => (total * usize::from(p)).div_ceil(100),
        };
        n.max(1)
    }
}

/// The canary a policy asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CanaryPolicy {
    /// How many pods go first.
    pub size: CanarySize,
    /// How long they are watched.
    pub duration: Duration,
}

/// Why a canary as written does not parse; the message names what counts instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CanaryError {
    /// `pods` is neither a number of at least 1 nor a percentage from 1% to 100%.
    #[error("canary pods {0:?} is not a number of at least 1 or a percentage from 1% to 100%")]
    Pods(String),
    /// `duration` is not a positive Go duration.
    #[error("canary duration {0:?} is not a positive duration")]
    Duration(String),
}

/// Reads `pods` as written: a number, or `"N%"`. Absent means 1 pod.
pub fn parse_size(pods: Option<&CanaryPods>) -> Result<CanarySize, CanaryError> {
    match pods {
        None => Ok(CanarySize::Pods(1)),
        Some(CanaryPods::Count(n)) => u32::try_from(*n)
            .ok()
            .filter(|n| *n >= 1)
            .map(CanarySize::Pods)
            .ok_or_else(|| CanaryError::Pods(n.to_string())),
        Some(CanaryPods::Text(s)) => match s.strip_suffix('%') {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| (1..=100).contains(p))
                .map(CanarySize::Percent),
            None => s
                .parse::<u32>()
                .ok()
                .filter(|n| *n >= 1)
                .map(CanarySize::Pods),
        }
        .ok_or_else(|| CanaryError::Pods(s.clone())),
    }
}

/// Reads a canary as written. Bad input never widens what a change does: a bad `pods`
/// counts as 1 pod and a bad `duration` as `fallback_duration` (the policy's
/// `watchDuration`); each is returned as a problem to report on the policy.
pub fn parse(c: &Canary, fallback_duration: Duration) -> (CanaryPolicy, Vec<CanaryError>) {
    let mut problems = Vec::new();
    let size = parse_size(c.pods.as_ref()).unwrap_or_else(|e| {
        problems.push(e);
        CanarySize::Pods(1)
    });
    let duration = parse_go_duration(c.duration.as_str())
        .ok()
        .filter(|d| *d > Duration::zero())
        .unwrap_or_else(|| {
            problems.push(CanaryError::Duration(c.duration.0.clone()));
            fallback_duration
        });
    (CanaryPolicy { size, duration }, problems)
}
