//! Workload annotation keys under `kerf.getkerf.dev/` that Kerf does not read: each is named
//! in `problems` with the nearest known key (so a misspelt opt-out is seen), and none
//! changes the effective values or the decision.

use kerf_testkit::decide as fixture;

use kerf_api::policy::Mode;
use kerf_api::wellknown::{ANNOTATION_MODE, ANNOTATIONS};
use kerf_decide::decide;
use kerf_decide::effective::unknown_keys::{nearest_known, unknown_keys};
use kerf_decide::effective::{EffectivePolicy, Layer};

/// The effective policy of `shop/checkout` with `annotations`, in auto-patch.
fn effective(annotations: &[(&str, &str)]) -> EffectivePolicy {
    fixture::effective_with("shop", "auto-patch", annotations)
}

#[test]
fn a_misspelt_mode_key_is_named_with_the_nearest_known_key() {
    let ep = effective(&[("kerf.getkerf.dev/modee", "off")]);
    assert_eq!(ep.problems.len(), 1, "{:?}", ep.problems);
    let p = &ep.problems[0];
    assert_eq!(
        (p.field.as_str(), p.layer, p.value.as_str()),
        ("kerf.getkerf.dev/modee", Layer::Annotation, "off")
    );
    assert!(
        p.message
            .contains("the nearest known key is kerf.getkerf.dev/mode)"),
        "{}",
        p.message
    );
    // The misspelt opt-out is not one: the policy's mode stays.
    assert_eq!(ep.mode.cpu.value, Mode::AutoPatch);
    assert_eq!(ep.mode.memory.value, Mode::AutoPatch);
}

#[test]
fn an_unknown_key_changes_neither_the_effective_values_nor_the_decision() {
    let without = effective(&[]);
    for key in [
        "kerf.getkerf.dev/modee",
        "kerf.getkerf.dev/Mode",
        "kerf.getkerf.dev/allow-disruptions",
        "kerf.getkerf.dev/something-else",
    ] {
        for value in ["off", "true", "rollout", ""] {
            let with = effective(&[(key, value)]);
            assert_eq!(with.problems.len(), 1, "{key}={value}");
            let mut values_only = with.clone();
            values_only.problems.clear();
            assert_eq!(values_only, without, "{key}={value}");
            assert_eq!(with.values_hash(), without.values_hash(), "{key}={value}");
            let f = fixture::facts();
            let now = fixture::now();
            assert_eq!(
                decide(&f, &with, now),
                decide(&f, &without, now),
                "{key}={value}"
            );
        }
    }
}

#[test]
fn known_keys_and_keys_outside_the_prefix_are_not_reported() {
    let mut annotations: Vec<(&str, &str)> = vec![
        ("example.com/modee", "off"),
        ("kerf.getkerf.dev.example/mode", "off"),
        ("app.kubernetes.io/name", "checkout"),
    ];
    annotations.extend(ANNOTATIONS.iter().map(|k| (*k, "x")));
    let found = unknown_keys(annotations.iter().map(|(k, _)| *k));
    assert_eq!(found, Vec::new());
}

#[test]
fn every_known_key_is_the_nearest_of_its_own_misspelling() {
    // Read from the list itself, so a key added to ANNOTATIONS is covered too.
    for known in ANNOTATIONS {
        let typo = format!("{known}x");
        assert_eq!(nearest_known(&typo), Some(*known), "{typo}");
        let dropped = &known[..known.len() - 1];
        assert_eq!(nearest_known(dropped), Some(*known), "{dropped}");
    }
    assert_eq!(
        nearest_known("kerf.getkerf.dev/mdoe"),
        Some(ANNOTATION_MODE)
    );
}
