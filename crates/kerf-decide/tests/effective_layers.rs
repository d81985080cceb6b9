//! Layer order, annotations and invalid values of the effective policy.

use kerf_testkit::decide as fixture;

use chrono::Duration;
use kerf_api::hub::PolicyDefaults;
use kerf_api::policy::{Mode, RightsizingPolicy, Strategy};
use kerf_decide::effective::{
    EffectivePolicy, Layer, PolicyInputs, Ratio, UNBOUNDED_HOURS, effective_policy,
};
use kerf_decide::select::WorkloadMeta;
use kerf_testkit::api::defaults;

fn workload(annotations: &[(&str, &str)]) -> WorkloadMeta {
    fixture::workload_meta("shop", annotations)
}

/// A policy; one without a selector in `spec_yaml` selects every workload (`all: true`).
fn policy(name: &str, spec_yaml: &str) -> RightsizingPolicy {
    kerf_testkit::api::policy_for_all(name, spec_yaml)
}

/// Layers by name; `None` leaves a layer out.
#[derive(Default)]
struct Layers {
    fleet: Option<PolicyDefaults>,
    cluster: Option<PolicyDefaults>,
    chart: Option<PolicyDefaults>,
    policies: Vec<RightsizingPolicy>,
    overrides: Option<PolicyDefaults>,
}

impl Layers {
    fn effective(&self, w: &WorkloadMeta) -> EffectivePolicy {
        effective_policy(&PolicyInputs {
            workload: w,
            policies: &self.policies,
            hub_fleet: self.fleet.as_ref(),
            hub_cluster: self.cluster.as_ref(),
            cluster_defaults: self.chart.as_ref(),
            hub_override: self.overrides.as_ref(),
        })
    }
}

fn cooldown(h: u32) -> PolicyDefaults {
    defaults(&format!("guardrails: {{cooldown: {h}h}}"))
}

// rule: GR-03
#[test]
fn gr_03_policy_guardrails_replace_the_defaults() {
    let layers = Layers {
        policies: vec![policy(
            "p",
            r#"guardrails: {learningPeriod: 336h, minConfidence: "0.8", maxChangePercent: 30, minCPU: 50m, minMemory: 64Mi, cooldown: 48h}"#,
        )],
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[]));
    assert_eq!(ep.learning_period.value, Duration::hours(336));
    assert_eq!(ep.min_confidence.value, Ratio(800_000));
    assert_eq!(ep.max_change_percent.value, 30);
    assert_eq!(ep.min_cpu.value, 50);
    assert_eq!(ep.min_memory.value, 64 << 20);
    assert_eq!(ep.cooldown.value, Duration::hours(48));
    for layer in [
        ep.learning_period.layer,
        ep.min_cpu.layer,
        ep.cooldown.layer,
    ] {
        assert_eq!(layer, Layer::Policy);
    }
    assert_eq!(ep.policy_name.as_deref(), Some("p"));
    // Unset fields keep the built-in defaults.
    assert_eq!(ep.watch_duration.layer, Layer::BuiltIn);
}

// rule: RB-18
#[test]
fn rb_18_policy_rollback_settings_replace_the_defaults() {
    let layers = Layers {
        policies: vec![policy(
            "p",
            r#"guardrails: {rollback: {watchDuration: 1h, throttlingRatio: "0.2", oomKills: 2, restarts: 5}}"#,
        )],
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[]));
    assert_eq!(ep.watch_duration.value, Duration::hours(1));
    assert_eq!(ep.throttling_ratio.value, Ratio(200_000));
    assert_eq!(ep.oom_kills.value, 2);
    assert_eq!(ep.restarts.value, 5);
    assert_eq!(ep.throttling_ratio.layer, Layer::Policy);
}

// rule: GR-35
#[test]
fn gr_35_hub_fleet_defaults_replace_the_built_in_ones() {
    let layers = Layers {
        fleet: Some(cooldown(30)),
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[]));
    assert_eq!(ep.cooldown.value, Duration::hours(30));
    assert_eq!(ep.cooldown.layer, Layer::HubFleet);
}

// rule: GR-36
#[test]
fn gr_36_hub_cluster_defaults_beat_fleet_defaults() {
    let layers = Layers {
        fleet: Some(cooldown(30)),
        cluster: Some(cooldown(31)),
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[]));
    assert_eq!(ep.cooldown.value, Duration::hours(31));
    assert_eq!(ep.cooldown.layer, Layer::HubCluster);
}

// rule: GR-37
#[test]
fn gr_37_chart_cluster_defaults_beat_hub_defaults() {
    let layers = Layers {
        fleet: Some(cooldown(30)),
        cluster: Some(cooldown(31)),
        chart: Some(cooldown(32)),
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[]));
    assert_eq!(ep.cooldown.value, Duration::hours(32));
    assert_eq!(ep.cooldown.layer, Layer::ClusterDefaults);
}

#[test]
fn each_layer_beats_the_ones_below() {
    let mut layers = Layers {
        fleet: Some(cooldown(30)),
        cluster: Some(cooldown(31)),
        chart: Some(cooldown(32)),
        policies: vec![policy("p", "guardrails: {cooldown: 33h}")],
        overrides: Some(cooldown(34)),
    };
    let w = workload(&[]);
    let ep = layers.effective(&w);
    assert_eq!(
        (ep.cooldown.value, ep.cooldown.layer),
        (Duration::hours(34), Layer::HubOverride)
    );
    layers.overrides = None;
    let ep = layers.effective(&w);
    assert_eq!(
        (ep.cooldown.value, ep.cooldown.layer),
        (Duration::hours(33), Layer::Policy)
    );
    layers.policies.clear();
    let ep = layers.effective(&w);
    assert_eq!(ep.cooldown.layer, Layer::ClusterDefaults);
    // A layer that does not set a field leaves the lower one in place.
    layers.chart = Some(defaults("guardrails: {minCPU: 20m}"));
    let ep = layers.effective(&w);
    assert_eq!(
        (ep.cooldown.value, ep.cooldown.layer),
        (Duration::hours(31), Layer::HubCluster)
    );
    assert_eq!(
        (ep.min_cpu.value, ep.min_cpu.layer),
        (20, Layer::ClusterDefaults)
    );
}

#[test]
fn modes_merge_per_resource_and_per_layer() {
    let layers = Layers {
        chart: Some(defaults("{mode: auto-patch}")),
        policies: vec![policy(
            "p",
            "{mode: audit, resources: {cpu: {mode: auto-patch}}}",
        )],
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[]));
    assert_eq!(
        (ep.mode.cpu.value, ep.mode.cpu.layer),
        (Mode::AutoPatch, Layer::Policy)
    );
    assert_eq!(
        (ep.mode.memory.value, ep.mode.memory.layer),
        (Mode::Audit, Layer::Policy)
    );
}

#[test]
fn the_mode_annotation_sets_both_resources_over_per_resource_modes() {
    let layers = Layers {
        policies: vec![policy(
            "p",
            "{resources: {cpu: {mode: auto-patch}, memory: {mode: off}}}",
        )],
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[("kerf.getkerf.dev/mode", "audit")]));
    assert_eq!(
        (ep.mode.cpu.value, ep.mode.cpu.layer),
        (Mode::Audit, Layer::Annotation)
    );
    assert_eq!(
        (ep.mode.memory.value, ep.mode.memory.layer),
        (Mode::Audit, Layer::Annotation)
    );
    assert!(ep.problems.is_empty());
}

#[test]
fn the_hub_override_beats_annotations() {
    let layers = Layers {
        overrides: Some(defaults("{mode: off, apply: {strategy: deferred}}")),
        ..Layers::default()
    };
    let w = workload(&[
        ("kerf.getkerf.dev/mode", "auto-patch"),
        ("kerf.getkerf.dev/strategy", "rollout"),
    ]);
    let ep = layers.effective(&w);
    assert_eq!(
        (ep.mode.cpu.value, ep.mode.cpu.layer),
        (Mode::Off, Layer::HubOverride)
    );
    assert_eq!(
        (ep.strategy.value, ep.strategy.layer),
        (Strategy::Deferred, Layer::HubOverride)
    );
}

// rule: AP-01
#[test]
fn ap_01_the_strategy_comes_from_the_policy() {
    let layers = Layers {
        policies: vec![policy("p", "apply: {strategy: rollout}")],
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[]));
    assert_eq!(
        (ep.strategy.value, ep.strategy.layer),
        (Strategy::Rollout, Layer::Policy)
    );
}

// rule: AP-02
#[test]
fn ap_02_the_strategy_annotation_beats_the_policy() {
    let layers = Layers {
        policies: vec![policy("p", "apply: {strategy: rollout}")],
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[("kerf.getkerf.dev/strategy", "deferred")]));
    assert_eq!(
        (ep.strategy.value, ep.strategy.layer),
        (Strategy::Deferred, Layer::Annotation)
    );
}

// rule: AP-51
#[test]
fn ap_51_allow_disruption_annotation_is_read() {
    let layers = Layers::default();
    assert!(
        layers
            .effective(&workload(&[("kerf.getkerf.dev/allow-disruption", "true")]))
            .allow_disruption
    );
    assert!(
        !layers
            .effective(&workload(&[("kerf.getkerf.dev/allow-disruption", "false")]))
            .allow_disruption
    );
    let ep = layers.effective(&workload(&[("kerf.getkerf.dev/allow-disruption", "yes")]));
    assert!(!ep.allow_disruption);
    assert_eq!(ep.problems.len(), 1);
    assert_eq!(ep.problems[0].field, "kerf.getkerf.dev/allow-disruption");
}

#[test]
fn an_invalid_mode_annotation_counts_as_off() {
    let layers = Layers {
        policies: vec![policy("p", "{mode: auto-patch}")],
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[("kerf.getkerf.dev/mode", "auto")]));
    assert_eq!(
        (ep.mode.cpu.value, ep.mode.cpu.layer),
        (Mode::Off, Layer::Annotation)
    );
    assert_eq!(ep.mode.memory.value, Mode::Off);
    assert_eq!(ep.problems.len(), 1);
    assert_eq!(ep.problems[0].field, "kerf.getkerf.dev/mode");
    assert_eq!(ep.problems[0].value, "auto");
    assert_eq!(ep.problems[0].layer, Layer::Annotation);
}

#[test]
fn an_invalid_strategy_annotation_keeps_the_policy_strategy() {
    let layers = Layers {
        policies: vec![policy("p", "apply: {strategy: deferred}")],
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[("kerf.getkerf.dev/strategy", "yolo")]));
    assert_eq!(
        (ep.strategy.value, ep.strategy.layer),
        (Strategy::Deferred, Layer::Policy)
    );
    assert_eq!(ep.problems.len(), 1);
    assert_eq!(ep.problems[0].field, "kerf.getkerf.dev/strategy");
}

#[test]
fn a_pin_to_a_missing_policy_counts_as_mode_off() {
    let layers = Layers {
        policies: vec![policy("p", "{mode: auto-patch}")],
        ..Layers::default()
    };
    let w = workload(&[
        ("kerf.getkerf.dev/policy", "gone"),
        ("kerf.getkerf.dev/mode", "auto-patch"),
    ]);
    let ep = layers.effective(&w);
    assert_eq!(ep.mode.cpu.value, Mode::Off);
    assert_eq!(ep.mode.memory.value, Mode::Off);
    assert_eq!(ep.policy_name, None);
    assert_eq!(ep.problems.len(), 1);
    assert_eq!(ep.problems[0].field, "kerf.getkerf.dev/policy");
    assert_eq!(ep.problems[0].value, "gone");
}

#[test]
fn unparsable_gating_fields_hold_every_change_back() {
    let layers = Layers {
        policies: vec![policy(
            "p",
            r#"{guardrails: {learningPeriod: 7d, cooldown: "-1h", minConfidence: "1.5", maxChangePercent: 0}, apply: {minWindowRemaining: soon}}"#,
        )],
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[]));
    let unbounded = Duration::hours(UNBOUNDED_HOURS);
    assert_eq!(
        (ep.learning_period.value, ep.learning_period.layer),
        (unbounded, Layer::Policy)
    );
    assert_eq!(ep.cooldown.value, unbounded);
    assert_eq!(ep.min_window_remaining.value, unbounded);
    assert_eq!(ep.min_confidence.value, Ratio::ONE);
    assert_eq!(ep.max_change_percent.value, 1);
    let fields: Vec<&str> = ep.problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "guardrails.learningPeriod",
            "guardrails.minConfidence",
            "guardrails.maxChangePercent",
            "guardrails.cooldown",
            "apply.minWindowRemaining"
        ]
    );
    assert!(ep.problems.iter().all(|p| p.layer == Layer::Policy));
}

#[test]
fn unparsable_values_that_would_move_or_undo_changes_keep_the_lower_layers() {
    let layers = Layers {
        chart: Some(defaults("guardrails: {minCPU: 20m}")),
        policies: vec![policy(
            "p",
            r#"{guardrails: {minCPU: lots, minMemory: 1Qi, rollback: {watchDuration: x, throttlingRatio: "2", oomKills: 0}}, apply: {fallbackAfter: "?"}}"#,
        )],
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[]));
    assert_eq!(
        (ep.min_cpu.value, ep.min_cpu.layer),
        (20, Layer::ClusterDefaults)
    );
    assert_eq!(
        (ep.min_memory.value, ep.min_memory.layer),
        (32 << 20, Layer::BuiltIn)
    );
    assert_eq!(ep.watch_duration.layer, Layer::BuiltIn);
    assert_eq!(ep.throttling_ratio.value, Ratio(250_000));
    assert_eq!(ep.oom_kills.value, 1);
    assert_eq!(ep.fallback_after.value, Duration::minutes(10));
    assert_eq!(ep.problems.len(), 6);
}

#[test]
fn out_of_range_hpa_bounds_leave_no_coordinated_target() {
    let layers = Layers {
        overrides: Some(defaults("hpa: {minTargetUtilization: 0}")),
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[]));
    assert!(ep.hpa_min_target.value > ep.hpa_max_target.value);
    assert_eq!(ep.problems.len(), 2, "{:?}", ep.problems);
}

#[test]
fn an_unparsable_recommender_window_makes_every_recommendation_stale() {
    let layers = Layers {
        fleet: Some(defaults(
            "recommendation: {window: two-weeks, cpuPercentile: 95}",
        )),
        ..Layers::default()
    };
    let ep = layers.effective(&workload(&[]));
    let window = ep.recommendation.window.as_ref().map(|w| w.value);
    assert_eq!(window, Some(Duration::zero()));
    assert_eq!(
        ep.recommendation
            .cpu_percentile
            .as_ref()
            .map(|v| (v.value, v.layer)),
        Some((95, Layer::HubFleet))
    );
    assert_eq!(ep.recommendation.memory_percentile, None);
    assert_eq!(ep.problems[0].field, "recommendation.window");
}

// rule: EV-17
#[test]
fn the_values_hash_ignores_provenance() {
    let a = Layers {
        fleet: Some(cooldown(30)),
        ..Layers::default()
    };
    let b = Layers {
        policies: vec![policy("other-name", "guardrails: {cooldown: 30h}")],
        ..Layers::default()
    };
    let w = workload(&[]);
    let (ea, eb) = (a.effective(&w), b.effective(&w));
    assert_ne!(ea.cooldown.layer, eb.cooldown.layer);
    assert_eq!(ea.values_hash(), eb.values_hash());
    assert_eq!(ea.values_hash().len(), 64);
    let c = Layers {
        fleet: Some(cooldown(29)),
        ..Layers::default()
    };
    assert_ne!(ea.values_hash(), c.effective(&w).values_hash());
    assert_ne!(EffectivePolicy::builtin().values_hash(), ea.values_hash());
}
