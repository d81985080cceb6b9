//! Baselines at the change and the OOM kills and restarts counted since.

use chrono::{DateTime, TimeZone, Utc};
use kerf_api::rsr::{Baseline, WatchStatus};
use kerf_decide::health::{
    ContainerCounters, Counts, LastTermination, PodCounters, WatchBaselines, complete_baselines,
    count_since, count_within, take_baselines,
};
use proptest::prelude::*;

#[allow(clippy::unwrap_used)]
fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 1, 12, 0, 0).unwrap()
}

fn container(name: &str, restarts: u32, ooms: u32) -> ContainerCounters {
    ContainerCounters {
        name: name.into(),
        restart_count: restarts,
        oom_kills: ooms,
        ..Default::default()
    }
}

fn pod(uid: &str, containers: Vec<ContainerCounters>) -> PodCounters {
    PodCounters {
        uid: uid.into(),
        containers,
        created_at: Some(t0() - chrono::Duration::hours(1)),
    }
}

fn counts(oom_kills: u64, restarts: u64) -> Counts {
    Counts {
        oom_kills,
        restarts,
    }
}

// rule: RB-09
#[test]
fn rb_09_only_what_happened_after_the_change_counts() {
    let at_change = [pod("a", vec![container("app", 7, 2)])];
    let b = take_baselines(&at_change, 200);
    assert_eq!(count_since(&b, &at_change), counts(0, 0));
    let later = [pod("a", vec![container("app", 9, 3)])];
    assert_eq!(count_since(&b, &later), counts(1, 2));
}

// rule: RB-10
#[test]
fn rb_10_counts_add_up_over_all_pods() {
    let at_change = [
        pod("a", vec![container("app", 1, 0), container("proxy", 4, 0)]),
        pod("b", vec![container("app", 0, 0)]),
    ];
    let b = take_baselines(&at_change, 200);
    let later = [
        pod("a", vec![container("app", 2, 1), container("proxy", 5, 0)]),
        pod("b", vec![container("app", 1, 1)]),
        // Created after the change: counts from zero.
        pod("c", vec![container("app", 1, 0)]),
    ];
    assert_eq!(count_since(&b, &later), counts(2, 4));
    // A deleted pod's counts are lost.
    assert_eq!(count_since(&b, &later[1..]), counts(1, 2));
}

// rule: reading 17, design D24
#[test]
fn reading_17_a_restarting_resize_takes_its_baseline_when_it_completes() {
    let resizing = |restarts: u32, done: bool| ContainerCounters {
        restarts_on_resize: true,
        resize_completed_at: done.then(t0),
        ..container("app", restarts, 0)
    };
    let at_change = [
        pod("a", vec![resizing(2, false)]),
        pod("b", vec![container("app", 0, 0)]),
    ];
    let mut b = take_baselines(&at_change, 200);
    assert!(b.pods["a"].is_empty(), "baseline waits for the resize");
    // The resize restarts the container; the resize is still in progress: nothing counts.
    let mid = [pod("a", vec![resizing(3, false)]), at_change[1].clone()];
    assert!(!complete_baselines(&mut b, &mid));
    assert_eq!(count_since(&b, &mid), counts(0, 0));
    // The resize completed: the baseline is taken now, with the restart it caused.
    let done = [pod("a", vec![resizing(3, true)]), at_change[1].clone()];
    assert!(complete_baselines(&mut b, &done));
    assert_eq!(b.pods["a"]["app"].restarts, 3);
    assert!(!complete_baselines(&mut b, &done));
    assert_eq!(count_since(&b, &done), counts(0, 0));
    // Restarts after that count.
    let after = [pod("a", vec![resizing(4, true)]), at_change[1].clone()];
    assert_eq!(count_since(&b, &after), counts(0, 1));
}

// rule: design D25
#[test]
fn baselines_are_capped_and_the_rest_aggregated() {
    let pods: Vec<PodCounters> = (0..250)
        .map(|i| pod(&format!("pod-{i:03}"), vec![container("app", i % 3, 0)]))
        .collect();
    let b = take_baselines(&pods, 200);
    assert_eq!(b.pods.len(), 200);
    // The highest counters get entries first: all 166 pods with restarts fit.
    let with_restarts = pods
        .iter()
        .filter(|p| p.containers[0].restart_count > 0)
        .count();
    assert!(b.pods.values().filter(|e| e["app"].restarts > 0).count() == with_restarts);
    assert_eq!(b.aggregated, Some(Baseline::default()));
    assert_eq!(count_since(&b, &pods), counts(0, 0));

    // Restarts of aggregated pods and of pods with entries both count.
    let mut later = pods.clone();
    for p in later.iter_mut() {
        p.containers[0].restart_count += 1;
    }
    assert_eq!(count_since(&b, &later), counts(0, 250));

    // The cap holds for any number of pods, and status keeps the same shape.
    let mut status = WatchStatus {
        start: t0(),
        end: None,
        baselines: Default::default(),
        aggregated: None,
    };
    b.write_to(&mut status);
    assert_eq!(WatchBaselines::from_status(&status), b);
    let json = serde_json::to_string(&status).unwrap();
    assert!(json.len() < 256 * 1024);
}

#[test]
fn aggregated_counters_are_subtracted_from_pods_without_entries() {
    let pods = [
        pod("a", vec![container("app", 5, 1)]),
        pod("b", vec![container("app", 2, 0)]),
        pod("c", vec![container("app", 0, 0)]),
    ];
    let b = take_baselines(&pods, 1);
    assert!(b.pods.contains_key("a"));
    assert_eq!(
        b.aggregated,
        Some(Baseline {
            restarts: 2,
            oom_kills: 0
        })
    );
    let later = [
        pod("a", vec![container("app", 5, 1)]),
        pod("b", vec![container("app", 3, 0)]),
        pod("c", vec![container("app", 1, 1)]),
    ];
    assert_eq!(count_since(&b, &later), counts(1, 2));
}

#[test]
fn surplus_resizing_pods_expect_the_restart_their_resize_causes() {
    let resizing = ContainerCounters {
        restarts_on_resize: true,
        ..container("app", 1, 0)
    };
    let pods = [
        pod("a", vec![resizing.clone()]),
        pod("b", vec![resizing.clone()]),
    ];
    let b = take_baselines(&pods, 1);
    assert_eq!(b.pods.len(), 1);
    assert_eq!(b.aggregated.as_ref().map(|a| a.restarts), Some(2));
    let done = ContainerCounters {
        restart_count: 2,
        resize_completed_at: Some(t0()),
        ..resizing
    };
    let mut b = b;
    let after = [pod("a", vec![done.clone()]), pod("b", vec![done])];
    complete_baselines(&mut b, &after);
    assert_eq!(count_since(&b, &after), counts(0, 0));
}

proptest! {
    #[test]
    fn the_cap_is_never_exceeded(n in 0usize..400, cap in 0usize..300, seed in 0u32..1000) {
        let pods: Vec<PodCounters> = (0..n)
            .map(|i| pod(&format!("p{i}"), vec![container("app", (i as u32 * seed) % 7, 0)]))
            .collect();
        let b = take_baselines(&pods, cap);
        prop_assert!(b.pods.len() <= cap);
        prop_assert_eq!(b.pods.len(), n.min(cap));
        prop_assert_eq!(b.aggregated.is_some(), n > cap);
        prop_assert_eq!(count_since(&b, &pods), counts(0, 0));
    }
}

/// Container `app` that terminated `restarts` times in all, the last one (an OOM kill or
/// not) dated `minutes` after t0.
fn dated(restarts: u32, ooms: u32, minutes: i64, oom_killed: bool) -> ContainerCounters {
    ContainerCounters {
        last_termination: Some(LastTermination {
            finished_at: t0() + chrono::Duration::minutes(minutes),
            oom_killed,
        }),
        ..container("app", restarts, ooms)
    }
}

// rule: RB-03
#[test]
fn rb_03_a_signal_dated_after_the_end_is_left_out_and_one_inside_counts() {
    let at_change = [pod("a", vec![container("app", 0, 0)])];
    let b = take_baselines(&at_change, 200);
    let end = Some(t0() + chrono::Duration::minutes(30));
    // The OOM kill pod status dates at minute 25 counts after the end as well.
    let inside = [pod("a", vec![dated(1, 1, 25, true)])];
    assert_eq!(count_within(&b, &inside, end), counts(1, 1));
    // At the end itself it is inside.
    let at_end = [pod("a", vec![dated(1, 1, 30, true)])];
    assert_eq!(count_within(&b, &at_end, end), counts(1, 1));
    // Dated after the end: nothing.
    let after = [pod("a", vec![dated(1, 1, 31, true)])];
    assert_eq!(count_within(&b, &after, end), counts(0, 0));
    assert_eq!(count_since(&b, &after), counts(1, 1));
    // A watch whose end is not known yet (a rollout) leaves nothing out.
    assert_eq!(count_within(&b, &after, None), counts(1, 1));
}

// rule: RB-03
#[test]
fn rb_03_a_signal_that_cannot_be_placed_after_the_end_counts_as_inside() {
    let at_change = [pod("a", vec![container("app", 0, 0)])];
    let b = take_baselines(&at_change, 200);
    let end = Some(t0() + chrono::Duration::minutes(30));
    // A restart counter rise without a time.
    let untimed = [pod("a", vec![container("app", 2, 1)])];
    assert_eq!(count_within(&b, &untimed, end), counts(1, 2));
    // Three restarts, the last (not an OOM kill) dated after the end: the two before it
    // have no time, and the OOM kill among them is not the last termination.
    let last_after = [pod("a", vec![dated(3, 1, 31, false)])];
    assert_eq!(count_within(&b, &last_after, end), counts(1, 2));
    // The same with the OOM kill as the last termination, after the end.
    let oom_after = [pod("a", vec![dated(3, 1, 31, true)])];
    assert_eq!(count_within(&b, &oom_after, end), counts(0, 2));
}

// rule: RB-03
#[test]
fn rb_03_a_pod_created_after_the_end_counts_nothing() {
    let at_change = [pod("a", vec![container("app", 0, 0)])];
    let b = take_baselines(&at_change, 200);
    let end = t0() + chrono::Duration::minutes(30);
    let mut late = pod("c", vec![container("app", 4, 1)]);
    late.created_at = Some(end + chrono::Duration::seconds(1));
    let mut early = pod("d", vec![container("app", 1, 1)]);
    early.created_at = Some(end - chrono::Duration::minutes(5));
    let pods = [late, early];
    assert_eq!(count_within(&b, &pods, Some(end)), counts(1, 1));
    assert_eq!(count_since(&b, &pods), counts(2, 5));
}
