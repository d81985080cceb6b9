//! The report of a fixture of workloads in every mode and phase, against totals computed
//! by hand; the table and the JSON against committed golden files.

use chrono::{DateTime, TimeZone, Utc};
use kerf_api::rsr::{ContainerRecommendation, RightsizingRecommendationSpec, WorkloadRef};
use kerf_api::{Quantity, ResourceValues, WorkloadKind};
use serde_json::{Value, json};

use super::compute::{ContainerInput, RsrInput, WorkloadInput, build};
use super::table::{MAX_WIDTH, fmt, render};
use super::{Report, Split};

const MI: i64 = 1 << 20;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0)
        .single()
        .unwrap()
}

fn values(cpu: Option<&str>, memory: Option<&str>) -> ResourceValues {
    ResourceValues {
        cpu: cpu.map(|q| Quantity(q.to_owned())),
        memory: memory.map(|q| Quantity(q.to_owned())),
    }
}

/// A workload whose containers request `(name, cpu, memory)`.
fn wl(
    ns: &str,
    kind: WorkloadKind,
    name: &str,
    replicas: i64,
    cs: &[(&str, &str, &str)],
) -> WorkloadInput {
    WorkloadInput {
        namespace: ns.to_owned(),
        kind,
        name: name.to_owned(),
        replicas,
        containers: cs
            .iter()
            .map(|(n, c, m)| ContainerInput {
                name: (*n).to_owned(),
                requests: values(Some(c), Some(m)),
                limits: ResourceValues::default(),
            })
            .collect(),
        rsr: None,
    }
}

fn spec(
    kind: WorkloadKind,
    name: &str,
    recs: &[(&str, Option<&str>, Option<&str>)],
) -> RightsizingRecommendationSpec {
    RightsizingRecommendationSpec {
        workload_ref: WorkloadRef {
            kind,
            name: name.to_owned(),
            uid: None,
        },
        recommendation_id: format!("rec-{name}"),
        generated_at: None,
        confidence: None,
        data_coverage: None,
        settings: None,
        containers: recs
            .iter()
            .map(|(n, c, m)| ContainerRecommendation {
                name: (*n).to_owned(),
                requests: values(*c, *m),
                limits: ResourceValues::default(),
                remove_limits: Vec::new(),
                confidence: None,
                flags: Vec::new(),
            })
            .collect(),
        approval: None,
        source: None,
    }
}

/// `w` with the hub recommending `recs` and the rsr status `status` (JSON as stored).
fn rec(
    mut w: WorkloadInput,
    recs: &[(&str, Option<&str>, Option<&str>)],
    status: Value,
) -> WorkloadInput {
    w.rsr = Some(RsrInput {
        spec: spec(w.kind, &w.name, recs),
        status: serde_json::from_value(status).unwrap(),
    });
    w
}

fn blocked(reason: &str) -> Value {
    json!({"type": "Blocked", "status": "True", "reason": reason, "message": "",
        "lastTransitionTime": "2026-12-01T11:00:00Z"})
}

fn modes(cpu: &str, memory: &str) -> Value {
    json!({"cpu": cpu, "memory": memory})
}

fn change(state: &str, strategy: &str, resources: &[&str], from: Value, to: Value) -> Value {
    json!({"id": "c1", "state": state, "recommendationID": "r", "strategy": strategy,
        "resources": resources, "startedAt": "2026-12-01T10:00:00Z",
        "containers": [{"name": "app", "from": {"requests": from}, "to": {"requests": to}}]})
}

fn shop() -> Vec<WorkloadInput> {
    use WorkloadKind::{Deployment, StatefulSet};
    let auto = modes("auto-patch", "auto-patch");
    let tiny = wl("shop", Deployment, "tiny", 1, &[("app", "1", "256Mi")]);
    let tiny_spec = spec(Deployment, "tiny", &[("app", Some("980m"), None)]);
    let tiny_hash =
        kerf_decide::dedup::values_hash(&kerf_decide::dedup::recommended_values(&tiny_spec));
    vec![
        // audit: nothing changes, both resources held back by the mode.
        rec(
            wl(
                "shop",
                Deployment,
                "checkout",
                3,
                &[("app", "500m", "512Mi"), ("proxy", "100m", "64Mi")],
            ),
            &[("app", Some("250m"), Some("256Mi"))],
            json!({"phase": "Skipped", "mode": modes("audit", "audit"),
                "summary": {"mode": "audit", "reason": "ModeAudit"}}),
        ),
        // auto-patch, applied in place: the live values run, the change moved 400m/256Mi a pod.
        rec(
            wl("shop", Deployment, "cart", 2, &[("app", "1", "1Gi")]),
            &[("app", Some("600m"), Some("768Mi"))],
            json!({"phase": "Applied", "mode": auto,
                "summary": {"mode": "auto-patch", "reason": "RecommendationApplied"},
                "change": change("Applied", "in-place", &["cpu", "memory"],
                    json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "600m", "memory": "768Mi"})),
                "live": {"containers": [{"name": "app",
                    "requests": {"cpu": "600m", "memory": "768Mi"},
                    "base": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}),
        ),
        // blocked by the cooldown, CPU raised and memory lowered.
        rec(
            wl("shop", StatefulSet, "db", 1, &[("app", "2", "4Gi")]),
            &[("app", Some("3"), Some("2Gi"))],
            json!({"phase": "Blocked", "mode": auto, "conditions": [blocked("Cooldown")],
                "summary": {"mode": "auto-patch", "reason": "Cooldown"}}),
        ),
        // a CPU change going in.
        rec(
            wl("shop", Deployment, "search", 4, &[("app", "200m", "256Mi")]),
            &[("app", Some("100m"), Some("256Mi"))],
            json!({"phase": "Applying", "mode": auto,
                "change": change("Applying", "rollout", &["cpu"],
                    json!({"cpu": "200m"}), json!({"cpu": "100m"}))}),
        ),
        // no recommendation; a container whose CPU request does not parse counts 0.
        wl(
            "shop",
            Deployment,
            "legacy",
            2,
            &[("app", "300m", "300Mi"), ("bad", "12Q", "64Mi")],
        ),
        // an invalid annotation names itself before the mode.
        rec(
            wl("shop", Deployment, "broken", 1, &[("app", "200m", "128Mi")]),
            &[("app", Some("100m"), None)],
            json!({"phase": "Skipped", "mode": auto,
                "summary": {"mode": "auto-patch", "reason": "InvalidAnnotation"}}),
        ),
        // applied by rollout earlier; the new CPU recommendation is below the tolerance.
        rec(
            tiny,
            &[("app", Some("980m"), None)],
            json!({"phase": "Applied", "mode": auto,
                "summary": {"mode": "auto-patch", "reason": "RecommendationApplied"},
                "change": change("Applied", "rollout", &["memory"],
                    json!({"memory": "512Mi"}), json!({"memory": "256Mi"})),
                "reported": [{"type": "skipped", "reason": "NoSignificantChange",
                    "valuesHash": tiny_hash, "policyHash": "p"}]}),
        ),
    ]
}

fn batch() -> Vec<WorkloadInput> {
    use WorkloadKind::{DaemonSet, Deployment};
    let auto = modes("auto-patch", "auto-patch");
    vec![
        rec(
            wl("batch", DaemonSet, "agent", 5, &[("app", "100m", "128Mi")]),
            &[("app", Some("50m"), Some("200Mi"))],
            json!({"phase": "Blocked", "mode": auto, "conditions": [blocked("LearningPeriod")],
                "summary": {"reason": "LearningPeriod"}}),
        ),
        rec(
            wl("batch", Deployment, "etl", 1, &[("app", "1", "2Gi")]),
            &[("app", Some("500m"), Some("1Gi"))],
            json!({"phase": "Skipped", "mode": modes("off", "off"),
                "summary": {"mode": "off", "reason": "ModeOff"}}),
        ),
        rec(
            wl(
                "batch",
                Deployment,
                "report",
                2,
                &[("app", "400m", "512Mi")],
            ),
            &[("app", Some("200m"), Some("256Mi"))],
            json!({"phase": "RolledBack", "mode": auto,
                "summary": {"mode": "auto-patch", "reason": "OOMKills"},
                "change": change("RolledBack", "rollout", &["cpu", "memory"],
                    json!({"cpu": "400m", "memory": "512Mi"}), json!({"cpu": "200m", "memory": "256Mi"})),
                "lastRollback": {"time": "2026-12-01T11:00:00Z", "reason": "OOMKills",
                    "resources": ["cpu", "memory"], "changeId": "c1"}}),
        ),
        rec(
            wl("batch", Deployment, "cron", 1, &[("app", "300m", "256Mi")]),
            &[("app", Some("200m"), None)],
            json!({"phase": "Deferred", "mode": auto,
                "summary": {"mode": "auto-patch", "reason": "OutsideMaintenanceWindow"}}),
        ),
        rec(
            wl("batch", Deployment, "paused", 1, &[("app", "1", "512Mi")]),
            &[("app", Some("800m"), None)],
            json!({"phase": "Blocked", "mode": auto, "conditions": [blocked("Paused")],
                "summary": {"mode": "auto-patch", "reason": "Paused"}}),
        ),
        // not decided yet: no status at all.
        rec(
            wl("batch", Deployment, "fresh", 1, &[("app", "100m", "100Mi")]),
            &[("app", Some("50m"), None)],
            json!({}),
        ),
    ]
}

fn fixture() -> Report {
    let mut all = shop();
    all.extend(batch());
    build(&all, Vec::new(), now())
}

fn split(decrease: i64, increase: i64) -> Split {
    Split::new(decrease, increase)
}

#[test]
fn cluster_totals_match_the_hand_computed_ones() {
    let r = fixture();
    let c = &r.cluster;
    assert_eq!((c.workloads, c.recommended_workloads), (13, 12));
    assert_eq!(c.cpu.requested, 11_300);
    assert_eq!(c.cpu.recommended, 9_530);
    assert_eq!(c.cpu.savings, split(2_770, 1_000));
    assert_eq!(c.cpu.savings.net, 1_770);
    assert_eq!(c.cpu.applied, split(800, 0));
    assert_eq!(c.cpu.held_back, split(2_770, 1_000));
    assert_eq!(c.memory.requested, 14_076 * MI);
    assert_eq!(c.memory.recommended, 10_084 * MI);
    assert_eq!(c.memory.savings, split(4_352 * MI, 360 * MI));
    assert_eq!(c.memory.savings.net, 3_992 * MI);
    assert_eq!(c.memory.applied, split(768 * MI, 0));
}

#[test]
fn namespace_totals_match_the_hand_computed_ones() {
    let r = fixture();
    let names: Vec<&str> = r.namespaces.iter().map(|n| n.namespace.as_str()).collect();
    assert_eq!(names, ["batch", "shop"]);
    let batch = &r.namespaces[0].totals;
    assert_eq!((batch.workloads, batch.recommended_workloads), (6, 6));
    assert_eq!((batch.cpu.requested, batch.cpu.recommended), (3_700, 2_200));
    assert_eq!(batch.cpu.savings, split(1_500, 0));
    assert_eq!(batch.memory.requested, 4_580 * MI);
    assert_eq!(batch.memory.recommended, 3_404 * MI);
    assert_eq!(batch.memory.savings, split(1_536 * MI, 360 * MI));
    assert_eq!(batch.memory.applied, Split::default());
    let shop = &r.namespaces[1].totals;
    assert_eq!((shop.workloads, shop.recommended_workloads), (7, 6));
    assert_eq!((shop.cpu.requested, shop.cpu.recommended), (7_600, 7_330));
    assert_eq!(shop.cpu.savings, split(1_270, 1_000));
    assert_eq!(shop.cpu.applied, split(800, 0));
    assert_eq!(shop.memory.requested, 9_496 * MI);
    assert_eq!(shop.memory.recommended, 6_680 * MI);
    assert_eq!(shop.memory.savings, split(2_816 * MI, 0));
    assert_eq!(shop.memory.applied, split(768 * MI, 0));
}

#[test]
fn held_back_savings_are_grouped_by_the_reason_the_rsr_status_carries() {
    let r = fixture();
    let got: Vec<(&str, u32, Split, Split)> = r
        .cluster
        .held_back
        .iter()
        .map(|h| (h.reason.as_str(), h.workloads, h.cpu, h.memory))
        .collect();
    let none = Split::default();
    assert_eq!(
        got,
        [
            ("Applying", 1, split(400, 0), none),
            ("Cooldown", 1, split(0, 1_000), split(2_048 * MI, 0)),
            ("InvalidAnnotation", 1, split(100, 0), none),
            ("LearningPeriod", 1, split(250, 0), split(0, 360 * MI)),
            ("ModeAudit", 1, split(750, 0), split(768 * MI, 0)),
            ("ModeOff", 1, split(500, 0), split(1_024 * MI, 0)),
            ("NoSignificantChange", 1, split(20, 0), none),
            ("OOMKills", 1, split(400, 0), split(512 * MI, 0)),
            ("OutsideMaintenanceWindow", 1, split(100, 0), none),
            ("Paused", 1, split(200, 0), none),
            ("Pending", 1, split(50, 0), none),
        ]
    );
}

#[test]
fn an_in_place_change_counts_the_live_values_as_requested_and_its_move_as_applied() {
    let r = fixture();
    let cart = r.workloads.iter().find(|w| w.name == "cart").unwrap();
    assert_eq!((cart.cpu.requested, cart.cpu.recommended), (1_200, 1_200));
    assert_eq!(cart.cpu.applied, split(800, 0));
    assert_eq!(cart.memory.applied, split(512 * MI, 0));
    assert_eq!(cart.cpu.held_back, None);
    assert_eq!(cart.phase.as_deref(), Some("Applied"));
}

#[test]
fn a_mode_per_resource_holds_back_only_that_resource_by_the_mode() {
    let w = rec(
        wl(
            "ns",
            WorkloadKind::Deployment,
            "mixed",
            1,
            &[("app", "1", "1Gi")],
        ),
        &[("app", Some("500m"), Some("512Mi"))],
        json!({"phase": "Blocked", "mode": modes("audit", "auto-patch"),
            "conditions": [blocked("Cooldown")], "summary": {"reason": "Cooldown"}}),
    );
    let r = build(&[w], Vec::new(), now());
    let line = &r.workloads[0];
    assert_eq!(line.cpu.held_back.as_deref(), Some("ModeAudit"));
    assert_eq!(line.memory.held_back.as_deref(), Some("Cooldown"));
    let reasons: Vec<(&str, u32)> = r
        .cluster
        .held_back
        .iter()
        .map(|h| (h.reason.as_str(), h.workloads))
        .collect();
    assert_eq!(reasons, [("Cooldown", 1), ("ModeAudit", 1)]);
}

#[test]
fn a_quantity_that_does_not_parse_is_named_and_counted_absent() {
    let r = fixture();
    assert_eq!(
        r.problems,
        [
            "shop/Deployment/legacy: container bad request cpu: invalid quantity \"12Q\": \
          unknown suffix \"Q\"; counted as absent"
        ]
    );
    let legacy = r.workloads.iter().find(|w| w.name == "legacy").unwrap();
    assert_eq!(legacy.cpu.requested, 600);
    assert!(!legacy.recommended);
}

#[test]
fn amounts_are_shown_in_millicores_or_cores_and_mib_or_gib() {
    use kerf_api::Resource::{Cpu, Memory};
    assert_eq!(fmt(Cpu, 250), "250m");
    assert_eq!(fmt(Cpu, 2_500), "2.5");
    assert_eq!(fmt(Cpu, 12_345), "12.35");
    assert_eq!(fmt(Cpu, -1_000), "-1");
    assert_eq!(fmt(Cpu, 0), "0");
    assert_eq!(fmt(Memory, 0), "0");
    assert_eq!(fmt(Memory, 512 * MI), "512Mi");
    assert_eq!(fmt(Memory, 1_536 * MI), "1.5Gi");
    assert_eq!(fmt(Memory, -360 * MI), "-360Mi");
}

fn golden(name: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/report/testdata")
        .join(name);
    if std::env::var_os("KERF_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (KERF_UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(
        got,
        want,
        "{} differs (KERF_UPDATE_GOLDEN=1 rewrites it)",
        path.display()
    );
}

#[test]
fn the_table_matches_its_golden_file_and_fits_120_columns() {
    let text = render(&fixture());
    for line in text.lines() {
        assert!(
            line.chars().count() <= MAX_WIDTH,
            "{} columns: {line:?}",
            line.chars().count()
        );
    }
    golden("table.txt", &text);
}

#[test]
fn the_table_fits_120_columns_with_long_names_and_huge_amounts() {
    let big = rec(
        wl(
            "a-namespace-name-of-sixty-three-characters-is-allowed-by-kubern",
            WorkloadKind::Deployment,
            "w",
            100_000,
            &[("app", "64", "512Gi")],
        ),
        &[("app", Some("1m"), Some("1Mi"))],
        json!({"phase": "Blocked", "conditions": [blocked("OutsideMaintenanceWindow")]}),
    );
    let text = render(&build(&[big], vec!["x".repeat(300)], now()));
    for line in text.lines() {
        assert!(
            line.chars().count() <= MAX_WIDTH,
            "{} columns: {line:?}",
            line.chars().count()
        );
    }
    assert!(text.contains("a-namespace-name-of~"), "{text}");
}

#[test]
fn the_json_matches_its_golden_file_and_reads_back() {
    let report = fixture();
    let text = serde_json::to_string_pretty(&report).unwrap() + "\n";
    golden("report.json", &text);
    let back: Report = serde_json::from_str(&text).unwrap();
    assert_eq!(back, report);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["units"], json!({"cpu": "millicores", "memory": "bytes"}));
}

#[tokio::test]
async fn the_endpoint_answers_503_until_the_caches_synced_then_the_json_report() {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    let cache = crate::cache::CacheSet::new();
    let clock: crate::clock::SharedClock = std::sync::Arc::new(crate::clock::TestClock::new(now()));
    let app = super::source::router(cache.clone(), clock);
    let get = || Request::get("/report").body(Body::empty()).unwrap();
    let res = app.clone().oneshot(get()).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    for w in crate::cache::WATCHES {
        cache.mark_synced(w);
    }
    let res = app.oneshot(get()).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .unwrap();
    let report: Report = serde_json::from_slice(&body).unwrap();
    assert_eq!((report.version, report.generated_at), (1, now()));
    assert_eq!(report.cluster.workloads, 0);
}

/// `shop/checkout` (3 pods, template 500m/512Mi) after an in-place change to 300m/384Mi
/// in `state`, with a rollback of `rolled_back` when there is one, recommended 300m/384Mi.
fn checkout_after(state: &str, rolled_back: &[&str]) -> WorkloadInput {
    let w = wl(
        "shop",
        WorkloadKind::Deployment,
        "checkout",
        3,
        &[("app", "500m", "512Mi")],
    );
    let mut status = json!({
        "phase": if rolled_back.is_empty() { "Released" } else { "RolledBack" },
        "mode": modes("auto-patch", "auto-patch"),
        "change": change(state, "in-place", &["cpu", "memory"],
            json!({"cpu": "500m", "memory": "512Mi"}), json!({"cpu": "300m", "memory": "384Mi"})),
    });
    if !rolled_back.is_empty() {
        status["lastRollback"] = json!({"time": "2026-12-01T11:00:00Z", "reason": "OOMKills",
            "resources": rolled_back, "changeId": "c1"});
    }
    rec(w, &[("app", Some("300m"), Some("384Mi"))], status)
}

#[test]
fn after_a_partial_rollback_applied_and_savings_come_from_the_values_the_pods_run() {
    // Memory went back to 512Mi; CPU stays at 300m on the 3 pods.
    let r = build(
        &[checkout_after("RolledBack", &["memory"])],
        Vec::new(),
        now(),
    );
    let c = &r.cluster;
    assert_eq!(c.cpu.requested, 900);
    assert_eq!(c.cpu.applied, split(600, 0));
    assert_eq!(
        c.cpu.savings,
        Split::default(),
        "300m runs: nothing left to save"
    );
    assert_eq!(c.memory.requested, 3 * 512 * MI);
    assert_eq!(c.memory.applied, Split::default());
    assert_eq!(c.memory.savings, split(3 * 128 * MI, 0));
}

#[test]
fn after_a_full_rollback_nothing_is_applied() {
    let r = build(
        &[checkout_after("RolledBack", &["cpu", "memory"])],
        Vec::new(),
        now(),
    );
    assert_eq!(r.cluster.cpu.applied, Split::default());
    assert_eq!(r.cluster.memory.applied, Split::default());
    assert_eq!(r.cluster.cpu.savings, split(600, 0));
}

#[test]
fn a_released_in_place_change_still_counts_while_the_pods_run_it_and_a_revert_does_not() {
    let r = build(&[checkout_after("Released", &[])], Vec::new(), now());
    assert_eq!(r.cluster.cpu.applied, split(600, 0));
    assert_eq!(r.cluster.memory.applied, split(3 * 128 * MI, 0));
    // Reverted: the pods run the template's values again.
    let mut w = checkout_after("Released", &[]);
    if let Some(rsr) = w.rsr.as_mut()
        && let Some(ch) = rsr.status.change.as_mut()
    {
        ch.revert = true;
        let c = &mut ch.containers[0];
        std::mem::swap(&mut c.from, &mut c.to);
    }
    let r = build(&[w], Vec::new(), now());
    assert_eq!(r.cluster.cpu.requested, 1_500);
    assert_eq!(r.cluster.cpu.applied, Split::default());
    assert_eq!(r.cluster.cpu.savings, split(600, 0));
}

// One time format across logs, status, explain and report (issue 32).
#[test]
fn the_table_and_the_json_write_the_time_in_utc_with_z_and_whole_seconds() {
    let at = now() + chrono::Duration::milliseconds(123_456);
    let report = build(&shop(), Vec::new(), at);
    let table = render(&report);
    let json = serde_json::to_string_pretty(&report).unwrap();
    let first = table.lines().next().unwrap_or_default();
    assert_eq!(first, "Kerf savings report at 2026-12-01T12:02:03Z");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["generatedAt"], "2026-12-01T12:02:03Z");
    for text in [&table, &json] {
        assert!(!text.contains("+00:00") && !text.contains(" UTC"), "{text}");
    }
}
