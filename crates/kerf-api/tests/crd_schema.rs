//! The generated CRDs: structural schemas, bounds the API server's CEL cost checks need,
//! the rules the product documents pin on the schema, printer columns, and drift against
//! `config/crds/`.

use serde_json::{Value, json};

/// The CRDs as `kerf-agent crds` prints them, read back through a YAML parser.
#[allow(clippy::expect_used)]
fn crds() -> Vec<Value> {
    let yaml = kerf_api::crds_yaml().expect("CRDs render");
    yaml.split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_yaml::from_str(d).expect("each CRD document parses as YAML"))
        .collect()
}

#[allow(clippy::expect_used)]
fn crd(kind: &str) -> Value {
    crds()
        .into_iter()
        .find(|c| c["spec"]["names"]["kind"] == kind)
        .expect("CRD present")
}

fn schema(kind: &str) -> Value {
    crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

use kerf_testkit::api::walk_schema as walk;

/// The paths (starting with the kind) of the nodes of both CRDs' schemas that `pick`
/// picks.
fn paths_where(pick: impl Fn(&str, &Value) -> bool) -> Vec<String> {
    let mut picked = Vec::new();
    for kind in ["RightsizingPolicy", "RightsizingRecommendation"] {
        walk(&schema(kind), kind, &mut |path, n| {
            if pick(path, n) {
                picked.push(path.to_owned());
            }
        });
    }
    picked
}

/// The printer columns of `kind`'s CRD.
fn printer_columns(kind: &str) -> Vec<Value> {
    crd(kind)["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The names of `columns`.
fn column_names(columns: &[Value]) -> Vec<&str> {
    columns.iter().filter_map(|c| c["name"].as_str()).collect()
}

fn is_int_or_string(node: &Value) -> bool {
    node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
}

fn all_keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                out.push(k.clone());
                all_keys(v, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| all_keys(v, out)),
        _ => {}
    }
}

fn node<'a>(root: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(root, |n, p| {
        if *p == "[]" {
            &n["items"]
        } else {
            &n["properties"][*p]
        }
    })
}

#[test]
fn crds_have_the_documented_names_and_scopes() {
    let rsp = crd("RightsizingPolicy");
    assert_eq!(rsp["spec"]["group"], "kerf.getkerf.dev");
    assert_eq!(rsp["spec"]["scope"], "Cluster");
    assert_eq!(
        rsp["spec"]["names"]["shortNames"],
        serde_json::json!(["rsp"])
    );
    assert_eq!(rsp["spec"]["versions"][0]["name"], "v1alpha1");
    let rsr = crd("RightsizingRecommendation");
    assert_eq!(rsr["spec"]["scope"], "Namespaced");
    assert_eq!(
        rsr["spec"]["names"]["shortNames"],
        serde_json::json!(["rsr"])
    );
    for kind in ["RightsizingPolicy", "RightsizingRecommendation"] {
        let desc = schema(kind)["description"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(desc.starts_with(&format!("A {kind} ")), "{kind}: {desc}");
        assert!(!desc.contains("Auto-generated"), "{kind}: {desc}");
        let status = &crd(kind)["spec"]["versions"][0]["subresources"]["status"];
        assert!(status.is_object(), "{kind} has a status subresource");
    }
}

// design D2: structural schemas.
#[test]
fn every_schema_node_has_a_type_except_int_or_string() {
    let missing = paths_where(|path, n| {
        let in_junctor =
            path.contains("anyOf[") || path.contains("allOf[") || path.contains("oneOf[");
        n.get("type").is_none() && !is_int_or_string(n) && !in_junctor
    });
    assert!(missing.is_empty(), "nodes without a type: {missing:?}");
}

// design D2: no references, no untyped junctions.
#[test]
fn schemas_use_no_ref_and_no_junctions() {
    for kind in ["RightsizingPolicy", "RightsizingRecommendation"] {
        let mut keys = Vec::new();
        all_keys(&schema(kind), &mut keys);
        for banned in ["$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf"] {
            assert!(!keys.iter().any(|k| k == banned), "{kind} uses {banned}");
        }
    }
}

// design D1
#[test]
fn policy_spec_schema_has_no_default() {
    let spec = &schema("RightsizingPolicy")["properties"]["spec"];
    assert!(spec.is_object());
    let mut keys = Vec::new();
    all_keys(spec, &mut keys);
    assert!(!keys.iter().any(|k| k == "default"), "a default under spec");
}

// design D2: every list is bounded.
#[test]
fn every_array_has_max_items() {
    let unbounded = paths_where(|_, n| {
        n["type"] == "array" && n.get("maxItems").and_then(Value::as_u64).is_none()
    });
    assert!(
        unbounded.is_empty(),
        "arrays without maxItems: {unbounded:?}"
    );
}

// design D2: every string a CEL rule can read is bounded.
#[test]
fn every_string_under_a_cel_rule_has_max_length() {
    for kind in ["RightsizingPolicy", "RightsizingRecommendation"] {
        let root = schema(kind);
        let mut ruled = Vec::new();
        walk(&root, kind, &mut |path, n| {
            if n.get("x-kubernetes-validations").is_some() {
                ruled.push((path.to_owned(), n));
            }
        });
        for (path, n) in ruled {
            walk(n, &path, &mut |p, s| {
                if s["type"] == "string" {
                    assert!(s.get("maxLength").is_some(), "{p} has no maxLength");
                }
            });
        }
    }
}

// rule: AP-32
#[test]
fn a_policy_lists_at_most_16_maintenance_and_freeze_windows() {
    let root = schema("RightsizingPolicy");
    for list in ["maintenanceWindows", "freezeWindows"] {
        let n = node(&root, &["spec", "apply", list]);
        assert_eq!(n["type"], "array", "{list}");
        assert_eq!(n["maxItems"], 16, "{list}");
    }
}

#[test]
fn max_change_percent_is_1_to_100() {
    let root = schema("RightsizingPolicy");
    let n = node(&root, &["spec", "guardrails", "maxChangePercent"]);
    assert_eq!(n["type"], "integer");
    assert_eq!(n["minimum"].as_f64(), Some(1.0));
    assert_eq!(n["maximum"].as_f64(), Some(100.0));
}

// rule: GR-10
#[test]
fn min_confidence_and_throttling_ratio_are_quoted_decimals_from_0_to_1() {
    let root = schema("RightsizingPolicy");
    for path in [
        &["spec", "guardrails", "minConfidence"][..],
        &["spec", "guardrails", "rollback", "throttlingRatio"][..],
    ] {
        let n = node(&root, path);
        assert_eq!(n["type"], "string", "{path:?}");
        assert_eq!(n["pattern"], r"^(0(\.[0-9]+)?|1(\.0+)?)$", "{path:?}");
        assert!(n["maxLength"].as_u64().is_some(), "{path:?}");
    }
    // The pattern itself accepts exactly the decimals from 0 to 1.
    for ok in ["0", "0.7", "0.25", "1", "1.0", "1.000"] {
        assert!(kerf_api::validate::is_unit_decimal(ok), "{ok}");
    }
    for bad in ["1.5", "-0.1", "2", ".5", "0.", "1.01", "0.7x", ""] {
        assert!(!kerf_api::validate::is_unit_decimal(bad), "{bad}");
    }
}

// rule: GR-26
#[test]
fn policy_has_no_tolerance_field() {
    let mut keys = Vec::new();
    all_keys(&schema("RightsizingPolicy"), &mut keys);
    assert!(!keys.is_empty());
    assert!(!keys.iter().any(|k| k.to_lowercase().contains("tolerance")));
}

#[test]
fn every_guardrail_rollback_and_apply_field_of_the_documents_is_in_the_policy() {
    let root = schema("RightsizingPolicy");
    let fields: &[&[&str]] = &[
        &["spec", "guardrails", "learningPeriod"],
        &["spec", "guardrails", "minConfidence"],
        &["spec", "guardrails", "maxChangePercent"],
        &["spec", "guardrails", "minCPU"],
        &["spec", "guardrails", "minMemory"],
        &["spec", "guardrails", "cooldown"],
        &["spec", "guardrails", "rollback", "watchDuration"],
        &["spec", "guardrails", "rollback", "oomKills"],
        &["spec", "guardrails", "rollback", "restarts"],
        &["spec", "guardrails", "rollback", "throttlingRatio"],
        &["spec", "apply", "strategy"],
        &["spec", "apply", "fallbackAfter"],
        &["spec", "apply", "minWindowRemaining"],
        &["spec", "apply", "maintenanceWindows", "[]", "schedule"],
        &["spec", "apply", "maintenanceWindows", "[]", "duration"],
        &["spec", "apply", "maintenanceWindows", "[]", "timeZone"],
        &["spec", "apply", "maintenanceWindows", "[]", "start"],
        &["spec", "apply", "maintenanceWindows", "[]", "end"],
        &["spec", "apply", "freezeWindows", "[]", "schedule"],
        &["spec", "mode"],
        &["spec", "resources", "cpu", "mode"],
        &["spec", "resources", "memory", "mode"],
        &["spec", "hpa", "coordination"],
        &["spec", "hpa", "minTargetUtilization"],
        &["spec", "hpa", "maxTargetUtilization"],
    ];
    for path in fields {
        let n = node(&root, path);
        assert!(n.is_object(), "missing {path:?}");
        assert!(n["description"].is_string(), "undocumented {path:?}");
    }
    let strategies = &node(&root, &["spec", "apply", "strategy"])["enum"];
    assert_eq!(
        strategies,
        &serde_json::json!(["in-place", "rollout", "deferred"])
    );
    let modes = &node(&root, &["spec", "mode"])["enum"];
    assert_eq!(modes, &serde_json::json!(["off", "audit", "auto-patch"]));
    // Only selector and priority may be required; nothing is.
    assert!(root["properties"]["spec"].get("required").is_none());
}

// Issue 32: `kubectl get rsp` shows how many workloads each policy governs (wins), from the
// status field the agent keeps; matched (including those another policy wins) is describe's.
#[test]
fn rsp_printer_columns_include_the_governed_count() {
    let cols = printer_columns("RightsizingPolicy");
    assert_eq!(
        column_names(&cols),
        ["Mode", "Strategy", "Priority", "Valid", "Governed", "Age"]
    );
    let governed = cols.iter().find(|c| c["name"] == "Governed");
    assert_eq!(
        governed.map(|c| (c["jsonPath"].clone(), c["type"].clone())),
        Some((json!(".status.governedWorkloads"), json!("integer")))
    );
    let root = schema("RightsizingPolicy");
    assert_eq!(
        node(&root, &["status", "governedWorkloads"])["type"],
        "integer"
    );
}

// rule: RB-38
#[test]
fn rsr_printer_columns_show_kind_workload_mode_phase_strategy_values_reason_age() {
    let cols = printer_columns("RightsizingRecommendation");
    assert_eq!(
        column_names(&cols),
        [
            "Kind",
            "Workload",
            "Mode",
            "Phase",
            "Strategy",
            "CPU",
            "Memory",
            "Reason",
            "Age",
            "Policy",
            "Confidence",
            "Last Change",
            "Next",
            "Source"
        ]
    );
    // The default view shows the first nine; `-o wide` adds the rest (priority 1).
    let priorities: Vec<i64> = cols
        .iter()
        .map(|c| c["priority"].as_i64().unwrap_or(0))
        .collect();
    assert_eq!(priorities, [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
    let phase = cols.iter().find(|c| c["name"] == "Phase");
    assert_eq!(
        phase.map(|c| c["jsonPath"].clone()),
        Some(".status.phase".into())
    );
    let source = cols.iter().find(|c| c["name"] == "Source");
    assert_eq!(
        source.map(|c| c["jsonPath"].clone()),
        Some(".spec.source".into())
    );
}

#[test]
fn rsp_printer_columns_show_mode_strategy_priority() {
    let cols = printer_columns("RightsizingPolicy");
    let names = column_names(&cols);
    for want in ["Mode", "Strategy", "Priority"] {
        assert!(names.contains(&want), "{names:?}");
    }
}

// rule: EV-22
#[test]
fn condition_reason_schema_accepts_every_event_reason_verbatim() {
    let root = schema("RightsizingRecommendation");
    let reason = node(&root, &["status", "conditions", "[]", "reason"]);
    let pattern = regex::Regex::new(reason["pattern"].as_str().unwrap_or("^$")).unwrap();
    let max = reason["maxLength"].as_u64().unwrap();
    assert!(!kerf_api::wellknown::REASONS.is_empty());
    for r in kerf_api::wellknown::REASONS {
        assert!(pattern.is_match(r) && r.len() as u64 <= max, "{r}");
    }
    assert!(!pattern.is_match("not a reason"));
}

#[test]
fn quantities_are_int_or_string_with_the_kubernetes_pattern() {
    let root = schema("RightsizingPolicy");
    let n = node(&root, &["spec", "guardrails", "minCPU"]);
    assert!(is_int_or_string(n));
    let pattern = regex::Regex::new(n["pattern"].as_str().unwrap()).unwrap();
    for ok in ["10m", "1", "0.5", "512Mi", "1e3", "1.5Gi"] {
        assert!(pattern.is_match(ok), "{ok}");
    }
    for bad in ["ten", "10 m", "1.5GB", ""] {
        assert!(!pattern.is_match(bad), "{bad}");
    }
}

#[test]
fn committed_crds_match_the_types() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/crds/kerf.getkerf.dev.yaml"
    );
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == kerf_api::crds_yaml().unwrap(),
        "config/crds/kerf.getkerf.dev.yaml is out of date: run `make crds`"
    );
}
