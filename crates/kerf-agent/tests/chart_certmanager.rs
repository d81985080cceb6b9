//! The cert-manager chain the chart renders with `webhook.certManager.enabled`: a
//! self-signed Issuer signs a CA Certificate, a CA Issuer made from its Secret signs the
//! serving Certificate (the Secret the pods mount), and cainjector fills the webhook's
//! caBundle from the CA Certificate, so renewing the serving certificate leaves the caBundle
//! as it was. Needs helm (see chart_support).

mod chart_support;

use serde_yaml::Value;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const NS: &str = "kerf-system";

fn render(args: &[&str]) -> Res<Vec<Value>> {
    let fixed = ["-n", NS, "--set", "clusterName=prod"];
    let cm = ["--set", "webhook.certManager.enabled=true"];
    chart_support::template(&chart_support::helm(), fixed.iter().chain(&cm).chain(args))
}

fn all<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter()
        .filter(|d| d["kind"].as_str() == Some(kind))
        .collect()
}

fn named<'a>(docs: &'a [Value], kind: &str, name: &str) -> Res<&'a Value> {
    all(docs, kind)
        .into_iter()
        .find(|d| d["metadata"]["name"].as_str() == Some(name))
        .ok_or_else(|| format!("no {kind} {name} rendered").into())
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// The namespace/name cainjector reads the CA from.
fn inject_from(docs: &[Value]) -> Res<String> {
    let mwc = named(docs, "MutatingWebhookConfiguration", "kerf-agent")?;
    let ann = &mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"];
    assert!(
        mwc["webhooks"][0]["clientConfig"]["caBundle"].is_null(),
        "cainjector owns the caBundle: the chart must not render one"
    );
    Ok(s(ann).to_owned())
}

/// The Secret the agent's pods mount as the webhook certificate.
fn mounted_secret(docs: &[Value]) -> Res<String> {
    let d = named(docs, "Deployment", "kerf-agent")?;
    let vols = d["spec"]["template"]["spec"]["volumes"].as_sequence();
    let v = vols
        .into_iter()
        .flatten()
        .find(|v| v["name"].as_str() == Some("webhook-tls"))
        .ok_or("no webhook-tls volume")?;
    Ok(s(&v["secret"]["secretName"]).to_owned())
}

#[test]
fn a_ca_issuer_signs_the_serving_certificate_and_cainjector_reads_the_ca() -> Res<()> {
    let docs = render(&[])?;
    // The self-signed Issuer signs only the CA.
    let selfsigned = named(&docs, "Issuer", "kerf-agent-selfsigned")?;
    assert!(
        selfsigned["spec"]["selfSigned"].is_mapping(),
        "{selfsigned:?}"
    );
    let ca = named(&docs, "Certificate", "kerf-agent-webhook-ca")?;
    assert_eq!(ca["spec"]["isCA"], Value::Bool(true));
    assert_eq!(s(&ca["spec"]["issuerRef"]["name"]), "kerf-agent-selfsigned");
    assert_eq!(s(&ca["spec"]["issuerRef"]["kind"]), "Issuer");
    assert_ne!(
        s(&ca["spec"]["privateKey"]["rotationPolicy"]),
        "Always",
        "a renewed CA keeps its key, so certificates it signed stay trusted"
    );
    let ca_secret = s(&ca["spec"]["secretName"]);
    // The CA Issuer is made from the CA's Secret.
    let ca_issuer = named(&docs, "Issuer", "kerf-agent-webhook-ca")?;
    assert_eq!(s(&ca_issuer["spec"]["ca"]["secretName"]), ca_secret);
    // It signs the serving certificate, which the pods mount.
    let leaf = named(&docs, "Certificate", "kerf-agent-webhook")?;
    assert_ne!(leaf["spec"]["isCA"], Value::Bool(true));
    assert_eq!(
        s(&leaf["spec"]["issuerRef"]["name"]),
        "kerf-agent-webhook-ca"
    );
    assert_eq!(s(&leaf["spec"]["issuerRef"]["kind"]), "Issuer");
    assert_ne!(s(&leaf["spec"]["secretName"]), ca_secret);
    assert_eq!(s(&leaf["spec"]["secretName"]), mounted_secret(&docs)?);
    let dns: Vec<&str> = leaf["spec"]["dnsNames"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(s)
        .collect();
    assert!(dns.contains(&"kerf-agent.kerf-system.svc"), "{dns:?}");
    // cainjector reads the CA Certificate, not the serving one: renewing the serving
    // certificate does not change the caBundle.
    assert_eq!(inject_from(&docs)?, format!("{NS}/kerf-agent-webhook-ca"));
    // cert-manager makes the Secrets; the chart renders none.
    assert!(
        all(&docs, "Secret").is_empty(),
        "{:?}",
        all(&docs, "Secret")
    );
    assert_eq!(all(&docs, "Certificate").len(), 2);
    assert_eq!(all(&docs, "Issuer").len(), 2);
    Ok(())
}

#[test]
fn an_issuer_of_the_user_signs_the_serving_certificate_alone() -> Res<()> {
    let docs = render(&[
        "--set",
        "webhook.certManager.issuerRef.name=corp-ca",
        "--set",
        "webhook.certManager.issuerRef.kind=ClusterIssuer",
    ])?;
    assert!(
        all(&docs, "Issuer").is_empty(),
        "no Issuer of the chart's own"
    );
    let certs = all(&docs, "Certificate");
    assert_eq!(certs.len(), 1, "{certs:?}");
    let leaf = certs[0];
    assert_eq!(s(&leaf["spec"]["issuerRef"]["name"]), "corp-ca");
    assert_eq!(s(&leaf["spec"]["issuerRef"]["kind"]), "ClusterIssuer");
    assert_eq!(s(&leaf["spec"]["secretName"]), mounted_secret(&docs)?);
    // The serving certificate's Secret carries the issuer's CA as ca.crt.
    assert_eq!(inject_from(&docs)?, format!("{NS}/kerf-agent-webhook"));
    Ok(())
}
