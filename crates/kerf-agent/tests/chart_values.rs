//! The Helm chart `charts/kerf-agent`, read as text: its defaults, and that every value
//! reaches the agent through a setting `kerf-agent run` reads. The Deployment's env is
//! resolved against values.yaml the way the template does, and the agent's own
//! `--print-settings` shows what it makes of them.

mod chart_support;

use std::collections::BTreeMap;
use std::process::Command;

use chart_support::chart_dir;
use serde_yaml::Value;

fn read(rel: &str) -> Result<String, std::io::Error> {
    std::fs::read_to_string(chart_dir().join(rel))
}

fn values() -> Result<Value, Box<dyn std::error::Error>> {
    Ok(serde_yaml::from_str(&read("values.yaml")?)?)
}

/// The value at a dotted path of values.yaml (`onDelete.settle`).
fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

/// The string at a dotted path.
fn text_at<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    at(v, path).and_then(Value::as_str)
}

/// Asserts the chart's template `file` contains `needle`.
#[allow(clippy::unwrap_used)] // test helper: a failure fails the test
fn assert_template_has(file: &str, needle: &str) {
    let text = read(&format!("templates/{file}")).unwrap();
    assert!(text.contains(needle), "{file} lacks {needle:?}");
}

/// Asserts the agent's environment variable `env` is set from `.Values.<path>`.
#[allow(clippy::unwrap_used)] // test helper: a failure fails the test
fn assert_env_reads(env: &str, path: &str) {
    let raw = env_value(env).unwrap();
    assert!(raw.contains(&format!(".Values.{path}")), "{env}: {raw}");
}

/// `.Values.a.b` or `.Release.Namespace` inside one `{{ ... }}` expression.
fn resolve_expr(expr: &str, values: &Value) -> Option<String> {
    if expr.contains(".Release.Namespace") {
        return Some("kerf-system".into());
    }
    let start = expr.rfind(".Values.")? + ".Values.".len();
    let path: String = expr[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
        .collect();
    match at(values, &path)? {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A template value with every `{{ ... }}` replaced; `None` when one cannot be resolved
/// (an optional variable set only inside `with`).
fn render_value(raw: &str, values: &Value) -> Option<String> {
    let mut out = String::new();
    let mut rest = raw.trim().trim_matches('"');
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let close = rest[open..].find("}}")? + open;
        out.push_str(&resolve_expr(&rest[open + 2..close], values)?);
        rest = &rest[close + 2..];
    }
    out.push_str(rest);
    Some(out)
}

/// The `KERF_*` env entries of the Deployment template: name and raw value text. An entry
/// taken from the ConfigMap (`configMapKeyRef`, the decision settings) has the raw text of
/// the ConfigMap template's key.
fn template_env() -> Result<Vec<(String, String)>, std::io::Error> {
    let text = read("templates/deployment.yaml")?;
    let lines: Vec<&str> = text.lines().collect();
    let mut env: Vec<(String, String)> = lines
        .windows(2)
        .filter_map(|w| {
            let name = w[0].trim().strip_prefix("- name: ")?;
            let value = w[1].trim().strip_prefix("value: ")?;
            name.starts_with("KERF_")
                .then(|| (name.to_owned(), value.to_owned()))
        })
        .collect();
    let config = read("templates/configmap.yaml")?;
    for line in config.lines() {
        let Some((key, value)) = line.trim().split_once(": ") else {
            continue;
        };
        if key.starts_with("KERF_") && text.contains(&format!("key: {key}\n")) {
            env.push((key.to_owned(), value.to_owned()));
        }
    }
    Ok(env)
}

fn env_value(name: &str) -> Result<String, std::io::Error> {
    Ok(template_env()?
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .unwrap_or_default())
}

/// Runs `kerf-agent run --print-settings` with the env the chart's defaults give, the
/// two config files written as the ConfigMap renders them, and `overrides` on top.
fn agent_settings(
    values: &Value,
    overrides: &[(&str, &str)],
) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let defaults = match at(values, "clusterDefaults") {
        Some(Value::Mapping(m)) if !m.is_empty() => serde_yaml::to_string(m)?,
        _ => String::new(),
    };
    std::fs::write(dir.path().join("cluster-defaults.yaml"), defaults)?;
    let windows = at(values, "freeze.windows").cloned().unwrap_or(Value::Null);
    std::fs::write(
        dir.path().join("freeze-windows.yaml"),
        serde_yaml::to_string(&windows)?,
    )?;
    let config_dir = dir.path().display().to_string();
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for (name, raw) in template_env()? {
        if let Some(v) = render_value(&raw, values) {
            env.insert(name, v.replace("/etc/kerf/config", &config_dir));
        }
    }
    env.insert("KERF_CLUSTER_NAME".into(), "test".into());
    for (k, v) in overrides {
        env.insert((*k).into(), (*v).into());
    }
    chart_support::print_settings(&env)
}

// rule: GR-25
#[test]
fn gr_25_tolerance_is_a_chart_value_defaulting_to_5() {
    let v = values().unwrap();
    assert_eq!(at(&v, "tolerance").and_then(Value::as_f64), Some(5.0));
    assert_env_reads("KERF_TOLERANCE", "tolerance");
    let s = agent_settings(&v, &[]).unwrap();
    assert_eq!(s["tolerance"], "5%");
    let s = agent_settings(&v, &[("KERF_TOLERANCE", "2.5")]).unwrap();
    assert_eq!(s["tolerance"], "2.5%");
}

// rule: AP-55
#[test]
fn ap_55_max_pod_deletes_per_run_defaults_to_1() {
    let v = values().unwrap();
    assert_eq!(
        at(&v, "onDelete.maxPodDeletesPerRun").and_then(Value::as_u64),
        Some(1)
    );
    assert_env_reads(
        "KERF_ON_DELETE_MAX_POD_DELETES_PER_RUN",
        "onDelete.maxPodDeletesPerRun",
    );
    let s = agent_settings(&v, &[]).unwrap();
    assert_eq!(s["onDelete"]["maxPodDeletesPerRun"], 1, "{s}");
}

// rule: AP-57
#[test]
fn ap_57_on_delete_settle_defaults_to_30_seconds() {
    let v = values().unwrap();
    assert_eq!(text_at(&v, "onDelete.settle"), Some("30s"));
    assert_env_reads("KERF_ON_DELETE_SETTLE", "onDelete.settle");
    let s = agent_settings(&v, &[]).unwrap();
    assert_eq!(s["onDelete"]["settle"], "30s", "{s}");
}

// rule: AP-40
#[test]
fn ap_40_freeze_now_is_a_chart_value_passed_to_the_agent() {
    let v = values().unwrap();
    assert_eq!(at(&v, "freeze.now").and_then(Value::as_bool), Some(false));
    assert_env_reads("KERF_FREEZE_NOW", "freeze.now");
    assert_eq!(agent_settings(&v, &[]).unwrap()["freeze"]["now"], false);
    let mut frozen = v.clone();
    if let Some(Value::Mapping(f)) = frozen.get_mut("freeze") {
        f.insert("now".into(), true.into());
    }
    assert_eq!(agent_settings(&frozen, &[]).unwrap()["freeze"]["now"], true);
}

// rule: AP-41
#[test]
fn ap_41_freeze_windows_reach_the_agent_through_the_config_map() {
    let v = values().unwrap();
    assert_eq!(
        at(&v, "freeze.windows")
            .and_then(Value::as_sequence)
            .map(Vec::len),
        Some(0)
    );
    let cm = read("templates/configmap.yaml").unwrap();
    assert!(cm.contains("freeze-windows.yaml:"));
    assert_template_has("_helpers.tpl", "toYaml .Values.freeze.windows");
    assert_eq!(
        env_value("KERF_FREEZE_WINDOWS").unwrap(),
        "/etc/kerf/config/freeze-windows.yaml"
    );
    assert_eq!(
        agent_settings(&v, &[]).unwrap()["freeze"]["windows"],
        serde_json::json!([])
    );
    let mut with = v.clone();
    let windows: Value =
        serde_yaml::from_str("- {schedule: '0 18 * * 5', duration: 62h, timeZone: Europe/Berlin}")
            .unwrap();
    if let Some(Value::Mapping(f)) = with.get_mut("freeze") {
        f.insert("windows".into(), windows);
    }
    let s = agent_settings(&with, &[]).unwrap();
    assert_eq!(s["freeze"]["windows"][0]["schedule"], "0 18 * * 5", "{s}");
    assert_eq!(
        s["freeze"]["windows"][0]["timeZone"], "Europe/Berlin",
        "{s}"
    );
}

// rule: GR-37
#[test]
fn gr_37_cluster_defaults_are_rendered_and_passed_as_a_file() {
    let v = values().unwrap();
    assert!(at(&v, "clusterDefaults").is_some_and(Value::is_mapping));
    assert_template_has("_helpers.tpl", "toYaml .Values.clusterDefaults");
    assert_template_has("configmap.yaml", "cluster-defaults.yaml:");
    assert_eq!(
        env_value("KERF_CLUSTER_DEFAULTS_FILE").unwrap(),
        "/etc/kerf/config/cluster-defaults.yaml"
    );
    let deploy = read("templates/deployment.yaml").unwrap();
    assert!(deploy.contains("mountPath: /etc/kerf/config"));
    assert!(deploy.contains("name: {{ include \"kerf-agent.configName\" . }}"));
    assert!(agent_settings(&v, &[]).unwrap()["clusterDefaults"].is_null());
    let mut with = v.clone();
    let defaults: Value =
        serde_yaml::from_str("{mode: audit, guardrails: {cooldown: 12h}}").unwrap();
    if let Value::Mapping(m) = &mut with {
        m.insert("clusterDefaults".into(), defaults);
    }
    let s = agent_settings(&with, &[]).unwrap();
    assert_eq!(s["clusterDefaults"]["mode"], "audit", "{s}");
    assert_eq!(s["clusterDefaults"]["guardrails"]["cooldown"], "12h", "{s}");
}

#[test]
fn every_variable_the_chart_sets_is_read_by_the_agent() {
    let out = Command::new(env!("CARGO_BIN_EXE_kerf-agent"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let env = template_env().unwrap();
    assert!(env.len() > 20, "{env:?}");
    for (name, _) in &env {
        assert!(
            help.contains(&format!("[env: {name}=")),
            "{name} is not an agent setting"
        );
    }
    // The container passes only the subcommand; every setting goes through the env.
    assert_template_has("deployment.yaml", "args: [\"run\"]");
}

#[test]
fn every_value_the_deployment_reads_exists_in_values_yaml() {
    let v = values().unwrap();
    let unresolved: Vec<_> = template_env()
        .unwrap()
        .into_iter()
        .filter(|(_, raw)| raw.contains(".Values.") && !raw.contains("{{ . "))
        .filter(|(_, raw)| render_value(raw, &v).is_none())
        .collect();
    assert!(unresolved.is_empty(), "{unresolved:?}");
}

#[test]
fn webhook_ignores_failures_and_answers_within_2_seconds() {
    let v = values().unwrap();
    assert_eq!(text_at(&v, "webhook.failurePolicy"), Some("Ignore"));
    assert_eq!(
        at(&v, "webhook.timeoutSeconds").and_then(Value::as_u64),
        Some(2)
    );
    let t = read("templates/webhook.yaml").unwrap();
    for needle in [
        "kind: MutatingWebhookConfiguration",
        "failurePolicy: {{ .Values.webhook.failurePolicy }}",
        "timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}",
        "sideEffects: None",
        "admissionReviewVersions: [\"v1\"]",
        "operations: [\"CREATE\"]",
        "resources: [\"pods\"]",
        "operator: NotIn",
        "- kube-system",
        "- {{ .Release.Namespace }}",
    ] {
        assert!(t.contains(needle), "webhook.yaml lacks {needle}");
    }
    assert!(t.contains("cert-manager.io/inject-ca-from"));
}

#[test]
fn pods_meet_pod_security_restricted() {
    let v = values().unwrap();
    let pod = at(&v, "podSecurityContext").unwrap();
    assert_eq!(pod["runAsNonRoot"], Value::Bool(true));
    assert_eq!(pod["seccompProfile"]["type"], Value::from("RuntimeDefault"));
    let c = at(&v, "securityContext").unwrap();
    assert_eq!(c["allowPrivilegeEscalation"], Value::Bool(false));
    assert_eq!(c["readOnlyRootFilesystem"], Value::Bool(true));
    assert_eq!(c["runAsNonRoot"], Value::Bool(true));
    assert_eq!(
        c["capabilities"]["drop"],
        serde_yaml::from_str::<Value>("[ALL]").unwrap()
    );
    assert_eq!(c["seccompProfile"]["type"], Value::from("RuntimeDefault"));
    let d = read("templates/deployment.yaml").unwrap();
    assert!(d.contains("toYaml .Values.podSecurityContext"));
    assert!(d.contains("toYaml .Values.securityContext"));
    assert!(!d.contains("hostPath") && !d.contains("hostNetwork"));
}

#[test]
fn chart_crds_are_the_generated_crds() {
    let chart = read("crds/kerf.getkerf.dev.yaml").unwrap();
    let generated =
        std::fs::read_to_string(chart_dir().join("../../config/crds/kerf.getkerf.dev.yaml"))
            .unwrap();
    assert!(chart == generated, "run `make crds`");
}

#[test]
fn chart_runs_two_replicas_with_a_disruption_budget() {
    let v = values().unwrap();
    assert_eq!(at(&v, "replicas").and_then(Value::as_u64), Some(2));
    assert_eq!(
        at(&v, "podDisruptionBudget.enabled"),
        Some(&Value::Bool(true))
    );
    assert_eq!(at(&v, "leaderElection.enabled"), Some(&Value::Bool(true)));
    assert_template_has("pdb.yaml", "kind: PodDisruptionBudget");
}
