//! Arbitrary RightsizingPolicy specs, malformed in every field, never panic through
//! validation, the effective policy or `decide()`, and every invalid field is named.

use kerf_testkit::decide as fixture;

use std::collections::BTreeSet;

use kerf_api::hub::PolicyDefaults;
use kerf_api::policy::{
    ApplySettings, Guardrails, HpaSettings, LimitsHandling, Mode, PolicySelector,
    RecommendationSettings, RightsizingPolicy, RightsizingPolicySpec, RollbackSettings,
    Strategy as ApplyStrategy, Window,
};
use kerf_api::validate::validate_policy;
use kerf_api::{GoDuration, Quantity, UnitDecimal};
use kerf_decide::decide;
use kerf_decide::effective::effective_policy;
use kerf_decide::effective::{EffectivePolicy, Layer, PerResource, PolicyInputs, Sourced};
use kerf_decide::select::WorkloadMeta;
use kerf_decide::window::parse_window;
use proptest::prelude::*;

/// A generated value and whether it was injected as invalid (`Some(true)`), drawn from
/// the valid pool (`Some(false)`) or arbitrary text of unknown validity (`None`).
type Gen<T> = (T, Option<bool>);

const BAD_DURATIONS: &[&str] = &[
    "",
    "abc",
    "-5m",
    "10",
    "1.5",
    "1hh",
    "h",
    "5 m",
    "1d",
    "1h-",
    "+1h",
    "0x10s",
    "99999999999999999999h",
    "1.h",
    ".5h",
    "1µ",
    "∞",
];
const GOOD_DURATIONS: &[&str] = &["30m", "1h30m", "168h", "10s", "1.5h", "500ms"];
const BAD_RATIOS: &[&str] = &[
    "",
    "1.5",
    "-0.1",
    ".5",
    "0.",
    "abc",
    "2",
    "1.0001",
    "0.1234567",
    "1e-1",
    " 0.5",
    "0,5",
];
const GOOD_RATIOS: &[&str] = &["0", "0.7", "1", "0.25", "1.0"];
const BAD_QUANTITIES: &[&str] = &[
    "", "abc", "-5m", "1Qi", "5 m", "1e999", "--1", "1.2.3", "Mi", "0x10", "-1Gi",
];
const GOOD_QUANTITIES: &[&str] = &["10m", "250m", "1", "32Mi", "1Gi", "0.5"];
const SCHEDULES: &[&str] = &["0 2 * * *", "30 22 * * 1-5", "61 * * * *", "not cron", ""];
const ZONES: &[&str] = &[
    "Europe/Berlin",
    "America/New_York",
    "UTC",
    "Mars/Olympus",
    "",
];
const TIMES: &[&str] = &[
    "2026-06-03T10:00:00Z",
    "2026-06-03T14:00:00+02:00",
    "yesterday",
    "2026-13-01T00:00:00Z",
    "",
];

/// A string field: a known-bad value, a known-good value or arbitrary text.
fn text(bad: &'static [&'static str], good: &'static [&'static str]) -> BoxedStrategy<Gen<String>> {
    prop_oneof![
        3 => proptest::sample::select(bad).prop_map(|s| (s.to_owned(), Some(true))),
        2 => proptest::sample::select(good).prop_map(|s| (s.to_owned(), Some(false))),
        1 => "\\PC{0,24}".prop_map(|s| (s, None)),
    ]
    .boxed()
}

fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: BoxedStrategy<Gen<T>>,
) -> BoxedStrategy<Option<Gen<T>>> {
    proptest::option::weighted(0.8, s).boxed()
}

/// A number field, invalid when it falls outside `lo..=hi`.
fn number<T>(lo: i64, hi: i64) -> BoxedStrategy<Option<Gen<T>>>
where
    T: Arbitrary + Copy + Into<i64> + std::fmt::Debug + 'static,
{
    let s = any::<T>().prop_map(move |v| {
        let n: i64 = v.into();
        (v, Some(!(lo..=hi).contains(&n)))
    });
    opt(s.boxed())
}

/// A window with each field drawn from a pool of good and bad values, or absent.
fn window() -> impl Strategy<Value = Window> {
    let pick = |pool: &'static [&'static str]| {
        proptest::option::of(prop_oneof![
            4 => proptest::sample::select(pool).prop_map(str::to_owned),
            1 => "\\PC{0,12}",
        ])
    };
    let duration = proptest::option::of(text(BAD_DURATIONS, GOOD_DURATIONS));
    (
        pick(SCHEDULES),
        duration,
        pick(ZONES),
        pick(TIMES),
        pick(TIMES),
    )
        .prop_map(|(schedule, duration, time_zone, start, end)| Window {
            schedule,
            duration: duration.map(|(d, _)| GoDuration::from(d.as_str())),
            time_zone,
            start,
            end,
        })
}

/// A spec plus the paths (relative to `spec.`) of the fields injected invalid.
#[derive(Clone, Debug)]
struct Case {
    spec: RightsizingPolicySpec,
    invalid: BTreeSet<String>,
}

#[derive(Default)]
struct Marks(BTreeSet<String>);

impl Marks {
    fn take<T>(&mut self, path: &str, g: Option<Gen<T>>) -> Option<T> {
        let (v, bad) = g?;
        if bad == Some(true) {
            self.0.insert(path.to_owned());
        }
        Some(v)
    }
}

type TextFields = (
    Option<Gen<String>>,
    Option<Gen<String>>,
    Option<Gen<String>>,
    Option<Gen<String>>,
    Option<Gen<String>>,
    Option<Gen<String>>,
);

fn text_fields() -> impl Strategy<Value = (TextFields, TextFields)> {
    let d = || opt(text(BAD_DURATIONS, GOOD_DURATIONS));
    let r = || opt(text(BAD_RATIOS, GOOD_RATIOS));
    let q = || opt(text(BAD_QUANTITIES, GOOD_QUANTITIES));
    (
        (d(), d(), d(), d(), d(), d()),
        (r(), r(), q(), q(), d(), d()),
    )
}

type Numbers = (
    Option<Gen<u8>>,
    Option<Gen<u8>>,
    Option<Gen<u16>>,
    Option<Gen<u8>>,
    Option<Gen<u32>>,
    Option<Gen<u32>>,
    Option<Gen<i32>>,
    Option<Gen<i32>>,
);

fn numbers() -> impl Strategy<Value = Numbers> {
    (
        number::<u8>(1, 100),
        number::<u8>(1, 100),
        number::<u16>(0, 1000),
        number::<u8>(1, 100),
        number::<u32>(1, 1000),
        number::<u32>(1, 1000),
        number::<i32>(1, 100),
        number::<i32>(1, 100),
    )
}

fn enums() -> impl Strategy<
    Value = (
        Option<Mode>,
        Option<ApplyStrategy>,
        Option<LimitsHandling>,
        Option<bool>,
    ),
> {
    let mode = proptest::sample::select(vec![Mode::Off, Mode::Audit, Mode::AutoPatch]);
    let strategy = proptest::sample::select(vec![
        ApplyStrategy::InPlace,
        ApplyStrategy::Rollout,
        ApplyStrategy::Deferred,
    ]);
    let limits = proptest::sample::select(vec![
        LimitsHandling::Keep,
        LimitsHandling::Ratio,
        LimitsHandling::Remove,
    ]);
    (
        proptest::option::of(mode),
        proptest::option::of(strategy),
        proptest::option::of(limits),
        proptest::option::of(any::<bool>()),
    )
}

fn windows() -> impl Strategy<Value = Option<Vec<Window>>> {
    proptest::option::of(prop_oneof![
        8 => proptest::collection::vec(window(), 0..4),
        1 => proptest::collection::vec(window(), 17..19),
    ])
}

fn case() -> impl Strategy<Value = Case> {
    (text_fields(), numbers(), enums(), windows(), windows()).prop_map(
        |((t1, t2), n, (mode, strategy, limits, coordination), maint, freeze)| {
            build(
                t1,
                t2,
                n,
                (mode, strategy, limits, coordination),
                maint,
                freeze,
            )
        },
    )
}

fn build(
    (window, learning, cooldown, watch, fallback, remaining): TextFields,
    (confidence, throttling, min_cpu, min_memory, _, _): TextFields,
    (cpu_pct, mem_pct, headroom, max_change, ooms, restarts, hpa_min, hpa_max): Numbers,
    (mode, strategy, limits, coordination): (
        Option<Mode>,
        Option<ApplyStrategy>,
        Option<LimitsHandling>,
        Option<bool>,
    ),
    maintenance_windows: Option<Vec<Window>>,
    freeze_windows: Option<Vec<Window>>,
) -> Case {
    let mut m = Marks::default();
    let d = |s: String| GoDuration::from(s.as_str());
    let u = |s: String| UnitDecimal::from(s.as_str());
    let q = |s: String| Quantity::from(s.as_str());
    let recommendation = RecommendationSettings {
        window: m.take("recommendation.window", window).map(d),
        cpu_percentile: m.take("recommendation.cpuPercentile", cpu_pct),
        memory_percentile: m.take("recommendation.memoryPercentile", mem_pct),
        headroom_percent: m.take("recommendation.headroomPercent", headroom),
        limits,
    };
    let rollback = RollbackSettings {
        watch_duration: m.take("guardrails.rollback.watchDuration", watch).map(d),
        oom_kills: m.take("guardrails.rollback.oomKills", ooms),
        restarts: m.take("guardrails.rollback.restarts", restarts),
        throttling_ratio: m
            .take("guardrails.rollback.throttlingRatio", throttling)
            .map(u),
    };
    let guardrails = Guardrails {
        learning_period: m.take("guardrails.learningPeriod", learning).map(d),
        min_confidence: m.take("guardrails.minConfidence", confidence).map(u),
        max_change_percent: m.take("guardrails.maxChangePercent", max_change),
        min_cpu: m.take("guardrails.minCPU", min_cpu).map(q),
        min_memory: m.take("guardrails.minMemory", min_memory).map(q),
        cooldown: m.take("guardrails.cooldown", cooldown).map(d),
        rollback: Some(rollback),
    };
    let apply = ApplySettings {
        strategy,
        fallback_after: m.take("apply.fallbackAfter", fallback).map(d),
        min_window_remaining: m.take("apply.minWindowRemaining", remaining).map(d),
        maintenance_windows,
        freeze_windows,
        canary: None,
    };
    let min = m.take("hpa.minTargetUtilization", hpa_min);
    let max = m.take("hpa.maxTargetUtilization", hpa_max);
    if let (Some(lo), Some(hi)) = (min, max)
        && lo > hi
    {
        m.0.insert("hpa.minTargetUtilization".to_owned());
    }
    let hpa = HpaSettings {
        coordination,
        min_target_utilization: min,
        max_target_utilization: max,
    };
    let spec = RightsizingPolicySpec {
        priority: None,
        selector: Some(PolicySelector {
            all: Some(true),
            ..PolicySelector::default()
        }),
        mode,
        resources: None,
        recommendation: Some(recommendation),
        guardrails: Some(guardrails),
        apply: Some(apply),
        hpa: Some(hpa),
    };
    Case { spec, invalid: m.0 }
}

fn workload() -> WorkloadMeta {
    fixture::workload_meta("payments", &[])
}

/// Whether a window counts as named: validation names a field under `prefix`, or
/// evaluation (cron syntax, time zones) rejects it.
fn window_named(prefix: &str, w: &Window, validated: &[String]) -> bool {
    let under = |p: &String| p == prefix || p.starts_with(&format!("{prefix}."));
    validated.iter().any(under) || parse_window(w).is_err()
}

/// Paths of every invalid field of the case that nothing names.
fn unnamed(case: &Case, validated: &[String], ep: &EffectivePolicy) -> Vec<String> {
    let problems: BTreeSet<&str> = ep.problems.iter().map(|p| p.field.as_str()).collect();
    let named =
        |rel: &str| validated.iter().any(|p| p == &format!("spec.{rel}")) || problems.contains(rel);
    let mut missing: Vec<String> = case
        .invalid
        .iter()
        .filter(|rel| !named(rel))
        .cloned()
        .collect();
    let Some(apply) = &case.spec.apply else {
        return missing;
    };
    for (name, list) in [
        ("maintenanceWindows", &apply.maintenance_windows),
        ("freezeWindows", &apply.freeze_windows),
    ] {
        let Some(list) = list else { continue };
        let rel = format!("apply.{name}");
        if list.len() > 16 && !named(&rel) {
            missing.push(rel.clone());
        }
        for (i, w) in list.iter().enumerate() {
            let shape_ok = (w.schedule.is_some()
                && w.duration.is_some()
                && w.start.is_none()
                && w.end.is_none())
                || (w.start.is_some()
                    && w.end.is_some()
                    && w.schedule.is_none()
                    && w.duration.is_none()
                    && w.time_zone.is_none());
            let invalid_part = !shape_ok
                || w.schedule
                    .as_deref()
                    .is_some_and(|s| s != "0 2 * * *" && s != "30 22 * * 1-5")
                || w.time_zone
                    .as_deref()
                    .is_some_and(|z| z == "Mars/Olympus" || z.is_empty())
                || w.start
                    .as_deref()
                    .is_some_and(|t| !t.starts_with("2026-06"))
                || w.end.as_deref().is_some_and(|t| !t.starts_with("2026-06"))
                || w.duration
                    .as_ref()
                    .is_some_and(|d| BAD_DURATIONS.contains(&d.as_str()));
            let prefix = format!("spec.{rel}[{i}]");
            if invalid_part && !window_named(&prefix, w, validated) {
                missing.push(format!("{rel}[{i}]"));
            }
        }
    }
    missing
}

/// The effective policy with both resources in auto-patch, so `decide` reaches the
/// later checks (windows, cooldown, HPA bounds).
fn auto_patch(mut ep: EffectivePolicy) -> EffectivePolicy {
    ep.mode = PerResource {
        cpu: Sourced::new(Mode::AutoPatch, Layer::Policy),
        memory: Sourced::new(Mode::AutoPatch, Layer::Policy),
    };
    ep
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // rule: design D3, D13
    #[test]
    fn design_d3_d13_malformed_policy_fields_are_named_and_never_panic(case in case()) {
        let validated: Vec<String> =
            validate_policy(&case.spec).into_iter().map(|e| e.path).collect();
        let policy = RightsizingPolicy::new("fuzzed", case.spec.clone());
        let lower = PolicyDefaults::from(&case.spec);
        let meta = workload();
        let policies = [policy];
        let inputs = PolicyInputs {
            workload: &meta,
            policies: &policies,
            hub_fleet: None,
            hub_cluster: Some(&lower),
            cluster_defaults: None,
            hub_override: None,
        };
        let ep = effective_policy(&inputs);
        prop_assert_eq!(ep.policy_name.as_deref(), Some("fuzzed"));
        let missing = unnamed(&case, &validated, &ep);
        prop_assert!(
            missing.is_empty(),
            "invalid fields named nowhere: {:?}\nvalidate: {:?}\nproblems: {:?}",
            missing, validated, ep.problems
        );
        let _ = ep.values_hash();
        let mut facts = fixture::facts();
        let now = fixture::now();
        let _ = decide(&facts, &ep, now);
        let ep = auto_patch(ep);
        let _ = decide(&facts, &ep, now);
        fixture::approve(&mut facts);
        facts.hpa = Some(fixture::cpu_hpa(60));
        let d = decide(&facts, &ep, now);
        prop_assert!(!d.message.is_empty());
    }
}
