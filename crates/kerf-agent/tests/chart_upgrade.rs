//! The previous release's values file with the current chart (docs/upgrade.md): until the
//! first release, the values.yaml of commit 6b1b166 (tests/e2e/upgrade/values-6b1b166.yaml),
//! given whole as `-f` the way `helm upgrade -f my-values.yaml` passes a copy of it. The
//! chart's schema refuses unknown keys, so a key the current chart dropped or renamed fails
//! here instead of being ignored.
//!
//! Needs helm (see chart_support): a missing helm fails the tests.

mod chart_support;

use serde_yaml::Value;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The values file of the previous release.
const OLD_VALUES: &str = "tests/e2e/upgrade/values-6b1b166.yaml";

/// Every document `helm template` renders with the values a user sets (cluster name and
/// hub) and `args`.
fn render(args: &[&str]) -> Res<Vec<Value>> {
    let user = [
        "-n",
        "kerf-system",
        "--set",
        "clusterName=prod",
        "--set",
        "hub.url=https://hub.example",
    ];
    let docs = chart_support::template(&chart_support::helm(), user.iter().chain(args))?;
    Ok(docs.into_iter().map(without_generated_certs).collect())
}

/// The document without what helm generates anew on each render (the webhook's CA and
/// serving certificate, in its Secret and the webhook configurations' `caBundle`).
fn without_generated_certs(mut doc: Value) -> Value {
    if doc["kind"].as_str() == Some("Secret") && doc["type"].as_str() == Some("kubernetes.io/tls") {
        doc["data"] = Value::Null;
    }
    if let Some(hooks) = doc.get_mut("webhooks").and_then(Value::as_sequence_mut) {
        for hook in hooks {
            hook["clientConfig"]["caBundle"] = Value::Null;
        }
    }
    doc
}

/// `kind/name` of a rendered document.
fn named(doc: &Value) -> String {
    format!(
        "{}/{}",
        doc["kind"].as_str().unwrap_or_default(),
        doc["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The chart's appVersion.
fn app_version() -> Res<String> {
    let chart = std::fs::read_to_string(chart_support::chart_dir().join("Chart.yaml"))?;
    let chart: Value = serde_yaml::from_str(&chart)?;
    Ok(chart["appVersion"].as_str().unwrap_or_default().to_owned())
}

// Nothing the previous release's values set is lost or read differently: the current
// chart renders them (schema included) into the same objects as its own defaults, with
// the agent's image at the chart's appVersion.
#[test]
fn the_previous_values_file_renders_the_current_chart_as_its_defaults() {
    let old = kerf_testkit::repo_root().join(OLD_VALUES);
    let old = old.display().to_string();
    let upgraded = render(&["-f", &old]).unwrap();
    let defaults = render(&[]).unwrap();
    let names: Vec<String> = upgraded.iter().map(named).collect();
    assert_eq!(names, defaults.iter().map(named).collect::<Vec<_>>());
    for (doc, default) in upgraded.iter().zip(&defaults) {
        assert_eq!(doc, default, "{} differs with {OLD_VALUES}", named(doc));
    }
    let deployment = upgraded
        .iter()
        .find(|d| d["kind"].as_str() == Some("Deployment"))
        .unwrap();
    let image = &deployment["spec"]["template"]["spec"]["containers"][0]["image"];
    let want = format!("ghcr.io/getkerf/kerf-agent:{}", app_version().unwrap());
    assert_eq!(image.as_str(), Some(want.as_str()));
}
