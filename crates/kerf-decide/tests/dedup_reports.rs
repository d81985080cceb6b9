//! Report de-duplication (events contract EV-14 to EV-19; rule readings 3 and 4).

use kerf_api::Resource;
use kerf_api::event::EventType;
use kerf_api::rsr::{ReportedKey, RightsizingRecommendationSpec};
use kerf_decide::dedup::{
    Candidate, DedupContext, RecommendedValues, mark_reported, recommended_values, reset,
    retain_current, should_emit, value_key,
};
use serde_json::json;

fn values(cpu: i64, memory: i64) -> RecommendedValues {
    [
        (value_key("app", Resource::Cpu), cpu),
        (value_key("app", Resource::Memory), memory),
    ]
    .into_iter()
    .collect()
}

fn ctx<'a>(v: &'a RecommendedValues, policy: &'a str) -> DedupContext<'a> {
    DedupContext {
        values: v,
        policy_hash: policy,
        tolerance_milli_percent: 5000,
    }
}

fn blocked(reason: &str) -> Candidate {
    blocked_on(reason, None)
}

#[allow(clippy::unwrap_used)]
fn blocked_on(reason: &str, resource: Option<Resource>) -> Candidate {
    Candidate::new(EventType::Blocked, reason, resource).unwrap()
}

/// Reports `c` for the first time, asserting it is due, and gives the keys reported.
fn first_report(c: &Candidate, cx: &DedupContext<'_>) -> Vec<ReportedKey> {
    let mut reported = Vec::new();
    assert!(evaluate(&mut reported, c, cx), "a first report is due");
    reported
}

/// Emits if due and, as if the hub acknowledged it, records it.
fn evaluate(reported: &mut Vec<ReportedKey>, c: &Candidate, cx: &DedupContext<'_>) -> bool {
    let emit = should_emit(reported, c, cx);
    if emit {
        *reported = mark_reported(reported, c, cx);
    }
    emit
}

// rule: EV-14, GR-43
#[test]
fn ev_14_a_block_is_emitted_once_per_type_and_reason() {
    let v = values(250, 512 << 20);
    let cx = ctx(&v, "p1");
    let mut reported = Vec::new();
    let c = blocked("LearningPeriod");
    assert!(evaluate(&mut reported, &c, &cx));
    for _ in 0..5 {
        assert!(!evaluate(&mut reported, &c, &cx));
    }
    // Another reason or type is its own key.
    assert!(evaluate(&mut reported, &blocked("LowConfidence"), &cx));
    let skipped = Candidate::new(EventType::Skipped, "LearningPeriod", None).unwrap();
    assert!(evaluate(&mut reported, &skipped, &cx));
}

#[test]
fn a_report_counts_only_once_acknowledged() {
    let v = values(250, 512 << 20);
    let cx = ctx(&v, "p1");
    let c = blocked("Cooldown");
    let reported = Vec::new();
    // Not acknowledged: still due on the next loop.
    assert!(should_emit(&reported, &c, &cx));
    assert!(should_emit(&reported, &c, &cx));
    let reported = mark_reported(&reported, &c, &cx);
    assert!(!should_emit(&reported, &c, &cx));
    assert_eq!(reported.len(), 1);
    assert_eq!(reported[0].type_, "blocked");
    assert_eq!(reported[0].reason, "Cooldown");
    assert_eq!(reported[0].policy_hash, "p1");
    // The values read as Kubernetes quantities, never raw millicores or bytes.
    assert_eq!(
        reported[0].values.get("app/cpu").map(String::as_str),
        Some("250m")
    );
    assert_eq!(
        reported[0].values.get("app/memory").map(String::as_str),
        Some("512Mi")
    );
}

// rule: EV-15, GR-43
#[test]
fn ev_15_values_moving_by_more_than_the_tolerance_emit_again() {
    let first = values(1000, 1000);
    let c = blocked("LowConfidence");
    let mut reported = first_report(&c, &ctx(&first, "p"));
    // 4.9 % is within the tolerance.
    let small = values(1049, 1000);
    assert!(!evaluate(&mut reported, &c, &ctx(&small, "p")));
    // Exactly the tolerance (5 % from 1000) is not more than it: quiet.
    let exact = values(1050, 1000);
    assert!(!evaluate(&mut reported, &c, &ctx(&exact, "p")));
    // Compared with the values last reported, not the previous loop's: 5.1 % from 1000.
    let more = values(1051, 1000);
    assert!(evaluate(&mut reported, &c, &ctx(&more, "p")));
    assert!(!evaluate(&mut reported, &c, &ctx(&more, "p")));
    // A drop counts as well, as does a value appearing.
    let drop = values(1051, 900);
    assert!(evaluate(&mut reported, &c, &ctx(&drop, "p")));
    let mut appeared = drop.clone();
    appeared.insert(value_key("sidecar", Resource::Cpu), 10);
    assert!(evaluate(&mut reported, &c, &ctx(&appeared, "p")));
}

/// A recommendation for container `app` with `requests` and optional extras.
#[allow(clippy::unwrap_used)]
fn spec(id: &str, extra: serde_json::Value) -> RightsizingRecommendationSpec {
    let mut container = json!({"name": "app", "requests": {"cpu": "300m", "memory": "300Mi"}});
    if let (Some(c), Some(e)) = (container.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    let spec = json!({
        "workloadRef": {"kind": "Deployment", "name": "web"},
        "recommendationID": id,
        "containers": [container],
    });
    serde_json::from_value(spec).unwrap()
}

/// Reports `first`, then tells whether `then` is reported again.
fn reported_again(
    first: &RightsizingRecommendationSpec,
    then: &RightsizingRecommendationSpec,
) -> bool {
    let c = blocked("FreezeWindow");
    let (a, b) = (recommended_values(first), recommended_values(then));
    let reported = mark_reported(&[], &c, &ctx(&a, "p"));
    should_emit(&reported, &c, &ctx(&b, "p"))
}

// rule: EV-16
#[test]
fn ev_16_a_new_recommendation_id_with_the_same_values_is_quiet() {
    let first = spec(
        "rec-1",
        json!({"limits": {"memory": "600Mi"}, "removeLimits": ["cpu"]}),
    );
    let same = spec(
        "rec-2",
        json!({"limits": {"memory": "600Mi"}, "removeLimits": ["cpu"]}),
    );
    assert_ne!(first.recommendation_id, same.recommendation_id);
    assert!(!reported_again(&first, &same));
    // The same comparison does see values that moved.
    let moved = spec(
        "rec-2",
        json!({"requests": {"cpu": "400m", "memory": "300Mi"}}),
    );
    assert!(reported_again(&first, &moved));
}

// rule: EV-15
#[test]
fn a_recommendation_that_moves_only_limits_or_removes_them_is_reported_again() {
    let plain = spec("rec-1", json!({}));
    let limited = spec("rec-2", json!({"limits": {"memory": "600Mi"}}));
    assert!(reported_again(&plain, &limited), "a limit appeared");
    let higher = spec("rec-3", json!({"limits": {"memory": "900Mi"}}));
    assert!(reported_again(&limited, &higher), "a limit moved");
    let removed = spec(
        "rec-4",
        json!({"limits": {"memory": "600Mi"}, "removeLimits": ["cpu"]}),
    );
    assert!(reported_again(&limited, &removed), "a limit removed");
    assert!(
        reported_again(&removed, &limited),
        "a limit no longer removed"
    );
    // Limits within the tolerance stay quiet, like requests.
    let close = spec("rec-5", json!({"limits": {"memory": "620Mi"}}));
    assert!(!reported_again(&limited, &close));
}

#[test]
fn limits_and_removed_limits_read_as_quantities_in_status() {
    let s = spec(
        "rec-1",
        json!({"limits": {"memory": "600Mi"}, "removeLimits": ["cpu"]}),
    );
    let v = recommended_values(&s);
    let reported = mark_reported(&[], &blocked("Cooldown"), &ctx(&v, "p"));
    let shown = &reported[0].values;
    assert_eq!(shown.get("app/cpu").map(String::as_str), Some("300m"));
    assert_eq!(
        shown.get("app/limits.memory").map(String::as_str),
        Some("600Mi")
    );
    assert_eq!(
        shown.get("app/removeLimits.cpu").map(String::as_str),
        Some("true")
    );
    // Read back, they compare equal: nothing moved.
    assert!(!should_emit(&reported, &blocked("Cooldown"), &ctx(&v, "p")));
}

// rule: EV-17
#[test]
fn ev_17_a_policy_change_emits_once_more() {
    let v = values(300, 300);
    let c = blocked("Cooldown");
    let mut reported = first_report(&c, &ctx(&v, "hash-1"));
    assert!(evaluate(&mut reported, &c, &ctx(&v, "hash-2")));
    assert!(!evaluate(&mut reported, &c, &ctx(&v, "hash-2")));
}

// rule: EV-18
#[test]
fn ev_18_applied_rolled_back_or_released_starts_over() {
    let v = values(300, 300);
    let c = blocked("Cooldown");
    let reported = first_report(&c, &ctx(&v, "p"));
    assert!(!should_emit(&reported, &c, &ctx(&v, "p")));
    let mut reported = reset();
    assert!(evaluate(&mut reported, &c, &ctx(&v, "p")));
}

// rule: EV-19
#[test]
fn ev_19_per_resource_blocks_are_keyed_per_resource() {
    let v = values(300, 300);
    let cx = ctx(&v, "p");
    let mut reported = Vec::new();
    let cpu = blocked_on("Throttled", Some(Resource::Cpu));
    let mem = blocked_on("OOMKilled", Some(Resource::Memory));
    let rpr_mem = blocked_on("RestartPolicyRequired", Some(Resource::Memory));
    assert!(evaluate(&mut reported, &cpu, &cx));
    assert!(evaluate(&mut reported, &mem, &cx));
    assert!(evaluate(&mut reported, &rpr_mem, &cx));
    assert!(!evaluate(&mut reported, &cpu, &cx));
    assert!(!evaluate(&mut reported, &mem, &cx));
    assert!(!evaluate(&mut reported, &rpr_mem, &cx));
    let rpr_cpu = blocked_on("RestartPolicyRequired", Some(Resource::Cpu));
    assert!(evaluate(&mut reported, &rpr_cpu, &cx));
    assert_eq!(reported.iter().filter(|k| k.resource.is_some()).count(), 4);
    // A whole-workload reason drops the resource from its key.
    let whole = blocked_on("Cooldown", Some(Resource::Cpu));
    assert_eq!(whole.resource, None);
}

// rule: GR-43
#[test]
fn a_reason_that_goes_away_and_returns_is_reported_again() {
    let v = values(300, 300);
    let cx = ctx(&v, "p");
    let mut reported = Vec::new();
    let lp = blocked("LearningPeriod");
    let cd = blocked("Cooldown");
    assert!(evaluate(&mut reported, &lp, &cx));
    reported = retain_current(&reported, std::slice::from_ref(&cd));
    assert!(evaluate(&mut reported, &cd, &cx));
    reported = retain_current(&reported, std::slice::from_ref(&lp));
    assert!(evaluate(&mut reported, &lp, &cx));
}

#[test]
fn only_skipped_blocked_and_failed_are_deduplicated() {
    assert!(Candidate::new(EventType::Failed, "RollbackError", None).is_ok());
    assert!(Candidate::new(EventType::Applied, "RecommendationApplied", None).is_err());
    assert!(Candidate::new(EventType::RolledBack, "OOMKills", None).is_err());
}
