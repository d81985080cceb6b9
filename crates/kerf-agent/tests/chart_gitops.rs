//! docs/gitops.md: the Argo CD Applications and Flux HelmReleases it shows are parsed as
//! YAML and checked against the agent (its field managers) and the chart (the values they
//! pass render, the objects and fields their ignore rules name exist).
//! Needs helm (see chart_support).

mod chart_support;

use std::ffi::OsStr;

use chart_support::strs;
use kerf_api::wellknown::{FIELD_MANAGER, FIELD_MANAGER_HPA};
use serde::Deserialize;
use serde_yaml::Value;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Every YAML document of the ```yaml blocks of docs/gitops.md.
fn documents() -> Res<Vec<Value>> {
    let path = chart_support::chart_dir().join("../../docs/gitops.md");
    let text = std::fs::read_to_string(path)?;
    let mut docs = Vec::new();
    let mut block: Option<String> = None;
    for line in text.lines() {
        match (&mut block, line.trim_end()) {
            (None, "```yaml") => block = Some(String::new()),
            (Some(b), "```") => {
                for de in serde_yaml::Deserializer::from_str(b) {
                    docs.push(Value::deserialize(de)?);
                }
                block = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    Ok(docs)
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> Res<&'a Value> {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind) && d["metadata"]["name"].as_str() == Some(name))
        .ok_or_else(|| format!("docs/gitops.md shows no {kind} {name}").into())
}

/// `helm template` of the chart with `values` (as a values file) in `ns`.
fn render(ns: &str, values: &Value) -> Res<Vec<Value>> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("values.yaml");
    std::fs::write(&file, serde_yaml::to_string(values)?)?;
    let args = [
        OsStr::new("-n"),
        OsStr::new(ns),
        OsStr::new("-f"),
        file.as_os_str(),
    ];
    chart_support::template(&chart_support::helm(), args)
        .map_err(|e| format!("the values of docs/gitops.md do not render: {e}").into())
}

fn sync_options(app: &Value) -> Vec<&str> {
    strs(&app["spec"]["syncPolicy"]["syncOptions"])
}

#[test]
fn argo_cd_ignores_the_fields_kerf_owns_on_workloads() -> Res<()> {
    let docs = documents()?;
    let app = find(&docs, "Application", "shop")?;
    let opts = sync_options(app);
    assert!(opts.contains(&"ServerSideApply=true"), "{opts:?}");
    assert!(opts.contains(&"RespectIgnoreDifferences=true"), "{opts:?}");
    let ignore = app["spec"]["ignoreDifferences"]
        .as_sequence()
        .ok_or("no ignoreDifferences")?;
    let managers = |group: &str, kind: &str| -> Vec<&str> {
        ignore
            .iter()
            .filter(|i| i["group"].as_str() == Some(group) && i["kind"].as_str() == Some(kind))
            .flat_map(|i| strs(&i["managedFieldsManagers"]))
            .collect()
    };
    for kind in ["Deployment", "StatefulSet", "DaemonSet"] {
        assert_eq!(managers("apps", kind), [FIELD_MANAGER], "{kind}");
    }
    assert_eq!(
        managers("autoscaling", "HorizontalPodAutoscaler"),
        [FIELD_MANAGER_HPA]
    );
    Ok(())
}

#[test]
fn argo_cd_renders_the_agent_and_ignores_only_the_generated_ca() -> Res<()> {
    let docs = documents()?;
    let app = find(&docs, "Application", "kerf-agent")?;
    assert!(sync_options(app).contains(&"ServerSideApply=true"));
    let ns = app["spec"]["destination"]["namespace"]
        .as_str()
        .ok_or("no namespace")?;
    let values = &app["spec"]["source"]["helm"]["valuesObject"];
    assert_eq!(
        values["webhook"]["certManager"]["enabled"],
        Value::Bool(true)
    );
    let rendered = render(ns, values)?;
    assert!(
        rendered
            .iter()
            .any(|d| d["kind"].as_str() == Some("Certificate")),
        "the values of the Application use cert-manager"
    );
    // The ignore rules name the objects of the chart-generated CA.
    let default = render(ns, &serde_yaml::from_str("clusterName: prod")?)?;
    let ignore = app["spec"]["ignoreDifferences"]
        .as_sequence()
        .ok_or("none")?;
    for rule in ignore {
        let kind = rule["kind"].as_str().ok_or("no kind")?;
        let name = rule["metadata"]["name"].as_str().or(rule["name"].as_str());
        assert!(
            default.iter().any(|d| d["kind"].as_str() == Some(kind)
                && d["metadata"]["name"].as_str() == name),
            "ignoreDifferences names {kind} {name:?}, which the chart does not render"
        );
    }
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let rule = ignore
            .iter()
            .find(|r| r["kind"].as_str() == Some(kind))
            .ok_or_else(|| format!("no rule for the {kind}"))?;
        assert_eq!(
            strs(&rule["jqPathExpressions"]),
            [".webhooks[].clientConfig.caBundle"]
        );
    }
    Ok(())
}

#[test]
fn flux_renders_the_agent_and_ignores_the_injected_ca_bundle() -> Res<()> {
    let docs = documents()?;
    let hr = find(&docs, "HelmRelease", "kerf-agent")?;
    let ns = hr["metadata"]["namespace"].as_str().ok_or("no namespace")?;
    assert_eq!(
        hr["spec"]["install"]["crds"].as_str(),
        Some("CreateReplace")
    );
    let rendered = render(ns, &hr["spec"]["values"])?;
    let drift = &hr["spec"]["driftDetection"];
    assert_eq!(drift["mode"].as_str(), Some("enabled"));
    for (i, kind) in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    .into_iter()
    .enumerate()
    {
        let rule = &drift["ignore"][i];
        assert_eq!(rule["target"]["kind"].as_str(), Some(kind));
        assert_eq!(strs(&rule["paths"]), ["/webhooks/0/clientConfig/caBundle"]);
        let config = rendered
            .iter()
            .find(|d| d["kind"].as_str() == Some(kind))
            .ok_or_else(|| format!("no {kind} rendered"))?;
        assert!(
            config["webhooks"][0]["clientConfig"].is_mapping(),
            "the ignored path's parent exists"
        );
        let ann = &config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"];
        assert!(ann.is_string(), "cainjector fills the ignored caBundle");
    }
    Ok(())
}

#[test]
fn flux_ignores_kerf_fields_on_workload_releases() -> Res<()> {
    let docs = documents()?;
    let hr = find(&docs, "HelmRelease", "shop")?;
    let drift = &hr["spec"]["driftDetection"];
    assert_eq!(drift["mode"].as_str(), Some("enabled"));
    let rules = drift["ignore"].as_sequence().ok_or("no ignore rules")?;
    let paths = |kind: &str| -> Vec<&str> {
        rules
            .iter()
            .filter(|r| r["target"]["kind"].as_str() == Some(kind))
            .flat_map(|r| strs(&r["paths"]))
            .collect()
    };
    assert!(
        paths("Deployment")
            .iter()
            .any(|p| p.starts_with("/spec/template/spec/containers/") && p.ends_with("/resources")),
        "{:?}",
        paths("Deployment")
    );
    assert_eq!(paths("HorizontalPodAutoscaler"), ["/spec/metrics"]);
    Ok(())
}
