//! What the agent's pod cache keeps per pod, measured by a counting allocator: kerf-sim (in
//! this process) makes one Deployment's pods with its defaults; one of them, as the API
//! serves it, is the model for N pods (10 pods per Deployment, 10 namespaces, 15 pods per
//! node) that are decoded and stored the way the pod watch does (`PodWire` from the JSON
//! bytes, `PodInfo::from_wire` with one interner, `CacheSet::apply_pod`). Prints one JSON
//! line: the bytes still allocated after the N pods went in (the pods, the indexes, the
//! interned strings), per pod.
//!
//! Run: `cargo run --release -p kerf-agent --example cache_cost -- --pods 10000`.

use std::alloc::System;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kerf_agent::cache::pods::PodWire;
use kerf_agent::cache::{CacheSet, Interner, PodInfo};
use kerf_sim::sim::{Sim, SimConfig};
use kerf_sim::store::gvr;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const PER_WORKLOAD: usize = 10;
const NAMESPACES: usize = 10;
const PER_NODE: usize = 15;

fn parse_pods() -> anyhow::Result<usize> {
    let mut it = std::env::args().skip(1);
    let mut pods = 10_000;
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--pods" => {
                let v = it
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("--pods needs a value"))?;
                pods = v.parse()?;
            }
            other => anyhow::bail!("unknown argument {other}; known: --pods"),
        }
    }
    Ok(pods)
}

/// One pod of a Deployment made by kerf-sim's controllers and kubelet, as the API serves it.
async fn model_pod() -> anyhow::Result<Value> {
    let sim = Sim::start(SimConfig::default()).await?;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "model", "namespace": "default", "labels": {"app": "model"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "model"}},
            "template": {"metadata": {"labels": {"app": "model"}}, "spec": {"containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "200m", "memory": "256Mi"},
                     "limits": {"memory": "512Mi"}}}]}}}});
    sim.context()
        .store
        .create(&gvr::DEPLOYMENTS, deployment, "kubectl")?;
    let pods: Api<Pod> = Api::namespaced(sim.client(), "default");
    for _ in 0..600 {
        let list = pods.list(&ListParams::default()).await?;
        let running = list
            .items
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        if let Some(p) = running {
            return Ok(serde_json::to_value(p)?);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("kerf-sim started no pod within 60 s")
}

/// The model renamed as pod `i`: its own name, uid and resourceVersion, the ReplicaSet of
/// its workload as owner, and a node.
fn pod_bytes(model: &Value, i: usize) -> anyhow::Result<Vec<u8>> {
    let mut p = model.clone();
    let workload = i / PER_WORKLOAD;
    let hash = format!("{:010x}", workload * 7919);
    let rs = format!("app-{workload}-{hash}");
    let m = &mut p["metadata"];
    m["name"] = json!(format!("{rs}-{:05x}", i * 31));
    m["namespace"] = json!(format!("scale-{}", workload % NAMESPACES));
    m["uid"] = json!(uuid::Uuid::new_v4().to_string());
    m["resourceVersion"] = json!((1000 + i).to_string());
    m["labels"] = json!({"app": format!("app-{workload}"), "pod-template-hash": hash});
    if let Some(owner) = m["ownerReferences"].get_mut(0) {
        owner["name"] = json!(rs);
        owner["uid"] = json!(format!("00000000-0000-4000-8000-{workload:012x}"));
    }
    p["spec"]["nodeName"] = json!(format!("node-{}", i / PER_NODE));
    Ok(serde_json::to_vec(&p)?)
}

fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let n = parse_pods()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let model = rt.block_on(model_pod())?;
    drop(rt);
    let model_len = serde_json::to_vec(&model)?.len();
    let cache = CacheSet::new();
    let mut interner = Interner::default();
    let region = Region::new(GLOBAL);
    for i in 0..n {
        // The watch decodes each event from its bytes; the bytes are gone afterwards.
        let bytes = pod_bytes(&model, i)?;
        let wire: PodWire = serde_json::from_slice(&bytes)?;
        drop(bytes);
        cache.apply_pod(PodInfo::from_wire(wire, &mut interner));
    }
    let stats = region.change();
    // A realloc's growth or shrink is counted in both totals already.
    let live = stats.bytes_allocated as i64 - stats.bytes_deallocated as i64;
    let last: Value = serde_json::from_slice(&pod_bytes(&model, n.saturating_sub(1))?)?;
    let (ns, name) = (&last["metadata"]["namespace"], &last["metadata"]["name"]);
    let found = cache.pod(ns.as_str().unwrap_or(""), name.as_str().unwrap_or(""));
    anyhow::ensure!(found.is_some(), "the cache does not hold pod {ns}/{name}");
    let per_pod = live as f64 / n as f64;
    let result = json!({
        "pods": n, "model_pod_json_bytes": model_len,
        "bytes_per_pod": (per_pod * 10.0).round() / 10.0,
        "interned_strings": interner.len(),
        "pod_info_size": std::mem::size_of::<PodInfo>(),
        "container_size": std::mem::size_of::<kerf_agent::cache::PodContainer>(),
    });
    println!("{result}");
    Ok(())
}
