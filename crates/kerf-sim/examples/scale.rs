//! Scale measurement of the simulated API server: 10k Deployments with 10 pods each
//! (100k pods) written straight into the store with the controllers off, then the process
//! RSS and the time kube's watcher takes to deliver the initial list of all pods.
//!
//! Run: `cargo run --release -p kerf-sim --example scale` (optional arguments: the number
//! of Deployments and the pods per Deployment).

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kerf_sim::sim::{Sim, SimConfig, SimContext};
use kerf_sim::store::gvr;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

/// Namespaces the workloads are spread over.
const NAMESPACES: usize = 100;

/// The resident set size of this process in KiB (`VmRSS` of /proc/self/status).
fn rss_kib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or_else(|| anyhow::anyhow!("no VmRSS in /proc/self/status"))?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

fn gib(kib: u64) -> f64 {
    kib as f64 / (1024.0 * 1024.0)
}

fn deployment(ns: &str, name: &str, replicas: usize) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                {"name": "app", "image": "registry.example/app:1.0",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                               "limits": {"cpu": "500m", "memory": "256Mi"}}}]}}}})
}

fn replica_set(ns: &str, name: &str, dep: &Value, replicas: usize) -> Value {
    let dep_name = dep["metadata"]["name"].clone();
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": ns,
            "labels": {"app": dep_name, "pod-template-hash": "5d8f7c9b6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": dep_name,
                "uid": dep["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"replicas": replicas,
            "selector": {"matchLabels": {"app": dep_name, "pod-template-hash": "5d8f7c9b6"}},
            "template": dep["spec"]["template"]}})
}

fn pod(ns: &str, name: &str, rs: &Value, node: &str) -> Value {
    let labels = rs["metadata"]["labels"].clone();
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": rs["metadata"]["name"], "uid": rs["metadata"]["uid"],
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"nodeName": node, "containers": rs["spec"]["template"]["spec"]["containers"]},
        "status": {"phase": "Running", "qosClass": "Burstable", "podIP": "10.244.1.10",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0,
                "image": "registry.example/app:1.0", "started": true,
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}})
}

/// Writes the namespaces, Deployments, ReplicaSets and pods into the store.
fn populate(ctx: &SimContext, deployments: usize, per: usize) -> anyhow::Result<()> {
    for n in 0..NAMESPACES {
        let ns = format!("scale-{n}");
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        ctx.store.create(&gvr::NAMESPACES, obj, "kubectl")?;
    }
    let nodes = ctx.config.nodes.max(1);
    for d in 0..deployments {
        let ns = format!("scale-{}", d % NAMESPACES);
        let name = format!("app-{d}");
        let dep = deployment(&ns, &name, per);
        let dep = ctx.store.create(&gvr::DEPLOYMENTS, dep, "kubectl")?;
        let rs_name = format!("{name}-5d8f7c9b6");
        let rs = replica_set(&ns, &rs_name, &dep, per);
        let rs = ctx
            .store
            .create(&gvr::REPLICASETS, rs, "kube-controller-manager")?;
        for p in 0..per {
            let node = kerf_sim::sim::node_name((d * per + p) % nodes + 1);
            let obj = pod(&ns, &format!("{rs_name}-{p:05}"), &rs, &node);
            ctx.store
                .create(&gvr::PODS, obj, "kube-controller-manager")?;
        }
    }
    Ok(())
}

/// Time until kube's watcher (one LIST, no pages) delivers the whole initial list.
async fn watcher_initial_list(api: Api<Pod>) -> anyhow::Result<(usize, Duration)> {
    let start = Instant::now();
    let config = watcher::Config {
        page_size: None,
        ..watcher::Config::default()
    };
    let mut stream = Box::pin(watcher::watcher(api, config));
    let mut count = 0;
    while let Some(ev) = stream.next().await {
        match ev? {
            Event::InitApply(_) => count += 1,
            Event::InitDone => return Ok((count, start.elapsed())),
            _ => {}
        }
    }
    anyhow::bail!("watch ended before the initial list")
}

/// Paged LIST with `limit`: pods and time, stopping after `budget`.
async fn paged_list(
    api: &Api<Pod>,
    limit: u32,
    budget: Duration,
) -> anyhow::Result<(usize, usize, Duration)> {
    let start = Instant::now();
    let mut token: Option<String> = None;
    let (mut items, mut pages) = (0, 0);
    loop {
        let mut lp = ListParams::default().limit(limit);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await?;
        items += page.items.len();
        pages += 1;
        token = page.metadata.continue_.filter(|c| !c.is_empty());
        if token.is_none() || start.elapsed() > budget {
            return Ok((items, pages, start.elapsed()));
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let deployments: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let per: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let sim = Sim::start(SimConfig {
        run_controllers: false,
        nodes: 100,
        node_max_pods: 1_100,
        ..SimConfig::default()
    })
    .await?;
    let base = rss_kib()?;
    println!("rss after start: {:.3} GiB", gib(base));
    let t = Instant::now();
    populate(sim.context(), deployments, per)?;
    println!(
        "populated {deployments} deployments x {per} pods in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let filled = rss_kib()?;
    println!("rss after populate: {:.3} GiB", gib(filled));
    let sample = sim.context().store.list(&gvr::PODS, Some("scale-0")).0;
    if let Some(p) = sample.first() {
        println!(
            "one stored pod: {} bytes of JSON",
            serde_json::to_vec(p)?.len()
        );
    }
    let api: Api<Pod> = Api::all(sim.client());
    let (count, took) = watcher_initial_list(api.clone()).await?;
    println!(
        "watcher initial list (page_size None): {count} pods in {:.2} s",
        took.as_secs_f64()
    );
    let after = rss_kib()?;
    println!("rss after watcher list: {:.3} GiB", gib(after));
    for limit in [500u32, 5_000] {
        let (items, pages, took) = paged_list(&api, limit, Duration::from_secs(30)).await?;
        println!(
            "paged LIST limit={limit}: {items} pods in {pages} pages, {:.2} s",
            took.as_secs_f64()
        );
    }
    let peak = rss_kib()?;
    println!("rss at end: {:.3} GiB", gib(peak));
    let ok_rss = filled <= 3 * 1024 * 1024;
    let ok_list = took <= Duration::from_secs(10);
    println!(
        "target rss <= 3 GiB after populate: {}",
        if ok_rss { "met" } else { "missed" }
    );
    println!(
        "target initial list <= 10 s: {}",
        if ok_list { "met" } else { "missed" }
    );
    Ok(())
}
