//! Values that reach the effective policy past the CRD schema (hub defaults, the chart's
//! clusterDefaults, a hub override) or past evaluation-only checks (cron syntax, time
//! zones) are listed in `problems`, naming the field and the layer, and never widen what
//! the agent may do.

use kerf_testkit::decide as fixture;

use kerf_api::policy::{
    Mode, PolicySelector, RecommendationSettings, RightsizingPolicy, RightsizingPolicySpec,
};
use kerf_api::wellknown as wk;
use kerf_decide::decide;
use kerf_decide::effective::{
    EffectivePolicy, Layer, PerResource, PolicyInputs, PolicyProblem, Sourced, effective_policy,
};
use kerf_decide::select::WorkloadMeta;
use kerf_testkit::api::defaults;

fn workload() -> WorkloadMeta {
    fixture::workload_meta("payments", &[])
}

/// The problems of `ep` as (field, layer, value).
fn problem_fields(ep: &EffectivePolicy) -> Vec<(&str, Layer, &str)> {
    ep.problems
        .iter()
        .map(|p| (p.field.as_str(), p.layer, p.value.as_str()))
        .collect()
}

/// The effective policy with `yaml` as the hub fleet defaults, the hub override, or a
/// RightsizingPolicy (selecting every workload unless `yaml` has a selector), in
/// auto-patch so that `decide` reaches every check.
#[allow(clippy::unwrap_used)]
fn effective(layer: Layer, yaml: &str) -> EffectivePolicy {
    let spec = defaults(yaml);
    let policies = match layer {
        Layer::Policy => {
            let mut spec: RightsizingPolicySpec = serde_yaml::from_str(yaml).unwrap();
            spec.selector.get_or_insert_with(|| PolicySelector {
                all: Some(true),
                ..PolicySelector::default()
            });
            vec![RightsizingPolicy::new("p", spec)]
        }
        _ => Vec::new(),
    };
    let meta = workload();
    let mut ep = effective_policy(&PolicyInputs {
        workload: &meta,
        policies: &policies,
        hub_fleet: (layer == Layer::HubFleet).then_some(&spec),
        hub_cluster: (layer == Layer::HubCluster).then_some(&spec),
        cluster_defaults: (layer == Layer::ClusterDefaults).then_some(&spec),
        hub_override: (layer == Layer::HubOverride).then_some(&spec),
    });
    ep.mode = PerResource {
        cpu: Sourced::new(Mode::AutoPatch, Layer::Policy),
        memory: Sourced::new(Mode::AutoPatch, Layer::Policy),
    };
    ep
}

fn named<'a>(ep: &'a EffectivePolicy, field: &str) -> Option<&'a PolicyProblem> {
    ep.problems.iter().find(|p| p.field == field)
}

// rule: GR-14, GR-35
#[test]
fn gr_14_an_out_of_range_max_change_percent_from_the_hub_is_named_and_narrows() {
    for layer in [
        Layer::HubFleet,
        Layer::HubCluster,
        Layer::ClusterDefaults,
        Layer::HubOverride,
    ] {
        let ep = effective(layer, "guardrails: {maxChangePercent: 150}");
        let p = named(&ep, "guardrails.maxChangePercent");
        assert_eq!(
            p.map(|p| (p.layer, p.value.as_str())),
            Some((layer, "150")),
            "{layer:?}"
        );
        // Read as 1 %: a decrease is capped to 1 % (500m to 495m, not 250m; a tolerance
        // of 0.5 % lets a 1 % step through).
        assert_eq!(
            (ep.max_change_percent.value, ep.max_change_percent.layer),
            (1, layer)
        );
        let mut f = fixture::facts();
        f.settings.tolerance_milli_percent = 500;
        let d = decide(&f, &ep, fixture::now());
        assert_eq!(
            fixture::to_request(&d, "app", kerf_api::Resource::Cpu).as_deref(),
            Some("495m")
        );
    }
}

// rule: GR-48, EV-29
#[test]
fn gr_48_out_of_range_percentiles_are_named_and_every_recommendation_is_stale() {
    let ep = effective(
        Layer::HubCluster,
        "recommendation: {cpuPercentile: 150, memoryPercentile: 0, headroomPercent: 5000}",
    );
    assert_eq!(
        problem_fields(&ep),
        [
            ("recommendation.cpuPercentile", Layer::HubCluster, "150"),
            ("recommendation.memoryPercentile", Layer::HubCluster, "0"),
            ("recommendation.headroomPercent", Layer::HubCluster, "5000"),
        ]
    );
    assert!(ep.problems.iter().all(|p| p.message.contains("stale")));
    // Even a recommendation that echoes the same values is stale: nothing goes in.
    let mut f = fixture::facts();
    f.recommendation.settings = Some(RecommendationSettings {
        cpu_percentile: Some(150),
        memory_percentile: Some(0),
        headroom_percent: Some(5000),
        ..RecommendationSettings::default()
    });
    let d = decide(&f, &ep, fixture::now());
    assert_eq!(d.reason(), wk::REASON_RECOMMENDATION_STALE);
    // In range, the same echo matches.
    let ok = effective(
        Layer::HubCluster,
        "recommendation: {cpuPercentile: 95, headroomPercent: 1000}",
    );
    assert!(ok.problems.is_empty(), "{:?}", ok.problems);
    f.recommendation.settings = Some(RecommendationSettings {
        cpu_percentile: Some(95),
        headroom_percent: Some(1000),
        ..RecommendationSettings::default()
    });
    assert_eq!(
        decide(&f, &ok, fixture::now()).reason(),
        wk::REASON_RECOMMENDATION_APPLIED
    );
}

/// The reason `decide()` gives for the fixture's facts under `ep`.
fn reason_on_fixture(ep: &EffectivePolicy) -> &'static str {
    decide(&fixture::facts(), ep, fixture::now()).reason()
}

// rule: AP-29, AP-33
#[test]
fn ap_33_a_bad_maintenance_schedule_is_named_and_the_window_is_closed() {
    let ep = effective(
        Layer::Policy,
        r#"{selector: {all: true}, apply: {strategy: deferred, maintenanceWindows: [{schedule: "0 11 * * *", duration: 2h, timeZone: Mars/Olympus}, {schedule: "61 * * * *", duration: 2h}]}}"#,
    );
    let fields = problem_fields(&ep);
    assert_eq!(
        fields,
        [
            (
                "apply.maintenanceWindows[0].timeZone",
                Layer::Policy,
                "Mars/Olympus"
            ),
            (
                "apply.maintenanceWindows[1].schedule",
                Layer::Policy,
                "61 * * * *"
            ),
        ]
    );
    assert!(ep.problems[1].message.contains("minute out of range"));
    assert!(ep.problems[1].message.contains("counts as closed"));
    // At 12:00 UTC the first window would be open if its zone were UTC; invalid, it is
    // closed.
    assert_eq!(
        reason_on_fixture(&ep),
        wk::REASON_OUTSIDE_MAINTENANCE_WINDOW
    );
}

// rule: AP-30, AP-39
#[test]
fn ap_39_a_bad_freeze_time_zone_from_the_hub_is_named_and_the_window_is_open() {
    let ep = effective(
        Layer::HubFleet,
        r#"apply: {freezeWindows: [{schedule: "0 0 24 12 *", duration: 48h, timeZone: Europe/Atlantis}]}"#,
    );
    let p = named(&ep, "apply.freezeWindows[0].timeZone");
    assert_eq!(
        p.map(|p| p.layer),
        Some(Layer::HubFleet),
        "{:?}",
        ep.problems
    );
    assert!(p.is_some_and(|p| p.message.contains("counts as open")));
    assert_eq!(reason_on_fixture(&ep), wk::REASON_FREEZE_WINDOW);
}

// A canary past the CRD schema never holds back less than a good one would.
#[test]
fn a_bad_canary_counts_as_one_pod_watched_for_the_watch_duration() {
    use kerf_decide::canary::{CanaryPolicy, CanarySize};
    let ep = effective(
        Layer::Policy,
        "apply: {canary: {pods: \"0%\", duration: \"soon\"}}",
    );
    let fields = problem_fields(&ep);
    assert!(
        fields.contains(&("apply.canary.pods", Layer::Policy, "0%")),
        "{fields:?}"
    );
    assert!(
        fields.contains(&("apply.canary.duration", Layer::Policy, "soon")),
        "{fields:?}"
    );
    assert_eq!(
        ep.canary.value,
        Some(CanaryPolicy {
            size: CanarySize::Pods(1),
            duration: ep.watch_duration.value,
        })
    );
    let good = effective(
        Layer::Policy,
        "apply: {canary: {pods: \"25%\", duration: 2m}}",
    );
    assert!(good.problems.is_empty(), "{:?}", good.problems);
    assert_eq!(
        good.canary.value.map(|c| c.size),
        Some(CanarySize::Percent(25))
    );
}
