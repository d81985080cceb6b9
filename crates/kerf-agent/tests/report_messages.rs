//! The reports of a decision as the agent sends them, with the requests `kubectl get rsr`
//! shows: a NoSignificantChange event names only values that stay.

use kerf_testkit::decide as pipeline_fixture;

use kerf_agent::reconcile::report;
use kerf_api::event::{EventType, EventWorkload};
use kerf_api::policy::Mode;
use kerf_api::rsr::RightsizingRecommendationStatus;
use kerf_api::wellknown as wk;
use pipeline_fixture::status::build;
use pipeline_fixture::{now, policy, set_mode, template};

// rule: GR-24
#[test]
fn a_no_significant_change_event_lists_no_value_that_would_move() {
    // cpu (auto-patch) stays at 300m; memory (audit) would move 512Mi -> 384Mi.
    let mut f = template(300, 512, "300m", "384Mi");
    let mut p = policy();
    set_mode(&mut p, Mode::AutoPatch, Mode::Audit);
    f.state = Default::default();
    let d = kerf_decide::decide(&f, &p, now());
    let s = build(&mut f, &p, &RightsizingRecommendationStatus::default());
    let workload = EventWorkload {
        namespace: "payments".into(),
        kind: "Deployment".into(),
        name: "checkout".into(),
    };
    let mut reports = report::reports(&d, &workload, "rec-1", now());
    report::add_requests(&mut reports, s.summary.as_ref());
    let message = |reason: &str| {
        reports
            .iter()
            .find(|r| r.event.reason == reason)
            .and_then(|r| r.event.message.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        message(wk::REASON_NO_SIGNIFICANT_CHANGE),
        "no value would move by the tolerance of 5 % or more: cpu 300m; memory is in mode audit"
    );
    // The mode's own skip of memory shows the columns, memory's move included.
    assert_eq!(
        message(wk::REASON_MODE_AUDIT),
        format!(
            "{} (cpu 300m, memory 512Mi\u{2192}384Mi)",
            d.reports
                .iter()
                .find(|r| r.reason == wk::REASON_MODE_AUDIT)
                .map(|r| r.message.clone())
                .unwrap_or_default()
        )
    );
    assert!(reports.iter().all(|r| r.event.type_ == EventType::Skipped));
}
