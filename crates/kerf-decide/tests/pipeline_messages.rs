//! Messages that agree with the values they show: the tolerance's skip names the values
//! that stay (never one that would move), and `explain` in audit says what would move.

use kerf_testkit::decide as fixture;

use fixture::*;
use kerf_api::policy::Mode;
use kerf_api::wellknown as wk;
use kerf_decide::explain::{Verdict, explain};
use kerf_decide::pipeline::Check;
use kerf_decide::{Outcome, decide};

// rule: GR-24
#[test]
fn no_significant_change_names_the_values_that_stay_not_one_that_would_move() {
    // cpu in auto-patch stays at 300m; memory would move 512Mi -> 384Mi but is in audit.
    let f = template(300, 512, "300m", "384Mi");
    let mut p = policy();
    set_mode(&mut p, Mode::AutoPatch, Mode::Audit);
    let d = decide(&f, &p, now());
    assert!(
        matches!(&d.outcome, Outcome::Skip(s) if s.reason == wk::REASON_NO_SIGNIFICANT_CHANGE),
        "{:?}",
        d.outcome
    );
    assert_eq!(
        d.message,
        "no value would move by the tolerance of 5 % or more: cpu 300m; memory is in mode audit"
    );
}

// rule: GR-23, GR-24
#[test]
fn no_significant_change_names_the_recommended_value_within_the_tolerance() {
    // 290m is 3.3 % below 300m, 500Mi 2.3 % below 512Mi: both stay.
    let f = template(300, 512, "290m", "500Mi");
    let d = decide(&f, &policy(), now());
    assert_eq!(
        d.message,
        "no value would move by the tolerance of 5 % or more: \
         cpu 300m (recommended 290m), memory 512Mi (recommended 500Mi)"
    );
}

#[test]
fn explain_in_audit_says_what_auto_patch_would_move() {
    let f = template(800, 2048, "400m", "1536Mi");
    let mut p = policy();
    set_mode(&mut p, Mode::Audit, Mode::Audit);
    let e = explain(&f, &p, now());
    assert_eq!(e.decision.reason(), wk::REASON_MODE_AUDIT);
    let step = e.steps.iter().find(|s| s.check == Check::Tolerance);
    let step = step.map(|s| (s.value.as_str(), s.verdict.clone()));
    assert_eq!(
        step,
        Some((
            "cpu and memory would move in auto-patch (cpu:audit,memory:audit)",
            Verdict::Pass
        ))
    );
}

#[test]
fn explain_with_one_resource_in_audit_names_both_parts() {
    let f = template(800, 2048, "400m", "1536Mi");
    let mut p = policy();
    set_mode(&mut p, Mode::AutoPatch, Mode::Audit);
    let e = explain(&f, &p, now());
    let step = e.steps.iter().find(|s| s.check == Check::Tolerance);
    assert_eq!(
        step.map(|s| s.value.as_str()),
        Some("cpu would move; memory would move in auto-patch (cpu:auto-patch,memory:audit)")
    );
}

#[test]
fn explain_in_audit_with_nothing_to_move_says_so() {
    let f = template(300, 512, "300m", "512Mi");
    let mut p = policy();
    set_mode(&mut p, Mode::Audit, Mode::Audit);
    let e = explain(&f, &p, now());
    let step = e.steps.iter().find(|s| s.check == Check::Tolerance);
    assert_eq!(
        step.map(|s| (s.value.as_str(), s.verdict.clone())),
        Some((
            "no value moves",
            Verdict::Skip(wk::REASON_NO_SIGNIFICANT_CHANGE)
        ))
    );
}
