//! Mutating admission of pod creation: the API server's calls to the registered
//! MutatingWebhookConfigurations (admissionregistration.k8s.io/v1).
//!
//! For each configuration (by name) and each webhook whose rules match `pods` `CREATE` and
//! whose namespaceSelector and objectSelector match, an AdmissionReview v1 is POSTed over
//! HTTPS, verifying the server certificate against the webhook's `caBundle` only. The target
//! is `clientConfig.url`, or for `clientConfig.service` the address routed with
//! [`crate::context::SimState::route_webhook_service`] (the certificate is checked for
//! `<name>.<namespace>.svc`), else the `kerf-sim/url` annotation of the Service object when
//! the store serves Services. `timeoutSeconds` (default 10) bounds the call. A failed call
//! with `failurePolicy: Fail` (the default) refuses the pod with a 500 naming the webhook,
//! as the real server does; with `Ignore` the pod goes on unchanged. `allowed: false`
//! refuses it (the webhook's code, default 403). A returned base64 JSONPatch is applied.

pub mod webhook_routes;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hyper::body::Body as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

use crate::context::SimContext;
use crate::controllers::common::{name, namespace, selector_matches};
use crate::store::{ApiError, gvr};

/// The annotation of a Service naming the URL its webhook is reached at.
pub const SERVICE_URL_ANNOTATION: &str = "kerf-sim/url";

/// Why a webhook call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Network or TLS failure.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// HTTP failure.
    #[error("{0}")]
    Http(#[from] hyper::Error),
    /// No answer within timeoutSeconds.
    #[error("context deadline exceeded")]
    Timeout,
    /// The configuration cannot be used.
    #[error("{0}")]
    Config(String),
    /// The answer is not a valid AdmissionReview.
    #[error("{0}")]
    BadResponse(String),
}

/// What a webhook answered.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Allowed, with an optional JSON patch.
    Allowed(Option<json_patch::Patch>),
    /// Denied: code, reason, message.
    Denied(u16, String, String),
}

/// Runs the mutating webhooks on a pod about to be created and returns the pod to store.
pub async fn admit_pod_create(ctx: &SimContext, pod: Value) -> Result<Value, ApiError> {
    let configs = ctx
        .store
        .list(&gvr::MUTATING_WEBHOOK_CONFIGURATIONS, None)
        .0;
    let ns_labels = namespace_labels(ctx, namespace(&pod));
    let mut pod = pod;
    for cfg in &configs {
        for wh in cfg
            .get("webhooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if webhook_matches(wh, &pod, &ns_labels) {
                pod = run_webhook(ctx, wh, pod).await?;
            }
        }
    }
    Ok(pod)
}

fn namespace_labels(ctx: &SimContext, ns: &str) -> Value {
    let mut labels = ctx
        .store
        .get(&gvr::NAMESPACES, None, ns)
        .and_then(|n| n.pointer("/metadata/labels").cloned())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    labels["kubernetes.io/metadata.name"] = json!(ns);
    labels
}

fn list_has(v: Option<&Value>, wanted: &[&str]) -> bool {
    v.and_then(Value::as_array).is_some_and(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .any(|s| wanted.contains(&s))
    })
}

/// Whether a rule covers `pods` `CREATE` in the core group.
pub fn rule_matches(rule: &Value) -> bool {
    list_has(rule.get("operations"), &["CREATE", "*"])
        && list_has(rule.get("apiGroups"), &["", "*"])
        && list_has(rule.get("apiVersions"), &["v1", "*"])
        && list_has(rule.get("resources"), &["pods", "*", "*/*"])
        && rule.get("scope").and_then(Value::as_str) != Some("Cluster")
}

/// Whether a webhook applies to the pod: a matching rule, namespaceSelector and
/// objectSelector.
pub fn webhook_matches(wh: &Value, pod: &Value, ns_labels: &Value) -> bool {
    wh.get("rules")
        .and_then(Value::as_array)
        .is_some_and(|r| r.iter().any(rule_matches))
        && selector_matches(wh.get("namespaceSelector"), Some(ns_labels))
        && selector_matches(wh.get("objectSelector"), pod.pointer("/metadata/labels"))
}

async fn run_webhook(ctx: &SimContext, wh: &Value, pod: Value) -> Result<Value, ApiError> {
    let wh_name = wh
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let ignore = wh.get("failurePolicy").and_then(Value::as_str) == Some("Ignore");
    let timeout = wh
        .get("timeoutSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(10)
        .clamp(1, 30);
    let target = resolve(ctx, wh, timeout);
    let outcome = match &target {
        Ok(t) => call(t, wh, &pod, timeout).await,
        Err(e) => Err(CallError::Config(e.clone())),
    };
    let failed = |e: String| {
        let url = target.as_ref().map(|t| t.url.clone()).unwrap_or_default();
        let message = format!(
            "Internal error occurred: failed calling webhook \"{wh_name}\": failed to call webhook: Post \"{url}\": {e}"
        );
        ApiError::new(
            500,
            "InternalError",
            message.clone(),
            Some(json!({"causes": [{"message": message}]})),
        )
    };
    match outcome {
        Ok(Verdict::Allowed(None)) => Ok(pod),
        Ok(Verdict::Allowed(Some(patch))) => {
            let mut patched = pod.clone();
            match json_patch::patch(&mut patched, &patch) {
                Ok(()) => Ok(patched),
                Err(e) if ignore => {
                    tracing::warn!(webhook = wh_name, error = %e, "webhook patch ignored");
                    Ok(pod)
                }
                Err(e) => Err(failed(format!("applying the JSON patch: {e}"))),
            }
        }
        Ok(Verdict::Denied(code, reason, message)) => {
            let message = if message.is_empty() {
                format!("admission webhook \"{wh_name}\" denied the request without explanation")
            } else {
                format!("admission webhook \"{wh_name}\" denied the request: {message}")
            };
            Err(ApiError::new(code, &reason, message, None))
        }
        Err(e) if ignore => {
            tracing::debug!(webhook = wh_name, error = %e, "webhook call failed, ignored");
            Ok(pod)
        }
        Err(e) => Err(failed(e.to_string())),
    }
}

/// Where a webhook is called.
#[derive(Debug)]
struct Target {
    /// The URL as the real API server names it in errors (with `?timeout=`).
    url: String,
    /// TCP address to connect to (host and port).
    connect: String,
    /// The name the certificate is verified for.
    server_name: String,
    /// Path and query of the request.
    path: String,
}

fn resolve(ctx: &SimContext, wh: &Value, timeout: u64) -> Result<Target, String> {
    let cc = wh.get("clientConfig").unwrap_or(&Value::Null);
    if let Some(url) = cc.get("url").and_then(Value::as_str) {
        return target_from_url(url, None, timeout);
    }
    let svc = cc
        .get("service")
        .ok_or("webhook has neither clientConfig.url nor clientConfig.service")?;
    let ns = svc
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let svc_name = svc.get("name").and_then(Value::as_str).unwrap_or("");
    let port = svc.get("port").and_then(Value::as_u64).unwrap_or(443);
    let path = svc.get("path").and_then(Value::as_str).unwrap_or("/");
    let host = format!("{svc_name}.{ns}.svc");
    let url = format!("https://{host}:{port}{path}");
    if let Some(addr) = ctx.state.webhooks.get(ns, svc_name) {
        let mut t = target_from_url(&url, Some(addr.to_string()), timeout)?;
        t.server_name = host;
        return Ok(t);
    }
    let annotated = ctx
        .store
        .lookup("", "v1", "services")
        .and_then(|g| ctx.store.get(&g, Some(ns), svc_name))
        .and_then(|s| {
            s.pointer("/metadata/annotations")?
                .get(SERVICE_URL_ANNOTATION)?
                .as_str()
                .map(str::to_string)
        });
    match annotated {
        Some(u) => {
            let mut t = target_from_url(&u, None, timeout)?;
            t.server_name = host;
            Ok(t)
        }
        None => Err(format!(
            "service {ns}/{svc_name} has no address in the simulated cluster"
        )),
    }
}

fn target_from_url(url: &str, connect: Option<String>, timeout: u64) -> Result<Target, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("invalid webhook URL {url:?}: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("webhook URL {url:?} is not https"));
    }
    let host = uri
        .host()
        .ok_or_else(|| format!("webhook URL {url:?} has no host"))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let sep = if uri.query().is_some() { '&' } else { '?' };
    let path = format!(
        "{}{sep}timeout={timeout}s",
        uri.path_and_query().map_or("/", |p| p.as_str())
    );
    Ok(Target {
        url: format!("{url}{sep}timeout={timeout}s"),
        connect: connect.unwrap_or_else(|| {
            if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            }
        }),
        server_name: host,
        path,
    })
}

/// The AdmissionReview request for creating `pod`.
pub fn review_request(uid: &str, pod: &Value) -> Value {
    let gvk = json!({"group": "", "version": "v1", "kind": "Pod"});
    let gvr = json!({"group": "", "version": "v1", "resource": "pods"});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": name(pod),
            "namespace": namespace(pod),
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                         "groups": ["system:serviceaccounts", "system:authenticated"]},
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        }
    })
}

/// Reads an AdmissionReview response.
pub fn parse_review(body: &[u8], uid: &str) -> Result<Verdict, CallError> {
    let bad = |m: String| CallError::BadResponse(m);
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| bad(format!("decoding the AdmissionReview: {e}")))?;
    let resp = v
        .get("response")
        .ok_or_else(|| bad("the AdmissionReview has no response".into()))?;
    if resp.get("uid").and_then(Value::as_str) != Some(uid) {
        return Err(bad(format!(
            "expected response.uid={uid:?}, got {:?}",
            resp.get("uid")
        )));
    }
    if resp.get("allowed").and_then(Value::as_bool) != Some(true) {
        let st = resp.get("status").unwrap_or(&Value::Null);
        let code = st
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .filter(|c| *c >= 400)
            .unwrap_or(403);
        let reason = st
            .get("reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .unwrap_or("Forbidden");
        let message = st.get("message").and_then(Value::as_str).unwrap_or("");
        return Ok(Verdict::Denied(
            code,
            reason.to_string(),
            message.to_string(),
        ));
    }
    let Some(patch) = resp.get("patch").and_then(Value::as_str) else {
        return Ok(Verdict::Allowed(None));
    };
    if resp
        .get("patchType")
        .and_then(Value::as_str)
        .is_some_and(|t| t != "JSONPatch")
    {
        return Err(bad("unsupported patchType".into()));
    }
    let bytes = B64
        .decode(patch)
        .map_err(|e| bad(format!("decoding the patch: {e}")))?;
    let patch: json_patch::Patch =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("decoding the patch: {e}")))?;
    Ok(Verdict::Allowed(Some(patch)))
}

fn tls_config(wh: &Value) -> Result<rustls::ClientConfig, CallError> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(bundle) = wh.pointer("/clientConfig/caBundle").and_then(Value::as_str) {
        let pem = B64
            .decode(bundle)
            .map_err(|e| CallError::Config(format!("caBundle: {e}")))?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| CallError::Config(format!("caBundle: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| CallError::Config(format!("caBundle: {e}")))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CallError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

async fn call(t: &Target, wh: &Value, pod: &Value, timeout: u64) -> Result<Verdict, CallError> {
    let versions = wh.get("admissionReviewVersions");
    if !list_has(versions, &["v1"]) {
        return Err(CallError::Config(
            "the webhook does not accept AdmissionReview v1".into(),
        ));
    }
    let uid =
        crate::controllers::common::random_suffix() + &crate::controllers::common::random_suffix();
    let body = serde_json::to_string(&review_request(&uid, pod))
        .map_err(|e| CallError::Config(e.to_string()))?;
    let fut = post(t, tls_config(wh)?, body);
    let answer = tokio::time::timeout(Duration::from_secs(timeout), fut)
        .await
        .map_err(|_| CallError::Timeout)??;
    parse_review(&answer, &uid)
}

async fn post(
    t: &Target,
    config: rustls::ClientConfig,
    body: String,
) -> Result<Vec<u8>, CallError> {
    let tcp = tokio::net::TcpStream::connect(&t.connect).await?;
    let name = ServerName::try_from(t.server_name.clone())
        .map_err(|e| CallError::Config(e.to_string()))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    let req = http::Request::post(&t.path)
        .header("host", &t.server_name)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(body)
        .map_err(|e| CallError::Config(e.to_string()))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let mut incoming = resp.into_body();
    let mut buf = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut incoming).poll_frame(cx)).await
    {
        if let Ok(data) = frame?.into_data() {
            buf.extend_from_slice(&data);
        }
    }
    if !status.is_success() {
        return Err(CallError::BadResponse(format!(
            "the server responded with {status}"
        )));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_select_pod_create() {
        let r = json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]});
        assert!(rule_matches(&r));
        let r = json!({"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]});
        assert!(!rule_matches(&r));
        let r = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]});
        assert!(rule_matches(&r));
        let r = json!({"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]});
        assert!(!rule_matches(&r));
    }

    #[test]
    fn selectors_gate_the_webhook() {
        let wh = json!({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]},
            "objectSelector": {"matchLabels": {"app": "web"}}});
        let pod = json!({"metadata": {"labels": {"app": "web"}}});
        assert!(webhook_matches(
            &wh,
            &pod,
            &json!({"kubernetes.io/metadata.name": "demo"})
        ));
        assert!(!webhook_matches(
            &wh,
            &pod,
            &json!({"kubernetes.io/metadata.name": "kube-system"})
        ));
        assert!(!webhook_matches(
            &wh,
            &json!({"metadata": {}}),
            &json!({"kubernetes.io/metadata.name": "demo"})
        ));
    }

    #[test]
    fn review_patch_is_decoded_and_applies() {
        let patch = B64.encode(br#"[{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"120m"}]"#);
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u1", "allowed": true, "patchType": "JSONPatch", "patch": patch}});
        let Verdict::Allowed(Some(p)) = parse_review(body.to_string().as_bytes(), "u1").unwrap()
        else {
            panic!("expected a patch")
        };
        let mut pod = json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "250m"}}}]}});
        json_patch::patch(&mut pod, &p).unwrap();
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "120m"
        );
    }

    #[test]
    fn denial_and_uid_mismatch() {
        let body =
            json!({"response": {"uid": "u1", "allowed": false, "status": {"message": "no"}}});
        assert_eq!(
            parse_review(body.to_string().as_bytes(), "u1").unwrap(),
            Verdict::Denied(403, "Forbidden".into(), "no".into())
        );
        assert!(parse_review(body.to_string().as_bytes(), "u2").is_err());
    }

    #[test]
    fn url_targets_carry_the_timeout() {
        let t = target_from_url("https://127.0.0.1:8443/mutate", None, 5).unwrap();
        assert_eq!(t.url, "https://127.0.0.1:8443/mutate?timeout=5s");
        assert_eq!(t.path, "/mutate?timeout=5s");
        assert_eq!(t.connect, "127.0.0.1:8443");
        assert!(target_from_url("http://x/", None, 5).is_err());
    }
}
