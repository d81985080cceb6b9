//! What a rollback restores and records.

use kerf_testkit::decide::health as health_support;

use chrono::Duration;
use health_support::{in_place, t0, thresholds};
use kerf_api::policy::Strategy;
use kerf_api::rsr::{ChangeRecord, ChangeState, ContainerChange, EventIds, HpaChange, HpaOrder};
use kerf_api::wellknown as wk;
use kerf_api::{Quantity, Resource, ResourceRequirements, ResourceValues};
use kerf_decide::health::restore::{RestoreWrite, pod_restore, restore_writes};
use kerf_decide::health::{
    BreachReason, Counts, HealthVerdict, evaluate, restore_hpa, restore_values, rollback_record,
};

fn values(cpu: Option<&str>, memory: Option<&str>) -> ResourceValues {
    ResourceValues {
        cpu: cpu.map(Quantity::from),
        memory: memory.map(Quantity::from),
    }
}

fn reqs(cpu: &str, memory: &str, mem_limit: Option<&str>) -> ResourceRequirements {
    ResourceRequirements {
        requests: values(Some(cpu), Some(memory)),
        limits: values(None, mem_limit),
    }
}

fn change() -> ChangeRecord {
    ChangeRecord {
        id: "change-1".into(),
        state: ChangeState::Applied,
        recommendation_id: "rec-1".into(),
        approval_id: None,
        strategy: Strategy::InPlace,
        resources: vec![Resource::Cpu, Resource::Memory],
        started_at: t0(),
        first_resize_at: None,
        applied_at: Some(t0()),
        containers: vec![
            ContainerChange {
                name: "app".into(),
                from: reqs("500m", "1Gi", Some("1Gi")),
                to: reqs("250m", "512Mi", Some("512Mi")),
            },
            ContainerChange {
                name: "proxy".into(),
                from: reqs("100m", "64Mi", None),
                to: reqs("50m", "64Mi", None),
            },
        ],
        hpa: Some(HpaChange {
            name: "checkout".into(),
            resource: Resource::Cpu,
            from: 60,
            to: 75,
            order: HpaOrder::After,
            written: true,
        }),
        event_ids: EventIds::default(),
        pending_events: Vec::new(),
        progress: None,
        canary: None,
        revert: false,
    }
}

// rule: RB-35, RB-05
#[test]
fn rb_35_a_rollback_restores_only_the_breached_resources() {
    let out = restore_values(&change(), &[Resource::Memory]);
    // The proxy's memory did not change: nothing to restore there.
    assert_eq!(out.len(), 1);
    let app = &out[0];
    assert_eq!(app.name, "app");
    assert_eq!(app.to.requests, values(Some("250m"), Some("1Gi")));
    assert_eq!(app.to.limits, values(None, Some("1Gi")));

    let out = restore_values(&change(), &[Resource::Cpu]);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].to.requests, values(Some("500m"), Some("512Mi")));
    assert_eq!(out[0].to.limits, values(None, Some("512Mi")));
    assert_eq!(out[1].to.requests, values(Some("100m"), Some("64Mi")));
}

// rule: RB-26
#[test]
fn rb_26_the_restore_carries_the_replaced_and_the_restored_values() {
    let c = change();
    let out = restore_values(&c, &[Resource::Cpu, Resource::Memory]);
    assert_eq!(out.len(), 2);
    for (restored, applied) in out.iter().zip(&c.containers) {
        assert_eq!(
            restored.from, applied.to,
            "from: the values the rollback replaces"
        );
        assert_eq!(
            restored.to, applied.from,
            "to: the values before the change"
        );
    }
}

// rule: RB-24
#[test]
fn rb_24_the_hpa_target_goes_back_with_cpu() {
    let hpa = restore_hpa(&change(), &[Resource::Cpu]).unwrap();
    assert_eq!((hpa.from, hpa.to), (75, 60));
    assert_eq!(hpa.order, HpaOrder::Before, "a lower target goes first");
    assert!(!hpa.written);
    assert_eq!(restore_hpa(&change(), &[Resource::Memory]), None);
}

// rule: RB-25, RB-34
#[test]
fn the_rollback_record_names_reason_resources_and_change() {
    let (watch, th) = (in_place(), thresholds());
    let counts = Counts {
        oom_kills: 0,
        restarts: 3,
    };
    let c = change();
    let now = t0() + Duration::minutes(4);
    let HealthVerdict::Breach(b) = evaluate(&watch, &c.resources, counts, &[], &th, now) else {
        panic!("expected a breach");
    };
    let rec = rollback_record(&c, b.reason, &b.restore, now);
    assert_eq!(rec.reason, wk::REASON_RESTARTS);
    assert_eq!(rec.resources, vec![Resource::Cpu, Resource::Memory]);
    assert_eq!(rec.change_id, "change-1");
    assert_eq!(rec.time, now);
    assert_eq!(b.reason, BreachReason::Restarts);
}

// rule: RB-22
#[test]
fn rb_22_an_in_place_change_is_restored_by_resizing_the_pods_back() {
    let writes = restore_writes(&change(), &[Resource::Cpu]);
    let [RestoreWrite::ResizeBack(back)] = writes.as_slice() else {
        panic!("{writes:?}");
    };
    assert_eq!(back.len(), 2);
    assert_eq!(back[0].1.requests, values(Some("500m"), None));
    // A pod already back, or without the container, gets no resize (a resumed rollback).
    let at_change = vec![("app".to_owned(), reqs("250m", "512Mi", Some("512Mi")))];
    assert_eq!(pod_restore(&at_change, back).len(), 1);
    let already_back = vec![("app".to_owned(), reqs("500m", "512Mi", Some("512Mi")))];
    assert!(pod_restore(&already_back, back).is_empty());
    // Nothing to restore is no write.
    let mut same = change();
    same.containers
        .iter_mut()
        .for_each(|c| c.to = c.from.clone());
    assert!(restore_writes(&same, &[Resource::Cpu]).is_empty());
}

// rule: RB-23, RB-24
#[test]
fn rb_23_a_rollout_is_restored_through_the_template_with_the_hpa_target_in_order() {
    let mut c = change();
    c.strategy = Strategy::Rollout;
    let kinds = |w: &[RestoreWrite]| -> Vec<&'static str> {
        w.iter()
            .map(|w| match w {
                RestoreWrite::ResizeBack(_) => "resize",
                RestoreWrite::Template { .. } => "template",
                RestoreWrite::Hpa(_) => "hpa",
            })
            .collect()
    };
    // The change raised the HPA target 60 -> 75 (restore_hpa's order): 60 goes back before
    // the template; after a change that lowered it, the old target goes back after.
    assert_eq!(
        kinds(&restore_writes(&c, &[Resource::Cpu])),
        ["hpa", "template"]
    );
    if let Some(h) = c.hpa.as_mut() {
        (h.from, h.to) = (75, 60);
    }
    assert_eq!(
        kinds(&restore_writes(&c, &[Resource::Cpu])),
        ["template", "hpa"]
    );
    // Memory alone leaves the CPU HPA alone.
    assert_eq!(
        kinds(&restore_writes(&c, &[Resource::Memory])),
        ["template"]
    );
    c.strategy = Strategy::Deferred;
    assert!(matches!(
        restore_writes(&c, &[Resource::Memory]).as_slice(),
        [RestoreWrite::Template { resources, .. }] if resources == &[Resource::Memory]
    ));
}
