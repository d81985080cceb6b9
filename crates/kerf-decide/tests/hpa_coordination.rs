//! HPA coordination (design section 5 and D22; EV-31, EV-32, EV-33).

use kerf_api::Resource;
use kerf_api::rsr::HpaOrder;
use kerf_decide::effective::{EffectivePolicy, PerResource};
use kerf_decide::hpa::{
    ContainerRequests, HpaBounds, HpaInput, HpaMetric, HpaOutcome, coordinate, scaled_target,
};

fn requests(list: &[(&str, Option<i64>, Option<i64>)]) -> ContainerRequests {
    list.iter()
        .map(|(n, cpu, memory)| {
            (
                (*n).to_owned(),
                PerResource {
                    cpu: *cpu,
                    memory: *memory,
                },
            )
        })
        .collect()
}

fn cpu_hpa(target: i32) -> HpaInput {
    HpaInput {
        name: "web".into(),
        metrics: vec![HpaMetric::Resource {
            resource: Resource::Cpu,
            average_utilization: Some(target),
        }],
    }
}

fn bounds() -> HpaBounds {
    HpaBounds::from_policy(&EffectivePolicy::builtin())
}

#[test]
fn the_target_keeps_the_absolute_scaling_point() {
    // Pod sum 400m -> 300m: 60 % of 400m = 240m = 80 % of 300m.
    let old = requests(&[
        ("app", Some(300), Some(100)),
        ("sidecar", Some(100), Some(100)),
    ]);
    let new = requests(&[
        ("app", Some(200), Some(100)),
        ("sidecar", Some(100), Some(100)),
    ]);
    let out = coordinate(&cpu_hpa(60), &old, &new, bounds());
    let HpaOutcome::Coordinated(change) = out else {
        panic!("{out:?}")
    };
    assert_eq!(
        (
            change.name.as_str(),
            change.resource,
            change.from,
            change.to
        ),
        ("web", Resource::Cpu, 60, 80)
    );
    assert_eq!(change.order, HpaOrder::After);
    assert!(!change.written);
    // Higher requests lower the target, which is written before the template patch.
    let out = coordinate(&cpu_hpa(80), &new, &old, bounds());
    let HpaOutcome::Coordinated(change) = out else {
        panic!("{out:?}")
    };
    assert_eq!(
        (change.from, change.to, change.order),
        (80, 60, HpaOrder::Before)
    );
}

#[test]
fn targets_round_to_the_nearest_percent() {
    assert_eq!(scaled_target(70, 300, 400), 53); // 52.5 rounds up
    assert_eq!(scaled_target(70, 100, 110), 64); // 63.6
    assert_eq!(scaled_target(50, 100, 300), 17); // 16.67
}

#[test]
fn container_resource_metrics_use_the_container_request() {
    let hpa = HpaInput {
        name: "web".into(),
        metrics: vec![HpaMetric::ContainerResource {
            container: "app".into(),
            resource: Resource::Memory,
            average_utilization: Some(60),
        }],
    };
    let old = requests(&[
        ("app", Some(100), Some(1000)),
        ("sidecar", None, Some(5000)),
    ]);
    let new = requests(&[("app", Some(100), Some(800)), ("sidecar", None, Some(5000))]);
    let HpaOutcome::Coordinated(change) = coordinate(&hpa, &old, &new, bounds()) else {
        panic!()
    };
    assert_eq!(
        (change.resource, change.from, change.to),
        (Resource::Memory, 60, 75)
    );
    // A change of another container does not touch it.
    let other = requests(&[
        ("app", Some(100), Some(1000)),
        ("sidecar", None, Some(2000)),
    ]);
    assert_eq!(
        coordinate(&hpa, &old, &other, bounds()),
        HpaOutcome::NotCoupled
    );
}

#[test]
fn an_hpa_on_an_untouched_resource_or_other_metrics_is_not_coupled() {
    let old = requests(&[("app", Some(300), Some(100))]);
    let new = requests(&[("app", Some(300), Some(50))]);
    assert_eq!(
        coordinate(&cpu_hpa(60), &old, &new, bounds()),
        HpaOutcome::NotCoupled
    );
    let value_target = HpaInput {
        name: "web".into(),
        metrics: vec![
            HpaMetric::Resource {
                resource: Resource::Memory,
                average_utilization: None,
            },
            HpaMetric::Other,
        ],
    };
    assert_eq!(
        coordinate(&value_target, &old, &new, bounds()),
        HpaOutcome::NotCoupled
    );
}

// rule: EV-31
#[test]
fn ev_31_coordination_off_blocks_hpa_coupled() {
    let old = requests(&[("app", Some(300), None)]);
    let new = requests(&[("app", Some(200), None)]);
    let off = HpaBounds {
        coordination: false,
        ..bounds()
    };
    let out = coordinate(&cpu_hpa(60), &old, &new, off);
    let HpaOutcome::Coupled { resource, message } = out else {
        panic!("{out:?}")
    };
    assert_eq!(resource, Resource::Cpu);
    assert!(message.contains("coordination is off"), "{message}");
}

// rule: EV-32
#[test]
fn ev_32_an_hpa_that_cannot_be_coordinated_blocks() {
    // A container without a request: the HPA has no utilization to scale by.
    let old = requests(&[("app", Some(300), None), ("sidecar", None, None)]);
    let new = requests(&[("app", Some(200), None), ("sidecar", None, None)]);
    assert!(matches!(
        coordinate(&cpu_hpa(60), &old, &new, bounds()),
        HpaOutcome::Coupled { .. }
    ));
    // A request that appears from nothing has no old value to scale from.
    let old = requests(&[("app", None, None)]);
    let new = requests(&[("app", Some(200), None)]);
    assert!(matches!(
        coordinate(&cpu_hpa(60), &old, &new, bounds()),
        HpaOutcome::Coupled { .. }
    ));
    // Two touched utilization metrics cannot both be kept by one target change.
    let both = HpaInput {
        name: "web".into(),
        metrics: vec![
            HpaMetric::Resource {
                resource: Resource::Cpu,
                average_utilization: Some(60),
            },
            HpaMetric::Resource {
                resource: Resource::Memory,
                average_utilization: Some(60),
            },
        ],
    };
    let old = requests(&[("app", Some(300), Some(300))]);
    let new = requests(&[("app", Some(250), Some(250))]);
    assert!(matches!(
        coordinate(&both, &old, &new, bounds()),
        HpaOutcome::Coupled { .. }
    ));
}

// rule: EV-33
#[test]
fn ev_33_a_target_outside_the_bounds_blocks() {
    let old = requests(&[("app", Some(300), None)]);
    // 60 * 300 / 150 = 120 > 90.
    let new = requests(&[("app", Some(150), None)]);
    let out = coordinate(&cpu_hpa(60), &old, &new, bounds());
    let HpaOutcome::Coupled { message, .. } = out else {
        panic!("{out:?}")
    };
    assert!(message.contains("120%"), "{message}");
    // 60 * 300 / 400 = 45 < 50.
    let new = requests(&[("app", Some(400), None)]);
    assert!(matches!(
        coordinate(&cpu_hpa(60), &old, &new, bounds()),
        HpaOutcome::Coupled { .. }
    ));
    // Exactly on a bound after rounding is inside: 60 * 300 / 200 = 90.
    let new = requests(&[("app", Some(200), None)]);
    assert!(matches!(
        coordinate(&cpu_hpa(60), &old, &new, bounds()),
        HpaOutcome::Coordinated(_)
    ));
}

#[test]
fn a_target_that_does_not_move_after_rounding_needs_no_coordination() {
    let old = requests(&[("app", Some(1000), None)]);
    let new = requests(&[("app", Some(1005), None)]);
    assert_eq!(
        coordinate(&cpu_hpa(60), &old, &new, bounds()),
        HpaOutcome::NotCoupled
    );
}
