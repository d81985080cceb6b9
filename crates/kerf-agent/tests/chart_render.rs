//! The chart rendered by `helm template`, fed to the agent: the Deployment's env and the
//! ConfigMap's files go to `kerf-agent run --print-settings` as a pod would get them.
//! Needs helm: `KERF_HELM` (set by .ci/run after `make chart-lint`), `helm` on PATH or
//! the one `make chart-lint` caches; without one the tests fail saying how to get it.

mod chart_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_yaml::Value;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Every document of `helm template` with `args`.
fn render(helm: &Path, args: &[&str]) -> Res<Vec<Value>> {
    let fixed = ["-n", "kerf-system", "--set", "clusterName=prod"];
    chart_support::template(helm, fixed.iter().chain(args))
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> Res<&'a Value> {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .ok_or_else(|| format!("no {kind} rendered").into())
}

/// The settings the agent reads from the rendered Deployment and ConfigMap.
fn settings(docs: &[Value]) -> Res<serde_json::Value> {
    let dir = tempfile::tempdir()?;
    let cm = kind(docs, "ConfigMap")?;
    if let Some(Value::Mapping(data)) = cm.get("data") {
        for (k, v) in data {
            let (Some(k), Some(v)) = (k.as_str(), v.as_str()) else {
                continue;
            };
            std::fs::write(dir.path().join(k), v)?;
        }
    }
    let mut env = BTreeMap::new();
    for (n, v) in agent_env(docs)? {
        let v = v.replace("/etc/kerf/config", &dir.path().display().to_string());
        env.insert(n, v);
    }
    chart_support::print_settings(&env)
}

/// The agent container's environment as the pod gets it: literal values, and values taken
/// from the rendered ConfigMap by `configMapKeyRef` (which must name that ConfigMap and a
/// key it holds).
fn agent_env(docs: &[Value]) -> Res<BTreeMap<String, String>> {
    let cm = kind(docs, "ConfigMap")?;
    let container = &kind(docs, "Deployment")?["spec"]["template"]["spec"]["containers"][0];
    let mut env = BTreeMap::new();
    for e in container["env"].as_sequence().into_iter().flatten() {
        let Some(n) = e["name"].as_str() else {
            continue;
        };
        let r = &e["valueFrom"]["configMapKeyRef"];
        let v = match (e["value"].as_str(), r["key"].as_str()) {
            (Some(v), _) => v,
            (None, Some(key)) => {
                if r["name"] != cm["metadata"]["name"] {
                    return Err(format!("{n} names ConfigMap {:?}", r["name"]).into());
                }
                cm["data"][key]
                    .as_str()
                    .ok_or_else(|| format!("{n}: the ConfigMap has no key {key}"))?
            }
            _ => continue,
        };
        env.insert(n.to_owned(), v.to_owned());
    }
    Ok(env)
}

/// The decision settings `kerf-agent explain` reads from the agent's ConfigMap.
const DECISION_KEYS: [&str; 7] = [
    "KERF_CLUSTER_NAME",
    "KERF_HUB_URL",
    "KERF_HUB_TOKEN_FILE",
    "KERF_HUB_STALE_AFTER",
    "KERF_TOLERANCE",
    "KERF_UNSUPPORTED_NODE_SELECTORS",
    "KERF_FREEZE_NOW",
];

// The agent and `kerf-agent explain` read one source: the decision settings are keys of
// the ConfigMap the Deployment takes its variables from (issue 32).
#[test]
fn the_deployment_takes_the_decision_settings_from_the_configmap() {
    let helm = chart_support::helm();
    let docs = render(
        &helm,
        &[
            "--set",
            "hub.url=https://hub.example",
            "--set",
            "hub.tokenSecret.name=hub-token",
            "--set",
            "tolerance=7.5",
            "--set-json",
            r#"unsupportedNodeSelectors=["pool=old","arch=arm,os=x"]"#,
        ],
    )
    .unwrap();
    let cm = kind(&docs, "ConfigMap").unwrap();
    assert_eq!(cm["metadata"]["name"], Value::from("kerf-agent-config"));
    let container =
        &kind(&docs, "Deployment").unwrap()["spec"]["template"]["spec"]["containers"][0];
    for key in DECISION_KEYS {
        let entry = container["env"]
            .as_sequence()
            .into_iter()
            .flatten()
            .find(|e| e["name"].as_str() == Some(key))
            .unwrap_or_else(|| panic!("{key} missing from the env"));
        assert!(entry.get("value").is_none(), "{key}: {entry:?}");
        assert_eq!(
            entry["valueFrom"]["configMapKeyRef"]["key"],
            Value::from(key)
        );
        assert!(
            cm["data"][key].as_str().is_some(),
            "{key} not in the ConfigMap"
        );
    }
    let env = agent_env(&docs).unwrap();
    assert_eq!(env["KERF_TOLERANCE"], "7.5");
    assert_eq!(
        env["KERF_UNSUPPORTED_NODE_SELECTORS"],
        "pool=old;arch=arm,os=x"
    );
    let s = settings(&docs).unwrap();
    assert_eq!(s["tolerance"], "7.5%", "{s}");
    assert_eq!(s["hub"]["url"], "https://hub.example", "{s}");
    assert_eq!(
        s["unsupportedNodeSelectors"].as_array().map(Vec::len),
        Some(2)
    );
}

// rule: GR-25, AP-55, AP-57
#[test]
fn rendered_defaults_reach_the_agent() {
    let helm = chart_support::helm();
    let docs = render(&helm, &[]).unwrap();
    let s = settings(&docs).unwrap();
    assert_eq!(s["tolerance"], "5%", "{s}");
    assert_eq!(s["onDelete"]["maxPodDeletesPerRun"], 1, "{s}");
    assert_eq!(s["onDelete"]["settle"], "30s", "{s}");
    assert_eq!(s["freeze"]["now"], false, "{s}");
    assert_eq!(s["freeze"]["windows"], serde_json::json!([]), "{s}");
    assert!(s["clusterDefaults"].is_null(), "{s}");
    assert_eq!(s["clusterName"], "prod");
    assert_eq!(s["namespace"], "kerf-system");
    let hook = kind(&docs, "MutatingWebhookConfiguration").unwrap();
    assert_eq!(hook["webhooks"][0]["failurePolicy"], Value::from("Ignore"));
    assert_eq!(hook["webhooks"][0]["timeoutSeconds"], Value::from(2));
}

// rule: AP-40, AP-41, GR-37
#[test]
fn rendered_freeze_and_cluster_defaults_reach_the_agent() {
    let helm = chart_support::helm();
    let docs = render(
        &helm,
        &[
            "--set",
            "freeze.now=true",
            "--set-json",
            r#"freeze.windows=[{"start":"2026-12-23T00:00:00Z","end":"2027-01-02T00:00:00Z"}]"#,
            "--set-json",
            r#"clusterDefaults={"mode":"audit","guardrails":{"minMemory":"64Mi"}}"#,
            "--set",
            "webhook.certManager.enabled=true",
        ],
    )
    .unwrap();
    let s = settings(&docs).unwrap();
    assert_eq!(s["freeze"]["now"], true, "{s}");
    assert_eq!(
        s["freeze"]["windows"][0]["start"], "2026-12-23T00:00:00Z",
        "{s}"
    );
    assert_eq!(s["clusterDefaults"]["mode"], "audit", "{s}");
    assert_eq!(
        s["clusterDefaults"]["guardrails"]["minMemory"], "64Mi",
        "{s}"
    );
    assert!(kind(&docs, "Certificate").is_ok());
}

#[test]
fn webhook_path_is_the_one_the_agent_serves() {
    let docs = render(&chart_support::helm(), &[]).unwrap();
    let hook = kind(&docs, "MutatingWebhookConfiguration").unwrap();
    let service = &hook["webhooks"][0]["clientConfig"]["service"];
    assert_eq!(
        service["path"].as_str(),
        Some(kerf_agent::webhook::MUTATE_PATH)
    );
    assert_eq!(service["name"].as_str(), Some("kerf-agent"));
}

/// The webhook Secret's `tls.crt`, `tls.key` and `ca.crt` (PEM), and the caBundle of the
/// webhook configuration (PEM).
fn webhook_tls(docs: &[Value]) -> Res<(String, String, String, String)> {
    use base64::Engine as _;
    let b64 = |v: &Value| -> Res<String> {
        let text = v.as_str().ok_or("not a string")?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(text)?;
        Ok(String::from_utf8(bytes)?)
    };
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == "kerf-agent-webhook-tls")
        .ok_or("no webhook Secret")?;
    let hook = kind(docs, "MutatingWebhookConfiguration")?;
    Ok((
        b64(&secret["data"]["tls.crt"])?,
        b64(&secret["data"]["tls.key"])?,
        b64(&secret["data"]["ca.crt"])?,
        b64(&hook["webhooks"][0]["clientConfig"]["caBundle"])?,
    ))
}

/// Verifies that `leaf` (PEM) chains to `ca` (PEM) and names the webhook Service.
fn verify_serving_cert(leaf: &str, ca: &str) -> Res<()> {
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca.as_bytes())?)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()?;
    let leaf = CertificateDer::from_pem_slice(leaf.as_bytes())?;
    let name = ServerName::try_from("kerf-agent.kerf-system.svc")?;
    verifier.verify_server_cert(&leaf, &[], &name, &[], UnixTime::now())?;
    Ok(())
}

/// A CA of the user's: (certificate PEM, key PEM).
fn user_ca() -> Res<(String, String)> {
    let ca = kerf_testkit::TestCa::new()?;
    Ok((ca.pem().to_owned(), ca.key_pem()))
}

/// Writes `pem` to `name` in `dir` and gives the `--set-file` entry for `webhook.tls.<name>`.
#[allow(clippy::unwrap_used)] // test helper: a failure fails the test
fn ca_file(dir: &std::path::Path, name: &str, pem: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, pem).unwrap();
    format!("webhook.tls.{name}={}", path.display())
}

#[test]
fn a_supplied_ca_gives_the_same_ca_bundle_at_every_render() {
    let helm = chart_support::helm();
    let dir = tempfile::tempdir().unwrap();
    let (ca_crt, ca_key) = user_ca().unwrap();
    let files = [("ca.crt", &ca_crt), ("ca.key", &ca_key)]
        .map(|(name, pem)| ca_file(dir.path(), name, pem))
        .join(",");
    let first = webhook_tls(&render(&helm, &["--set-file", &files]).unwrap()).unwrap();
    let second = webhook_tls(&render(&helm, &["--set-file", &files]).unwrap()).unwrap();
    // The caBundle is the user's CA, at every render (helm template, Argo CD, Flux).
    assert_eq!(first.3, ca_crt);
    assert_eq!(second.3, ca_crt);
    assert_eq!(first.2, ca_crt, "the Secret's ca.crt");
    // Each serving certificate chains to it and names the webhook Service.
    verify_serving_cert(&first.0, &ca_crt).unwrap();
    verify_serving_cert(&second.0, &ca_crt).unwrap();
    assert!(first.1.contains("PRIVATE KEY"));
    // Without one, every render outside an install makes a new CA.
    let a = webhook_tls(&render(&helm, &[]).unwrap()).unwrap();
    let b = webhook_tls(&render(&helm, &[]).unwrap()).unwrap();
    assert_ne!(a.3, b.3);
    verify_serving_cert(&a.0, &a.3).unwrap();
}

#[test]
fn a_ca_without_its_key_is_refused() {
    let helm = chart_support::helm();
    let dir = tempfile::tempdir().unwrap();
    let (ca_crt, _) = user_ca().unwrap();
    let file = ca_file(dir.path(), "ca.crt", &ca_crt);
    let err = render(&helm, &["--set-file", &file]).unwrap_err();
    assert!(
        err.to_string()
            .contains("webhook.tls.ca.key is required with webhook.tls.ca.crt"),
        "{err}"
    );
}

/// Each rule of `rules` as its sorted `port/protocol` list and its `from`/`to` peers.
fn rules_of(np: &Value, field: &str, peers: &str) -> Vec<(Vec<String>, Value)> {
    let rules = np["spec"][field].as_sequence().cloned().unwrap_or_default();
    rules
        .iter()
        .map(|r| {
            let mut ports: Vec<String> = r["ports"]
                .as_sequence()
                .into_iter()
                .flatten()
                .map(|p| {
                    let port = p["port"].as_u64().unwrap_or_default();
                    format!("{port}/{}", p["protocol"].as_str().unwrap_or_default())
                })
                .collect();
            ports.sort();
            (ports, r[peers].clone())
        })
        .collect()
}

#[allow(clippy::unwrap_used)] // test helper: a bad literal fails the test
fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

#[test]
fn network_policy_limits_egress_to_dns_the_api_server_and_the_hub() {
    let helm = chart_support::helm();
    let docs = render(&helm, &["--set", "hub.url=https://hub.example.com/kerf"]).unwrap();
    let np = kind(&docs, "NetworkPolicy").unwrap();
    assert_eq!(np["spec"]["policyTypes"], yaml("[Ingress, Egress]"));
    let egress = rules_of(np, "egress", "to");
    let ports: Vec<_> = egress.iter().map(|(p, _)| p.join(",")).collect();
    assert_eq!(ports, ["53/TCP,53/UDP", "443/TCP,6443/TCP", "443/TCP"]);
    // No addresses are known by default: any address, on those ports only.
    assert!(egress.iter().all(|(_, to)| to.is_null()), "{egress:?}");

    // The hub's port comes from its URL; the metrics endpoint gets its own rule; CIDRs
    // narrow the addresses.
    let docs = render(
        &helm,
        &[
            "--set",
            "hub.url=http://hub.example.com:8080",
            "--set",
            "health.metricsURL=http://prometheus.monitoring:9090",
            "--set-json",
            r#"networkPolicy.egress.hubCIDRs=["10.20.0.0/16"]"#,
            "--set-json",
            r#"networkPolicy.egress.apiServerCIDRs=["172.18.0.2/32"]"#,
        ],
    )
    .unwrap();
    let egress = rules_of(kind(&docs, "NetworkPolicy").unwrap(), "egress", "to");
    let ports: Vec<_> = egress.iter().map(|(p, _)| p.join(",")).collect();
    assert_eq!(
        ports,
        ["53/TCP,53/UDP", "443/TCP,6443/TCP", "8080/TCP", "9090/TCP"]
    );
    assert_eq!(egress[1].1, yaml("[{ipBlock: {cidr: 172.18.0.2/32}}]"));
    assert_eq!(egress[2].1, yaml("[{ipBlock: {cidr: 10.20.0.0/16}}]"));
    assert!(egress[3].1.is_null());

    // Turned off, egress is not restricted at all.
    let docs = render(&helm, &["--set", "networkPolicy.egress.enabled=false"]).unwrap();
    let np = kind(&docs, "NetworkPolicy").unwrap();
    assert_eq!(np["spec"]["policyTypes"], yaml("[Ingress]"));
    assert!(np["spec"]["egress"].is_null());
}

#[test]
fn network_policy_admits_the_webhook_from_anywhere_and_metrics_from_monitoring() {
    let helm = chart_support::helm();
    let docs = render(&helm, &[]).unwrap();
    let ingress = rules_of(kind(&docs, "NetworkPolicy").unwrap(), "ingress", "from");
    assert_eq!(ingress.len(), 2, "{ingress:?}");
    assert_eq!(ingress[0].0, ["8443/TCP"]);
    assert!(
        ingress[0].1.is_null(),
        "the API server's address is not known"
    );
    assert_eq!(ingress[1].0, ["8080/TCP"]);
    assert_eq!(
        ingress[1].1,
        yaml(
            "[{namespaceSelector: {matchExpressions: \
             [{key: kubernetes.io/metadata.name, operator: In, values: [monitoring]}]}}]"
        )
    );

    let docs = render(
        &helm,
        &[
            "--set-json",
            r#"networkPolicy.metricsNamespaces=["observability"]"#,
            "--set-json",
            r#"networkPolicy.metricsFrom=[{"podSelector":{"matchLabels":{"app":"vmagent"}}}]"#,
            "--set-json",
            r#"networkPolicy.webhookFrom=[{"ipBlock":{"cidr":"10.0.0.0/24"}}]"#,
        ],
    )
    .unwrap();
    let ingress = rules_of(kind(&docs, "NetworkPolicy").unwrap(), "ingress", "from");
    assert_eq!(ingress[0].1, yaml("[{ipBlock: {cidr: 10.0.0.0/24}}]"));
    let from = &ingress[1].1;
    assert_eq!(
        from[0]["namespaceSelector"]["matchExpressions"][0]["values"],
        yaml("[observability]")
    );
    assert_eq!(
        from[1],
        yaml("{podSelector: {matchLabels: {app: vmagent}}}")
    );
}

/// Whether the rendered ClusterRole may read VerticalPodAutoscalers.
fn reads_vpas(docs: &[Value]) -> Res<bool> {
    let role = kind(docs, "ClusterRole")?;
    Ok(role["rules"].as_sequence().into_iter().flatten().any(|r| {
        r["apiGroups"][0].as_str() == Some("autoscaling.k8s.io")
            && r["resources"][0].as_str() == Some("verticalpodautoscalers")
    }))
}

// The source reaches the agent through the ConfigMap; the ClusterRole reads VPAs only
// with the vpa source (docs/sources.md).
#[test]
fn the_vpa_source_reaches_the_agent_and_alone_adds_the_vpa_rule() {
    let helm = chart_support::helm();
    let docs = render(&helm, &["--set", "recommendations.source=vpa"]).unwrap();
    let env = agent_env(&docs).unwrap();
    assert_eq!(env["KERF_RECOMMENDATION_SOURCE"], "vpa");
    let s = settings(&docs).unwrap();
    assert_eq!(s["recommendationSource"], "vpa", "{s}");
    assert!(s.get("invalidSettings").is_none(), "{s}");
    assert!(reads_vpas(&docs).unwrap());
    let hub = render(&helm, &["--set", "hub.url=https://hub.example"]).unwrap();
    assert!(!reads_vpas(&hub).unwrap());
    assert!(
        !agent_env(&hub)
            .unwrap()
            .contains_key("KERF_RECOMMENDATION_SOURCE")
    );
    assert_eq!(settings(&hub).unwrap()["recommendationSource"], "hub");
}
