//! Built-in defaults of the effective policy (guardrails document, defaults table).

use kerf_testkit::decide as fixture;

use chrono::Duration;
use kerf_api::policy::{Mode, Strategy};
use kerf_decide::effective::{EffectivePolicy, Layer, Ratio};
use kerf_decide::select::WorkloadMeta;

fn workload() -> WorkloadMeta {
    fixture::workload_meta("shop", &[])
}

/// The effective policy with no layer set at all.
fn nothing_set() -> EffectivePolicy {
    fixture::effective_under(&workload(), &[])
}

// rule: GR-04
#[test]
fn gr_04_learning_period_defaults_to_168h() {
    let ep = nothing_set();
    assert_eq!(ep.learning_period.value, Duration::hours(168));
    assert_eq!(ep.learning_period.layer, Layer::BuiltIn);
}

// rule: GR-05
#[test]
fn gr_05_min_confidence_defaults_to_0_7() {
    let ep = nothing_set();
    assert_eq!(ep.min_confidence.value, Ratio(700_000));
    assert_eq!(ep.min_confidence.value, Ratio::parse("0.7").unwrap());
    assert_eq!(ep.min_confidence.layer, Layer::BuiltIn);
}

// rule: GR-06
#[test]
fn gr_06_max_change_percent_defaults_to_50() {
    let ep = nothing_set();
    assert_eq!(ep.max_change_percent.value, 50);
    assert_eq!(ep.max_change_percent.layer, Layer::BuiltIn);
}

// rule: GR-07
#[test]
fn gr_07_min_cpu_defaults_to_10m() {
    let ep = nothing_set();
    assert_eq!(ep.min_cpu.value, 10);
    assert_eq!(ep.min_cpu.layer, Layer::BuiltIn);
}

// rule: GR-08
#[test]
fn gr_08_min_memory_defaults_to_32mi() {
    let ep = nothing_set();
    assert_eq!(ep.min_memory.value, 32 * 1024 * 1024);
    assert_eq!(ep.min_memory.layer, Layer::BuiltIn);
}

// rule: GR-09
#[test]
fn gr_09_cooldown_defaults_to_24h() {
    let ep = nothing_set();
    assert_eq!(ep.cooldown.value, Duration::hours(24));
    assert_eq!(ep.cooldown.layer, Layer::BuiltIn);
}

// rule: GR-30
#[test]
fn gr_30_watch_duration_defaults_to_30m() {
    let ep = nothing_set();
    assert_eq!(ep.watch_duration.value, Duration::minutes(30));
    assert_eq!(ep.watch_duration.layer, Layer::BuiltIn);
}

// rule: GR-31
#[test]
fn gr_31_oom_kills_defaults_to_1() {
    let ep = nothing_set();
    assert_eq!(ep.oom_kills.value, 1);
    assert_eq!(ep.oom_kills.layer, Layer::BuiltIn);
}

// rule: GR-32
#[test]
fn gr_32_restarts_defaults_to_3() {
    let ep = nothing_set();
    assert_eq!(ep.restarts.value, 3);
    assert_eq!(ep.restarts.layer, Layer::BuiltIn);
}

// rule: GR-33
#[test]
fn gr_33_throttling_ratio_defaults_to_0_25() {
    let ep = nothing_set();
    assert_eq!(ep.throttling_ratio.value, Ratio(250_000));
    assert_eq!(ep.throttling_ratio.layer, Layer::BuiltIn);
}

// rule: GR-34
#[test]
fn gr_34_fallback_after_defaults_to_10m() {
    let ep = nothing_set();
    assert_eq!(ep.fallback_after.value, Duration::minutes(10));
    assert_eq!(ep.fallback_after.layer, Layer::BuiltIn);
}

// rule: AP-03
#[test]
fn ap_03_strategy_defaults_to_in_place() {
    let ep = nothing_set();
    assert_eq!(ep.strategy.value, Strategy::InPlace);
    assert_eq!(ep.strategy.layer, Layer::BuiltIn);
}

// design D13
#[test]
fn without_a_policy_the_mode_is_audit() {
    let ep = nothing_set();
    assert_eq!(ep.mode.cpu.value, Mode::Audit);
    assert_eq!(ep.mode.memory.value, Mode::Audit);
    assert_eq!(ep.policy_name, None);
}

#[test]
fn the_remaining_defaults_match_the_documents() {
    let ep = nothing_set();
    assert_eq!(ep.min_window_remaining.value, Duration::minutes(30));
    assert!(ep.maintenance_windows.value.is_empty());
    assert!(ep.freeze_windows.value.is_empty());
    assert!(ep.hpa_coordination.value);
    assert_eq!(ep.hpa_min_target.value, 50);
    assert_eq!(ep.hpa_max_target.value, 90);
    assert!(!ep.allow_disruption);
    assert_eq!(ep.recommendation, Default::default());
    assert!(ep.problems.is_empty());
    assert_eq!(ep, EffectivePolicy::builtin());
}

#[test]
fn ratios_parse_exactly_and_reject_the_rest() {
    assert_eq!(Ratio::parse("0").unwrap(), Ratio(0));
    assert_eq!(Ratio::parse("1").unwrap(), Ratio::ONE);
    assert_eq!(Ratio::parse("1.000").unwrap(), Ratio::ONE);
    assert_eq!(Ratio::parse("0.25").unwrap(), Ratio(250_000));
    assert_eq!(Ratio::parse("0.123456").unwrap(), Ratio(123_456));
    for bad in [
        "",
        "1.5",
        "2",
        "-0.1",
        ".5",
        "0.",
        "0.1234567",
        "abc",
        "0.7 ",
    ] {
        assert!(Ratio::parse(bad).is_err(), "{bad:?} parsed");
    }
    assert_eq!(Ratio(700_000).to_string(), "0.7");
    assert_eq!(Ratio::ONE.to_string(), "1");
}
