//! kerf-sim under load with its controllers and kubelet on.
//!
//! 1. Creates `--create` Deployments (2 replicas each) through the HTTPS API with a kube
//!    client, 8 requests in flight, and times the creation and the settling (every
//!    Deployment available).
//! 2. On a fresh cluster, loads `--deployments` Deployments with their ReplicaSets and
//!    `--pods` bound, not yet started pods each straight into the store, waits until the
//!    controllers and the kubelet have settled (every Deployment available and no write for
//!    3 s), then measures the process's CPU time and RSS at rest over `--idle-seconds`.
//!
//! Prints one JSON line. Run:
//! `cargo run --release -p kerf-sim --example bench -- --create 1000 --deployments 10000 --pods 10`

use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use kerf_sim::sim::{Sim, SimConfig, SimContext};
use kerf_sim::store::gvr;
use kerf_testkit::{BENCH_APP, deployment_json, seed_deployment};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

/// Namespaces the loaded workloads are spread over.
const NAMESPACES: usize = 100;

#[derive(Debug, Clone, Copy)]
struct Args {
    create: usize,
    deployments: usize,
    pods: usize,
    idle_seconds: u64,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        create: 1_000,
        deployments: 10_000,
        pods: 10,
        idle_seconds: 30,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--create" => args.create = value.parse()?,
            "--deployments" => args.deployments = value.parse()?,
            "--pods" => args.pods = value.parse()?,
            "--idle-seconds" => args.idle_seconds = value.parse()?,
            other => anyhow::bail!(
                "unknown flag {other} (--create, --deployments, --pods, --idle-seconds)"
            ),
        }
    }
    Ok(args)
}

/// A cluster with room for `pods` pods of 100m / 128Mi.
fn config(pods: usize) -> SimConfig {
    let nodes = pods.div_ceil(1_000).max(3);
    SimConfig {
        nodes,
        node_cpu: "200".into(),
        node_memory: "512Gi".into(),
        node_max_pods: 1_100,
        ..SimConfig::default()
    }
}

fn namespace(ctx: &SimContext, ns: &str) -> anyhow::Result<()> {
    let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    ctx.store.create(&gvr::NAMESPACES, obj, "kubectl")?;
    Ok(())
}

/// Deployments whose status shows every replica available, and all Deployments.
fn available(ctx: &SimContext) -> (usize, usize) {
    let deps = ctx.store.list(&gvr::DEPLOYMENTS, None).0;
    let ready = deps
        .iter()
        .filter(|d| {
            let want = d.pointer("/spec/replicas").and_then(Value::as_i64);
            d.pointer("/status/availableReplicas")
                .and_then(Value::as_i64)
                == want
        })
        .count();
    (ready, deps.len())
}

/// Waits until every Deployment is available and the store saw no write for `quiet`.
async fn settle(ctx: &SimContext, quiet: Duration, limit: Duration) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let (mut rv, mut since) = (ctx.store.resource_version(), Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now_rv = ctx.store.resource_version();
        if now_rv != rv {
            (rv, since) = (now_rv, Instant::now());
            continue;
        }
        let (ready, all) = available(ctx);
        if ready == all && since.elapsed() >= quiet {
            return Ok(start.elapsed().saturating_sub(since.elapsed()));
        }
        anyhow::ensure!(
            start.elapsed() < limit,
            "not settled after {limit:?}: {ready} of {all} Deployments available"
        );
    }
}

/// Part 1: Deployments created through the API.
async fn create_through_api(args: Args) -> anyhow::Result<Value> {
    let sim = Sim::start(config(args.create * 2)).await?;
    namespace(sim.context(), "bench")?;
    let api: Api<Deployment> = Api::namespaced(sim.client(), "bench");
    let start = Instant::now();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..args.create)
        .map(|i| {
            let api = api.clone();
            async move {
                let dep: Deployment = serde_json::from_value(deployment_json(
                    "bench",
                    &format!("web-{i}"),
                    2,
                    BENCH_APP,
                ))?;
                api.create(&PostParams::default(), &dep).await?;
                Ok(())
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let created = start.elapsed();
    for r in results {
        r?;
    }
    let settled = settle(
        sim.context(),
        Duration::from_secs(1),
        Duration::from_secs(600),
    )
    .await?;
    Ok(json!({
        "deployments": args.create,
        "create_s": round(created.as_secs_f64()),
        "settled_s": round(settled.as_secs_f64()),
    }))
}

/// Writes the namespaces, Deployments, ReplicaSets (as the Deployment controller names
/// them) and bound pods into the store.
fn load(ctx: &SimContext, args: Args) -> anyhow::Result<()> {
    for n in 0..NAMESPACES {
        namespace(ctx, &format!("scale-{n}"))?;
    }
    for d in 0..args.deployments {
        let ns = format!("scale-{}", d % NAMESPACES);
        let dep = deployment_json(&ns, &format!("app-{d}"), args.pods, BENCH_APP);
        seed_deployment(ctx, dep, args.pods, d * args.pods)?;
    }
    Ok(())
}

/// User plus system CPU time of this process, from /proc/self/stat.
fn cpu_seconds() -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let after = stat.rsplit_once(')').context("odd /proc/self/stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).context("no utime")?.parse::<u64>()?
        + fields.get(12).context("no stime")?.parse::<u64>()?;
    Ok(ticks as f64 / 100.0)
}

/// A size field of /proc/self/status in MiB (`VmRSS:`, `VmHWM:`).
fn status_mib(field: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .context("no such field in /proc/self/status")?
        .parse()?;
    Ok(round(kib / 1024.0))
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Part 2: a loaded cluster at rest.
async fn at_rest(args: Args) -> anyhow::Result<Value> {
    let start = Instant::now();
    let sim =
        Sim::start_filled(config(args.deployments * args.pods), |ctx| load(ctx, args)).await?;
    let loaded = start.elapsed();
    let settled = settle(
        sim.context(),
        Duration::from_secs(3),
        Duration::from_secs(1800),
    )
    .await?;
    let (cpu0, t0, rv0) = (
        cpu_seconds()?,
        Instant::now(),
        sim.context().store.resource_version(),
    );
    tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
    let idle_cpu = cpu_seconds()? - cpu0;
    let wall = t0.elapsed().as_secs_f64();
    Ok(json!({
        "deployments": args.deployments,
        "pods": args.deployments * args.pods,
        "load_s": round(loaded.as_secs_f64()),
        "settled_s": round(settled.as_secs_f64()),
        "idle_window_s": round(wall),
        "idle_cpu_share_of_core": round(idle_cpu / wall),
        "idle_writes": sim.context().store.resource_version() - rv0,
        "rss_mib": status_mib("VmRSS:")?,
        "hwm_mib": status_mib("VmHWM:")?,
    }))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let api = if args.create > 0 {
        create_through_api(args).await?
    } else {
        Value::Null
    };
    let rest = if args.deployments > 0 {
        at_rest(args).await?
    } else {
        Value::Null
    };
    println!("{}", json!({"create_through_api": api, "at_rest": rest}));
    Ok(())
}
