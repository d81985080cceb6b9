use super::*;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn vpa(mode: Option<&str>, status: serde_json::Value) -> Vpa {
    let mut spec = serde_json::json!({
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    });
    if let Some(m) = mode {
        spec["updatePolicy"] = serde_json::json!({"updateMode": m});
    }
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-vpa", "namespace": "shop", "uid": "u-1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
        "status": status,
    }))
    .unwrap()
}

fn status(target: (&str, &str), lower: (&str, &str), upper: (&str, &str)) -> serde_json::Value {
    serde_json::json!({
        "recommendation": {"containerRecommendations": [{
            "containerName": "app",
            "target": {"cpu": target.0, "memory": target.1},
            "lowerBound": {"cpu": lower.0, "memory": lower.1},
            "upperBound": {"cpu": upper.0, "memory": upper.1},
        }]},
        "conditions": [{"type": "RecommendationProvided", "status": "True",
                        "lastTransitionTime": "2026-01-02T00:00:00Z"}],
    })
}

fn current(req: (&str, &str), lim: (&str, &str)) -> BTreeMap<String, CurrentValues> {
    let v = |c: &str, m: &str| ResourceValues {
        cpu: Some(Quantity(c.to_owned())),
        memory: Some(Quantity(m.to_owned())),
    };
    BTreeMap::from([(
        "app".to_owned(),
        CurrentValues {
            requests: v(req.0, req.1),
            limits: v(lim.0, lim.1),
        },
    )])
}

fn rec_of(v: &Vpa, limits: LimitsHandling, now: &str) -> Recommendation {
    let cur = current(("500m", "512Mi"), ("1", "1Gi"));
    recommendation(v, WorkloadKind::Deployment, &cur, limits, at(now))
}

#[test]
fn target_values_are_the_recommended_requests_with_coverage_and_generated_at() {
    let v = vpa(
        Some("Off"),
        status(("250m", "256Mi"), ("200m", "200Mi"), ("300m", "312Mi")),
    );
    let r = rec_of(&v, LimitsHandling::Keep, "2026-01-05T00:00:00Z");
    assert_eq!(r.workload.namespace, "shop");
    assert_eq!(r.workload.kind, "Deployment");
    assert_eq!(r.workload.name, "web");
    let c = &r.containers[0];
    assert_eq!(c.name, "app");
    assert_eq!(c.requests.cpu.as_ref().unwrap().as_str(), "250m");
    assert_eq!(c.requests.memory.as_ref().unwrap().as_str(), "256Mi");
    assert!(c.limits.is_empty(), "Keep leaves limits");
    assert_eq!(r.generated_at, at("2026-01-02T00:00:00Z"));
    assert_eq!(r.data_coverage.covered.as_str(), "96h");
    assert_eq!(r.data_coverage.window.as_str(), VPA_WINDOW);
    assert_eq!(r.settings.limits, Some(LimitsHandling::Keep));
    // spread: cpu (300-200)/250 = 0.4, memory (312-200)/256 = 0.4375 → 1/1.4375
    assert_eq!(r.confidence.as_str(), "0.70");
}

#[test]
fn coverage_is_capped_at_the_vpa_window_and_never_negative() {
    let v = vpa(
        Some("Off"),
        status(("250m", "256Mi"), ("250m", "256Mi"), ("250m", "256Mi")),
    );
    let old = rec_of(&v, LimitsHandling::Keep, "2026-03-01T00:00:00Z");
    assert_eq!(old.data_coverage.covered.as_str(), "192h");
    let before = rec_of(&v, LimitsHandling::Keep, "2025-12-01T00:00:00Z");
    assert_eq!(before.data_coverage.covered.as_str(), "0h");
    // Equal bounds: no spread, full confidence.
    assert_eq!(old.confidence.as_str(), "1.00");
}

#[test]
fn a_narrow_spread_gives_more_confidence_than_a_wide_one() {
    let narrow = vpa(
        Some("Off"),
        status(("1", "1Gi"), ("900m", "900Mi"), ("1100m", "1100Mi")),
    );
    let wide = vpa(
        Some("Off"),
        status(("1", "1Gi"), ("100m", "100Mi"), ("4", "4Gi")),
    );
    let n = rec_of(&narrow, LimitsHandling::Keep, "2026-01-05T00:00:00Z");
    let w = rec_of(&wide, LimitsHandling::Keep, "2026-01-05T00:00:00Z");
    assert_eq!(n.confidence.as_str(), "0.83");
    assert_eq!(w.confidence.as_str(), "0.20");
}

#[test]
fn the_id_stays_while_the_numbers_stay_and_changes_with_them() {
    let a = vpa(
        Some("Off"),
        status(("250m", "256Mi"), ("200m", "200Mi"), ("300m", "312Mi")),
    );
    let b = vpa(
        Some("Off"),
        status(("250m", "256Mi"), ("100m", "100Mi"), ("900m", "900Mi")),
    );
    let c = vpa(
        Some("Off"),
        status(("300m", "256Mi"), ("200m", "200Mi"), ("300m", "312Mi")),
    );
    let id = |v: &Vpa, now| rec_of(v, LimitsHandling::Keep, now).recommendation_id;
    let first = id(&a, "2026-01-05T00:00:00Z");
    assert!(first.starts_with("vpa-") && first.len() == 20, "{first}");
    assert_eq!(first, id(&a, "2026-01-06T00:00:00Z"), "time alone");
    assert_eq!(first, id(&b, "2026-01-05T00:00:00Z"), "bounds alone");
    assert_ne!(first, id(&c, "2026-01-05T00:00:00Z"), "a new target");
}

#[test]
fn the_limits_rule_of_the_policy_is_applied() {
    let v = vpa(
        Some("Initial"),
        status(("250m", "256Mi"), ("200m", "200Mi"), ("300m", "312Mi")),
    );
    let ratio = rec_of(&v, LimitsHandling::Ratio, "2026-01-05T00:00:00Z");
    let c = &ratio.containers[0];
    // current 500m/1 and 512Mi/1Gi: the limit keeps twice the request.
    assert_eq!(c.limits.cpu.as_ref().unwrap().as_str(), "500m");
    assert_eq!(c.limits.memory.as_ref().unwrap().as_str(), "512Mi");
    let remove = rec_of(&v, LimitsHandling::Remove, "2026-01-05T00:00:00Z");
    assert_eq!(remove.containers[0].remove_limits, Resource::ALL.to_vec());
    assert_eq!(remove.settings.limits, Some(LimitsHandling::Remove));
}

#[test]
fn only_off_and_initial_leave_pods_to_kerf_every_other_mode_holds() {
    let st = status(("250m", "256Mi"), ("200m", "200Mi"), ("300m", "312Mi"));
    for mode in ["Off", "Initial"] {
        assert_eq!(vpa(Some(mode), st.clone()).hold(), None, "{mode}");
    }
    for mode in [
        "Recreate",
        "Auto",
        "InPlaceOrRecreate",
        "InPlace",
        "Sometimes",
    ] {
        let hold = vpa(Some(mode), st.clone()).hold().unwrap_or_default();
        assert!(hold.contains("shop/web-vpa"), "{hold}");
        assert!(hold.contains(&format!("updateMode {mode}")), "{hold}");
    }
    // VPA reads an unset mode as Recreate.
    let unset = vpa(None, st).hold().unwrap_or_default();
    assert!(
        unset.contains("updateMode unset, VPA's default Recreate"),
        "{unset}"
    );
}

#[test]
fn only_kinds_kerf_manages_are_targets() {
    let mut v = vpa(Some("Off"), serde_json::Value::Null);
    assert_eq!(v.target(), Some((WorkloadKind::Deployment, "web")));
    v.spec.target_ref = Some(TargetRef {
        kind: "CronJob".into(),
        name: "nightly".into(),
    });
    assert_eq!(v.target(), None);
    v.spec.target_ref = None;
    assert_eq!(v.target(), None);
}

#[test]
fn a_vpa_without_a_recommendation_gives_no_containers_and_no_confidence() {
    let v = vpa(Some("Off"), serde_json::json!({}));
    let r = rec_of(&v, LimitsHandling::Keep, "2026-01-05T00:00:00Z");
    assert!(r.containers.is_empty());
    assert_eq!(r.confidence.as_str(), "0.00");
    // No RecommendationProvided condition: the VPA's creation.
    assert_eq!(r.generated_at, at("2026-01-01T00:00:00Z"));
    let none = vpa(Some("Off"), serde_json::Value::Null);
    assert!(
        rec_of(&none, LimitsHandling::Keep, "2026-01-05T00:00:00Z")
            .containers
            .is_empty()
    );
}

#[test]
fn a_bad_quantity_is_passed_on_for_the_rsr_check_and_zeroes_confidence() {
    let v = vpa(
        Some("Off"),
        status(("12Q", "256Mi"), ("200m", "200Mi"), ("300m", "312Mi")),
    );
    let r = rec_of(&v, LimitsHandling::Ratio, "2026-01-05T00:00:00Z");
    let c = &r.containers[0];
    assert_eq!(c.requests.cpu.as_ref().unwrap().as_str(), "12Q");
    assert_eq!(
        c.limits.cpu, None,
        "no ratio from a value that does not parse"
    );
    assert_eq!(r.confidence.as_str(), "0.00");
    let spec = kerf_api::rsr::RightsizingRecommendationSpec {
        workload_ref: kerf_api::rsr::WorkloadRef {
            kind: WorkloadKind::Deployment,
            name: "web".into(),
            uid: None,
        },
        recommendation_id: r.recommendation_id.clone(),
        generated_at: None,
        confidence: Some(r.confidence.clone()),
        data_coverage: None,
        settings: None,
        containers: r.containers.clone(),
        approval: None,
        source: None,
    };
    let refused = kerf_api::validate::validate_recommendation_spec(&spec);
    assert!(!refused.is_empty(), "the rsr check names the bad quantity");
}

#[test]
fn a_status_of_the_wrong_shape_does_not_decode_rather_than_panic() {
    let bad = serde_json::json!({
        "metadata": {"name": "x", "namespace": "shop"},
        "spec": {"targetRef": {"kind": "Deployment", "name": "web"}},
        "status": {"recommendation": {"containerRecommendations": [{"containerName": "app", "target": {"cpu": 5}}]}},
    });
    assert!(serde_json::from_value::<Vpa>(bad).is_err());
}
