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

use chrono::{DateTime, Utc};
use kerf_api::rsr::{CanaryRecord, CanaryStage};

use crate::facts::PodFacts;
use crate::inplace::{self, PodResize};
use crate::values::ContainerResources;

pub use crate::canary_policy::{CanaryError, CanaryPolicy, CanarySize, parse, parse_size};

/// What [`next`] reads.
#[derive(Clone, Debug)]
pub struct CanaryInput<'a> {
    /// The canary the effective policy asks for; `None` when it asks for none.
    pub policy: Option<CanaryPolicy>,
    /// The canary the intent recorded, if any.
    pub record: Option<&'a CanaryRecord>,
    /// The workload's pods; only those an in-place change targets count
    /// ([`PodFacts::targeted`]).
    pub pods: &'a [PodFacts],
    /// The change's values per container: a pod whose spec holds them was resized.
    pub target: &'a [ContainerResources],
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

/// One targeted pod as the canary reads it.
struct Targeted<'a> {
    /// Pod name.
    name: &'a str,
    /// Its spec holds the change's values (a resize was sent).
    resized: bool,
    /// The kubelet accepted the resize (or completed it).
    accepted: bool,
}

/// The targeted pods (not terminating, of the current revision) and where their resizes
/// stand.
fn targeted<'a>(pods: &'a [PodFacts], target: &[ContainerResources]) -> Vec<Targeted<'a>> {
    pods.iter()
        .filter(|p| p.targeted())
        .map(|p| {
            let state = inplace::pod_state(p, target);
            Targeted {
                name: &p.name,
                resized: state != PodResize::NeedsResize,
                accepted: state.is_accepted(),
            }
        })
        .collect()
}

/// The canary's next step (design D16 with `apply.canary`).
pub fn next(input: &CanaryInput<'_>) -> CanaryStep {
    let pods = targeted(input.pods, input.target);
    let Some(record) = input.record else {
        return choose(input.policy, &pods);
    };
    let live: Vec<&str> = pods.iter().map(|p| p.name).collect();
    let present = present(record, &live);
    match record.stage {
        CanaryStage::Passed => CanaryStep::All,
        CanaryStage::RolledBack => CanaryStep::Restore(present),
        _ if input.breached => CanaryStep::Restore(present),
        // Every canary pod went away before the canary passed: start again with others.
        _ if present.is_empty() => choose(input.policy, &pods),
        CanaryStage::Resizing => resizing(input, &pods, present),
        CanaryStage::Watching => match record.watch.as_ref().and_then(|w| w.end) {
            Some(end) if input.now < end => CanaryStep::Wait { until: end },
            Some(_) => CanaryStep::Pass,
            // A watch without an end is not one this agent wrote: watch again from now.
            None => resizing(input, &pods, present),
        },
    }
}

fn resizing(input: &CanaryInput<'_>, pods: &[Targeted<'_>], present: Vec<String>) -> CanaryStep {
    let accepted = present
        .iter()
        .all(|name| pods.iter().any(|p| p.name == name && p.accepted));
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
fn choose(policy: Option<CanaryPolicy>, pods: &[Targeted<'_>]) -> CanaryStep {
    let Some(policy) = policy else {
        return CanaryStep::All;
    };
    let resized = pods.iter().filter(|p| p.resized).count();
    let n = policy.size.of(pods.len()).max(resized);
    if n >= pods.len() {
        return CanaryStep::All;
    }
    let mut order: Vec<&Targeted<'_>> = pods.iter().collect();
    order.sort_by(|a, b| b.resized.cmp(&a.resized).then_with(|| a.name.cmp(b.name)));
    CanaryStep::Choose(
        order
            .into_iter()
            .take(n)
            .map(|p| p.name.to_owned())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;
    use kerf_api::policy::{Canary, CanaryPods};
    use kerf_api::rsr::WatchStatus;
    use kerf_api::{ResourceRequirements, ResourceValues};

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    /// The `app` container at `cpu` requested.
    fn cpu(cpu: &str) -> Vec<ContainerResources> {
        let requests = ResourceValues {
            cpu: Some(cpu.into()),
            memory: None,
        };
        let r = ResourceRequirements {
            requests,
            limits: ResourceValues::default(),
        };
        vec![("app".to_owned(), r)]
    }

    /// The change's values: cpu 500m.
    fn target() -> Vec<ContainerResources> {
        cpu("500m")
    }

    /// Targeted pods by name, whether their spec holds the target (resized) and whether
    /// their status does too (accepted: the resize completed).
    fn pods(states: &[(&str, bool, bool)]) -> Vec<PodFacts> {
        let at = |holds: bool| if holds { target() } else { cpu("1") };
        states
            .iter()
            .map(|(n, resized, accepted)| PodFacts {
                name: (*n).to_owned(),
                spec_resources: at(*resized),
                status_resources: at(*accepted),
                current_revision: true,
                ..PodFacts::default()
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
    fn one_pod_step(r: &CanaryRecord, pods: &[PodFacts]) -> CanaryStep {
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
        pods: &[PodFacts],
        breached: bool,
    ) -> CanaryStep {
        next(&CanaryInput {
            policy,
            record,
            pods,
            target: &target(),
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
