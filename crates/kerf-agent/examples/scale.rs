//! Scale run of the agent: kerf-sim (in this process) with N Deployments of P pods written
//! straight into its store, already running (their ReplicaSets, bound pods with the status
//! its kubelet gives a started pod, and the status the controllers write once every pod is
//! available), the dev hub with one recommendation per workload (a share of
//! them a change, the rest equal to the requests), a policy in auto-patch with the
//! in-place strategy, and `kerf-agent run` as a separate process. Prints one JSON line:
//! cache sync, every rsr with a phase, every change Applied, the agent's RSS after the
//! pass, then over an idle window its CPU, its API requests by verb and its decisions per
//! second, and the actuating writes per second of the change wave.
//!
//! Run: `cargo build --release -p kerf-agent && cargo run --release -p kerf-agent --example
//! scale -- --workloads 1000 --pods-per-workload 10`. `--baseline FILE` compares the run
//! with a committed baseline and exits 1 when the time to phase or the RSS exceeds it by
//! more than 25 %. `--scoped-namespaces K` runs the agent scoped to the first K of the
//! ten namespaces (`--scope-namespaces`), so that it manages K tenths of the workloads
//! while the cluster holds them all: the pass then waits for those workloads' rsrs only.
//! The agent runs with its allocator as released (jemalloc with the settings built into
//! it; `_RJEM_MALLOC_CONF` in the run's environment adds to them); `--system-allocator`
//! builds it with the system allocator instead, which a heap profiler given with
//! `--agent-wrapper` sees. The line names what it ran with.

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use kerf_api::RightsizingRecommendation;
use kerf_sim::sim::{Sim, SimConfig, SimContext};
use kerf_sim::store::gvr;
use kerf_testkit::{
    AgentBuild, App, KillOnDrop, agent_binary, agent_run, deployment_json, free_port,
    seed_running_deployment,
};
use kube::Api;
use serde_json::{Value, json};

const NAMESPACES: usize = 10;
const CLUSTER: &str = "scale";
const IMAGE: &str = "registry.k8s.io/pause:3.10";
/// How long the agent must have sent no write before the idle window starts.
const QUIET: Duration = Duration::from_secs(3);

#[derive(Debug)]
struct Args {
    workloads: usize,
    pods: usize,
    change_share: f64,
    idle: Duration,
    baseline: Option<PathBuf>,
    agent_args: Vec<String>,
    agent_log: String,
    /// A command the agent runs under (a profiler), split at spaces.
    agent_wrapper: Option<String>,
    /// The agent manages the first this many namespaces only (all when `None`).
    scoped_namespaces: Option<usize>,
    /// The agent is built with the system allocator instead of jemalloc.
    system_allocator: bool,
}

impl Args {
    /// Whether the agent manages workload `d`.
    fn in_scope(&self, d: usize) -> bool {
        self.scoped_namespaces.is_none_or(|k| d % NAMESPACES < k)
    }

    /// Whether workload `d` gets a change: spread evenly over the workloads, or, in a
    /// scoped run, over the workloads of each namespace (the namespaces take the workloads
    /// in turn, so a spread over all of them could miss the managed ones).
    fn is_change(&self, d: usize) -> bool {
        let i = if self.scoped_namespaces.is_some() {
            d / NAMESPACES
        } else {
            d
        };
        is_change(i, self.change_share)
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args {
        workloads: 1000,
        pods: 10,
        change_share: 0.5,
        idle: Duration::from_secs(60),
        baseline: None,
        agent_args: Vec::new(),
        agent_log: "warn".to_owned(),
        agent_wrapper: None,
        scoped_namespaces: None,
        system_allocator: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--workloads" => a.workloads = value()?.parse()?,
            "--pods-per-workload" => a.pods = value()?.parse()?,
            "--change-share" => a.change_share = value()?.parse()?,
            "--idle-seconds" => a.idle = Duration::from_secs(value()?.parse()?),
            "--baseline" => a.baseline = Some(value()?.into()),
            "--agent-arg" => a.agent_args.push(value()?),
            "--agent-log" => a.agent_log = value()?,
            "--agent-wrapper" => a.agent_wrapper = Some(value()?),
            "--system-allocator" => a.system_allocator = true,
            "--scoped-namespaces" => {
                let k: usize = value()?.parse()?;
                anyhow::ensure!(
                    (1..=NAMESPACES).contains(&k),
                    "--scoped-namespaces takes 1 to {NAMESPACES}"
                );
                let list: Vec<String> = (0..k).map(|n| format!("scale-{n}")).collect();
                a.agent_args
                    .push(format!("--scope-namespaces={}", list.join(",")));
                a.scoped_namespaces = Some(k);
            }
            other => anyhow::bail!(
                "unknown argument {other}; known: --workloads --pods-per-workload \
                 --change-share --idle-seconds --baseline --agent-arg --agent-log \
                 --agent-wrapper --system-allocator --scoped-namespaces"
            ),
        }
    }
    Ok(a)
}

fn namespace(d: usize) -> String {
    format!("scale-{}", d % NAMESPACES)
}

fn deployment(ns: &str, name: &str, replicas: usize) -> Value {
    let app = App {
        image: IMAGE,
        requests: ["200m", "256Mi"],
        limits: None,
    };
    deployment_json(ns, name, replicas, app)
}

/// Writes Deployment `d` with its ReplicaSet and pods into the store, the pods running as
/// if the sim's kubelet had started them (a start of each pod one by one took kerf-sim
/// 16 minutes at 100,000 pods).
fn populate_one(ctx: &SimContext, d: usize, per: usize) -> anyhow::Result<()> {
    let (ns, name) = (namespace(d), format!("app-{d}"));
    seed_running_deployment(ctx, deployment(&ns, &name, per), per, d * per)
}

/// Waits until every Deployment reports all its replicas available (at once, when the fill
/// wrote them so).
async fn wait_available(ctx: &SimContext) -> anyhow::Result<f64> {
    wait_until(
        "every Deployment available",
        Duration::from_secs(3600),
        4,
        || async {
            let (deps, _) = ctx.store.list(&gvr::DEPLOYMENTS, None);
            deps.iter().all(|d| {
                let want = d.pointer("/spec/replicas").and_then(Value::as_i64);
                d.pointer("/status/availableReplicas")
                    .and_then(Value::as_i64)
                    == want
            })
        },
    )
    .await
}

fn populate(ctx: &SimContext, args: &Args) -> anyhow::Result<()> {
    for n in 0..NAMESPACES {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("scale-{n}")}});
        ctx.store.create(&gvr::NAMESPACES, obj, "kubectl")?;
    }
    let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kerf-system"}});
    ctx.store.create(&gvr::NAMESPACES, obj, "kubectl")?;
    for d in 0..args.workloads {
        populate_one(ctx, d, args.pods)?;
    }
    Ok(())
}

/// Whether workload `d` gets a change (spread evenly over the workloads).
fn is_change(d: usize, share: f64) -> bool {
    let before = (d as f64 * share).floor();
    let after = ((d + 1) as f64 * share).floor();
    after > before
}

fn recommendations(args: &Args) -> anyhow::Result<Vec<kerf_api::hub::Recommendation>> {
    (0..args.workloads)
        .map(|d| {
            let (cpu, mem) = if args.is_change(d) {
                ("100m", "128Mi")
            } else {
                ("200m", "256Mi")
            };
            kerf_testkit::hub_recommendation(
                [&namespace(d), "Deployment", &format!("app-{d}")],
                &format!("rec-{d}-{cpu}"),
                [cpu, mem],
                "0.9",
            )
        })
        .collect()
}

async fn apply_cluster_objects(client: &kube::Client) -> anyhow::Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use serde::Deserialize;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let text = include_str!("../../../config/crds/kerf.getkerf.dev.yaml");
    for doc in serde_yaml::Deserializer::from_str(text) {
        let crd = CustomResourceDefinition::deserialize(doc)?;
        crds.create(&Default::default(), &crd).await?;
    }
    let namespaces: Vec<String> = (0..NAMESPACES).map(|n| format!("scale-{n}")).collect();
    let policy: kerf_api::RightsizingPolicy = serde_json::from_value(json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingPolicy",
        "metadata": {"name": "scale"},
        "spec": {"priority": 10, "selector": {"namespaces": namespaces}, "mode": "auto-patch",
            "guardrails": {"learningPeriod": "1s", "minConfidence": "0.5", "cooldown": "1s",
                "rollback": {"watchDuration": "1s"}},
            "apply": {"strategy": "in-place", "fallbackAfter": "5m", "minWindowRemaining": "1s"}}
    }))?;
    let api: Api<kerf_api::RightsizingPolicy> = Api::all(client.clone());
    // The CRD may take a moment to be served.
    for _ in 0..50 {
        if api.create(&Default::default(), &policy).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("cannot create the RightsizingPolicy")
}

struct Agent {
    child: KillOnDrop,
    port: u16,
}

fn start_agent(sim: &Sim, hub: &str, args: &Args) -> anyhow::Result<Agent> {
    let port = free_port()?;
    let bin = agent_binary(if args.system_allocator {
        AgentBuild::SystemAllocator
    } else {
        AgentBuild::Plain
    })?;
    let mut cmd = agent_run(&bin, CLUSTER, hub, "10s");
    if let Some(wrapper) = &args.agent_wrapper {
        // The wrapper's words, then the agent's command line as `agent_run` made it.
        let mut words = wrapper.split_whitespace();
        let mut wrapped = std::process::Command::new(words.next().unwrap_or("env"));
        wrapped
            .args(words)
            .arg(cmd.get_program())
            .args(cmd.get_args());
        cmd = wrapped;
    }
    let child = cmd
        .env("KUBECONFIG", sim.kubeconfig_path())
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .args(["--log-filter", &args.agent_log])
        .args(&args.agent_args)
        // The agent logs to stdout: its lines go to stderr, stdout keeps the one JSON line.
        .stdout(Stdio::from(std::io::stderr().as_fd().try_clone_to_owned()?))
        .stderr(Stdio::inherit())
        .spawn()?;
    Ok(Agent {
        child: KillOnDrop(child),
        port,
    })
}

impl Agent {
    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let r = reqwest::get(format!("http://127.0.0.1:{}{path}", self.port))
            .await
            .ok()?;
        let code = r.status().as_u16();
        Some((code, r.text().await.ok()?))
    }

    /// A field of /proc/PID/status in KiB.
    fn status_kib(&self, field: &str) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.0.id()))?;
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("no {field} for the agent"))
    }

    /// User plus system CPU seconds.
    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.0.id()))?;
        let f: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace().collect())
            .unwrap_or_default();
        let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        Ok((tick(11) + tick(12)) / 100.0)
    }

    /// `kerf_agent_allocator_bytes` by state, in KiB.
    async fn allocator_kib(&self) -> BTreeMap<String, u64> {
        let Some((_, text)) = self.get("/metrics").await else {
            return BTreeMap::new();
        };
        text.lines()
            .filter_map(|l| l.strip_prefix("kerf_agent_allocator_bytes{state=\""))
            .filter_map(|l| {
                let (state, rest) = l.split_once("\"} ")?;
                Some((state.to_owned(), rest.trim().parse::<u64>().ok()? / 1024))
            })
            .collect()
    }

    /// The sum of `kerf_agent_decisions_total` over its labels.
    async fn decisions(&self) -> f64 {
        let Some((_, text)) = self.get("/metrics").await else {
            return 0.0;
        };
        text.lines()
            .filter(|l| l.starts_with("kerf_agent_decisions_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// Counts of the rsrs: with a phase, and in phase Applied.
/// How many rsrs have a phase and how many are `Applied`, as a watch of the rsrs shows
/// them: each change is seen when it happens, and nothing lists every rsr again and again
/// (a list of 10,000 rsrs takes kerf-sim's CPU from the pass it measures).
fn watch_phases(client: &kube::Client) -> (tokio::sync::watch::Receiver<(usize, usize)>, KillTask) {
    use futures::StreamExt;
    use kube::runtime::watcher::{self, Event};
    let api: Api<RightsizingRecommendation> = Api::all(client.clone());
    let (tx, rx) = tokio::sync::watch::channel((0, 0));
    let task = tokio::spawn(async move {
        let mut phases: BTreeMap<(String, String), bool> = BTreeMap::new();
        let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let (rsr, deleted) = match event {
                Ok(Event::Apply(r) | Event::InitApply(r)) => (r, false),
                Ok(Event::Delete(r)) => (r, true),
                _ => continue,
            };
            let key = (
                rsr.metadata.namespace.clone().unwrap_or_default(),
                rsr.metadata.name.clone().unwrap_or_default(),
            );
            let phase = rsr.status.as_ref().and_then(|s| s.phase.as_ref());
            match phase.filter(|_| !deleted) {
                Some(p) => phases.insert(key, format!("{p:?}").contains("Applied")),
                None => phases.remove(&key),
            };
            let applied = phases.values().filter(|a| **a).count();
            tx.send_replace((phases.len(), applied));
        }
    });
    (rx, KillTask(task))
}

/// Aborts its task when dropped.
struct KillTask(tokio::task::JoinHandle<()>);

impl Drop for KillTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Seconds until `done` holds for the counts, at most `limit`.
async fn wait_counts(
    what: &str,
    rx: &mut tokio::sync::watch::Receiver<(usize, usize)>,
    limit: Duration,
    done: impl FnMut(&(usize, usize)) -> bool,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    match tokio::time::timeout(limit, rx.wait_for(done)).await {
        Ok(Ok(_)) => Ok(start.elapsed().as_secs_f64()),
        Ok(Err(_)) => anyhow::bail!("{what}: the rsr watch ended"),
        Err(_) => anyhow::bail!("{what}: not reached within {limit:?}"),
    }
}

async fn wait_until<F, Fut>(
    what: &str,
    limit: Duration,
    spacing: u32,
    mut check: F,
) -> anyhow::Result<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        let looked = Instant::now();
        if check().await {
            break;
        }
        if start.elapsed() > limit {
            anyhow::bail!("{what}: not reached within {limit:?}");
        }
        // A look waits `spacing` times its own length before the next (at least 100 ms):
        // one that reads the whole store (100,000 pods take seconds to decode) waits four
        // times, so the sim keeps its cores for its controllers and kubelet; cheap looks (the
        // agent's readiness) wait once. The rsrs' phases are watched, not looked at.
        let pause = (looked.elapsed() * spacing).max(Duration::from_millis(100));
        tokio::time::sleep(pause).await;
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Actuating writes of the change wave per second: their count over the time from the
/// first to the last.
fn wave_rate(sim: &Sim) -> (usize, f64) {
    let snap = sim.audit().snapshot();
    let times: Vec<Instant> = snap
        .records
        .iter()
        .filter(|r| kerf_agent::apiclient::is_actuating(&r.method, &r.path, Some(&r.query)))
        .map(|r| r.received)
        .collect();
    let span = match (times.first(), times.last()) {
        (Some(a), Some(b)) => (*b - *a).as_secs_f64(),
        _ => 0.0,
    };
    let rate = if span > 0.0 {
        times.len() as f64 / span
    } else {
        0.0
    };
    (times.len(), rate)
}

/// Requests by verb in the audit log since `from` (only the agent talks to the API server
/// while this example waits).
fn requests_by_verb(sim: &Sim, from: Instant) -> BTreeMap<String, u64> {
    let mut by = BTreeMap::new();
    for r in sim.audit().snapshot().records.iter() {
        if r.received >= from {
            *by.entry(r.method.to_string()).or_insert(0) += 1;
        }
    }
    by
}

/// The timings of the pass.
struct Pass {
    sync_s: f64,
    phase_s: f64,
    applied_s: f64,
}

async fn measure_pass(
    args: &Args,
    mut counts: tokio::sync::watch::Receiver<(usize, usize)>,
    agent: &Agent,
) -> anyhow::Result<Pass> {
    let limit = Duration::from_secs(3600);
    let sync_s = wait_until("cache sync", limit, 1, || async {
        agent.get("/readyz").await.is_some_and(|(c, _)| c == 200)
    })
    .await?;
    let managed = (0..args.workloads).filter(|d| args.in_scope(*d));
    let n = managed.clone().count();
    let changes = managed.filter(|d| args.is_change(*d)).count();
    let phase_s =
        sync_s + wait_counts("every rsr with a phase", &mut counts, limit, |c| c.0 >= n).await?;
    let applied_s = phase_s
        + wait_counts("every change Applied", &mut counts, limit, |c| {
            c.1 >= changes
        })
        .await?;
    Ok(Pass {
        sync_s,
        phase_s,
        applied_s,
    })
}

/// Waits until the agent sent no write for [`QUIET`] (the acknowledgements of the change
/// wave's events recorded, the health watches started), two minutes at most; returns the
/// seconds waited.
async fn wait_quiet(sim: &Sim) -> f64 {
    let quiet = || {
        let snap = sim.audit().snapshot();
        let last = snap
            .records
            .iter()
            .filter(|r| r.is_mutating())
            .map(|r| r.received)
            .max();
        last.is_none_or(|t| t.elapsed() >= QUIET)
    };
    let waited = wait_until("no write", Duration::from_secs(120), 1, || async {
        quiet()
    })
    .await;
    waited.unwrap_or(120.0)
}

/// The idle window: CPU seconds, requests by verb and decisions per second.
async fn measure_idle(
    args: &Args,
    sim: &Sim,
    agent: &Agent,
) -> anyhow::Result<(f64, BTreeMap<String, u64>, f64)> {
    let (cpu0, dec0, from) = (
        agent.cpu_seconds()?,
        agent.decisions().await,
        Instant::now(),
    );
    tokio::time::sleep(args.idle).await;
    let cpu = agent.cpu_seconds()? - cpu0;
    let decisions = (agent.decisions().await - dec0) / args.idle.as_secs_f64();
    Ok((cpu, requests_by_verb(sim, from), decisions))
}

/// Fails when the time to phase or the RSS exceeds the baseline by more than 25 %.
fn check_baseline(path: &PathBuf, result: &Value) -> anyhow::Result<()> {
    let base: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let mut failed = Vec::new();
    for key in ["phase_s", "rss_kib"] {
        let (got, want) = (result[key].as_f64(), base[key].as_f64());
        let (Some(got), Some(want)) = (got, want) else {
            anyhow::bail!("{key} missing in the run or in {}", path.display());
        };
        let ratio = got / want;
        eprintln!("{key}: {got:.1} against a baseline of {want:.1} ({ratio:.2}x)");
        if ratio > 1.25 {
            failed.push(format!("{key} {got:.1} > 1.25 x {want:.1}"));
        }
    }
    if !failed.is_empty() {
        anyhow::bail!(
            "regression against {}: {}",
            path.display(),
            failed.join(", ")
        );
    }
    Ok(())
}

async fn run(args: Args) -> anyhow::Result<Value> {
    // 15 pods of 200m on a node of 4 CPUs.
    let nodes = (args.workloads * args.pods).div_ceil(15).max(3);
    let config = SimConfig {
        nodes,
        node_max_pods: 250,
        ..SimConfig::default()
    };
    let filling = Instant::now();
    let sim = Sim::start_filled(config, |ctx| populate(ctx, &args)).await?;
    let fill_s = filling.elapsed().as_secs_f64();
    let pods_s = wait_available(sim.context()).await?;
    eprintln!(
        "{} Deployments of {} pods written in {fill_s:.1} s, available {pods_s:.1} s later",
        args.workloads, args.pods
    );
    apply_cluster_objects(&sim.client()).await?;
    let hub = kerf_sim::hub::start(kerf_sim::hub::DevHubConfig::default()).await?;
    hub.set_config(CLUSTER, Default::default());
    hub.set_recommendations(CLUSTER, recommendations(&args)?);
    sim.audit().reset();
    let (counts, _rsr_watch) = watch_phases(&sim.client());
    let agent = start_agent(&sim, &hub.url(), &args)?;
    let pass = measure_pass(&args, counts, &agent).await?;
    let (writes, write_rate) = wave_rate(&sim);
    let (rss, hwm) = (agent.status_kib("VmRSS:")?, agent.status_kib("VmHWM:")?);
    // The RSS in its parts: the heap and stacks, and the binary's own pages.
    let (anon, file) = (agent.status_kib("RssAnon:")?, agent.status_kib("RssFile:")?);
    // And the allocator's view of its part (none with the system allocator).
    let allocator_kib = agent.allocator_kib().await;
    let settle_s = wait_quiet(&sim).await;
    let (cpu, verbs, decisions) = measure_idle(&args, &sim, &agent).await?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    Ok(json!({
        "workloads": args.workloads, "pods_per_workload": args.pods,
        "change_share": args.change_share,
        "scoped_namespaces": args.scoped_namespaces,
        "allocator": if args.system_allocator { "system" } else { kerf_agent::runtime::ALLOCATOR },
        "allocator_settings": if args.system_allocator {
            String::new()
        } else {
            kerf_agent::runtime::allocator_settings()
        },
        "workloads_in_scope": (0..args.workloads).filter(|d| args.in_scope(*d)).count(),
        "cache_sync_s": round(pass.sync_s), "phase_s": round(pass.phase_s),
        "applied_s": round(pass.applied_s),
        "rss_kib": rss, "hwm_kib": hwm, "rss_anon_kib": anon, "rss_file_kib": file,
        "allocator_kib": allocator_kib,
        "settle_s": round(settle_s),
        "idle_window_s": args.idle.as_secs(), "idle_cpu_s": round(cpu),
        "idle_requests": verbs, "idle_decisions_per_s": round(decisions),
        "actuating_writes": writes, "actuating_writes_per_s": round(write_rate),
        "loadavg": load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    }))
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = parse_args()?;
    let baseline = args.baseline.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(run(args))?;
    println!("{result}");
    if let Some(path) = baseline {
        check_baseline(&path, &result)?;
    }
    Ok(())
}
