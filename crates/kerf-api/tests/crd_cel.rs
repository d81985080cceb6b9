//! Every CEL rule (`x-kubernetes-validations`) of the generated CRDs compiles, and each is
//! evaluated against an object that passes and one that fails (design D2). The rules are
//! collected by walking the whole schema, so a rule added later without a case here fails
//! `every_rule_has_cases`.

use kube::CustomResourceExt;
use kube_cel::{Validator, compile_schema};
use serde_json::{Value, json};

fn schema_of(crd: &impl serde::Serialize) -> Value {
    let v = serde_json::to_value(crd).unwrap_or_default();
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn schemas() -> Vec<(&'static str, Value)> {
    vec![
        (
            "RightsizingPolicy",
            schema_of(&kerf_api::RightsizingPolicy::crd()),
        ),
        (
            "RightsizingRecommendation",
            schema_of(&kerf_api::RightsizingRecommendation::crd()),
        ),
    ]
}

/// Every rule with the path of the schema node that carries it.
fn all_rules() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (kind, schema) in schemas() {
        kerf_testkit::api::walk_schema(&schema, kind, &mut |path, node| {
            let rules = node
                .get("x-kubernetes-validations")
                .and_then(Value::as_array);
            out.extend(
                rules
                    .into_iter()
                    .flatten()
                    .map(|r| (path.to_owned(), r.clone())),
            );
        });
    }
    out
}

/// A spec fragment that passes a rule and one that fails it, placed at `at`.
struct Case {
    rule_starts_with: &'static str,
    good: Vec<Value>,
    bad: Vec<Value>,
}

/// The cases of every rule.
fn cases() -> Vec<Case> {
    [window_and_hpa_cases(), selector_cases(), canary_cases()]
        .into_iter()
        .flatten()
        .collect()
}

/// The rules of maintenance and freeze windows and of the HPA settings.
fn window_and_hpa_cases() -> Vec<Case> {
    vec![
        Case {
            rule_starts_with: "(has(self.schedule) && has(self.duration)",
            good: vec![
                json!({"schedule": "0 2 * * 0", "duration": "3h", "timeZone": "Europe/Berlin"}),
                json!({"schedule": "0 2 * * 0", "duration": "3h"}),
                json!({"start": "2026-12-20T00:00:00Z", "end": "2026-12-21T00:00:00Z"}),
            ],
            bad: vec![
                json!({"schedule": "0 2 * * 0", "duration": "3h", "start": "2026-12-20T00:00:00Z"}),
                json!({"schedule": "0 2 * * 0"}),
                json!({"duration": "3h"}),
                json!({"start": "2026-12-20T00:00:00Z"}),
                json!({"start": "2026-12-20T00:00:00Z", "end": "2026-12-21T00:00:00Z", "timeZone": "UTC"}),
                json!({}),
            ],
        },
        Case {
            rule_starts_with: "!has(self.start) || !has(self.end)",
            good: vec![json!({"start": "2026-12-20T00:00:00Z", "end": "2026-12-21T00:00:00Z"})],
            bad: vec![
                json!({"start": "2026-12-21T00:00:00Z", "end": "2026-12-20T00:00:00Z"}),
                json!({"start": "2026-12-21T00:00:00Z", "end": "2026-12-21T00:00:00Z"}),
            ],
        },
        Case {
            rule_starts_with: "!has(self.minTargetUtilization)",
            good: vec![
                json!({"minTargetUtilization": 50, "maxTargetUtilization": 90}),
                json!({"minTargetUtilization": 70, "maxTargetUtilization": 70}),
                json!({"minTargetUtilization": 95}),
            ],
            bad: vec![json!({"minTargetUtilization": 90, "maxTargetUtilization": 50})],
        },
    ]
}

/// The rules of the policy's selector.
fn selector_cases() -> Vec<Case> {
    vec![
        Case {
            rule_starts_with: "has(self.selector)",
            good: vec![json!({"all": true})],
            bad: vec![json!(null)],
        },
        Case {
            rule_starts_with: "(has(self.all) && self.all) || has(self.namespaces)",
            good: vec![
                json!({"all": true}),
                json!({"all": true, "kinds": ["Deployment"]}),
                json!({"namespaces": ["shop"]}),
                json!({"namespaceSelector": {"matchLabels": {"team": "shop"}}}),
                json!({"workloadSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}),
            ],
            bad: vec![
                json!({}),
                json!({"kinds": ["Deployment"]}),
                json!({"all": false}),
                json!({"all": false, "kinds": ["StatefulSet"]}),
            ],
        },
        Case {
            rule_starts_with: "!has(self.namespaces) || size(self.namespaces) > 0",
            good: vec![json!({"namespaces": ["shop"]}), json!({"all": true})],
            bad: vec![
                json!({"namespaces": []}),
                json!({"namespaces": [], "workloadSelector": {"matchLabels": {"a": "b"}}}),
            ],
        },
        Case {
            rule_starts_with: "!has(self.all) || !self.all",
            good: vec![
                json!({"all": true, "kinds": ["DaemonSet"]}),
                json!({"all": false, "namespaces": ["shop"]}),
            ],
            bad: vec![
                json!({"all": true, "namespaces": ["shop"]}),
                json!({"all": true, "namespaceSelector": {"matchLabels": {"a": "b"}}}),
                json!({"all": true, "workloadSelector": {"matchLabels": {"a": "b"}}}),
            ],
        },
        Case {
            rule_starts_with: "(has(self.matchLabels) && size(self.matchLabels) > 0)",
            good: vec![
                json!({"matchLabels": {"app": "web"}}),
                json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
            ],
            bad: vec![
                json!({}),
                json!({"matchLabels": {}}),
                json!({"matchExpressions": []}),
                json!({"matchLabels": {}, "matchExpressions": []}),
            ],
        },
    ]
}

/// The rules of the canary.
fn canary_cases() -> Vec<Case> {
    vec![
        Case {
            rule_starts_with: "!has(self.pods) || string(self.pods)",
            good: vec![
                json!({"pods": 1, "duration": "10m"}),
                json!({"pods": 3, "duration": "10m"}),
                json!({"pods": "1%", "duration": "10m"}),
                json!({"pods": "25%", "duration": "10m"}),
                json!({"pods": "100%", "duration": "10m"}),
                json!({"pods": "3", "duration": "10m"}),
                json!({"duration": "10m"}),
            ],
            bad: vec![
                json!({"pods": 0, "duration": "10m"}),
                json!({"pods": -2, "duration": "10m"}),
                json!({"pods": "0%", "duration": "10m"}),
                json!({"pods": "101%", "duration": "10m"}),
                json!({"pods": "0", "duration": "10m"}),
                json!({"pods": "25 %", "duration": "10m"}),
                json!({"pods": "half", "duration": "10m"}),
            ],
        },
        Case {
            rule_starts_with: "duration(self.duration) > duration('0s')",
            good: vec![
                json!({"pods": 1, "duration": "10m"}),
                json!({"pods": 1, "duration": "1h30m"}),
                json!({"pods": 1, "duration": "90s"}),
            ],
            bad: vec![
                json!({"pods": 1, "duration": "0s"}),
                json!({"pods": 1, "duration": "0m"}),
            ],
        },
    ]
}

/// A policy object with `fragment` placed at the schema node `path` (a rule's location).
fn policy_with(path: &str, fragment: &Value) -> Value {
    let spec = match path {
        "RightsizingPolicy.spec.apply.maintenanceWindows[]" => {
            json!({"apply": {"strategy": "deferred", "maintenanceWindows": [fragment]}})
        }
        "RightsizingPolicy.spec.apply.freezeWindows[]" => {
            json!({"apply": {"freezeWindows": [fragment]}})
        }
        "RightsizingPolicy.spec.hpa" => json!({"hpa": fragment}),
        "RightsizingPolicy.spec.apply.canary" => json!({"apply": {"canary": fragment}}),
        // The rule on spec reads the selector: `null` stands for "no selector".
        "RightsizingPolicy.spec" if fragment.is_null() => json!({}),
        "RightsizingPolicy.spec" => json!({"selector": fragment}),
        "RightsizingPolicy.spec.selector" => json!({"selector": fragment}),
        "RightsizingPolicy.spec.selector.namespaceSelector" => {
            json!({"selector": {"namespaceSelector": fragment}})
        }
        "RightsizingPolicy.spec.selector.workloadSelector" => {
            json!({"selector": {"workloadSelector": fragment}})
        }
        other => json!({"unplaced": other}),
    };
    let mut spec = spec;
    if let Some(s) = spec.as_object_mut()
        && !path.starts_with("RightsizingPolicy.spec.selector")
        && path != "RightsizingPolicy.spec"
    {
        s.insert("selector".into(), json!({"all": true}));
    }
    json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1",
        "kind": "RightsizingPolicy",
        "metadata": {"name": "p"},
        "spec": spec,
    })
}

// design D2
#[test]
fn every_rule_compiles() {
    let rules = all_rules();
    assert!(rules.len() >= 5, "{rules:?}");
    for (path, rule) in &rules {
        let compiled =
            compile_schema(&json!({"type": "object", "x-kubernetes-validations": [rule]}));
        let errors = compiled.compilation_errors();
        assert!(errors.is_empty(), "{path}: {rule}: {errors:?}");
        assert!(
            rule["message"].is_string(),
            "{path}: rule without a message"
        );
    }
    for (kind, schema) in schemas() {
        assert!(!compile_schema(&schema).has_errors(), "{kind}");
    }
}

#[test]
fn every_rule_has_cases() {
    let cases = cases();
    for (path, rule) in all_rules() {
        let text = rule["rule"].as_str().unwrap_or_default();
        let case = cases.iter().find(|c| text.starts_with(c.rule_starts_with));
        assert!(case.is_some(), "no case for the rule at {path}: {text}");
        let placed = policy_with(&path, &json!({}));
        assert!(
            placed["spec"].get("unplaced").is_none(),
            "no placement for {path}"
        );
    }
}

// design D2, rule: AP-32
#[test]
fn every_rule_passes_its_good_objects_and_rejects_its_bad_ones() {
    let validator = Validator::new();
    let policy = schema_of(&kerf_api::RightsizingPolicy::crd());
    let compiled = compile_schema(&policy);
    for (path, rule) in all_rules() {
        let text = rule["rule"].as_str().unwrap_or_default().to_owned();
        let Some(case) = cases()
            .into_iter()
            .find(|c| text.starts_with(c.rule_starts_with))
        else {
            continue;
        };
        for good in &case.good {
            let obj = policy_with(&path, good);
            let res = validator.validate_compiled(&compiled, &obj, None);
            // Another rule on the same node may reject the fragment; this rule must not.
            let by_this: Vec<_> = res
                .err()
                .into_iter()
                .flatten()
                .filter(|e| e.rule == text)
                .collect();
            assert!(
                by_this.is_empty(),
                "{path}: {good} should pass {text}: {by_this:?}"
            );
        }
        for bad in &case.bad {
            let obj = policy_with(&path, bad);
            let errs = validator.validate_compiled(&compiled, &obj, None).err();
            let by_this: Vec<_> = errs
                .into_iter()
                .flatten()
                .filter(|e| e.rule == text)
                .collect();
            assert_eq!(by_this.len(), 1, "{path}: {bad} should fail {text}");
            assert_eq!(
                by_this[0].message,
                rule["message"].as_str().unwrap_or_default()
            );
        }
    }
}

#[test]
fn the_documented_example_policy_passes_every_rule() {
    let obj = json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1",
        "kind": "RightsizingPolicy",
        "metadata": {"name": "example"},
        "spec": {
            "priority": 10,
            "selector": {"namespaces": ["payments-prod"], "kinds": ["Deployment", "StatefulSet"]},
            "mode": "auto-patch",
            "guardrails": {"learningPeriod": "336h", "minConfidence": "0.8", "maxChangePercent": 30,
                           "minCPU": "50m", "minMemory": "64Mi", "cooldown": "48h",
                           "rollback": {"watchDuration": "1h", "oomKills": 1, "restarts": 3, "throttlingRatio": "0.2"}},
            "apply": {
                "strategy": "deferred",
                "maintenanceWindows": [
                    {"schedule": "0 2 * * 0", "duration": "3h", "timeZone": "Europe/Berlin"},
                    {"start": "2026-12-20T00:00:00Z", "end": "2026-12-21T00:00:00Z"}
                ],
                "freezeWindows": [{"schedule": "0 18 * * 5", "duration": "62h", "timeZone": "Europe/Berlin"}]
            },
            "hpa": {"coordination": true, "minTargetUtilization": 50, "maxTargetUtilization": 90}
        }
    });
    let schema = schema_of(&kerf_api::RightsizingPolicy::crd());
    let res = Validator::new().validate(&schema, &obj, None);
    assert!(res.is_ok(), "{res:?}");
    let parsed: kerf_api::RightsizingPolicy = serde_json::from_value(obj).unwrap();
    assert!(kerf_api::validate::validate_policy(&parsed.spec).is_empty());
}
