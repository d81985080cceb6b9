//! e2e: an agent with nothing to change does not write. Deployments in auto-patch whose
//! hub recommendations equal their requests: once the first full pass has written every
//! rsr, kerf-sim counts no mutating request but Lease renewals for the idle window.
//!
//! `KERF_IDLE_WORKLOADS` (default 200) and `KERF_IDLE_WINDOW_SECS` (default 60, one hub
//! resync) size it; CI runs the defaults and `make soak` runs 1,000 workloads for ten
//! minutes, writing its counts to the JSON file named by `KERF_RESULT_FILE`.

mod e2e_support;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use e2e_support::{AgentOptions, CLUSTER, Env, USER_MANAGER, policy_spec};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kerf_api::event::Event;
use kerf_api::hub::Recommendation;
use kerf_sim::api::audit::{Audit, AuditRecord, AuditSnapshot};
use kerf_sim::sim::{Sim, SimConfig};
use kerf_sim::store::gvr;
use kube::Api;
use kube::api::{DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

/// Number of workloads (env override for local runs).
const WORKLOADS_ENV: &str = "KERF_IDLE_WORKLOADS";
/// Length of the idle window in seconds (env override for local runs).
const WINDOW_ENV: &str = "KERF_IDLE_WINDOW_SECS";
/// The workloads are spread over this many namespaces.
const NAMESPACES: usize = 10;
/// The agent's namespace (its Lease and `kerf-hub-state`).
const AGENT_NS: &str = "kerf-system";
/// Requests of every container, and the hub's recommendation for it.
const CPU: &str = "20m";
const MEMORY: &str = "64Mi";
/// Longest wait for the Deployments to be available and for the first pass.
const SETUP_WAIT: Duration = Duration::from_secs(600);

/// The sim's own runtime, so its controllers and kubelet (busy at a thousand workloads in
/// a debug build) do not hold the worker threads of the agent and the test; shut down in
/// the background when dropped (a runtime may not be dropped inside another).
struct SimRuntime(Option<tokio::runtime::Runtime>);

impl Drop for SimRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// Worker threads of the sim's runtime: more than its six controller loops, so the API
/// server always has one to answer on.
const SIM_WORKERS: usize = 8;

/// Starts kerf-sim on a runtime of its own.
async fn sim_apart(config: SimConfig) -> anyhow::Result<(SimRuntime, Sim)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(SIM_WORKERS)
        .enable_all()
        .build()?;
    let started = rt.spawn(Sim::start(config));
    let rt = SimRuntime(Some(rt));
    let sim = started.await??;
    Ok((rt, sim))
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes the run's counts to the file named by `KERF_RESULT_FILE` (`make soak`), if set.
fn write_result(counts: &Value) -> anyhow::Result<()> {
    if let Ok(path) = std::env::var("KERF_RESULT_FILE") {
        std::fs::write(&path, serde_json::to_vec_pretty(counts)?)?;
    }
    Ok(())
}

fn namespace_of(i: usize) -> String {
    format!("e2e-idle-{}", i % NAMESPACES)
}

fn name_of(i: usize) -> String {
    format!("web-{i:04}")
}

async fn make_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match nss.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deployment `i`: one replica, one container `app` requesting [`CPU`] and [`MEMORY`],
/// defaulted as the API server defaults it and written straight into the sim's store
/// under the user's field manager (as the scale benchmark fills it): a thousand creates
/// over HTTPS, each waking the sim's controllers, would take most of the time budget.
fn deployment(sim: &Sim, i: usize) -> anyhow::Result<()> {
    let (ns, name) = (namespace_of(i), name_of(i));
    let labels = json!({"app": name});
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                "name": "app", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": CPU, "memory": MEMORY}}}]}}}
    });
    kerf_sim::api::defaults::apply(&gvr::DEPLOYMENTS, &mut d);
    sim.context()
        .store
        .create(&gvr::DEPLOYMENTS, d, USER_MANAGER)
        .map_err(|e| anyhow::anyhow!("Deployment {ns}/{name}: {}", e.message))?;
    Ok(())
}

/// The hub's recommendation for Deployment `i`: exactly its current requests.
fn recommendation(
    i: usize,
    generated_at: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<Recommendation> {
    let name = name_of(i);
    let mut rec = kerf_testkit::hub_recommendation(
        [&namespace_of(i), "Deployment", &name],
        &format!("rec-{name}"),
        [CPU, MEMORY],
        "0.9",
    )?;
    rec.generated_at = generated_at;
    Ok(rec)
}

/// How many Deployments have their one replica available.
async fn available(client: &kube::Client) -> anyhow::Result<usize> {
    let all: Api<Deployment> = Api::all(client.clone());
    let list = all.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|d| d.status.as_ref().and_then(|s| s.available_replicas) == Some(1))
        .count())
}

/// Polls `count` every 2 s until it reaches `want`, printing the progress every 15 s;
/// fails after [`SETUP_WAIT`], a call that hangs included.
async fn wait_count<F, Fut>(what: &str, want: usize, mut count: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<usize>>,
{
    let start = Instant::now();
    let mut shown = start;
    let mut seen = 0;
    loop {
        let left = SETUP_WAIT.saturating_sub(start.elapsed());
        match tokio::time::timeout(left, count()).await {
            Ok(Ok(n)) => seen = n,
            Ok(Err(e)) => eprintln!("e2e-idle: {what}: {e}"),
            Err(_) => {}
        }
        if seen >= want {
            eprintln!("e2e-idle: {what}: {seen} after {:?}", start.elapsed());
            return Ok(());
        }
        if start.elapsed() >= SETUP_WAIT {
            anyhow::bail!("timed out after {SETUP_WAIT:?}: {what}: {seen} of {want}");
        }
        if shown.elapsed() >= Duration::from_secs(15) {
            eprintln!(
                "e2e-idle: {what}: {seen} of {want} after {:?}",
                start.elapsed()
            );
            shown = Instant::now();
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Whether the first pass is done for an rsr: status written with a phase, the skip
/// reported to (and acknowledged by) the hub and recorded.
fn first_pass_done(rsr: &Value) -> bool {
    let s = &rsr["status"];
    s["phase"].is_string() && s["reported"].as_array().is_some_and(|r| !r.is_empty())
}

async fn rsrs(client: &kube::Client) -> anyhow::Result<Vec<Value>> {
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &kerf_agent::rsr_sync::rsr_resource());
    let list = api.list(&ListParams::default()).await?;
    list.items
        .into_iter()
        .map(|o| Ok(serde_json::to_value(o)?))
        .collect()
}

/// The resource of a request path, with its subresource (`pods/resize`); names and
/// namespaces left out.
fn resource_of(path: &str) -> String {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segs.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
        _ => return path.to_owned(),
    };
    let rest = match rest {
        ["namespaces", _, more @ ..] if !more.is_empty() => more,
        _ => rest,
    };
    rest.iter()
        .step_by(2)
        .copied()
        .collect::<Vec<_>>()
        .join("/")
}

/// The requests `pick` selects by verb and resource: how many and their mean duration.
fn by_kind(records: &[AuditRecord], pick: impl Fn(&AuditRecord) -> bool) -> String {
    let mut out: BTreeMap<String, (u32, Duration)> = BTreeMap::new();
    for r in records.iter().filter(|r| pick(r)) {
        let e = out
            .entry(format!("{} {}", r.method, resource_of(&r.path)))
            .or_default();
        e.0 += 1;
        e.1 += r.duration;
    }
    let shown: Vec<String> = out
        .iter()
        .map(|(k, (n, d))| format!("{k}: {n} (mean {:?})", *d / *n))
        .collect();
    shown.join(", ")
}

fn summary(what: &str, s: &AuditSnapshot) -> String {
    format!(
        "{what}: {} requests, {} mutating ({} other than Lease renewals); writes: {}; reads: {}",
        s.total,
        s.mutating,
        s.mutating_except_leases,
        by_kind(&s.records, AuditRecord::is_mutating),
        by_kind(&s.records, |r| !r.is_mutating())
    )
}

// sim
// rule: EV-14, GR-43, design D26
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_with_nothing_to_change_writes_nothing_but_its_lease() -> anyhow::Result<()> {
    let started = Instant::now();
    let workloads = usize::try_from(env_number(WORKLOADS_ENV, 200))?;
    let window = Duration::from_secs(env_number(WINDOW_ENV, 60));
    let config = SimConfig {
        kubelet_ready_delay: Duration::from_millis(50),
        node_cpu: "64".into(),
        node_memory: "256Gi".into(),
        node_max_pods: 1000,
        ..SimConfig::default()
    };
    let (_sim_runtime, sim) = sim_apart(config).await?;
    let mut env = Env::with_sim(&namespace_of(0), sim).await?;
    let client = env.client.clone();
    for ns in (1..NAMESPACES)
        .map(namespace_of)
        .chain([AGENT_NS.to_owned()])
    {
        make_namespace(&client, &ns).await?;
    }
    let sim = env
        .sim
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("not on kerf-sim"))?;
    let audit = sim.audit().clone();
    workloads_with_recommendations(&env, sim, workloads, started).await?;
    let setup = started.elapsed();

    // The agent with its defaults: leader election, a 60 s hub poll, 30 m staleness.
    audit.reset();
    let opts = AgentOptions {
        poll_interval: "60s",
        stale_after: "30m",
    };
    let mut settings = env.settings(&opts)?;
    settings.leader_election.enabled = true;
    env.start_agent_with(settings).await;
    let first_pass_started = Instant::now();
    wait_count("rsrs through the first pass", workloads, || async {
        let all = rsrs(&client).await?;
        Ok(all.iter().filter(|r| first_pass_done(r)).count())
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}; {}", summary("so far", &audit.snapshot())))?;
    let first_pass = first_pass_started.elapsed();
    let events_before = env.hub.events(CLUSTER).len();
    let before = audit.reset();
    eprintln!(
        "e2e-idle: {workloads} workloads; setup {setup:?}; first pass {first_pass:?}; {}",
        summary("first pass", &before)
    );

    // The idle window: nothing changes, so nothing but the Lease may be written.
    report_through_the_window(&audit, window).await;
    let idle = audit.snapshot();
    eprintln!(
        "e2e-idle: {}; test took {:?}",
        summary("window", &idle),
        started.elapsed()
    );
    let renewals = idle.records.iter().filter(|r| r.is_lease_renewal()).count();
    let events = env.hub.events(CLUSTER);
    write_result(&json!({
        "workloads": workloads,
        "window_s": window.as_secs(),
        "setup_s": setup.as_secs_f64(),
        "first_pass_s": first_pass.as_secs_f64(),
        "first_pass_requests": before.total,
        "window_requests": idle.total,
        "window_mutating": idle.mutating,
        "window_mutating_except_leases": idle.mutating_except_leases,
        "window_lease_renewals": renewals,
        "window_hub_events": events.len().saturating_sub(events_before),
    }))?;
    nothing_but_the_lease_written(&idle, renewals, &events, events_before);
    env.stop_agent().await;
    Ok(())
}

/// `workloads` Deployments on `sim`, Available, under one auto-patch policy, each with a
/// recommendation at the hub.
async fn workloads_with_recommendations(
    env: &Env,
    sim: &Sim,
    workloads: usize,
    started: Instant,
) -> anyhow::Result<()> {
    let client = &env.client;
    for i in 0..workloads {
        deployment(sim, i)?;
    }
    eprintln!(
        "e2e-idle: {workloads} Deployments created after {:?}",
        started.elapsed()
    );
    wait_count("Deployments available", workloads, || available(client)).await?;
    let mut spec = policy_spec(&env.ns, "auto-patch", "in-place");
    spec["selector"]["namespaces"] = json!((0..NAMESPACES).map(namespace_of).collect::<Vec<_>>());
    env.policy("auto", spec).await?;
    let generated_at = chrono::Utc::now();
    let recs = (0..workloads).map(|i| recommendation(i, generated_at));
    env.recommend(recs.collect::<anyhow::Result<_>>()?);
    Ok(())
}

/// Waits out the idle `window`, reporting the requests counted by `audit` each minute.
async fn report_through_the_window(audit: &Audit, window: Duration) {
    let window_started = Instant::now();
    while window_started.elapsed() < window {
        let left = window.saturating_sub(window_started.elapsed());
        tokio::time::sleep(left.min(Duration::from_secs(60))).await;
        let s = audit.snapshot();
        eprintln!(
            "e2e-idle: {:?} into the window: {} requests, {} mutating, {} other than Lease renewals",
            window_started.elapsed(),
            s.total,
            s.mutating,
            s.mutating_except_leases
        );
    }
}

/// While idle: no write but the Lease's, the Lease still renewed, no event sent after
/// the first `events_before`.
fn nothing_but_the_lease_written(
    idle: &AuditSnapshot,
    renewals: usize,
    events: &[Event],
    events_before: usize,
) {
    let offending: Vec<String> = idle
        .writes_except_leases()
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert_eq!(
        idle.mutating_except_leases,
        0,
        "writes while idle:\n{}",
        offending.join("\n")
    );
    assert!(
        renewals > 0,
        "the agent stopped renewing its Lease: {}",
        summary("window", idle)
    );
    assert_eq!(
        events.len(),
        events_before,
        "events sent while idle: {:#?}",
        &events[events_before..]
    );
}
