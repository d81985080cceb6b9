//! Scale measurement of the simulated API server: 10k Deployments with 10 pods each
//! (100k pods) written straight into the store with the controllers off, then the process
//! RSS and the time kube's watcher takes to deliver the initial list of all pods: with one
//! LIST, with kube's default paging (500 per page) and as a streaming list; then paged LISTs.
//!
//! Run: `cargo run --release -p kerf-sim --example scale` (optional arguments: the number
//! of Deployments and the pods per Deployment).

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kerf_sim::sim::{Sim, SimConfig, SimContext};
use kerf_sim::store::gvr;
use kerf_testkit::{BENCH_APP, deployment_json};
use kube::Api;
use kube::api::ListParams;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

/// Namespaces the workloads are spread over.
const NAMESPACES: usize = 100;

/// A size field of /proc/self/status in KiB (`VmRSS:` the resident set, `VmHWM:` its peak).
fn status_kib(field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .ok_or_else(|| anyhow::anyhow!("no {field} in /proc/self/status"))?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

fn gib(kib: u64) -> f64 {
    kib as f64 / (1024.0 * 1024.0)
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
        let dep = deployment_json(&ns, &name, per, BENCH_APP);
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

/// Time until a kube watcher with `config` delivers the whole initial list, and the count.
async fn watcher_initial_list(
    api: Api<Pod>,
    config: watcher::Config,
) -> anyhow::Result<(usize, Duration)> {
    let start = Instant::now();
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

/// Paged LIST with `limit`: pods, pages and time, stopping after `budget`.
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

/// The metadata of a list answer (its items are skipped).
#[derive(serde::Deserialize)]
struct ListHead {
    metadata: ListMeta,
}

/// LISTs of all pods (pages of `limit`, or one) read as text, not decoded into pods: the
/// server's and the transport's share of an initial list. Returns bytes, pages and time.
async fn text_list(
    client: &kube::Client,
    limit: Option<u32>,
) -> anyhow::Result<(usize, usize, Duration)> {
    let start = Instant::now();
    let (mut bytes, mut pages, mut token) = (0, 0, String::new());
    loop {
        let mut uri = String::from("/api/v1/pods");
        if let Some(l) = limit {
            uri.push_str(&format!("?limit={l}&continue={token}"));
        }
        let text = client
            .request_text(http::Request::get(uri).body(Vec::new())?)
            .await?;
        bytes += text.len();
        pages += 1;
        let head: ListHead = serde_json::from_str(&text)?;
        token = head.metadata.continue_.unwrap_or_default();
        if token.is_empty() {
            return Ok((bytes, pages, start.elapsed()));
        }
    }
}

/// Prints the RSS and the peak RSS so far, returning the RSS in KiB.
fn report_rss(when: &str) -> anyhow::Result<u64> {
    let (rss, peak) = (status_kib("VmRSS:")?, status_kib("VmHWM:")?);
    println!(
        "rss {when}: {:.3} GiB (peak so far {:.3} GiB)",
        gib(rss),
        gib(peak)
    );
    Ok(rss)
}

/// One watcher run, printed.
async fn run_watcher(
    api: &Api<Pod>,
    label: &str,
    config: watcher::Config,
) -> anyhow::Result<Duration> {
    let (count, took) = watcher_initial_list(api.clone(), config).await?;
    println!(
        "watcher initial list ({label}): {count} pods in {:.2} s",
        took.as_secs_f64()
    );
    report_rss(&format!("after the {label} watcher"))?;
    Ok(took)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "missed" }
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
    report_rss("after start")?;
    let t = Instant::now();
    populate(sim.context(), deployments, per)?;
    println!(
        "populated {deployments} deployments x {per} pods in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let filled = report_rss("after populate")?;
    let sample = sim
        .context()
        .store
        .list_shared(&gvr::PODS, Some("scale-0"))
        .0;
    if let Some(p) = sample.first() {
        println!("one stored pod: {} bytes of JSON", p.json().len());
    }
    let api: Api<Pod> = Api::all(sim.client());
    let one_list = watcher::Config {
        page_size: None,
        ..watcher::Config::default()
    };
    let took = run_watcher(&api, "one LIST, page_size None", one_list).await?;
    for limit in [None, Some(500)] {
        let (bytes, pages, took) = text_list(&sim.client(), limit).await?;
        println!(
            "LIST as text, not decoded (limit {limit:?}): {:.1} MB in {pages} pages, {:.2} s",
            bytes as f64 / 1e6,
            took.as_secs_f64()
        );
    }
    report_rss("after the text LISTs")?;
    let paged = watcher::Config::default();
    run_watcher(&api, "kube default, 500 per page", paged).await?;
    let streaming = watcher::Config::default().streaming_lists();
    run_watcher(&api, "streaming list", streaming).await?;
    for limit in [500u32, 5_000] {
        let (items, pages, took) = paged_list(&api, limit, Duration::from_secs(120)).await?;
        println!(
            "paged LIST limit={limit}: {items} pods in {pages} pages, {:.2} s",
            took.as_secs_f64()
        );
    }
    report_rss("at end")?;
    println!(
        "target rss <= 3 GiB after populate: {}",
        verdict(filled <= 3 * 1024 * 1024)
    );
    println!(
        "target initial list (one LIST) <= 10 s: {}",
        verdict(took <= Duration::from_secs(10))
    );
    Ok(())
}
