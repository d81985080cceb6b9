//! One test per whole-workload rule of the pipeline.

use kerf_testkit::decide as fixture;

use chrono::Duration;
use fixture::*;
use kerf_api::hub::PauseScope;
use kerf_api::policy::{Mode, Strategy, Window};
use kerf_api::rsr::{ChangeState, LiveContainer, LiveValues, Phase};
use kerf_api::wellknown as wk;
use kerf_api::{
    GoDuration, RecommendationSettings, Resource, ResourceRequirements, ResourceValues,
};
use kerf_decide::decide;
use kerf_decide::effective::{EffectivePolicy, Layer, Ratio, Sourced};
use kerf_decide::facts::{Facts, WatchFacts};
use kerf_decide::pipeline::{Check, ReportKind};

fn reason(f: &Facts, p: &EffectivePolicy) -> &'static str {
    decide(f, p, now()).reason()
}

fn covered(f: &mut Facts, d: &str) {
    if let Some(c) = f.recommendation.data_coverage.as_mut() {
        c.covered = GoDuration::from(d);
    }
}

fn one_off(start: &str, end: &str) -> Window {
    Window {
        start: Some(start.into()),
        end: Some(end.into()),
        ..Window::default()
    }
}

fn sundays_at_two() -> Window {
    Window {
        schedule: Some("0 2 * * 0".into()),
        duration: Some(GoDuration::from("3h")),
        ..Window::default()
    }
}

// rule: GR-01
#[test]
fn gr_01_every_strategy_passes_the_guardrails() {
    let mut f = facts();
    f.recommendation.containers[0].confidence = Some("0.5".into());
    for s in [Strategy::InPlace, Strategy::Rollout, Strategy::Deferred] {
        let mut p = policy();
        set_strategy(&mut p, s);
        p.maintenance_windows = Sourced::new(
            vec![one_off("2026-06-03T11:00:00Z", "2026-06-03T15:00:00Z")].into(),
            Layer::Policy,
        );
        assert_eq!(reason(&f, &p), wk::REASON_LOW_CONFIDENCE, "{s:?}");
    }
}

// rule: GR-02
#[test]
fn gr_02_an_approved_once_change_passes_the_same_guardrails() {
    let mut f = facts();
    approve(&mut f);
    covered(&mut f, "24h");
    let p = EffectivePolicy::builtin();
    assert_eq!(reason(&f, &p), wk::REASON_LEARNING_PERIOD);
}

// rule: GR-03
#[test]
fn gr_03_policy_guardrails_replace_the_defaults() {
    let mut f = facts();
    covered(&mut f, "240h");
    let mut p = policy();
    p.learning_period = Sourced::new(Duration::hours(336), Layer::Policy);
    assert_eq!(reason(&f, &p), wk::REASON_LEARNING_PERIOD);
    p.min_confidence = Sourced::new(Ratio(950_000), Layer::Policy);
    p.learning_period = Sourced::new(Duration::hours(24), Layer::Policy);
    assert_eq!(reason(&f, &p), wk::REASON_LOW_CONFIDENCE);
}

// rule: GR-04, GR-11, GR-50
#[test]
fn gr_11_coverage_shorter_than_the_learning_period_blocks_equal_passes() {
    let mut f = facts();
    covered(&mut f, "167h59m");
    assert_eq!(reason(&f, &policy()), wk::REASON_LEARNING_PERIOD);
    covered(&mut f, "168h");
    assert_eq!(reason(&f, &policy()), wk::REASON_RECOMMENDATION_APPLIED);
    covered(&mut f, "7d");
    assert_eq!(
        reason(&f, &policy()),
        wk::REASON_LEARNING_PERIOD,
        "an unreadable coverage blocks"
    );
}

// rule: GR-05, GR-13, GR-51
#[test]
fn gr_13_confidence_below_min_blocks_equal_passes() {
    let mut f = facts();
    f.recommendation.containers[0].confidence = Some("0.69".into());
    assert_eq!(reason(&f, &policy()), wk::REASON_LOW_CONFIDENCE);
    f.recommendation.containers[0].confidence = Some("0.7".into());
    assert_eq!(reason(&f, &policy()), wk::REASON_RECOMMENDATION_APPLIED);
}

// rule: GR-12
#[test]
fn gr_12_the_workload_confidence_is_the_lowest_container() {
    let mut f = facts();
    let mut side = recommendation("100m", "64Mi");
    side.name = "side".into();
    side.confidence = Some("0.6".into());
    f.recommendation.containers.push(side);
    f.recommendation.confidence = Some("0.9".into());
    assert_eq!(reason(&f, &policy()), wk::REASON_LOW_CONFIDENCE);
}

// rule: GR-09, GR-21, GR-54
#[test]
fn gr_21_after_a_change_the_workload_waits_for_the_cooldown() {
    let mut f = facts();
    f.state.change = Some(applied_change(Duration::hours(23), ChangeState::Applied));
    let d = decide(&f, &policy(), now());
    assert_eq!(block(&d).reason, wk::REASON_COOLDOWN);
    assert_eq!(block(&d).until, Some(now() + Duration::hours(1)));
    f.state.change = Some(applied_change(Duration::hours(24), ChangeState::Applied));
    assert_eq!(reason(&f, &policy()), wk::REASON_RECOMMENDATION_APPLIED);
}

// reading 18, design D11
// rule: GR-21
#[test]
fn no_change_starts_while_a_health_watch_runs() {
    let mut p = policy();
    p.cooldown = Sourced::new(Duration::minutes(10), Layer::Policy);
    let mut f = facts();
    f.state.change = Some(applied_change(Duration::minutes(20), ChangeState::Applied));
    f.state.watch = Some(WatchFacts {
        running: true,
        end: Some(now() + Duration::minutes(10)),
    });
    let d = decide(&f, &p, now());
    assert_eq!(block(&d).reason, wk::REASON_COOLDOWN);
    assert_eq!(block(&d).until, Some(now() + Duration::minutes(10)));
    f.state.watch = Some(WatchFacts {
        running: false,
        end: Some(now() - Duration::minutes(1)),
    });
    assert_eq!(reason(&f, &p), wk::REASON_RECOMMENDATION_APPLIED);
}

// rule: GR-40, GR-41
#[test]
fn gr_40_a_block_shows_blocked_unless_earlier_values_are_live() {
    let mut f = facts();
    f.cluster_freeze.now = true;
    let d = decide(&f, &policy(), now());
    assert_eq!(
        (d.phase, block(&d).reason),
        (Phase::Blocked, wk::REASON_FREEZE_WINDOW)
    );
    f.state.change = Some(applied_change(Duration::hours(48), ChangeState::Applied));
    assert_eq!(decide(&f, &policy(), now()).phase, Phase::Applied);
    f.state.change = Some(applied_change(Duration::hours(48), ChangeState::RolledBack));
    assert_eq!(decide(&f, &policy(), now()).phase, Phase::Blocked);
}

// rule: GR-42
#[test]
fn gr_42_a_block_is_not_final() {
    let mut f = facts();
    f.state.change = Some(applied_change(Duration::hours(20), ChangeState::Applied));
    assert_eq!(decide(&f, &policy(), now()).reason(), wk::REASON_COOLDOWN);
    let later = now() + Duration::hours(4);
    f.hub.last_success = Some(later);
    assert_eq!(
        decide(&f, &policy(), later).reason(),
        wk::REASON_RECOMMENDATION_APPLIED
    );
}

// rule: EV-23
#[test]
fn ev_23_an_automatic_change_is_recommendation_applied() {
    let d = decide(&facts(), &policy(), now());
    let a = apply(&d);
    assert_eq!(
        (a.reason, a.approval.clone()),
        (wk::REASON_RECOMMENDATION_APPLIED, None)
    );
    assert_eq!(a.recommendation_id, "rec-1");
    assert_eq!(d.phase, Phase::Applying);
}

// rule: EV-24, EV-25, EV-26
#[test]
fn ev_24_an_approved_once_change_carries_the_approval() {
    let mut f = facts();
    approve(&mut f);
    let d = decide(&f, &EffectivePolicy::builtin(), now());
    let a = apply(&d);
    assert_eq!(a.reason, wk::REASON_APPROVED_ONCE);
    let approval = a.approval.clone().unwrap();
    assert_eq!(
        (approval.approval_id.as_str(), approval.approved_by.as_str()),
        ("appr-7", "ops@example.com")
    );
    assert_eq!((d.modes.cpu, d.modes.memory), (Mode::Audit, Mode::Audit));
}

// rule: EV-24
#[test]
fn an_approval_applies_to_audit_resources_of_its_recommendation_only() {
    let mut f = facts();
    f.recommendation.containers[0] = recommendation("250m", "512Mi");
    approve(&mut f);
    let mut p = policy();
    set_mode(&mut p, Mode::Audit, Mode::Off);
    let d = decide(&f, &p, now());
    assert_eq!(apply(&d).resources, vec![Resource::Cpu]);
    assert!(
        d.reports
            .iter()
            .any(|r| r.reason == wk::REASON_MODE_OFF && r.resource == Resource::Memory)
    );
    let mut other = f.clone();
    if let Some(a) = other.approval.as_mut() {
        a.recommendation_id = "rec-0".into();
    }
    assert_eq!(reason(&other, &p), wk::REASON_MODE_AUDIT);
    let mut expired = f.clone();
    if let Some(a) = expired.approval.as_mut() {
        a.expires_at = now();
    }
    assert_eq!(reason(&expired, &p), wk::REASON_MODE_AUDIT);
    f.state.consumed_approvals = vec!["appr-7".into()];
    assert_eq!(reason(&f, &p), wk::REASON_MODE_AUDIT);
}

// rule: EV-27, EV-28, GR-45
#[test]
fn ev_27_off_and_audit_resources_are_skipped_with_their_mode() {
    let mut p = policy();
    set_mode(&mut p, Mode::Off, Mode::Off);
    let d = decide(&facts(), &p, now());
    assert_eq!(
        (skip(&d).reason, skip(&d).resources.to_vec()),
        (wk::REASON_MODE_OFF, Resource::ALL.to_vec())
    );
    set_mode(&mut p, Mode::Audit, Mode::Audit);
    assert_eq!(reason(&facts(), &p), wk::REASON_MODE_AUDIT);
    // CPU off and memory in audit: the outcome covers memory, CPU is reported on its own.
    set_mode(&mut p, Mode::Off, Mode::Audit);
    let d = decide(&facts(), &p, now());
    assert_eq!(skip(&d).resources, vec![Resource::Memory]);
    let off: Vec<_> = d.reports.iter().map(|r| (r.reason, r.resource)).collect();
    assert_eq!(off, vec![(wk::REASON_MODE_OFF, Resource::Cpu)]);
    // Memory in audit is skipped on its own while CPU goes in.
    let mut f = facts();
    f.recommendation.containers[0] = recommendation("250m", "512Mi");
    set_mode(&mut p, Mode::AutoPatch, Mode::Audit);
    let d = decide(&f, &p, now());
    assert_eq!(apply(&d).resources, vec![Resource::Cpu]);
    let r = &d.reports[0];
    assert_eq!(
        (r.kind, r.reason, r.resource),
        (ReportKind::Skipped, wk::REASON_MODE_AUDIT, Resource::Memory)
    );
}

// rule: EV-29, GR-48
#[test]
fn ev_29_only_settings_some_layer_sets_are_compared_as_values() {
    let mut f = facts();
    f.recommendation.settings = Some(RecommendationSettings {
        window: Some(GoDuration::from("20160m")),
        cpu_percentile: Some(90),
        ..RecommendationSettings::default()
    });
    let mut p = policy();
    p.recommendation.window = Some(Sourced::new(Duration::hours(336), Layer::Policy));
    assert_eq!(reason(&f, &p), wk::REASON_RECOMMENDATION_APPLIED);
    p.recommendation.cpu_percentile = Some(Sourced::new(95, Layer::HubFleet));
    let d = decide(&f, &p, now());
    assert_eq!(skip(&d).reason, wk::REASON_RECOMMENDATION_STALE);
    assert!(d.message.contains("cpuPercentile"), "{}", d.message);
}

// rule: EV-37, GR-46
#[test]
fn ev_37_no_fresh_recommendation_blocks_hub_unreachable() {
    let mut f = facts();
    f.hub.last_success = Some(now() - Duration::minutes(30));
    assert_eq!(reason(&f, &policy()), wk::REASON_RECOMMENDATION_APPLIED);
    f.hub.last_success = Some(now() - Duration::minutes(31));
    assert_eq!(reason(&f, &policy()), wk::REASON_HUB_UNREACHABLE);
    f.hub.last_success = None;
    assert_eq!(reason(&f, &policy()), wk::REASON_HUB_UNREACHABLE);
}

#[test]
fn a_stale_source_other_than_the_hub_blocks_source_unavailable_naming_it() {
    let mut f = facts();
    f.hub.source = kerf_api::rsr::RecommendationSource::Vpa;
    f.hub.last_success = Some(now() - Duration::minutes(30));
    assert_eq!(reason(&f, &policy()), wk::REASON_RECOMMENDATION_APPLIED);
    f.hub.last_success = Some(now() - Duration::minutes(31));
    let d = decide(&f, &policy(), now());
    assert_eq!(block(&d).reason, wk::REASON_SOURCE_UNAVAILABLE);
    assert!(
        d.message
            .contains("the vpa source's recommendations are stale: last successful read 31m"),
        "{}",
        d.message
    );
    f.hub.last_success = None;
    assert_eq!(reason(&f, &policy()), wk::REASON_SOURCE_UNAVAILABLE);
}

#[test]
fn a_vpa_that_updates_the_pods_holds_the_workload_even_when_fresh() {
    let mut f = facts();
    f.hub.source = kerf_api::rsr::RecommendationSource::Vpa;
    f.hub.vpa_active = Some("VerticalPodAutoscaler shop/web updates the pods itself".into());
    let d = decide(&f, &policy(), now());
    assert_eq!(block(&d).reason, wk::REASON_VPA_ACTIVE);
    assert!(d.message.contains("shop/web"), "{}", d.message);
    // The mode comes first: audit skips, as for any block.
    let mut audit = policy();
    set_mode(&mut audit, Mode::Audit, Mode::Audit);
    assert_eq!(reason(&f, &audit), wk::REASON_MODE_AUDIT);
}

// rule: EV-40, GR-47, AP-43
#[test]
fn ev_40_a_pause_blocks_with_its_scope() {
    let mut f = facts();
    pause(&mut f, PauseScope::Cluster);
    let d = decide(&f, &policy(), now());
    let b = block(&d);
    assert_eq!(b.reason, wk::REASON_PAUSED);
    assert_eq!(
        b.details.get(wk::DETAIL_PAUSE_SCOPE).map(String::as_str),
        Some("cluster")
    );
}

// rule: AP-34, AP-40, AP-42, GR-52
#[test]
fn ap_40_the_cluster_wide_freeze_blocks_and_no_policy_lifts_it() {
    let mut f = facts();
    f.cluster_freeze.now = true;
    let mut p = policy();
    p.freeze_windows = Sourced::new(Vec::new().into(), Layer::Annotation);
    assert_eq!(reason(&f, &p), wk::REASON_FREEZE_WINDOW);
}

// rule: AP-41
#[test]
fn ap_41_an_open_cluster_freeze_window_blocks() {
    let mut f = facts();
    f.cluster_freeze.windows = vec![one_off("2026-06-03T00:00:00Z", "2026-06-04T00:00:00Z")].into();
    let d = decide(&f, &policy(), now());
    assert_eq!(block(&d).reason, wk::REASON_FREEZE_WINDOW);
    f.cluster_freeze.windows = vec![one_off("2026-06-04T00:00:00Z", "2026-06-05T00:00:00Z")].into();
    assert_eq!(reason(&f, &policy()), wk::REASON_RECOMMENDATION_APPLIED);
}

// rule: AP-34, AP-39
#[test]
fn ap_39_an_invalid_freeze_window_is_open() {
    let mut p = policy();
    p.freeze_windows = Sourced::new(
        vec![Window {
            schedule: Some("61 * * * *".into()),
            ..Window::default()
        }]
        .into(),
        Layer::Policy,
    );
    let d = decide(&facts(), &p, now());
    assert_eq!(block(&d).reason, wk::REASON_FREEZE_WINDOW);
    assert!(
        block(&d).message.contains("invalid"),
        "{}",
        block(&d).message
    );
}

fn deferred(windows: Vec<Window>) -> EffectivePolicy {
    let mut p = policy();
    set_strategy(&mut p, Strategy::Deferred);
    p.maintenance_windows = Sourced::new(windows.into(), Layer::Policy);
    p
}

// rule: AP-23, AP-24, AP-25, GR-56
#[test]
fn ap_25_a_deferred_change_waits_outside_its_window() {
    let d = decide(&facts(), &deferred(vec![sundays_at_two()]), now());
    let b = block(&d);
    assert_eq!(
        (b.reason, b.check),
        (
            wk::REASON_OUTSIDE_MAINTENANCE_WINDOW,
            Check::MaintenanceWindow
        )
    );
    let sunday = chrono::DateTime::parse_from_rfc3339("2026-06-07T02:00:00Z").unwrap();
    assert_eq!(b.next_window, Some(sunday.with_timezone(&chrono::Utc)));
    assert_eq!(d.phase, Phase::Deferred);
}

// rule: AP-26, AP-27
#[test]
fn ap_26_inside_the_window_the_guardrails_run_again_and_it_goes_in_as_rollout() {
    let p = deferred(vec![one_off(
        "2026-06-03T11:00:00Z",
        "2026-06-03T14:00:00Z",
    )]);
    let d = decide(&facts(), &p, now());
    assert_eq!(apply(&d).strategy, Strategy::Rollout);
    let mut f = facts();
    f.cluster_freeze.now = true;
    assert_eq!(reason(&f, &p), wk::REASON_FREEZE_WINDOW);
}

// design D23
// rule: AP-23
#[test]
fn a_deferred_change_needs_min_window_remaining() {
    let p = deferred(vec![one_off(
        "2026-06-03T11:00:00Z",
        "2026-06-03T12:29:00Z",
    )]);
    assert_eq!(reason(&facts(), &p), wk::REASON_OUTSIDE_MAINTENANCE_WINDOW);
    let p = deferred(vec![one_off(
        "2026-06-03T11:00:00Z",
        "2026-06-03T12:30:00Z",
    )]);
    assert_eq!(reason(&facts(), &p), wk::REASON_RECOMMENDATION_APPLIED);
}

// rule: AP-28
#[test]
fn ap_28_deferred_without_a_window_keeps_waiting() {
    let d = decide(&facts(), &deferred(Vec::new()), now());
    assert_eq!(
        (block(&d).reason, block(&d).next_window),
        (wk::REASON_OUTSIDE_MAINTENANCE_WINDOW, None)
    );
}

// rule: AP-33
#[test]
fn ap_33_an_invalid_maintenance_window_is_closed() {
    let bad = Window {
        schedule: Some("not cron".into()),
        duration: Some(GoDuration::from("24h")),
        ..Window::default()
    };
    assert_eq!(
        reason(&facts(), &deferred(vec![bad])),
        wk::REASON_OUTSIDE_MAINTENANCE_WINDOW
    );
}

// design D20
#[test]
fn current_values_come_from_live_values_of_an_in_place_change() {
    let mut f = facts();
    f.state.live = Some(LiveValues {
        containers: vec![LiveContainer {
            name: "app".into(),
            requests: ResourceValues {
                cpu: q("300m"),
                memory: q("256Mi"),
            },
            limits: ResourceValues {
                cpu: None,
                memory: q("512Mi"),
            },
            base: ResourceRequirements::default(),
        }],
    });
    let d = decide(&f, &policy(), now());
    let a = apply(&d);
    assert_eq!(a.containers[0].from.requests.cpu, q("300m"));
    assert_eq!(a.containers[0].to.requests.cpu, q("250m"));
    assert_eq!(d.summary().cpu.as_deref(), Some("300m\u{2192}250m"));
}
