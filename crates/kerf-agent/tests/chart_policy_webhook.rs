//! The chart's ValidatingWebhookConfiguration for RightsizingPolicies: the path the agent
//! serves, `failurePolicy: Ignore` whatever the pod webhook's, no side effects, a short
//! timeout, CREATE and UPDATE of rightsizingpolicies, and the same CA as the pod webhook
//! (the chart's own certificate, a Secret of the user's, cert-manager's cainjector).
//! Needs helm (see chart_support).

mod chart_support;

use chart_support::strs;
use serde_yaml::Value;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn render(args: &[&str]) -> Res<Vec<Value>> {
    let fixed = ["-n", "kerf-system", "--set", "clusterName=prod"];
    chart_support::template(&chart_support::helm(), fixed.iter().chain(args))
}

fn config<'a>(docs: &'a [Value], kind: &str) -> Option<&'a Value> {
    docs.iter().find(|d| d["kind"].as_str() == Some(kind))
}

fn validating(docs: &[Value]) -> Res<&Value> {
    Ok(
        config(docs, "ValidatingWebhookConfiguration")
            .ok_or("no ValidatingWebhookConfiguration")?,
    )
}

fn mutating(docs: &[Value]) -> Res<&Value> {
    Ok(config(docs, "MutatingWebhookConfiguration").ok_or("no MutatingWebhookConfiguration")?)
}

#[test]
fn policies_are_validated_at_the_agents_path_and_never_blocked_by_it() -> Res<()> {
    let docs = render(&["--set", "webhook.failurePolicy=Fail"])?;
    let hook = &validating(&docs)?["webhooks"][0];
    assert_eq!(hook["name"].as_str(), Some("policies.kerf.getkerf.dev"));
    assert_eq!(
        hook["failurePolicy"].as_str(),
        Some("Ignore"),
        "not the pod webhook's Fail"
    );
    assert_eq!(hook["sideEffects"].as_str(), Some("None"));
    assert_eq!(strs(&hook["admissionReviewVersions"]), ["v1"]);
    let timeout = hook["timeoutSeconds"].as_u64().ok_or("no timeout")?;
    assert!((1..=5).contains(&timeout), "short timeout: {timeout}");
    let service = &hook["clientConfig"]["service"];
    assert_eq!(
        service["path"].as_str(),
        Some(kerf_agent::webhook::VALIDATE_POLICY_PATH)
    );
    let pod_service = &mutating(&docs)?["webhooks"][0]["clientConfig"]["service"];
    assert_eq!(service["name"], pod_service["name"]);
    assert_eq!(service["port"], pod_service["port"]);
    let rule = &hook["rules"][0];
    assert_eq!(strs(&rule["apiGroups"]), [kerf_api::wellknown::API_GROUP]);
    assert_eq!(strs(&rule["resources"]), ["rightsizingpolicies"]);
    assert_eq!(strs(&rule["operations"]), ["CREATE", "UPDATE"]);
    assert_eq!(rule["scope"].as_str(), Some("Cluster"));
    Ok(())
}

#[test]
fn the_policy_webhook_trusts_the_same_ca_as_the_pod_webhook() -> Res<()> {
    // The chart's generated CA.
    let docs = render(&[])?;
    let ca = |d: &Value| d["webhooks"][0]["clientConfig"]["caBundle"].clone();
    let generated = ca(validating(&docs)?);
    assert!(generated.as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(generated, ca(mutating(&docs)?));
    // A Secret of the user's.
    let docs = render(&[
        "--set",
        "webhook.tls.secretName=mine",
        "--set",
        "webhook.tls.caBundle=Q0E=",
    ])?;
    assert_eq!(ca(validating(&docs)?).as_str(), Some("Q0E="));
    // cert-manager, with the chart's CA or an issuer of the user's.
    for extra in [
        &[][..],
        &["--set", "webhook.certManager.issuerRef.name=corp"][..],
    ] {
        let mut args = vec!["--set", "webhook.certManager.enabled=true"];
        args.extend_from_slice(extra);
        let docs = render(&args)?;
        let inject =
            |d: &Value| d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].clone();
        let from = inject(validating(&docs)?);
        assert!(
            from.as_str().is_some_and(|s| s.starts_with("kerf-system/")),
            "{from:?}"
        );
        assert_eq!(from, inject(mutating(&docs)?), "{extra:?}");
        assert!(
            ca(validating(&docs)?).is_null(),
            "cainjector fills the caBundle"
        );
    }
    Ok(())
}

#[test]
fn the_policy_webhook_can_be_left_unregistered_on_its_own() -> Res<()> {
    let docs = render(&["--set", "webhook.validatePolicies=false"])?;
    assert!(config(&docs, "ValidatingWebhookConfiguration").is_none());
    assert!(config(&docs, "MutatingWebhookConfiguration").is_some());
    let docs = render(&["--set", "webhook.enabled=false"])?;
    assert!(config(&docs, "ValidatingWebhookConfiguration").is_some());
    assert!(config(&docs, "MutatingWebhookConfiguration").is_none());
    Ok(())
}
