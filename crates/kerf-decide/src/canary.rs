//! The canary of an in-place change (`apply.canary`): a few pods are resized first and
//! watched for the canary's duration with the health watch's thresholds; only then are
//! the other pods resized. Still one change: one intent, one `applied` event once every
//! pod runs the new values.
//!
//! [`next`] names the canary's next step from the intent's [`CanaryRecord`], the targeted
//! pods and `now`; the agent carries it out and records it. The canary never widens what
//! a change may do: it resizes a subset of the pods the change would resize anyway, a
//! breach restores only the pods it touched, and the values are blocked afterwards like
//! after any rollback (RB-31, through `lastRollback`).

use chrono::{DateTime, Duration, Utc};
use kerf_api::policy::{Canary, CanaryPods};
use kerf_api::rsr::{CanaryRecord, CanaryStage};

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

/// One targeted pod (running, of the current revision) as the canary sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanaryPod {
    /// Pod name.
    pub name: String,
    /// Its spec holds the change's values (a resize was sent).
    pub resized: bool,
    /// The kubelet accepted the resize (or completed it).
    pub accepted: bool,
}

/// What [`next`] reads.
#[derive(Clone, Debug)]
pub struct CanaryInput<'a> {
    /// The canary the effective policy asks for; `None` when it asks for none.
    pub policy: Option<CanaryPolicy>,
    /// The canary the intent recorded, if any.
    pub record: Option<&'a CanaryRecord>,
    /// The targeted pods.
    pub pods: &'a [CanaryPod],
    /// The canary watch found a breach in this pass.
    pub breached: bool,
    /// Now.
    pub now: DateTime<Utc>,
}

/// The canary's next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CanaryStep {
    /// No canary holds anything back: every targeted pod is resized (no canary asked, a
    /// canary as large as the workload, or a canary that passed).
    All,
    /// Record these pods as the canary (stage `Resizing`) before any of them is resized
    /// (design D25); the next pass resizes them.
    Choose(Vec<String>),
    /// Resize, or follow the resizes of, these canary pods only.
    Resize(Vec<String>),
    /// Every canary pod runs the new values: record stage `Watching` with a watch that
    /// starts now and ends at `until`.
    Watch {
        /// When the canary watch ends.
        until: DateTime<Utc>,
    },
    /// The canary watch runs: resize nothing, look again at `until` (pod updates wake the
    /// workload before that).
    Wait {
        /// When the canary watch ends.
        until: DateTime<Utc>,
    },
    /// The canary watch ended without a breach: record stage `Passed` and resize the rest
    /// (their `fallbackAfter` runs from their own first resize).
    Pass,
    /// A breach during the canary: restore these canary pods only.
    Restore(Vec<String>),
}

/// The canary's next step (design D16 with `apply.canary`).
pub fn next(input: &CanaryInput<'_>) -> CanaryStep {
    let Some(record) = input.record else {
        return choose(input);
    };
    let live: Vec<&str> = input.pods.iter().map(|p| p.name.as_str()).collect();
    let present = present(record, &live);
    match record.stage {
        CanaryStage::Passed => CanaryStep::All,
        CanaryStage::RolledBack => CanaryStep::Restore(present),
        _ if input.breached => CanaryStep::Restore(present),
        // Every canary pod went away before the canary passed: start again with others.
        _ if present.is_empty() => choose(input),
        CanaryStage::Resizing => resizing(input, present),
        CanaryStage::Watching => match record.watch.as_ref().and_then(|w| w.end) {
            Some(end) if input.now < end => CanaryStep::Wait { until: end },
            Some(_) => CanaryStep::Pass,
            // A watch without an end is not one this agent wrote: watch again from now.
            None => resizing(input, present),
        },
    }
}

fn resizing(input: &CanaryInput<'_>, present: Vec<String>) -> CanaryStep {
    let accepted = present
        .iter()
        .all(|name| input.pods.iter().any(|p| &p.name == name && p.accepted));
    match input.policy {
        // The policy no longer asks for a canary: it passes, the change goes on.
        None if accepted => CanaryStep::Pass,
        Some(policy) if accepted => CanaryStep::Watch {
            until: input.now + policy.duration,
        },
        _ => CanaryStep::Resize(present),
    }
}

/// The recorded canary pods among the `live` pod names.
pub fn present(record: &CanaryRecord, live: &[&str]) -> Vec<String> {
    record
        .pods
        .iter()
        .filter(|name| live.contains(&name.as_str()))
        .cloned()
        .collect()
}

/// The pods of a new canary: those already resized first (a canary asked for while the
/// change was under way: every one of them is in it), then by name. None when the canary
/// would hold nothing back.
fn choose(input: &CanaryInput<'_>) -> CanaryStep {
    let Some(policy) = input.policy else {
        return CanaryStep::All;
    };
    let resized = input.pods.iter().filter(|p| p.resized).count();
    let n = policy.size.of(input.pods.len()).max(resized);
    if n >= input.pods.len() {
        return CanaryStep::All;
    }
    let mut order: Vec<&CanaryPod> = input.pods.iter().collect();
    order.sort_by(|a, b| b.resized.cmp(&a.resized).then_with(|| a.name.cmp(&b.name)));
    CanaryStep::Choose(order.into_iter().take(n).map(|p| p.name.clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::rsr::WatchStatus;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn pods(states: &[(&str, bool, bool)]) -> Vec<CanaryPod> {
        states
            .iter()
            .map(|(n, resized, accepted)| CanaryPod {
                name: (*n).to_owned(),
                resized: *resized,
                accepted: *accepted,
            })
            .collect()
    }

    fn policy(size: CanarySize) -> Option<CanaryPolicy> {
        Some(CanaryPolicy {
            size,
            duration: Duration::minutes(10),
        })
    }

    /// The step of a one-pod canary `r` over `pods`, without a breach.
    fn one_pod_step(r: &CanaryRecord, pods: &[CanaryPod]) -> CanaryStep {
        step(policy(CanarySize::Pods(1)), Some(r), pods, false)
    }

    /// A canary of `pods` whose watch ends in 30 seconds, and that end.
    fn watching(pods: &[&str]) -> (CanaryRecord, DateTime<Utc>) {
        let end = now() + Duration::seconds(30);
        (record(CanaryStage::Watching, pods, Some(end)), end)
    }

    fn record(stage: CanaryStage, pods: &[&str], end: Option<DateTime<Utc>>) -> CanaryRecord {
        CanaryRecord {
            pods: pods.iter().map(|p| (*p).to_owned()).collect(),
            stage,
            watch: end.map(|end| WatchStatus {
                start: end - Duration::minutes(10),
                end: Some(end),
                baselines: Default::default(),
                aggregated: None,
            }),
        }
    }

    fn step(
        policy: Option<CanaryPolicy>,
        record: Option<&CanaryRecord>,
        pods: &[CanaryPod],
        breached: bool,
    ) -> CanaryStep {
        next(&CanaryInput {
            policy,
            record,
            pods,
            breached,
            now: now(),
        })
    }

    #[test]
    fn sizes_count_pods_and_round_percentages_up() {
        assert_eq!(CanarySize::Pods(2).of(10), 2);
        assert_eq!(CanarySize::Percent(25).of(10), 3);
        assert_eq!(CanarySize::Percent(1).of(3), 1);
        assert_eq!(CanarySize::Percent(100).of(3), 3);
    }

    #[test]
    fn bad_input_never_widens_the_change() {
        let c = Canary {
            pods: Some(CanaryPods::Text("0%".into())),
            duration: "soon".into(),
        };
        let (p, problems) = parse(&c, Duration::minutes(30));
        assert_eq!(p.size, CanarySize::Pods(1));
        assert_eq!(p.duration, Duration::minutes(30));
        assert_eq!(problems.len(), 2);
        let good = Canary {
            pods: Some(CanaryPods::Text("25%".into())),
            duration: "2m".into(),
        };
        let (p, problems) = parse(&good, Duration::minutes(30));
        assert_eq!(
            (p.size, p.duration, problems.len()),
            (CanarySize::Percent(25), Duration::minutes(2), 0)
        );
        assert!(parse_size(Some(&CanaryPods::Count(0))).is_err());
        assert_eq!(
            parse_size(Some(&CanaryPods::Text("3".into()))),
            Ok(CanarySize::Pods(3))
        );
        assert!(parse_size(Some(&CanaryPods::Text("101%".into()))).is_err());
    }

    #[test]
    fn without_a_canary_every_pod_is_resized() {
        let p = pods(&[("a", false, false), ("b", false, false)]);
        assert_eq!(step(None, None, &p, false), CanaryStep::All);
    }

    #[test]
    fn a_canary_is_recorded_before_any_pod_is_resized() {
        let p = pods(&[
            ("c", false, false),
            ("a", false, false),
            ("b", false, false),
        ]);
        let s = step(policy(CanarySize::Pods(1)), None, &p, false);
        assert_eq!(s, CanaryStep::Choose(vec!["a".into()]));
    }

    #[test]
    fn a_canary_as_large_as_the_workload_holds_nothing_back() {
        let p = pods(&[("a", false, false), ("b", false, false)]);
        assert_eq!(
            step(policy(CanarySize::Percent(100)), None, &p, false),
            CanaryStep::All
        );
        let one = pods(&[("a", false, false)]);
        assert_eq!(
            step(policy(CanarySize::Pods(1)), None, &one, false),
            CanaryStep::All
        );
    }

    #[test]
    fn pods_already_resized_are_the_canary_when_it_is_asked_for_late() {
        let p = pods(&[("a", false, false), ("b", true, true), ("c", false, false)]);
        let s = step(policy(CanarySize::Pods(1)), None, &p, false);
        assert_eq!(s, CanaryStep::Choose(vec!["b".into()]));
        let two = pods(&[
            ("a", true, false),
            ("b", true, true),
            ("c", false, false),
            ("d", false, false),
        ]);
        assert_eq!(
            step(policy(CanarySize::Pods(1)), None, &two, false),
            CanaryStep::Choose(vec!["a".into(), "b".into()])
        );
        let all = pods(&[("a", true, false), ("b", true, true)]);
        assert_eq!(
            step(policy(CanarySize::Pods(1)), None, &all, false),
            CanaryStep::All
        );
    }

    #[test]
    fn only_the_canary_pods_are_resized_until_they_run_the_values() {
        let r = record(CanaryStage::Resizing, &["a"], None);
        let p = pods(&[("a", true, false), ("b", false, false), ("c", false, false)]);
        let s = one_pod_step(&r, &p);
        assert_eq!(s, CanaryStep::Resize(vec!["a".into()]));
    }

    #[test]
    fn the_canary_watch_starts_once_every_canary_pod_runs_the_values() {
        let r = record(CanaryStage::Resizing, &["a"], None);
        let p = pods(&[("a", true, true), ("b", false, false)]);
        let s = one_pod_step(&r, &p);
        assert_eq!(
            s,
            CanaryStep::Watch {
                until: now() + Duration::minutes(10)
            }
        );
    }

    #[test]
    fn the_rest_waits_for_the_canary_duration_then_goes() {
        let (r, end) = watching(&["a"]);
        let p = pods(&[("a", true, true), ("b", false, false)]);
        assert_eq!(one_pod_step(&r, &p), CanaryStep::Wait { until: end });
        let ended = record(CanaryStage::Watching, &["a"], Some(now()));
        assert_eq!(one_pod_step(&ended, &p), CanaryStep::Pass);
        let passed = record(CanaryStage::Passed, &["a"], Some(now()));
        assert_eq!(one_pod_step(&passed, &p), CanaryStep::All);
    }

    // rule: RB-22 (a canary rollback restores only the pods the canary resized)
    #[test]
    fn a_breach_during_the_canary_restores_the_canary_pods_only() {
        let (r, _) = watching(&["a", "gone"]);
        let p = pods(&[("a", true, true), ("b", false, false), ("c", false, false)]);
        assert_eq!(
            step(policy(CanarySize::Pods(2)), Some(&r), &p, true),
            CanaryStep::Restore(vec!["a".into()])
        );
    }

    #[test]
    fn a_canary_whose_pods_all_went_away_starts_again() {
        let (r, _) = watching(&["gone"]);
        let p = pods(&[("b", false, false), ("c", false, false)]);
        assert_eq!(one_pod_step(&r, &p), CanaryStep::Choose(vec!["b".into()]));
    }

    #[test]
    fn a_canary_the_policy_no_longer_asks_for_passes_once_its_pods_run_the_values() {
        let r = record(CanaryStage::Resizing, &["a"], None);
        let p = pods(&[("a", true, true), ("b", false, false)]);
        assert_eq!(step(None, Some(&r), &p, false), CanaryStep::Pass);
    }
}
