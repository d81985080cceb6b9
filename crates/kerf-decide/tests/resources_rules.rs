//! The per-resource step (check 9, design D8, D9, D14) with exact quantities.

use kerf_testkit::decide as fixture;

use chrono::Duration;
use fixture::*;
use kerf_api::policy::Strategy;
use kerf_api::rsr::{ChangeState, ContainerFlag};
use kerf_api::wellknown as wk;
use kerf_api::{Resource, ResourceValues};
use kerf_decide::decide;
use kerf_decide::effective::{Layer, Sourced};
use kerf_decide::facts::{ContainerRole, Facts, ResizePolicy};
use kerf_decide::pipeline::{Check, Decision, ReportKind};

fn with_rec(cpu: &str, memory: &str) -> Facts {
    let mut f = facts();
    f.recommendation.containers[0] = recommendation(cpu, memory);
    f
}

fn run(f: &Facts) -> Decision {
    decide(f, &policy(), now())
}

fn b_resources(d: &Decision) -> Vec<Resource> {
    block(d).resources.to_vec()
}

fn reports(d: &Decision, reason: &str) -> Vec<(Resource, Option<String>)> {
    d.reports
        .iter()
        .filter(|r| r.reason == reason && r.kind == ReportKind::Blocked)
        .map(|r| (r.resource, r.container.clone()))
        .collect()
}

// rule: GR-06, GR-14
#[test]
fn gr_14_a_decrease_is_clamped_to_max_change_percent() {
    let d = run(&with_rec("100m", "64Mi"));
    assert_eq!(
        to_request(&d, "app", Resource::Cpu).as_deref(),
        Some("250m")
    );
    assert_eq!(
        to_request(&d, "app", Resource::Memory).as_deref(),
        Some("128Mi")
    );
    let mut p = policy();
    p.max_change_percent = Sourced::new(30, Layer::Policy);
    let d = decide(&with_rec("100m", "256Mi"), &p, now());
    assert_eq!(
        to_request(&d, "app", Resource::Cpu).as_deref(),
        Some("350m")
    );
}

// rule: GR-15
#[test]
fn gr_15_the_capped_bound_rounds_up_to_a_millicore_or_a_mib() {
    let mut f = with_rec("1m", "1Mi");
    f.workload.containers[0].requests = values(Some(333), Some(301 * MI));
    f.workload.containers[0].limits = values(None, None);
    let d = run(&f);
    assert_eq!(
        to_request(&d, "app", Resource::Cpu).as_deref(),
        Some("167m")
    );
    assert_eq!(
        to_request(&d, "app", Resource::Memory).as_deref(),
        Some("151Mi")
    );
}

// rule: GR-16
#[test]
fn gr_16_an_increase_is_never_capped() {
    let d = run(&with_rec("4", "2Gi"));
    assert_eq!(to_request(&d, "app", Resource::Cpu).as_deref(), Some("4"));
    assert_eq!(
        to_request(&d, "app", Resource::Memory).as_deref(),
        Some("2Gi")
    );
}

// rule: GR-17, GR-21
#[test]
fn gr_17_a_large_drop_takes_several_steps_a_cooldown_apart() {
    let mut f = with_rec("100m", "256Mi");
    f.workload.containers[0].requests.cpu = Some(1000);
    assert_eq!(
        to_request(&run(&f), "app", Resource::Cpu).as_deref(),
        Some("500m")
    );
    // The first step went in an hour ago: the next waits for the cooldown.
    f.workload.containers[0].requests.cpu = Some(500);
    f.state.change = Some(applied_change(Duration::hours(1), ChangeState::Applied));
    assert_eq!(block(&run(&f)).reason, wk::REASON_COOLDOWN);
    f.state.change = Some(applied_change(Duration::hours(24), ChangeState::Applied));
    assert_eq!(
        to_request(&run(&f), "app", Resource::Cpu).as_deref(),
        Some("250m")
    );
}

// rule: GR-18
#[test]
fn gr_18_no_cpu_request_below_min_cpu() {
    let mut f = with_rec("10m", "256Mi");
    f.workload.containers[0].requests.cpu = Some(80);
    let mut p = policy();
    p.min_cpu = Sourced::new(50, Layer::Policy);
    let d = decide(&f, &p, now());
    assert_eq!(to_request(&d, "app", Resource::Cpu).as_deref(), Some("50m"));
}

// rule: GR-08, GR-19
#[test]
fn gr_19_no_memory_request_below_min_memory() {
    let mut f = with_rec("500m", "8Mi");
    f.workload.containers[0].requests.memory = Some(48 * MI);
    let d = run(&f);
    assert_eq!(
        to_request(&d, "app", Resource::Memory).as_deref(),
        Some("32Mi")
    );
}

// design D14
// rule: GR-07
#[test]
fn a_current_value_below_the_minimum_is_raised_to_it() {
    let mut f = with_rec("5m", "256Mi");
    f.workload.containers[0].requests.cpu = Some(5);
    let d = run(&f);
    assert_eq!(to_request(&d, "app", Resource::Cpu).as_deref(), Some("10m"));
}

// rule: GR-20
#[test]
fn gr_20_a_kept_limit_below_a_new_request_is_raised_to_it() {
    let mut f = with_rec("800m", "256Mi");
    f.workload.containers[0].limits.cpu = Some(600);
    let d = run(&f);
    assert_eq!(
        to_request(&d, "app", Resource::Cpu).as_deref(),
        Some("800m")
    );
    assert_eq!(to_limit(&d, "app", Resource::Cpu).as_deref(), Some("800m"));
}

// rule: GR-20
#[test]
fn gr_20_a_recommended_limit_below_the_request_is_raised() {
    let mut f = with_rec("500m", "1Gi");
    f.recommendation.containers[0].limits.memory = q("768Mi");
    let d = run(&f);
    assert_eq!(
        to_request(&d, "app", Resource::Memory).as_deref(),
        Some("1Gi")
    );
    assert_eq!(
        to_limit(&d, "app", Resource::Memory).as_deref(),
        Some("1Gi")
    );
}

// rule: GR-23
#[test]
fn gr_23_a_move_below_the_tolerance_keeps_the_value_exactly_the_tolerance_goes() {
    let d = run(&with_rec("476m", "256Mi"));
    assert_eq!(skip(&d).reason, wk::REASON_NO_SIGNIFICANT_CHANGE);
    assert!(d.message.contains("5 %"), "{}", d.message);
    let mut f = with_rec("476m", "256Mi");
    f.settings.tolerance_milli_percent = 2500;
    assert_eq!(
        to_request(&run(&f), "app", Resource::Cpu).as_deref(),
        Some("476m")
    );
    let d = run(&with_rec("475m", "256Mi"));
    assert_eq!(
        to_request(&d, "app", Resource::Cpu).as_deref(),
        Some("475m")
    );
    // Memory moves by 4 %, CPU by 50 %: memory keeps its value.
    let d = run(&with_rec("250m", "266Mi"));
    assert_eq!(apply(&d).resources, vec![Resource::Cpu]);
}

// rule: GR-24
#[test]
fn gr_24_everything_within_tolerance_is_skipped_never_blocked() {
    let mut f = with_rec("490m", "250Mi");
    flag(&mut f, ContainerFlag::Throttled);
    f.cluster_freeze.now = true;
    let d = run(&f);
    assert_eq!(skip(&d).reason, wk::REASON_NO_SIGNIFICANT_CHANGE);
    assert!(d.reports.iter().all(|r| r.kind == ReportKind::Skipped));
}

// rule: GR-27
#[test]
fn gr_27_throttled_container_never_gets_lower_cpu() {
    let mut f = with_rec("250m", "256Mi");
    flag(&mut f, ContainerFlag::Throttled);
    let d = run(&f);
    let b = block(&d);
    assert_eq!(
        (b.reason, b.check),
        (wk::REASON_THROTTLED, Check::ResourceLimits)
    );
    assert_eq!(b.resources, vec![Resource::Cpu]);
    // An increase is not a decrease.
    let mut f = with_rec("750m", "256Mi");
    flag(&mut f, ContainerFlag::Throttled);
    assert_eq!(
        to_request(&run(&f), "app", Resource::Cpu).as_deref(),
        Some("750m")
    );
}

// rule: GR-28
#[test]
fn gr_28_oom_killed_container_never_gets_lower_memory() {
    let mut f = with_rec("500m", "128Mi");
    flag(&mut f, ContainerFlag::OomKilled);
    let b = block(&run(&f)).clone();
    assert_eq!(b.reason, wk::REASON_OOM_KILLED);
    assert_eq!(b.resources, vec![Resource::Memory]);
}

// rule: GR-29
#[test]
fn gr_29_a_refusal_takes_out_only_the_refused_resource() {
    let mut f = with_rec("250m", "512Mi");
    flag(&mut f, ContainerFlag::Throttled);
    let d = run(&f);
    assert_eq!(apply(&d).resources, vec![Resource::Memory]);
    assert_eq!(
        to_request(&d, "app", Resource::Memory).as_deref(),
        Some("512Mi")
    );
    assert_eq!(to_request(&d, "app", Resource::Cpu), None);
    assert_eq!(
        reports(&d, wk::REASON_THROTTLED),
        vec![(Resource::Cpu, Some("app".into()))]
    );
}

// rule: GR-22, RB-32, EV-30
#[test]
fn rb_32_after_an_oom_rollback_memory_decreases_wait_for_the_cooldown() {
    let mut f = with_rec("250m", "128Mi");
    oom_rolled_back(&mut f, Duration::minutes(23 * 60 + 55), "100Mi");
    let d = run(&f);
    assert_eq!(apply(&d).resources, vec![Resource::Cpu]);
    assert_eq!(
        reports(&d, wk::REASON_COOLDOWN),
        vec![(Resource::Memory, Some("app".into()))]
    );
    oom_rolled_back(&mut f, Duration::hours(25), "100Mi");
    assert_eq!(
        apply(&run(&f)).resources,
        vec![Resource::Cpu, Resource::Memory]
    );
}

// rule: RB-33, EV-30
#[test]
fn rb_33_after_a_throttling_rollback_cpu_decreases_wait_but_increases_go() {
    let mut f = with_rec("250m", "256Mi");
    let to = ResourceValues {
        cpu: q("200m"),
        memory: None,
    };
    rolled_back(
        &mut f,
        Duration::minutes(23 * 60 + 55),
        wk::REASON_THROTTLING,
        &[Resource::Cpu],
        to.clone(),
    );
    let b = block(&run(&f)).clone();
    assert_eq!(
        (b.reason, b.resources.to_vec()),
        (wk::REASON_COOLDOWN, vec![Resource::Cpu])
    );
    f.recommendation.containers[0] = recommendation("800m", "256Mi");
    assert_eq!(
        to_request(&run(&f), "app", Resource::Cpu).as_deref(),
        Some("800m")
    );
}

// rule: RB-34, EV-30
#[test]
fn rb_34_after_a_restart_rollback_both_decreases_wait() {
    let mut f = with_rec("250m", "128Mi");
    let to = ResourceValues {
        cpu: q("200m"),
        memory: q("100Mi"),
    };
    rolled_back(
        &mut f,
        Duration::minutes(23 * 60 + 55),
        wk::REASON_RESTARTS,
        &Resource::ALL,
        to,
    );
    let d = run(&f);
    assert_eq!(block(&d).reason, wk::REASON_COOLDOWN);
    assert_eq!(block(&d).check, Check::ResourceLimits);
    assert_eq!(b_resources(&d), vec![Resource::Cpu]);
    assert_eq!(
        reports(&d, wk::REASON_COOLDOWN),
        vec![(Resource::Memory, Some("app".into()))]
    );
}

// rule: RB-31
#[test]
fn rb_31_the_values_a_rollback_removed_are_never_applied_again() {
    let mut f = with_rec("250m", "256Mi");
    let to = ResourceValues {
        cpu: q("250m"),
        memory: None,
    };
    rolled_back(
        &mut f,
        Duration::hours(30),
        wk::REASON_THROTTLING,
        &[Resource::Cpu],
        to,
    );
    let d = run(&f);
    assert_eq!(skip(&d).reason, wk::REASON_NO_SIGNIFICANT_CHANGE, "{d:?}");
    f.recommendation.containers[0] = recommendation("300m", "256Mi");
    assert_eq!(
        to_request(&run(&f), "app", Resource::Cpu).as_deref(),
        Some("300m")
    );
}

// rule: EV-34
#[test]
fn ev_34_jvm_memory_in_place_needs_restart_container() {
    let mut f = with_rec("250m", "512Mi");
    flag(&mut f, ContainerFlag::Jvm);
    let d = run(&f);
    assert_eq!(apply(&d).resources, vec![Resource::Cpu]);
    assert_eq!(
        reports(&d, wk::REASON_RESTART_POLICY_REQUIRED),
        vec![(Resource::Memory, Some("app".into()))]
    );
    resize(&mut f, Resource::Memory, ResizePolicy::RestartContainer);
    assert_eq!(
        apply(&run(&f)).resources,
        vec![Resource::Cpu, Resource::Memory]
    );
    // Python, detected from the template.
    let mut f = with_rec("500m", "512Mi");
    f.workload.containers[0].command = vec!["gunicorn".into()];
    assert_eq!(block(&run(&f)).reason, wk::REASON_RESTART_POLICY_REQUIRED);
}

// rule: AP-16
#[test]
fn ap_16_a_rollout_may_change_jvm_memory_whatever_the_resize_policy() {
    let mut f = with_rec("500m", "512Mi");
    flag(&mut f, ContainerFlag::Python);
    let mut p = policy();
    set_strategy(&mut p, Strategy::Rollout);
    let d = decide(&f, &p, now());
    assert_eq!(
        to_request(&d, "app", Resource::Memory).as_deref(),
        Some("512Mi")
    );
}

// rule: EV-35
#[test]
fn ev_35_a_fixed_heap_in_the_template_makes_memory_audit_only() {
    let mut f = with_rec("250m", "512Mi");
    f.workload.containers[0].args = vec!["-Xmx400m".into(), "-jar".into(), "app.jar".into()];
    let mut p = policy();
    set_strategy(&mut p, Strategy::Rollout);
    let d = decide(&f, &p, now());
    assert_eq!(apply(&d).resources, vec![Resource::Cpu]);
    assert_eq!(
        reports(&d, wk::REASON_JVM_FIXED_HEAP),
        vec![(Resource::Memory, Some("app".into()))]
    );
}

// rule: EV-36
#[test]
fn ev_36_the_hub_flag_jvm_fixed_heap_blocks_memory_too() {
    let mut f = with_rec("500m", "128Mi");
    flag(&mut f, ContainerFlag::JvmFixedHeap);
    let b = block(&run(&f)).clone();
    assert_eq!(
        (b.reason, b.resources.to_vec()),
        (wk::REASON_JVM_FIXED_HEAP, vec![Resource::Memory])
    );
}

// rule: AP-14
#[test]
fn ap_14_a_swap_node_blocks_the_memory_part_of_in_place() {
    let mut f = with_rec("250m", "512Mi");
    f.nodes[0].swap = true;
    let d = run(&f);
    assert_eq!(apply(&d).resources, vec![Resource::Cpu]);
    assert_eq!(
        reports(&d, wk::REASON_UNSUPPORTED_NODE),
        vec![(Resource::Memory, Some("app".into()))]
    );
    let mut p = policy();
    set_strategy(&mut p, Strategy::Rollout);
    assert_eq!(
        apply(&decide(&f, &p, now())).resources,
        vec![Resource::Cpu, Resource::Memory]
    );
}

// rule: AP-15
#[test]
fn ap_15_unsupported_node_selectors_block_all_of_in_place() {
    let mut f = with_rec("250m", "512Mi");
    f.nodes[0]
        .labels
        .insert("cpu-manager".into(), "static".into());
    f.settings.unsupported_node_selectors =
        vec![[("cpu-manager".to_owned(), "static".to_owned())].into()];
    let d = run(&f);
    let b = block(&d);
    assert_eq!(
        (b.reason, b.check),
        (wk::REASON_UNSUPPORTED_NODE, Check::ResourceLimits)
    );
    assert_eq!(reports(&d, wk::REASON_UNSUPPORTED_NODE).len(), 1);
    assert!(b.message.contains("node-a"), "{}", b.message);
}

// design D19
#[test]
fn a_cluster_without_pods_resize_blocks_in_place_with_unsupported_node() {
    let mut f = with_rec("250m", "256Mi");
    f.settings.resize_subresource = false;
    let b = block(&run(&f)).clone();
    assert_eq!(b.reason, wk::REASON_UNSUPPORTED_NODE);
    assert!(b.message.contains("pods/resize"));
}

#[test]
fn in_place_waits_while_the_webhook_has_no_usable_certificate() {
    let mut f = with_rec("250m", "256Mi");
    f.settings.webhook_certificate_problem = Some("reading /certs/tls.crt: not found".into());
    let b = block(&run(&f)).clone();
    assert_eq!(b.reason, wk::REASON_WEBHOOK_CERTIFICATE_UNUSABLE);
    assert!(b.message.contains("/certs/tls.crt"), "{}", b.message);
    // A rollout changes the template itself: no webhook is needed.
    let mut p = policy();
    set_strategy(&mut p, Strategy::Rollout);
    let by_rollout = apply(&decide(&f, &p, now())).resources.clone();
    assert!(!by_rollout.is_empty());
    f.settings.webhook_certificate_problem = None;
    assert_eq!(apply(&run(&f)).resources, by_rollout);
}

// design D8
#[test]
fn containers_the_template_lacks_are_dropped_and_named() {
    let mut f = with_rec("250m", "256Mi");
    f.recommendation.containers.push(recommendation("1", "1Gi"));
    f.recommendation.containers[1].name = "gone".into();
    let d = run(&f);
    assert_eq!(d.dropped_containers, vec!["gone".to_owned()]);
    assert!(d.message.contains("gone"));
    assert_eq!(apply(&d).containers.len(), 1);
    f.recommendation.containers.remove(0);
    let s = skip(&run(&f)).clone();
    assert_eq!(s.reason, wk::REASON_RECOMMENDATION_STALE);
}

// design D8
#[test]
fn only_restartable_init_containers_change() {
    let mut f = with_rec("250m", "256Mi");
    f.workload.containers[0].role = ContainerRole::Init;
    assert_eq!(skip(&run(&f)).reason, wk::REASON_RECOMMENDATION_STALE);
    f.workload.containers[0].role = ContainerRole::RestartableInit;
    assert_eq!(
        to_request(&run(&f), "app", Resource::Cpu).as_deref(),
        Some("250m")
    );
}

// design D9
#[test]
fn an_absent_recommended_limit_keeps_the_current_one() {
    let d = run(&with_rec("250m", "300Mi"));
    assert_eq!(
        to_limit(&d, "app", Resource::Memory).as_deref(),
        Some("512Mi")
    );
}

// design D9
#[test]
fn a_limit_decrease_is_capped_like_a_request() {
    let mut f = with_rec("500m", "256Mi");
    f.recommendation.containers[0].limits.memory = q("300Mi");
    f.workload.containers[0].limits.memory = Some(1024 * MI);
    let d = run(&f);
    assert_eq!(
        to_limit(&d, "app", Resource::Memory).as_deref(),
        Some("512Mi")
    );
}

// design D9 (AP-17 is the executor's)
#[test]
fn remove_limits_under_in_place_is_left_to_new_pods_and_named() {
    let mut f = with_rec("500m", "256Mi");
    f.recommendation.containers[0].remove_limits = vec![Resource::Memory];
    let d = run(&f);
    let a = apply(&d);
    assert_eq!(to_limit(&d, "app", Resource::Memory), None);
    assert_eq!(a.kept_limits, vec![("app".to_owned(), Resource::Memory)]);
    assert!(
        d.message
            .contains("memory limit of app stays on running pods"),
        "{}",
        d.message
    );
    let mut p = policy();
    set_strategy(&mut p, Strategy::Rollout);
    assert!(apply(&decide(&f, &p, now())).kept_limits.is_empty());
}

// design D9
#[test]
fn a_guaranteed_container_gets_limit_equal_to_request() {
    let mut f = with_rec("250m", "256Mi");
    f.workload.containers[0].requests = values(Some(500), Some(256 * MI));
    f.workload.containers[0].limits = values(Some(500), Some(256 * MI));
    f.recommendation.containers[0].remove_limits = vec![Resource::Cpu];
    let d = run(&f);
    assert_eq!(
        to_request(&d, "app", Resource::Cpu).as_deref(),
        Some("250m")
    );
    assert_eq!(to_limit(&d, "app", Resource::Cpu).as_deref(), Some("250m"));
}

// design D9
#[test]
fn a_best_effort_container_never_gets_requests() {
    let mut f = with_rec("250m", "256Mi");
    f.workload.containers[0].requests = values(None, None);
    f.workload.containers[0].limits = values(None, None);
    let d = run(&f);
    assert_eq!(skip(&d).reason, wk::REASON_NO_SIGNIFICANT_CHANGE);
    assert!(d.message.contains("BestEffort"), "{}", d.message);
}

#[test]
fn a_bad_recommended_quantity_is_named_and_left_out() {
    let mut f = with_rec("250m", "256Mi");
    f.recommendation.containers[0].requests.memory = q("12Q");
    let d = run(&f);
    assert_eq!(apply(&d).resources, vec![Resource::Cpu]);
    assert!(d.message.contains("12Q"), "{}", d.message);
}
