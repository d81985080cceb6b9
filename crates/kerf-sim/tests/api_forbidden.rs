//! The three 403 answers of `pods/resize` (design D17), through kube's Client, as the real
//! kube-apiserver renders them: node room (PodResizeValidator), RBAC and ResourceQuota.

use k8s_openapi::api::core::v1::Pod;
use kerf_sim::sim::Sim;
use kerf_testkit::api_sim;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const AGENT: &str = "system:serviceaccount:kerf-system:kerf";

/// A kube Client of the cluster acting as `user` (`Impersonate-User`).
async fn client_as(sim: &Sim, user: &str) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(sim.kubeconfig_path())?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    config.headers.push((
        http::HeaderName::from_static("impersonate-user"),
        http::HeaderValue::from_str(user)?,
    ));
    Ok(kube::Client::try_from(config)?)
}

/// Creates namespace `ns` and a pod `name` bound to sim-node-1 asking `cpu` and `memory`.
async fn pod(sim: &Sim, ns: &str, name: &str, cpu: &str, memory: &str) -> anyhow::Result<()> {
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(sim.client());
    if nss.get_opt(ns).await?.is_none() {
        nss.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": "sim-node-1", "containers": [{"name": "app", "image": "app:1",
            "resources": {"requests": {"cpu": cpu, "memory": memory},
                          "limits": {"cpu": cpu, "memory": memory}}}]}}))?;
    Api::<Pod>::namespaced(sim.client(), ns)
        .create(&PostParams::default(), &pod)
        .await?;
    Ok(())
}

/// Resizes container `app` of `ns/name` to `cpu` (requests and limits).
async fn resize_cpu(client: kube::Client, ns: &str, name: &str, cpu: &str) -> kube::Result<Pod> {
    let patch = json!({"spec": {"containers": [{"name": "app",
        "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}});
    Api::<Pod>::namespaced(client, ns)
        .patch_subresource(
            "resize",
            name,
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
}

/// Resizes container `app` of `ns/name` to `cpu`; the Status of the refusal.
async fn resize_refused(
    client: kube::Client,
    ns: &str,
    name: &str,
    cpu: &str,
) -> anyhow::Result<Value> {
    match resize_cpu(client, ns, name, cpu).await {
        Err(kube::Error::Api(status)) => Ok(serde_json::to_value(&*status)?),
        Err(e) => anyhow::bail!("unexpected error: {e}"),
        Ok(_) => anyhow::bail!("resize of {ns}/{name} to {cpu} was accepted"),
    }
}

/// A sim with pod `shop/name` whose resizes RBAC denies to the agent.
async fn pod_the_agent_may_not_resize(name: &str) -> anyhow::Result<Sim> {
    let sim = api_sim().await?;
    pod(&sim, "shop", name, "500m", "128Mi").await?;
    sim.context().state.resize.deny_user(AGENT);
    Ok(sim)
}

fn shape(status: &Value) -> Value {
    json!({"status": status["status"], "code": status["code"], "reason": status["reason"],
        "message": status["message"], "details": status["details"]})
}

#[tokio::test]
async fn resize_beyond_node_room_answers_the_recorded_403() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    pod(&sim, "conf", "resize-too-big", "1", "128Mi").await?;
    let status = resize_refused(sim.client(), "conf", "resize-too-big", "5").await?;
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/02-resize-beyond-allocatable.json"
    ))?)?;
    assert_eq!(shape(&status), shape(&recorded["response"]["body"]));
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("node didn't have enough allocatable"))
    );
    Ok(())
}

#[tokio::test]
async fn resize_denied_by_rbac_names_user_verb_and_subresource() -> anyhow::Result<()> {
    let sim = pod_the_agent_may_not_resize("web-1").await?;
    let status = resize_refused(client_as(&sim, AGENT).await?, "shop", "web-1", "600m").await?;
    assert_eq!(
        shape(&status),
        json!({"status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "pods \"web-1\" is forbidden: User \"system:serviceaccount:kerf-system:kerf\" cannot patch resource \"pods/resize\" in API group \"\" in the namespace \"shop\"",
            "details": {"name": "web-1", "kind": "pods"}})
    );
    let other = client_as(&sim, "someone-else").await?;
    let pod = resize_cpu(other, "shop", "web-1", "600m").await?;
    let cpu = pod.spec.and_then(|s| s.containers[0].resources.clone());
    assert_eq!(
        cpu.and_then(|r| r.requests)
            .and_then(|r| r.get("cpu").cloned()),
        Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
            "600m".into()
        ))
    );
    sim.context().state.resize.allow_user(AGENT);
    resize_cpu(client_as(&sim, AGENT).await?, "shop", "web-1", "700m").await?;
    Ok(())
}

#[tokio::test]
async fn resize_denied_by_rbac_on_put_says_update() -> anyhow::Result<()> {
    let sim = pod_the_agent_may_not_resize("web-2").await?;
    let api = Api::<Pod>::namespaced(client_as(&sim, AGENT).await?, "shop");
    let current = Api::<Pod>::namespaced(sim.client(), "shop")
        .get("web-2")
        .await?;
    let res = api
        .replace_subresource("resize", "web-2", &PostParams::default(), &current)
        .await;
    let Err(kube::Error::Api(status)) = res else {
        panic!("PUT pods/resize was not refused: {res:?}");
    };
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "pods \"web-2\" is forbidden: User \"system:serviceaccount:kerf-system:kerf\" cannot update resource \"pods/resize\" in API group \"\" in the namespace \"shop\""
    );
    Ok(())
}

#[tokio::test]
async fn resize_beyond_resource_quota_answers_exceeded_quota() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    pod(&sim, "team", "api-1", "1", "256Mi").await?;
    pod(&sim, "team", "api-2", "500m", "256Mi").await?;
    sim.context().state.resize.set_quota(
        "team",
        "compute",
        &[("requests.cpu", "2"), ("requests.memory", "1Gi")],
    );
    let status = resize_refused(sim.client(), "team", "api-2", "1500m").await?;
    assert_eq!(
        shape(&status),
        json!({"status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "pods \"api-2\" is forbidden: exceeded quota: compute, requested: requests.cpu=1, used: requests.cpu=1500m, limited: requests.cpu=2",
            "details": {"name": "api-2", "kind": "pods"}})
    );
    // Within the quota the resize goes in.
    resize_cpu(sim.client(), "team", "api-2", "1").await?;
    sim.context().state.resize.clear_quota("team");
    resize_cpu(sim.client(), "team", "api-2", "2").await?;
    Ok(())
}
