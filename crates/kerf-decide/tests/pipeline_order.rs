//! The order of the checks (GR-44..GR-56): for every pair of checks, facts where both
//! fail report the earlier one.

use kerf_testkit::decide as fixture;

use chrono::Duration;
use fixture::*;
use kerf_api::hub::PauseScope;
use kerf_api::policy::{Mode, Strategy};
use kerf_api::rsr::{ChangeState, ContainerFlag};
use kerf_api::wellknown as wk;
use kerf_api::{GoDuration, RecommendationSettings, Resource};
use kerf_decide::effective::{EffectivePolicy, Layer, Sourced};
use kerf_decide::facts::{Facts, ResizePolicy};
use kerf_decide::pipeline::{Check, Outcome};
use kerf_decide::{decide, explain};

type Breaker = fn(&mut Facts, &mut EffectivePolicy);

/// One edit per numbered check that makes that check (and only it) fail.
fn breakers() -> Vec<(Check, &'static str, Breaker)> {
    vec![
        (Check::Mode, wk::REASON_MODE_OFF, |_, p| {
            set_mode(p, Mode::Off, Mode::Off)
        }),
        (Check::HubReachable, wk::REASON_HUB_UNREACHABLE, |f, _| {
            f.hub.last_success = Some(now() - Duration::hours(2));
        }),
        (Check::Pause, wk::REASON_PAUSED, |f, _| {
            pause(f, PauseScope::Fleet)
        }),
        (
            Check::StaleSettings,
            wk::REASON_RECOMMENDATION_STALE,
            |f, p| {
                p.recommendation.window = Some(Sourced::new(Duration::hours(336), Layer::Policy));
                f.recommendation.settings = Some(RecommendationSettings {
                    window: Some(GoDuration::from("168h")),
                    ..RecommendationSettings::default()
                });
            },
        ),
        (Check::HpaCoupling, wk::REASON_HPA_COUPLED, |f, p| {
            f.hpa = Some(cpu_hpa(60));
            p.hpa_coordination = Sourced::new(false, Layer::Policy);
        }),
        (Check::LearningPeriod, wk::REASON_LEARNING_PERIOD, |f, _| {
            if let Some(d) = f.recommendation.data_coverage.as_mut() {
                d.covered = GoDuration::from("1h");
            }
        }),
        (Check::Confidence, wk::REASON_LOW_CONFIDENCE, |f, _| {
            f.recommendation.containers[0].confidence = Some("0.1".into());
        }),
        (Check::FreezeWindow, wk::REASON_FREEZE_WINDOW, |f, _| {
            f.cluster_freeze.now = true
        }),
        (Check::ResourceLimits, wk::REASON_THROTTLED, |f, _| {
            flag(f, ContainerFlag::Throttled)
        }),
        (Check::Cooldown, wk::REASON_COOLDOWN, |f, _| {
            f.state.change = Some(applied_change(Duration::hours(1), ChangeState::Applied));
        }),
        (
            Check::SingleReplica,
            wk::REASON_SINGLE_REPLICA_UNSAFE,
            |f, _| {
                single_replica_recreate(f);
                resize(f, Resource::Cpu, ResizePolicy::RestartContainer);
            },
        ),
        (
            Check::MaintenanceWindow,
            wk::REASON_OUTSIDE_MAINTENANCE_WINDOW,
            |_, p| {
                set_strategy(p, Strategy::Deferred);
            },
        ),
    ]
}

#[allow(clippy::panic)]
fn decided_by(f: &Facts, p: &EffectivePolicy) -> (Check, &'static str) {
    let d = decide(f, p, now());
    match d.outcome {
        Outcome::Skip(s) => (s.check, s.reason),
        Outcome::Block(b) => (b.check, b.reason),
        Outcome::Apply(a) => panic!("expected a skip or block, got {a:?}"),
    }
}

#[test]
fn the_base_fixture_passes_every_check() {
    let d = decide(&facts(), &policy(), now());
    assert_eq!(d.reason(), wk::REASON_RECOMMENDATION_APPLIED, "{d:?}");
    assert_eq!(
        to_request(&d, "app", Resource::Cpu).as_deref(),
        Some("250m")
    );
}

// rule: GR-44, GR-45, GR-46, GR-47, GR-48, GR-49, GR-50, GR-51, GR-52, GR-53, GR-54, GR-55, GR-56
#[test]
fn gr_44_each_check_alone_reports_its_own_reason() {
    for (check, reason, brk) in breakers() {
        let (mut f, mut p) = (facts(), policy());
        brk(&mut f, &mut p);
        assert_eq!(decided_by(&f, &p), (check, reason), "{check:?} alone");
    }
}

// rule: GR-44, GR-45, GR-46, GR-47, GR-48, GR-49, GR-50, GR-51, GR-52, GR-53, GR-54, GR-55, GR-56
#[test]
fn gr_44_for_every_pair_the_earlier_check_decides() {
    let all = breakers();
    let mut pairs = 0;
    for (i, (check_i, reason_i, brk_i)) in all.iter().enumerate() {
        for (check_j, _, brk_j) in all.iter().skip(i + 1) {
            let (mut f, mut p) = (facts(), policy());
            brk_j(&mut f, &mut p);
            brk_i(&mut f, &mut p);
            assert_eq!(
                decided_by(&f, &p),
                (*check_i, *reason_i),
                "{check_i:?} must win over {check_j:?}"
            );
            pairs += 1;
        }
    }
    assert_eq!(pairs, 66);
}

// rule: GR-44
#[test]
fn gr_44_every_check_is_numbered_in_the_documents_order() {
    let numbers: Vec<u8> = Check::ORDER.iter().filter_map(|c| c.number()).collect();
    assert_eq!(numbers, (1..=12).collect::<Vec<u8>>());
    let order: Vec<Check> = breakers().iter().map(|(c, _, _)| *c).collect();
    let numbered: Vec<Check> = Check::ORDER
        .into_iter()
        .filter(|c| c.number().is_some())
        .collect();
    assert_eq!(order, numbered);
}

// rule: GR-24, GR-45
#[test]
fn gr_24_tolerance_comes_after_the_mode_and_before_every_other_check() {
    for (check, _, brk) in breakers() {
        let (mut f, mut p) = (facts(), policy());
        f.recommendation.containers[0] = recommendation("490m", "256Mi");
        brk(&mut f, &mut p);
        let (decided, reason) = decided_by(&f, &p);
        if check == Check::Mode {
            assert_eq!(reason, wk::REASON_MODE_OFF);
        } else {
            assert_eq!(
                (decided, reason),
                (Check::Tolerance, wk::REASON_NO_SIGNIFICANT_CHANGE),
                "{check:?} must not be reported"
            );
        }
    }
}

// rule: GR-44
#[test]
fn gr_44_explain_shows_every_failing_step_and_marks_the_first() {
    let (mut f, mut p) = (facts(), policy());
    for (check, _, brk) in breakers() {
        if check != Check::Mode {
            brk(&mut f, &mut p);
        }
    }
    let e = explain(&f, &p, now());
    let decisive: Vec<Check> = e
        .steps
        .iter()
        .filter(|s| s.decisive)
        .map(|s| s.check)
        .collect();
    assert_eq!(decisive, vec![Check::HubReachable]);
    assert_eq!(e.decision.reason(), wk::REASON_HUB_UNREACHABLE);
    let failing = e
        .steps
        .iter()
        .filter(|s| s.verdict != kerf_decide::explain::Verdict::Pass)
        .count();
    assert_eq!(failing, 11, "{:#?}", e.steps);
}
