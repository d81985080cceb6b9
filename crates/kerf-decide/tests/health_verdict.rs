//! The health watch verdicts: thresholds, signals, what each restores, when the watch ends.

use kerf_testkit::decide::health as health_support;

use chrono::{DateTime, Duration, Utc};
use health_support::{in_place, t0, thresholds};
use kerf_api::Resource;
use kerf_api::policy::Strategy;
use kerf_api::wellknown as wk;
use kerf_decide::effective::{EffectivePolicy, Ratio};
use kerf_decide::health::{
    Breach, BreachReason, Counts, HealthVerdict, Thresholds, ThrottlingSample, evaluate,
};

const BOTH: [Resource; 2] = [Resource::Cpu, Resource::Memory];

fn counts(oom_kills: u64, restarts: u64) -> Counts {
    Counts {
        oom_kills,
        restarts,
    }
}

fn sample(periods: u64, throttled: u64, window_start: DateTime<Utc>) -> ThrottlingSample {
    ThrottlingSample {
        container: "app".into(),
        periods,
        throttled_periods: throttled,
        window_start,
    }
}

fn at(minutes: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(minutes)
}

fn run(
    touched: &[Resource],
    c: Counts,
    t: &[ThrottlingSample],
    now: DateTime<Utc>,
) -> HealthVerdict {
    evaluate(&in_place(), touched, c, t, &thresholds(), now)
}

#[allow(clippy::panic)]
fn breach(v: HealthVerdict) -> Breach {
    match v {
        HealthVerdict::Breach(b) => b,
        other => panic!("expected a breach, got {other:?}"),
    }
}

fn watching() -> HealthVerdict {
    HealthVerdict::Watching {
        until: Some(at(30)),
    }
}

// rule: RB-03, RB-19
#[test]
fn rb_03_the_watch_ends_healthy_when_nothing_inside_it_reached_a_threshold() {
    assert_eq!(run(&BOTH, counts(0, 0), &[], at(29)), watching());
    // The counts are those pod status does not place after the end (`count_within`, whose
    // tests pin the dating): none, or fewer than the thresholds, and the watch is over.
    assert_eq!(
        run(&BOTH, counts(0, 0), &[], at(30)),
        HealthVerdict::Healthy
    );
    assert_eq!(
        run(&BOTH, counts(0, 2), &[], at(90)),
        HealthVerdict::Healthy
    );
    let b = breach(run(&BOTH, counts(5, 9), &[], at(29)));
    assert_eq!(b.reason, BreachReason::OomKills);
}

// rule: RB-03, RB-05, RB-07
#[test]
fn rb_03_a_signal_inside_the_watch_seen_only_after_its_end_still_rolls_back() {
    // The agent was down at the end: an OOM kill inside the watch restores memory.
    let b = breach(run(&BOTH, counts(1, 1), &[], at(45)));
    assert_eq!(b.reason, BreachReason::OomKills);
    assert_eq!(b.restore, vec![Resource::Memory]);
    // Three restarts inside it restore every touched resource, at the end itself too.
    let b = breach(run(&BOTH, counts(0, 3), &[], at(30)));
    assert_eq!(b.reason, BreachReason::Restarts);
    assert_eq!(b.restore, BOTH.to_vec());
    // An OOM kill does not roll back a change that left memory alone (RB-05).
    assert_eq!(
        run(&[Resource::Cpu], counts(1, 1), &[], at(45)),
        HealthVerdict::Healthy
    );
}

// rule: RB-03, RB-08
#[test]
fn rb_03_throttling_is_not_read_after_the_end() {
    let hot = [sample(1000, 900, at(3))];
    assert_eq!(
        breach(run(&BOTH, counts(0, 0), &hot, at(29))).reason,
        BreachReason::Throttling
    );
    assert_eq!(
        run(&BOTH, counts(0, 0), &hot, at(31)),
        HealthVerdict::Healthy
    );
}

// rule: RB-04
#[test]
fn rb_04_the_first_signal_wins_and_the_watch_ends_with_it() {
    // Several signals at the same evaluation: the fixed order OOMKills, Restarts, Throttling.
    let hot = [sample(1000, 900, at(2))];
    let b = breach(run(&BOTH, counts(1, 3), &hot, at(10)));
    assert_eq!(b.reason, BreachReason::OomKills);
    let b = breach(run(&BOTH, counts(0, 3), &hot, at(10)));
    assert_eq!(b.reason, BreachReason::Restarts);
    // Once rolled back, later signals trigger no second rollback.
    let mut w = in_place();
    w.rolled_back = true;
    let v = evaluate(&w, &BOTH, counts(4, 9), &hot, &thresholds(), at(11));
    assert_eq!(v, HealthVerdict::Ended);
    assert_eq!(v.condition_reason(), None);
}

// rule: RB-05
#[test]
fn rb_05_oom_kills_only_when_memory_was_touched_and_restore_memory() {
    assert_eq!(run(&[Resource::Cpu], counts(2, 0), &[], at(5)), watching());
    let b = breach(run(&BOTH, counts(1, 0), &[], at(5)));
    assert_eq!(b.reason, BreachReason::OomKills);
    assert_eq!(b.restore, vec![Resource::Memory]);
}

// rule: RB-06
#[test]
fn rb_06_every_restart_counts_whatever_its_cause() {
    // Restarts arrive as one count, causes unknown; an OOM kill below its threshold still
    // counts as a restart when memory was not touched (OOM kills are not watched then).
    let b = breach(run(&[Resource::Cpu], counts(3, 3), &[], at(5)));
    assert_eq!(b.reason, BreachReason::Restarts);
}

// rule: RB-07, reading 9
#[test]
fn rb_07_restarts_restore_every_touched_resource() {
    let b = breach(run(&BOTH, counts(0, 3), &[], at(5)));
    assert_eq!(b.reason, BreachReason::Restarts);
    assert_eq!(b.restore, vec![Resource::Cpu, Resource::Memory]);
    let b = breach(run(&[Resource::Cpu], counts(0, 4), &[], at(5)));
    assert_eq!(b.restore, vec![Resource::Cpu]);
    let b = breach(run(&[Resource::Memory], counts(0, 3), &[], at(5)));
    assert_eq!(b.restore, vec![Resource::Memory]);
    assert_eq!(run(&[], counts(0, 9), &[], at(5)), watching());
}

// rule: RB-08
#[test]
fn rb_08_throttling_only_when_cpu_was_touched_and_restores_cpu() {
    let hot = [sample(1000, 300, at(2))];
    assert_eq!(
        run(&[Resource::Memory], counts(0, 0), &hot, at(10)),
        watching()
    );
    let b = breach(run(&BOTH, counts(0, 0), &hot, at(10)));
    assert_eq!(b.reason, BreachReason::Throttling);
    assert_eq!(b.restore, vec![Resource::Cpu]);
}

// rule: RB-12
#[test]
fn rb_12_the_ratio_is_throttled_periods_over_periods() {
    let s = sample(1000, 249, at(2));
    assert_eq!(s.ratio(), Some(Ratio(249_000)));
    assert_eq!(run(&BOTH, counts(0, 0), &[s], at(10)), watching());
    let b = breach(run(
        &BOTH,
        counts(0, 0),
        &[sample(1000, 250, at(2))],
        at(10),
    ));
    assert_eq!(b.details[wk::DETAIL_THROTTLING_RATIO], "0.25");
}

// rule: RB-14, reading 8
#[test]
fn rb_14_throttling_counts_from_two_minutes_after_the_change() {
    // A window that starts inside the first two minutes is not counted.
    let early = [sample(1000, 1000, at(1))];
    assert_eq!(run(&BOTH, counts(0, 0), &early, at(10)), watching());
    // Nothing is counted before the delay has passed, whatever the sample says.
    let t = [sample(1000, 1000, at(2))];
    assert_eq!(run(&BOTH, counts(0, 0), &t, at(1)), watching());
    assert!(matches!(
        run(&BOTH, counts(0, 0), &t, at(3)),
        HealthVerdict::Breach(_)
    ));
    // The delay is the agent's setting.
    let mut th = thresholds();
    th.throttling_delay = Duration::minutes(5);
    let v = evaluate(&in_place(), &BOTH, counts(0, 0), &t, &th, at(10));
    assert_eq!(v, watching());
}

// rule: RB-15
#[test]
fn rb_15_the_ratio_waits_for_300_periods() {
    let thin = [sample(299, 299, at(2))];
    assert_eq!(run(&BOTH, counts(0, 0), &thin, at(10)), watching());
    let enough = [sample(300, 75, at(2))];
    assert!(matches!(
        run(&BOTH, counts(0, 0), &enough, at(10)),
        HealthVerdict::Breach(_)
    ));
}

// rule: RB-16
#[test]
fn rb_16_no_sample_never_triggers_throttling() {
    assert_eq!(run(&[Resource::Cpu], counts(0, 0), &[], at(10)), watching());
    assert_eq!(
        run(&[Resource::Cpu], counts(0, 0), &[], at(31)),
        HealthVerdict::Healthy
    );
}

// rule: RB-19, RB-39
#[test]
fn rb_19_no_breach_for_watch_duration_is_healthy() {
    let v = run(&BOTH, counts(0, 2), &[sample(1000, 200, at(2))], at(29));
    assert_eq!(v, watching());
    assert_eq!(v.condition_reason(), Some(wk::CONDITION_REASON_WATCHING));
    let v = run(&BOTH, counts(0, 2), &[], at(30));
    assert_eq!(v, HealthVerdict::Healthy);
    assert_eq!(v.condition_reason(), Some(wk::CONDITION_REASON_HEALTHY));
}

// rule: RB-25, RB-40
#[test]
fn rb_25_the_reason_names_the_signal() {
    let cases = [
        (counts(1, 0), vec![], wk::REASON_OOM_KILLS),
        (counts(0, 3), vec![], wk::REASON_RESTARTS),
        (
            counts(0, 0),
            vec![sample(400, 400, at(2))],
            wk::REASON_THROTTLING,
        ),
    ];
    for (c, t, reason) in cases {
        let v = run(&BOTH, c, &t, at(10));
        assert_eq!(v.condition_reason(), Some(reason));
        assert_eq!(breach(v).reason.as_str(), reason);
        assert!(wk::ROLLED_BACK_REASONS.contains(&reason));
    }
}

// rule: RB-27, EV-59
#[test]
fn ev_59_details_hold_the_measure_and_watch_duration() {
    let b = breach(run(&BOTH, counts(2, 2), &[], at(10)));
    assert_eq!(b.details.len(), 2);
    assert_eq!(b.details[wk::DETAIL_OOM_KILLS], "2");
    assert_eq!(b.details[wk::DETAIL_WATCH_DURATION], "30m");
    assert_eq!(
        b.message,
        "2 OOM kills within 30m after change (threshold 1)"
    );

    let b = breach(run(&[Resource::Cpu], counts(0, 4), &[], at(10)));
    assert_eq!(b.details[wk::DETAIL_RESTARTS], "4");
    assert_eq!(b.details[wk::DETAIL_WATCH_DURATION], "30m");
    assert_eq!(
        b.message,
        "4 container restarts within 30m after change (threshold 3)"
    );

    let b = breach(run(
        &[Resource::Cpu],
        counts(0, 0),
        &[sample(1200, 372, at(3))],
        at(10),
    ));
    assert_eq!(b.details[wk::DETAIL_THROTTLING_RATIO], "0.31");
    assert_eq!(b.details[wk::DETAIL_WATCH_DURATION], "30m");
    assert!(b.message.contains("0.31") && b.message.contains("(threshold 0.25)"));
    for key in b.details.keys() {
        assert!(wk::DETAIL_KEYS.contains(&key.as_str()), "{key}");
    }
}

// rule: reading 1
#[test]
fn reading_01_thresholds_trigger_when_reached() {
    let b = breach(run(&BOTH, counts(1, 0), &[], at(1)));
    assert_eq!(b.reason, BreachReason::OomKills);
    assert_eq!(run(&BOTH, counts(0, 2), &[], at(1)), watching());
    assert!(matches!(
        run(&BOTH, counts(0, 3), &[], at(1)),
        HealthVerdict::Breach(_)
    ));
    let mut th = thresholds();
    th.oom_kills = 2;
    let v = evaluate(&in_place(), &BOTH, counts(1, 0), &[], &th, at(1));
    assert_eq!(v, watching());
}

// rule: RB-18
#[test]
fn policy_thresholds_replace_the_defaults() {
    let mut p = EffectivePolicy::builtin();
    p.restarts.value = 5;
    p.throttling_ratio.value = Ratio(200_000);
    let th = Thresholds::from_policy(&p, Duration::minutes(2));
    let v = evaluate(&in_place(), &BOTH, counts(0, 4), &[], &th, at(1));
    assert!(matches!(v, HealthVerdict::Watching { .. }));
    let t = [sample(1000, 200, at(2))];
    let b = breach(evaluate(&in_place(), &BOTH, counts(0, 0), &t, &th, at(10)));
    assert_eq!(b.reason, BreachReason::Throttling);
}

// rule: design D23
#[test]
fn rollout_watch_ends_watch_duration_after_the_rollout_completes() {
    let mut w = in_place();
    w.strategy = Strategy::Rollout;
    assert_eq!(w.end(), None);
    let v = evaluate(&w, &BOTH, counts(0, 0), &[], &thresholds(), at(200));
    assert_eq!(v, HealthVerdict::Watching { until: None });
    // Signals during the rollout still count.
    let v = evaluate(&w, &BOTH, counts(0, 3), &[], &thresholds(), at(200));
    assert!(matches!(v, HealthVerdict::Breach(_)));
    w.rollout_completed_at = Some(at(20));
    assert_eq!(w.end(), Some(at(50)));
    let v = evaluate(&w, &BOTH, counts(0, 0), &[], &thresholds(), at(49));
    assert_eq!(
        v,
        HealthVerdict::Watching {
            until: Some(at(50))
        }
    );
    // At the end, with nothing inside the watch reaching a threshold (`count_within`
    // leaves out what pod status dates after it), the watch is over.
    let v = evaluate(&w, &BOTH, counts(0, 2), &[], &thresholds(), at(50));
    assert_eq!(v, HealthVerdict::Healthy);
}

#[test]
fn the_worst_throttled_container_is_reported() {
    let t = [
        ThrottlingSample {
            container: "sidecar".into(),
            ..sample(1000, 300, at(2))
        },
        sample(1000, 600, at(2)),
        ThrottlingSample {
            container: "low".into(),
            ..sample(1000, 100, at(2))
        },
    ];
    let b = breach(run(&[Resource::Cpu], counts(0, 0), &t, at(10)));
    assert_eq!(b.details[wk::DETAIL_THROTTLING_RATIO], "0.6");
    assert!(b.message.contains("container app"), "{}", b.message);
}

#[test]
fn promql_results_become_samples_only_when_sane() {
    let s = ThrottlingSample::from_increase("app", 74.6, 299.6, at(2)).unwrap();
    assert_eq!((s.throttled_periods, s.periods), (75, 300));
    assert!(ThrottlingSample::from_increase("app", f64::NAN, 300.0, at(2)).is_none());
    assert!(ThrottlingSample::from_increase("app", 10.0, -1.0, at(2)).is_none());
    assert!(ThrottlingSample::from_increase("app", 301.0, 300.0, at(2)).is_none());
}
