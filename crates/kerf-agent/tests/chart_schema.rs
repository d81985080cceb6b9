//! `charts/kerf-agent/values.schema.json`: helm refuses unknown keys and wrong types
//! before rendering anything, naming the key; the defaults and the Makefile's chart-lint
//! options still render; `clusterDefaults` and the freeze windows follow the
//! RightsizingPolicy CRD.
//!
//! Needs helm (see chart_support): a missing helm fails the tests.

mod chart_support;

use std::process::{Command, Output};

use serde_json::{Map, Value as Json, json};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// `helm <verb> kerf-agent charts/kerf-agent -n kerf-system --set clusterName=prod <args>`.
#[allow(clippy::panic)] // test helper: helm that does not start fails the test
fn helm(verb: &[&str], args: &[&str]) -> Output {
    let out = Command::new(chart_support::helm())
        .args(verb)
        .arg("kerf-agent")
        .arg(chart_support::chart_dir())
        .args(["-n", "kerf-system", "--set", "clusterName=prod"])
        .args(args)
        .env("KUBECONFIG", "/nonexistent")
        .output();
    match out {
        Ok(o) => o,
        Err(e) => panic!("helm {verb:?} did not run: {e}"),
    }
}

/// Asserts that `helm template` and `helm install --dry-run=client` both refuse `args`
/// with a schema error that contains every one of `named`.
fn assert_refused(args: &[&str], named: &[&str]) {
    for verb in [&["template"][..], &["install", "--dry-run=client"][..]] {
        let out = helm(verb, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "helm {verb:?} {args:?} rendered:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            stderr.contains("don't meet the specifications of the schema"),
            "helm {verb:?} {args:?}: not a schema error: {stderr}"
        );
        for n in named {
            assert!(
                stderr.contains(n),
                "helm {verb:?} {args:?}: error does not name {n}: {stderr}"
            );
        }
        assert!(out.stdout.is_empty(), "nothing is rendered");
    }
}

#[test]
fn an_unknown_key_is_refused_with_its_name() {
    // `hub.url` is the value; `hub.URL` used to be ignored silently.
    assert_refused(
        &["--set", "hub.URL=https://hub.example.com"],
        &["'/hub'", "'URL' not allowed"],
    );
    assert_refused(&["--set", "tolerence=3"], &["'tolerence' not allowed"]);
    // The agent serves /mutate only; the path is not a value.
    assert_refused(&["--set", "webhook.path=/hook"], &["'path' not allowed"]);
    assert_refused(
        &["--set", "webhook.certManager.issuerRef.nme=my-issuer"],
        &["'/webhook/certManager/issuerRef'", "'nme' not allowed"],
    );
}

#[test]
fn a_wrong_type_is_refused_with_the_key() {
    assert_refused(
        &["--set", "tolerance=abc"],
        &["'/tolerance'", "want number"],
    );
    assert_refused(&["--set", "tolerance=100"], &["'/tolerance'"]);
    assert_refused(&["--set", "replicas=two"], &["'/replicas'", "want integer"]);
    assert_refused(
        &["--set", "hub.pollInterval=1 minute"],
        &["'/hub/pollInterval'", "does not match pattern"],
    );
    assert_refused(
        &["--set", "log.format=xml"],
        &["'/log/format'", "'text', 'json'"],
    );
}

#[test]
fn cluster_defaults_are_checked_against_the_policy_spec() {
    // A typo of `guardrails` would otherwise reach the agent's file.
    assert_refused(
        &[
            "--set-json",
            r#"clusterDefaults={"guardrail":{"cooldown":"12h"}}"#,
        ],
        &["'/clusterDefaults'", "'guardrail' not allowed"],
    );
    assert_refused(
        &["--set-json", r#"clusterDefaults={"mode":"auto"}"#],
        &["'/clusterDefaults/mode'"],
    );
    assert_refused(
        &[
            "--set-json",
            r#"clusterDefaults={"guardrails":{"maxChangePercent":150}}"#,
        ],
        &["'/clusterDefaults/guardrails/maxChangePercent'"],
    );
    // selector and priority belong to a RightsizingPolicy only.
    assert_refused(
        &["--set-json", r#"clusterDefaults={"priority":3}"#],
        &["'priority' not allowed"],
    );
    assert_refused(
        &[
            "--set-json",
            r#"freeze.windows=[{"schedule":"0 18 * * 5"}]"#,
        ],
        &["'/freeze/windows/0'", "missing property 'duration'"],
    );
}

#[test]
fn defaults_and_full_values_render() {
    let out = helm(&["template"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let full = [
        "--set-json",
        r#"clusterDefaults={"mode":"auto-patch","resources":{"memory":{"mode":"audit"}},"guardrails":{"minCPU":"50m","minMemory":"64Mi","maxChangePercent":30,"rollback":{"oomKills":2,"throttlingRatio":"0.3"}},"apply":{"strategy":"deferred","maintenanceWindows":[{"schedule":"0 2 * * *","duration":"2h","timeZone":"Europe/Berlin"}]},"hpa":{"coordination":false},"recommendation":{"cpuPercentile":95,"limits":"Ratio"}}"#,
        "--set-json",
        r#"freeze.windows=[{"schedule":"0 18 * * 5","duration":"62h","timeZone":"Europe/Berlin"},{"start":"2026-12-23T00:00:00Z","end":"2027-01-02T00:00:00Z"}]"#,
        "--set",
        "tolerance=2.5",
        "--set",
        "outbox.maxBytes=16Mi",
        "--set",
        "hub.url=https://hub.example.com",
        "--set-json",
        r#"webhook.certManager={"enabled":true,"issuerRef":{"name":"ca","kind":"ClusterIssuer"}}"#,
        "--set-json",
        r#"tolerations=[{"key":"k","operator":"Exists"}]"#,
        "--set",
        "podLabels.team=platform",
        "--set",
        "global.imageRegistry=registry.example",
    ];
    let out = helm(&["template"], &full);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_makefile_chart_lint_options_render() {
    let root = chart_support::chart_dir().join("../..");
    let out = Command::new("make")
        .arg("-C")
        .arg(&root)
        .arg("chart-lint")
        .arg(format!("HELM={}", chart_support::helm().display()))
        .output()
        .unwrap_or_else(|e| panic!("make did not run (install make): {e}"));
    assert!(
        out.status.success(),
        "make chart-lint: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// values.schema.json.
fn schema() -> Res<Json> {
    let text = std::fs::read_to_string(chart_support::chart_dir().join("values.schema.json"))?;
    Ok(serde_json::from_str(&text)?)
}

/// A CRD schema as the chart's schema states it: no descriptions, formats, nullability
/// or CEL rules (helm does not read them), and every object closed to unknown keys.
fn closed(s: &Json) -> Json {
    let Some(map) = s.as_object() else {
        return s.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        match k.as_str() {
            "nullable"
            | "format"
            | "description"
            | "x-kubernetes-validations"
            | "x-kubernetes-int-or-string" => {}
            "properties" => {
                let props = v.as_object().into_iter().flatten();
                let props = props.map(|(pk, pv)| (pk.clone(), closed(pv))).collect();
                out.insert(k.clone(), Json::Object(props));
            }
            "items" => {
                out.insert(k.clone(), closed(v));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if map.contains_key("properties") {
        out.insert("additionalProperties".into(), Json::Bool(false));
    }
    if map.get("x-kubernetes-int-or-string") == Some(&Json::Bool(true)) {
        out.insert("type".into(), json!(["string", "integer"]));
    }
    Json::Object(out)
}

/// `definitions.clusterDefaults` and `definitions.window` as the policy CRD defines them.
fn defs_from_crd() -> Res<(Json, Json)> {
    let root = chart_support::chart_dir().join("../..");
    let text = std::fs::read_to_string(root.join("config/crds/kerf.getkerf.dev.yaml"))?;
    let crd = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).map_err(|e| e.to_string()))
        .collect::<Result<Vec<Json>, _>>()?
        .into_iter()
        .find(|d| d["spec"]["names"]["kind"] == "RightsizingPolicy")
        .ok_or("no RightsizingPolicy CRD")?;
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let mut defaults = closed(spec);
    if let Some(props) = defaults["properties"].as_object_mut() {
        props.remove("selector");
        props.remove("priority");
    }
    let window = closed(&spec["properties"]["apply"]["properties"]["freezeWindows"]["items"]);
    Ok((defaults, window))
}

#[test]
fn cluster_defaults_schema_follows_the_policy_crd() {
    let (defaults, window) = defs_from_crd().unwrap();
    let mut s = schema().unwrap();
    if std::env::var_os("KERF_BLESS_CHART_SCHEMA").is_some() {
        s["definitions"]["clusterDefaults"] = defaults.clone();
        s["definitions"]["window"] = window.clone();
        let path = chart_support::chart_dir().join("values.schema.json");
        let text = serde_json::to_string_pretty(&s).unwrap() + "\n";
        std::fs::write(path, text).unwrap();
    }
    let hint = "values.schema.json differs from the RightsizingPolicy CRD: \
                run `KERF_BLESS_CHART_SCHEMA=1 cargo test -p kerf-agent --test chart_schema`";
    assert!(s["definitions"]["clusterDefaults"] == defaults, "{hint}");
    assert!(s["definitions"]["window"] == window, "{hint}");
    assert_eq!(
        s["properties"]["clusterDefaults"]["$ref"],
        "#/definitions/clusterDefaults"
    );
    // The guardrails of the CRD are all there and closed.
    let g = &s["definitions"]["clusterDefaults"]["properties"]["guardrails"];
    assert_eq!(g["additionalProperties"], false);
    assert!(g["properties"]["rollback"]["properties"]["oomKills"].is_object());
}

/// Paths of every key the schema lists under a closed object, and whether values.yaml
/// has it. Keys that default to absent are allowed by the list of optional ones.
fn missing_in_values(schema: &Json, values: &Json, path: &str, out: &mut Vec<String>) {
    let Some(props) = schema["properties"].as_object() else {
        return;
    };
    if schema.get("$ref").is_some() || schema["additionalProperties"] != false {
        return;
    }
    for (k, sub) in props {
        let here = format!("{path}.{k}").trim_start_matches('.').to_owned();
        match values.get(k) {
            Some(v) => missing_in_values(sub, v, &here, out),
            None => out.push(here),
        }
    }
}

#[test]
fn every_key_of_the_schema_is_a_value_of_the_chart() {
    let s = schema().unwrap();
    let text = std::fs::read_to_string(chart_support::chart_dir().join("values.yaml")).unwrap();
    let values: Json = serde_yaml::from_str(&text).unwrap();
    let mut missing = Vec::new();
    missing_in_values(&s, &values, "", &mut missing);
    // Optional: globals of a parent chart, and the issuer reference cert-manager reads.
    let optional = [
        "global",
        "webhook.certManager.issuerRef.name",
        "webhook.certManager.issuerRef.kind",
        "webhook.certManager.issuerRef.group",
    ];
    missing.retain(|m| !optional.contains(&m.as_str()));
    assert!(
        missing.is_empty(),
        "in the schema but not in values.yaml: {missing:?}"
    );
}

#[test]
fn a_recommendation_source_that_is_not_one_is_refused() {
    assert_refused(
        &["--set", "recommendations.source=vpaa"],
        &["'/recommendations/source'", "vpa"],
    );
}
