//! The real kubectl against kerf-sim: apply (client- and server-side), get with printer
//! columns, patch of the resize subresource, wait and describe. Skipped when kubectl is
//! not on PATH.

use kerf_sim::sim::{Sim, SimConfig};

fn kubectl(sim: &Sim, args: &[&str], stdin: Option<&str>) -> anyhow::Result<(bool, String)> {
    kerf_testkit::kubectl(sim.kubeconfig_path(), args, stdin)
}

/// Runs kubectl with the words of `line` as its arguments.
fn kubectl_line(sim: &Sim, line: &str, stdin: Option<&str>) -> anyhow::Result<(bool, String)> {
    kubectl(sim, &line.split_whitespace().collect::<Vec<_>>(), stdin)
}

const MANIFEST: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
        resources:
          requests: {cpu: 100m, memory: 64Mi}
          limits: {cpu: 200m, memory: 128Mi}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_get_resize_wait_and_describe_work() -> anyhow::Result<()> {
    let sim = Sim::start(SimConfig::default()).await?;
    let (ok, out) = kubectl(&sim, &["apply", "-f", "-"], Some(MANIFEST))?;
    assert!(ok, "{out}");
    for wait in [
        "wait -n shop --for=condition=Available deployment/web --timeout=20s",
        "wait -n shop --for=condition=Ready pod --all --timeout=20s",
    ] {
        let (ok, out) = kubectl_line(&sim, wait, None)?;
        assert!(ok, "{out}");
    }
    let (ok, pods) = kubectl(&sim, &["get", "pods", "-n", "shop", "-o", "name"], None)?;
    assert!(ok, "{pods}");
    let pod = pods.lines().next().unwrap_or_default().to_string();
    let patch =
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"150m"}}}]}}"#;
    let (ok, out) = kubectl_line(
        &sim,
        &format!("patch -n shop {pod} --subresource resize --type strategic -p {patch}"),
        None,
    )?;
    assert!(ok, "{out}");
    let (ok, out) = kubectl_line(
        &sim,
        &format!("get -n shop {pod} -o jsonpath={{.spec.containers[0].resources.requests.cpu}}"),
        None,
    )?;
    assert_eq!((ok, out.trim()), (true, "150m"));
    let ssa = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        resources:\n          requests:\n            cpu: 180m\n";
    let (ok, out) = kubectl(
        &sim,
        &["apply", "--server-side", "--field-manager=kerf", "-f", "-"],
        Some(ssa),
    )?;
    assert!(
        !ok && out.contains("conflict with \"kubectl-client-side-apply\""),
        "{out}"
    );
    let (ok, out) = kubectl_line(
        &sim,
        "apply --server-side --force-conflicts --field-manager=kerf -f -",
        Some(ssa),
    )?;
    assert!(ok, "{out}");
    let (ok, out) = kubectl(&sim, &["get", "pods", "-n", "shop"], None)?;
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert!(
        ok && header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{out}"
    );
    let (ok, out) = kubectl(
        &sim,
        &["get", "pods", "-n", "shop", "-w", "--request-timeout=2s"],
        None,
    )?;
    let rows = out.lines().filter(|l| l.starts_with("web-")).count();
    assert!(out.starts_with("NAME") && rows >= 2, "{ok} {out}");
    let (ok, out) = kubectl(&sim, &["get", "deploy", "-A"], None)?;
    assert!(ok && out.contains("READY") && out.contains("web"), "{out}");
    let (ok, out) = kubectl(&sim, &["describe", "-n", "shop", "deployment", "web"], None)?;
    assert!(ok && out.contains("Replicas:"), "{out}");
    let (ok, out) = kubectl(&sim, &["describe", "node", "sim-node-1"], None)?;
    assert!(ok && out.contains("Allocatable:"), "{out}");
    let (ok, out) = kubectl(&sim, &["delete", "-n", "shop", "deployment", "web"], None)?;
    assert!(ok, "{out}");
    Ok(())
}
