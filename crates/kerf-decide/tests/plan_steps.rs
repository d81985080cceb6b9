//! The plans of the steps that carry an applied change further: the evictions of an
//! OnDelete StatefulSet and the HPA target after a rollout.

use chrono::{Duration, TimeZone, Utc};
use kerf_api::rsr::HpaOrder;
use kerf_decide::pass::ON_DELETE_RECHECK;
use kerf_decide::plan::{self, EVICTION_REFUSAL_RETRY, Effect};

// rule: AP-59
#[test]
fn evictions_go_one_pod_each_in_the_order_of_the_replacement_plan_rule_ap_59() {
    let now = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap();
    let effects = plan::evict(vec!["db-2".into(), "db-1".into()], now);
    let evicted: Vec<&str> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Evict { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        evicted,
        ["db-2", "db-1"],
        "highest ordinal first, as planned"
    );
    assert!(
        matches!(effects.first(), Some(Effect::WakeAt(t)) if *t == now + ON_DELETE_RECHECK),
        "the recheck is set before any eviction, so a refusal still leaves a wake-up: {effects:?}"
    );
}

// rule: AP-61
#[test]
fn a_refused_eviction_is_tried_again_after_the_retry_delay_rule_ap_61() {
    let now = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap();
    let effects = plan::evict(vec!["db-2".into()], now);
    let retry = effects.iter().find_map(|e| match e {
        Effect::Evict { retry_at, .. } => Some(*retry_at),
        _ => None,
    });
    assert_eq!(retry, Some(now + EVICTION_REFUSAL_RETRY));
    assert_eq!(EVICTION_REFUSAL_RETRY, Duration::seconds(5));
}

#[test]
fn the_hpa_step_after_a_rollout_writes_the_target_that_waited() {
    assert_eq!(plan::hpa_after(), vec![Effect::PatchHpa(HpaOrder::After)]);
}

mod release {
    use kerf_api::Resource;
    use kerf_api::policy::{Mode, Strategy};
    use kerf_api::rsr::{ChangeState, HpaChange};
    use kerf_decide::pass::Release;
    use kerf_decide::plan::{self, Effect};
    use kerf_testkit::decide::applied_change;

    fn rel(resources: Vec<Resource>) -> Release {
        Release {
            resources,
            previous: Mode::AutoPatch,
            new: Mode::Off,
        }
    }

    // rule: AP-21
    #[test]
    fn a_template_change_hands_its_fields_back_before_the_release_is_recorded_rule_ap_21() {
        let mut change = applied_change(chrono::Duration::hours(1), ChangeState::Applied);
        change.strategy = Strategy::Rollout;
        let r = rel(vec![Resource::Cpu]);
        assert_eq!(
            plan::release(&change, &r),
            vec![
                Effect::ReleaseTemplate(vec![Resource::Cpu]),
                Effect::MarkReleased(r.clone())
            ]
        );
    }

    #[test]
    fn an_in_place_release_leaves_the_pods_alone_and_puts_the_hpa_target_back_first() {
        let mut change = applied_change(chrono::Duration::hours(1), ChangeState::Applied);
        change.strategy = Strategy::InPlace;
        change.hpa = Some(HpaChange {
            name: "web".into(),
            resource: Resource::Cpu,
            from: 70,
            to: 80,
            order: kerf_api::rsr::HpaOrder::After,
            written: true,
        });
        let r = rel(vec![Resource::Cpu]);
        assert_eq!(
            plan::release(&change, &r),
            vec![Effect::RestoreHpa, Effect::MarkReleased(r.clone())]
        );
    }
}
