//! Mutating webhooks on pod creation: a small HTTPS webhook (its own CA) patches the pods a
//! ReplicaSet creates; failurePolicy Ignore lets pods through with the webhook down, Fail
//! refuses them naming the webhook; a certificate from another CA is refused; a denial
//! carries the webhook's message.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kerf_sim::admission::admit_pod_create;
use kerf_sim::sim::{Sim, SimConfig};
use kerf_sim::store::ApiError;
use kerf_testkit::TestCa;
use kube::Api;
use kube::api::PostParams;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};

const PATCH: &str = r#"[{"op":"add","path":"/metadata/labels/mutated","value":"yes"},{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"120m"}]"#;

/// A webhook server with its own CA: the CA PEM, the address, and the reviews it received.
struct Hook {
    ca_pem: String,
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Value>>>,
}

async fn review(
    State((seen, allow)): State<(Arc<Mutex<Vec<Value>>>, bool)>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let uid = body["request"]["uid"].clone();
    if let Ok(mut s) = seen.lock() {
        s.push(body);
    }
    if !allow {
        return Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": false, "status": {"code": 403, "message": "pods are not welcome"}}}),
        );
    }
    let patch = base64::engine::general_purpose::STANDARD.encode(PATCH);
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch}}),
    )
}

async fn start_hook(allow: bool) -> anyhow::Result<Hook> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new()?;
    let leaf = ca.leaf("hook.webhooks.svc", "hook.webhooks.svc")?;
    let chain = vec![CertificateDer::from(leaf.cert_der)];
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_der));
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key_der)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = axum::Router::new()
        .route("/mutate", post(review))
        .with_state((seen.clone(), allow));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    Ok(Hook {
        ca_pem: ca.pem().to_owned(),
        addr,
        seen,
    })
}

fn webhook_config(
    name: &str,
    client_config: Value,
    ca_pem: &str,
    policy: &str,
) -> anyhow::Result<MutatingWebhookConfiguration> {
    let mut cc = client_config;
    cc["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca_pem));
    Ok(serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{"name": format!("{name}.hook.test"), "clientConfig": cc,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}},
            "failurePolicy": policy, "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 2}]
    }))?)
}

/// Registers a MutatingWebhookConfiguration for pod creates in `default`.
async fn register(
    sim: &Sim,
    name: &str,
    client_config: Value,
    ca_pem: &str,
    policy: &str,
) -> anyhow::Result<()> {
    let mwc: Api<MutatingWebhookConfiguration> = Api::all(sim.client());
    let config = webhook_config(name, client_config, ca_pem, policy)?;
    mwc.create(&PostParams::default(), &config).await?;
    Ok(())
}

/// Starts a sim with webhook `name` registered (`client_config`, trusting `ca_pem`, failure
/// policy `policy`) and creates a bare pod through admission; the refusal.
async fn refused_pod(
    name: &str,
    client_config: Value,
    ca_pem: &str,
    policy: &str,
) -> anyhow::Result<ApiError> {
    let sim = Sim::start(SimConfig::default()).await?;
    register(&sim, name, client_config, ca_pem, policy).await?;
    match admit_pod_create(sim.context(), bare_pod()).await {
        Ok(pod) => anyhow::bail!("the pod was admitted: {pod}"),
        Err(e) => Ok(e),
    }
}

/// The client config of a webhook reached by URL on local port `port`.
fn url_config(port: u16) -> Value {
    json!({"url": format!("https://127.0.0.1:{port}/mutate")})
}

/// A local port nothing listens on.
async fn closed_port() -> anyhow::Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    Ok(listener.local_addr()?.port())
}

async fn create_replicaset(sim: &Sim, name: &str) -> anyhow::Result<()> {
    let rs: Api<ReplicaSet> = Api::namespaced(sim.client(), "default");
    rs.create(&PostParams::default(), &replicaset(name)?)
        .await?;
    Ok(())
}

fn replicaset(name: &str) -> anyhow::Result<ReplicaSet> {
    Ok(serde_json::from_value(
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}]}}}}),
    )?)
}

async fn pods_of(sim: &Sim, app: &str, n: usize) -> anyhow::Result<Vec<Value>> {
    let labels = format!("app={app}");
    kerf_testkit::pods(&sim.client(), "default", &labels, n, Duration::from_secs(5)).await
}

fn bare_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "default", "labels": {}},
        "spec": {"containers": [{"name": "app", "image": "i", "resources": {"requests": {"cpu": "250m"}}}]}})
}

#[tokio::test]
async fn mutating_webhook_patches_pods_created_by_a_replicaset() {
    let hook = start_hook(true).await.unwrap();
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    sim.context()
        .state
        .route_webhook_service("webhooks", "hook", hook.addr);
    let cc = json!({"service": {"namespace": "webhooks", "name": "hook", "path": "/mutate", "port": 443}});
    register(&sim, "svc", cc, &hook.ca_pem, "Fail")
        .await
        .unwrap();
    create_replicaset(&sim, "mut").await.unwrap();

    let pods = pods_of(&sim, "mut", 2).await.unwrap();
    for p in &pods {
        assert_eq!(p["metadata"]["labels"]["mutated"], "yes");
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "120m"
        );
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    }
    let seen = hook.seen.lock().unwrap().clone();
    assert!(seen.len() >= 2);
    let req = &seen[0]["request"];
    assert_eq!(seen[0]["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "Pod"})
    );
    assert_eq!(req["namespace"], "default");
    assert_eq!(
        req["object"]["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "250m"
    );
}

#[tokio::test]
async fn failure_policy_ignore_with_the_webhook_down_still_creates_pods() {
    let hook = start_hook(true).await.unwrap();
    let closed = closed_port().await.unwrap();
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    register(&sim, "down", url_config(closed), &hook.ca_pem, "Ignore")
        .await
        .unwrap();
    create_replicaset(&sim, "ign").await.unwrap();
    let pods = pods_of(&sim, "ign", 2).await.unwrap();
    assert!(
        pods.iter()
            .all(|p| p["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "250m")
    );
    assert!(
        pods.iter()
            .all(|p| p["metadata"]["labels"]["mutated"].is_null())
    );
}

#[tokio::test]
async fn failure_policy_fail_refuses_the_pod_naming_the_webhook() {
    let hook = start_hook(true).await.unwrap();
    let closed = closed_port().await.unwrap();
    let url = format!("https://127.0.0.1:{closed}/mutate");
    let err = refused_pod("fail", url_config(closed), &hook.ca_pem, "Fail")
        .await
        .unwrap();
    assert_eq!(err.code, 500);
    assert_eq!(err.reason, "InternalError");
    let prefix = format!(
        "Internal error occurred: failed calling webhook \"fail.hook.test\": failed to call webhook: Post \"{url}?timeout=2s\": "
    );
    assert!(err.message.starts_with(&prefix), "{}", err.message);
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_refused() {
    let hook = start_hook(true).await.unwrap();
    let other = start_hook(true).await.unwrap();
    let cc = url_config(hook.addr.port());
    let err = refused_pod("wrongca", cc, &other.ca_pem, "Fail")
        .await
        .unwrap();
    assert_eq!(err.code, 500);
    assert!(err.message.contains("certificate"), "{}", err.message);
    assert!(hook.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_denial_carries_the_webhooks_message() {
    let hook = start_hook(false).await.unwrap();
    let cc = url_config(hook.addr.port());
    let err = refused_pod("deny", cc, &hook.ca_pem, "Ignore")
        .await
        .unwrap();
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "admission webhook \"deny.hook.test\" denied the request: pods are not welcome"
    );
}
