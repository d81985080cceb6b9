//! End to end against kerf-sim: the simulated API server calls the webhook over TLS
//! (MutatingWebhookConfiguration with `url` and `caBundle`) for every pod a Deployment
//! creates; pods of a workload with live values come up with them, and stop getting them
//! once the rsr is rolled back.

use std::collections::BTreeSet;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use kerf_agent::webhook::{self, ReloadingCert, SharedIndex};
use kerf_api::RightsizingRecommendation;
use kerf_sim::sim::{Sim, SimConfig};
use kerf_testkit::TestCa;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use prometheus_client::registry::Registry;
use serde_json::{Value, json};

/// Writes a CA-signed serving certificate for 127.0.0.1 into `dir`; returns the CA PEM.
fn write_certs(dir: &std::path::Path) -> anyhow::Result<String> {
    let ca = TestCa::new()?;
    let name = "kerf-agent-webhook.kerf.svc";
    let leaf = ca.leaf(name, name)?;
    std::fs::write(dir.join("tls.crt"), leaf.cert_pem)?;
    std::fs::write(dir.join("tls.key"), leaf.key_pem)?;
    Ok(ca.pem().to_owned())
}

fn webhook_config(url: &str, ca_pem: &str) -> anyhow::Result<MutatingWebhookConfiguration> {
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    Ok(serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "kerf-agent"},
        "webhooks": [{
            "name": "pods.kerf.getkerf.dev",
            "clientConfig": {"url": url, "caBundle": bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                "operator": "NotIn", "values": ["kube-system", "kerf"]}]},
            "failurePolicy": "Ignore", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 2,
        }]
    }))?)
}

fn deployment() -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "250m", "memory": "512Mi"},
                                  "limits": {"cpu": "1", "memory": "1Gi"}}}]}}}
    }))?)
}

fn rsr(phase: &str) -> anyhow::Result<RightsizingRecommendation> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingRecommendation",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"workloadRef": {"kind": "Deployment", "name": "web"},
                 "recommendationID": "r1", "containers": []},
        "status": {"phase": phase, "live": {"containers": [{
            "name": "app",
            "requests": {"cpu": "120m", "memory": "384Mi"},
            "limits": {"memory": "1Gi"},
            "base": {"requests": {"cpu": "250m", "memory": "512Mi"},
                     "limits": {"cpu": "1", "memory": "1Gi"}},
        }]}}
    }))?)
}

/// Waits for `n` pods of `web`; returns them as JSON by name.
async fn pods(sim: &Sim, n: usize) -> anyhow::Result<Vec<Value>> {
    kerf_testkit::pods(
        &sim.client(),
        "default",
        "app=web",
        n,
        Duration::from_secs(10),
    )
    .await
}

/// Records each ReplicaSet's Deployment in the index, as the agent's cache does.
async fn index_replicasets(sim: &Sim, index: &SharedIndex) -> anyhow::Result<()> {
    let api: Api<k8s_openapi::api::apps::v1::ReplicaSet> = Api::namespaced(sim.client(), "default");
    for rs in api.list(&ListParams::default()).await? {
        let owner = rs
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == "Deployment");
        if let (Some(name), Some(o)) = (&rs.metadata.name, owner) {
            index.upsert_replicaset("default", name, Some(&o.name));
        }
    }
    Ok(())
}

// rule: AP-06, AP-18, RB-21
#[tokio::test]
async fn pods_created_through_the_api_server_get_live_values() {
    let dir = tempfile::tempdir().unwrap();
    let ca_pem = write_certs(dir.path()).unwrap();
    let certs =
        ReloadingCert::load(&dir.path().join("tls.crt"), &dir.path().join("tls.key")).unwrap();
    let index = SharedIndex::new();
    index.upsert_rsr(&rsr("Applied").unwrap()).unwrap();
    let mut registry = Registry::default();
    let metrics = webhook::register_metrics(&mut registry);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://127.0.0.1:{}/mutate",
        listener.local_addr().unwrap().port()
    );
    let router = webhook::router(index.clone(), metrics.clone());
    tokio::spawn(webhook::serve(
        listener,
        certs,
        router,
        std::future::pending(),
    ));

    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let mwc: Api<MutatingWebhookConfiguration> = Api::all(sim.client());
    mwc.create(
        &PostParams::default(),
        &webhook_config(&url, &ca_pem).unwrap(),
    )
    .await
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(sim.client(), "default");
    deployments
        .create(&PostParams::default(), &deployment().unwrap())
        .await
        .unwrap();

    let live = json!({"requests": {"cpu": "120m", "memory": "384Mi"}, "limits": {"memory": "1Gi"}});
    let first = pods(&sim, 2).await.unwrap();
    for p in &first {
        // AP-18: the CPU limit the change removed is absent from the new pod.
        assert_eq!(
            p["spec"]["containers"][0]["resources"], live,
            "{}",
            p["metadata"]["name"]
        );
    }
    let patched = metrics
        .requests
        .get_or_create(&kerf_agent::metrics::ResultLabel {
            result: "patched".into(),
        })
        .get();
    assert!(patched >= 2, "webhook patched {patched} pods");

    // A pod added by scaling, its ReplicaSet now in the index, gets them too.
    index_replicasets(&sim, &index).await.unwrap();
    let third = scale_to(&sim, &first, 3).await.unwrap();
    assert_eq!(third["spec"]["containers"][0]["resources"], live);

    // RB-21: after the rollback, new pods keep the template's values.
    index.upsert_rsr(&rsr("RolledBack").unwrap()).unwrap();
    let before = pods(&sim, 3).await.unwrap();
    let fourth = scale_to(&sim, &before, 4).await.unwrap();
    assert_eq!(
        fourth["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
    );
}

/// Scales `web` to `replicas` and returns the one pod not among `before`.
async fn scale_to(sim: &Sim, before: &[Value], replicas: usize) -> anyhow::Result<Value> {
    let deployments: Api<Deployment> = Api::namespaced(sim.client(), "default");
    let name = |p: &Value| {
        p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let names: BTreeSet<String> = before.iter().map(name).collect();
    let scale = json!({"spec": {"replicas": replicas}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&scale))
        .await?;
    let all = pods(sim, replicas).await?;
    let mut new = all.into_iter().filter(|p| !names.contains(&name(p)));
    let pod = new.next().ok_or_else(|| anyhow::anyhow!("no new pod"))?;
    anyhow::ensure!(new.next().is_none(), "more than one new pod");
    Ok(pod)
}
