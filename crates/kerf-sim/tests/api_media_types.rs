//! The `scale` subresource that `kubectl scale` uses, and kubectl's apply route (protobuf
//! bodies are covered in `api_protobuf.rs`).

use k8s_openapi::api::apps::v1::Deployment;
use kerf_sim::sim::Sim;
use kerf_testkit::api_sim;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn the_scale_subresource_reads_and_sets_replicas() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let api: Api<Deployment> = Api::namespaced(sim.client(), "default");
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}}}});
    api.create(&PostParams::default(), &serde_json::from_value(d)?)
        .await?;
    let scale = api.get_scale("web").await?;
    assert_eq!(
        scale.status.and_then(|s| s.selector).as_deref(),
        Some("app=web")
    );
    let scale = api
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await?;
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(3));
    let d = api.get("web").await?;
    assert_eq!(d.spec.and_then(|s| s.replicas), Some(3));
    assert_eq!(d.metadata.generation, Some(2));
    Ok(())
}

fn kubectl(sim: &Sim, args: &str, stdin: Option<&str>) -> anyhow::Result<(bool, String)> {
    let args: Vec<&str> = args.split_whitespace().collect();
    kerf_testkit::kubectl(sim.kubeconfig_path(), &args, stdin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_of_generated_yaml_and_scale_work() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    for create in [
        "create namespace x",
        "create deployment web -n x --image=registry.k8s.io/pause:3.10",
    ] {
        let (ok, yaml) = kubectl(&sim, &format!("{create} --dry-run=client -o yaml"), None)?;
        assert!(ok, "{yaml}");
        let (ok, out) = kubectl(&sim, "apply -f -", Some(&yaml))?;
        assert!(ok, "{out}");
    }
    let (ok, out) = kubectl(&sim, "scale -n x deployment web --replicas=2", None)?;
    assert!(ok, "{out}");
    let (ok, out) = kubectl(
        &sim,
        "get -n x deployment web -o jsonpath={.spec.replicas}",
        None,
    )?;
    assert_eq!((ok, out.trim()), (true, "2"));
    Ok(())
}
