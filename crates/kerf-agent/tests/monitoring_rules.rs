//! The monitoring the chart ships: the PrometheusRule's alerts and the Grafana dashboard's
//! panels are valid PromQL for Prometheus' own `promtool check rules`, name only metrics
//! the agent exports, and every alert links to its runbook in docs/operations.md.
//!
//! Needs helm (see chart_support) and promtool (Debian's `prometheus` package, or
//! `KERF_PROMTOOL`): a missing tool fails the tests saying what to install.

mod chart_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use kerf_agent::executor::metrics::{ActionLabels, ReasonLabel, ResourceLabel};
use kerf_agent::hub::metrics::{EndpointLabel, RequestLabels};
use kerf_agent::metrics::applied::AppliedLabels;
use kerf_agent::metrics::{Metrics, ResultLabel, StepLabel, TypeReason};
use kerf_agent::outbox::metrics::TypeLabel;
use serde::Deserialize;
use serde_json::Value as Json;
use serde_yaml::Value;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const PREFIX: &str = "kerf_agent_";

/// promtool: `KERF_PROMTOOL`, else Debian's /usr/bin/promtool, else `promtool` on PATH.
#[allow(clippy::panic)] // test helper: a missing promtool fails the test
fn promtool() -> PathBuf {
    let candidates = std::env::var_os("KERF_PROMTOOL")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            PathBuf::from("/usr/bin/promtool"),
            PathBuf::from("promtool"),
        ]);
    for p in candidates {
        let runs = Command::new(&p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if runs {
            return p;
        }
    }
    panic!(
        "promtool not found: install Debian's `prometheus` package (apt-get install prometheus) \
         or point KERF_PROMTOOL at a promtool binary"
    );
}

/// The documents of `helm template` with `args`.
fn render(args: &[&str]) -> Res<Vec<Value>> {
    let out = Command::new(chart_support::helm())
        .args(["template", "kerf-agent"])
        .arg(chart_support::chart_dir())
        .args(["-n", "kerf-system", "--set", "clusterName=prod"])
        .args(args)
        .env("KUBECONFIG", "/nonexistent")
        .output()?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
    }
    let mut docs = Vec::new();
    for de in serde_yaml::Deserializer::from_str(std::str::from_utf8(&out.stdout)?) {
        let v = Value::deserialize(de)?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}

fn of_kind(docs: &[Value], kind: &str) -> Vec<Value> {
    docs.iter()
        .filter(|d| d["kind"].as_str() == Some(kind))
        .cloned()
        .collect()
}

/// The rule groups of the rendered PrometheusRule.
fn rule_groups() -> Res<Value> {
    let docs = render(&["--set", "metrics.prometheusRule.enabled=true"])?;
    let rules = of_kind(&docs, "PrometheusRule");
    assert_eq!(rules.len(), 1, "one PrometheusRule is rendered");
    Ok(rules[0]["spec"]["groups"].clone())
}

/// Every `(alert, expr)` of the rule groups.
fn alerts(groups: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for g in groups.as_sequence().into_iter().flatten() {
        for r in g["rules"].as_sequence().into_iter().flatten() {
            if let Some(name) = r["alert"].as_str() {
                out.push((name.to_owned(), r.clone()));
            }
        }
    }
    out
}

fn dashboard() -> Res<Json> {
    let path = chart_support::chart_dir().join("dashboards/kerf-agent.json");
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

/// Every `expr` of the dashboard's panels, rows included.
fn dashboard_exprs(d: &Json) -> Vec<String> {
    fn walk(panels: &Json, out: &mut Vec<String>) {
        for p in panels.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    out.push(e.to_owned());
                }
            }
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&d["panels"], &mut out);
    out
}

/// A dashboard expression as Prometheus would get it from Grafana: the variables
/// replaced by values of the same kind.
fn as_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__range", "1h")
        .replace("$job", ".*")
        .replace("$namespace", ".*")
}

/// Writes `groups` as a rules file and runs `promtool check rules` on it.
fn promtool_check(groups: &Value, dir: &Path, name: &str) -> Res<()> {
    let mut file = serde_yaml::Mapping::new();
    file.insert("groups".into(), groups.clone());
    let path = dir.join(name);
    std::fs::write(&path, serde_yaml::to_string(&file)?)?;
    let out = Command::new(promtool())
        .args(["check", "rules"])
        .arg(&path)
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool check rules {name}:\n{text}");
    Ok(())
}

/// `expr` with the text of its string literals blanked out (label values and regexes).
fn without_strings(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in expr.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                    out.push(c);
                    continue;
                }
                out.push(' ');
            }
            None => {
                if matches!(c, '"' | '\'' | '`') {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// The names `kerf_agent_…` in a PromQL expression, outside string literals.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let expr = without_strings(expr);
    let expr = expr.as_str();
    let bytes = expr.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
    let mut names = BTreeSet::new();
    let mut i = 0;
    while let Some(pos) = expr[i..].find(PREFIX) {
        let start = i + pos;
        let mut end = start + PREFIX.len();
        while end < bytes.len()
            && (bytes[end].is_ascii_lowercase()
                || bytes[end].is_ascii_digit()
                || bytes[end] == b'_')
        {
            end += 1;
        }
        if start == 0 || !ident(bytes[start - 1]) {
            names.insert(expr[start..end].to_owned());
        }
        i = end;
    }
    names
}

/// The agent's metrics with one sample in each labelled family: a family encodes
/// nothing, not even its `# TYPE` line, before its first label set.
fn populated_metrics() -> Metrics {
    let m = Metrics::new();
    let s = |v: &str| v.to_owned();
    let result = ResultLabel { result: s("ok") };
    let type_reason = TypeReason {
        r#type: s("applied"),
        reason: s("Recommendation"),
    };
    m.reconcile.decisions.get_or_create(&type_reason).inc();
    m.reconcile.duration.get_or_create(&result).observe(0.1);
    let step = StepLabel { step: s("start") };
    m.reconcile.pass_duration.get_or_create(&step).observe(0.1);
    m.webhook.requests.get_or_create(&result).inc();
    let action = ActionLabels {
        action: s("resize"),
        result: s("ok"),
    };
    m.executor.actions.get_or_create(&action).inc();
    let reason = ReasonLabel {
        reason: s("OOMKills"),
    };
    m.executor.rollbacks.get_or_create(&reason).inc();
    let resource = ResourceLabel {
        resource: s("pods"),
    };
    m.executor.permission_denied.get_or_create(&resource).inc();
    let request = RequestLabels {
        endpoint: s("config"),
        code: s("200"),
    };
    m.hub.requests.get_or_create(&request).inc();
    let endpoint = EndpointLabel {
        endpoint: s("config"),
    };
    m.hub.last_success.get_or_create(&endpoint).set(1.0);
    m.outbox
        .sent
        .get_or_create(&TypeLabel {
            r#type: s("applied"),
        })
        .inc();
    let applied = AppliedLabels {
        workload_namespace: s("shop"),
        when: s("before"),
    };
    m.outbox.applied.cpu_cores.get_or_create(&applied).inc();
    m.outbox.applied.memory_bytes.get_or_create(&applied).inc();
    m
}

/// The sample names the agent's registry exports, from its `# TYPE` lines: a counter
/// `x` is sampled as `x_total`, a histogram as `x_bucket`, `x_sum` and `x_count`.
fn exported_names() -> Res<BTreeSet<String>> {
    let text = populated_metrics().encode()?;
    let mut names = BTreeSet::new();
    for line in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let mut parts = line.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            "info" => &["_info"],
            _ => &[""],
        };
        names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
    }
    Ok(names)
}

#[test]
fn the_alert_rules_pass_promtool_check_rules() -> Res<()> {
    let groups = rule_groups()?;
    let names: Vec<String> = alerts(&groups).into_iter().map(|(n, _)| n).collect();
    for wanted in [
        "KerfAgentDown",
        "KerfAgentNotLeading",
        "KerfAgentHubUnreachable",
        "KerfAgentRecommendationsStale",
        "KerfAgentEventsDropped",
        "KerfAgentRollbacks",
        "KerfAgentPermissionDenied",
        "KerfAgentWebhookErrors",
        "KerfAgentReconcileErrors",
    ] {
        assert!(
            names.iter().any(|n| n == wanted),
            "{wanted} missing: {names:?}"
        );
    }
    let dir = tempfile::tempdir()?;
    promtool_check(&groups, dir.path(), "alerts.yaml")
}

#[test]
fn the_dashboard_queries_pass_promtool_check_rules() -> Res<()> {
    let exprs = dashboard_exprs(&dashboard()?);
    assert!(exprs.len() >= 10, "the dashboard has its panels: {exprs:?}");
    // Each panel query as a recording rule, so that promtool parses it as Prometheus would.
    let rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut r = serde_yaml::Mapping::new();
            r.insert("record".into(), format!("kerf_dashboard:query_{i}").into());
            r.insert("expr".into(), as_promql(e).into());
            Value::Mapping(r)
        })
        .collect();
    let mut group = serde_yaml::Mapping::new();
    group.insert("name".into(), "kerf-dashboard".into());
    group.insert("rules".into(), Value::Sequence(rules));
    let dir = tempfile::tempdir()?;
    promtool_check(
        &Value::Sequence(vec![Value::Mapping(group)]),
        dir.path(),
        "dashboard.yaml",
    )
}

#[test]
fn alerts_and_panels_name_only_metrics_the_agent_exports() -> Res<()> {
    let exported = exported_names()?;
    for must in [
        "kerf_agent_build_info",
        "kerf_agent_applied_cpu_request_cores_total",
        "kerf_agent_webhook_request_duration_seconds_bucket",
    ] {
        assert!(exported.contains(must), "{must} not in {exported:?}");
    }
    let mut used: Vec<(String, String)> = Vec::new();
    for (alert, rule) in alerts(&rule_groups()?) {
        let expr = rule["expr"].as_str().unwrap_or_default().to_owned();
        used.extend(metric_names(&expr).into_iter().map(|n| (alert.clone(), n)));
    }
    for expr in dashboard_exprs(&dashboard()?) {
        used.extend(metric_names(&expr).into_iter().map(|n| (expr.clone(), n)));
    }
    assert!(
        used.len() >= 20,
        "the tokenizer finds the metrics: {used:?}"
    );
    let unknown: Vec<_> = used.iter().filter(|(_, n)| !exported.contains(n)).collect();
    assert!(unknown.is_empty(), "not exported by the agent: {unknown:?}");
    Ok(())
}

#[test]
fn the_metric_name_tokenizer_reads_promql() {
    let names = metric_names(
        r#"sum(rate(kerf_agent_a_total{job="x-kerf_agent_no"}[5m])) / kerf_agent_b_bucket"#,
    );
    let want: BTreeSet<String> = ["kerf_agent_a_total", "kerf_agent_b_bucket"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(names, want);
    assert!(
        !exported_names()
            .unwrap_or_default()
            .contains("kerf_agent_no_such_metric")
    );
}

#[test]
fn every_alert_links_to_its_runbook_paragraph() -> Res<()> {
    let docs = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md"),
    )?;
    for (alert, rule) in alerts(&rule_groups()?) {
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_default();
        let anchor = alert.to_lowercase();
        assert!(
            url.ends_with(&format!("docs/operations.md#{anchor}")),
            "{alert}: {url}"
        );
        assert!(
            docs.lines().any(|l| l.trim() == format!("### {alert}")),
            "docs/operations.md has no `### {alert}` runbook"
        );
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning"].contains(&severity),
            "{alert}: {severity}"
        );
    }
    Ok(())
}

#[test]
fn monitoring_objects_are_off_by_default_and_render_when_enabled() -> Res<()> {
    let kinds = ["ServiceMonitor", "PrometheusRule"];
    let docs = render(&[])?;
    for kind in kinds {
        assert!(
            of_kind(&docs, kind).is_empty(),
            "{kind} rendered by default"
        );
    }
    let docs = render(&[
        "--set",
        "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true",
        "--set",
        "metrics.dashboard.enabled=true",
    ])?;
    let sm = of_kind(&docs, "ServiceMonitor");
    assert_eq!(sm.len(), 1);
    assert_eq!(
        sm[0]["spec"]["endpoints"][0]["port"].as_str(),
        Some("metrics")
    );
    let dashboards: Vec<Value> = of_kind(&docs, "ConfigMap")
        .into_iter()
        .filter(|c| c["metadata"]["labels"]["grafana_dashboard"].as_str() == Some("1"))
        .collect();
    assert_eq!(dashboards.len(), 1, "one dashboard ConfigMap");
    let json = dashboards[0]["data"]["kerf-agent.json"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(serde_json::from_str::<Json>(json)?, dashboard()?);
    Ok(())
}

#[test]
fn an_unknown_monitoring_value_is_refused_by_the_schema() {
    for (set, key) in [
        (
            "metrics.serviceMonitor.enabeld=true",
            "'enabeld' not allowed",
        ),
        (
            "metrics.prometheusRule.runbookURL=x",
            "'runbookURL' not allowed",
        ),
        ("metrics.dashboard.label=x", "'label' not allowed"),
    ] {
        let err = render(&["--set", set]).err().map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(err.contains(key), "--set {set}: {err}");
    }
}
