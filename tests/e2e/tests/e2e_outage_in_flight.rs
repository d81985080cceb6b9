//! e2e (kerf-sim only): an API server outage while changes are at every stage. kerf-sim
//! refuses connections, then answers 503, then leaves requests hanging (5 s each) while:
//! an in-place change has its intent written and some pods resized (`inplace`, 4 pods), a
//! rollout progresses (`roll`), a health watch runs (`watched`), a rollback after an OOM
//! kill is half done (`breach`, 4 pods), a canary holds (`canary`), and an OnDelete
//! StatefulSet waits to have its pods replaced (`db`). The agent runs as its own process
//! with one actuating write a second, so the changes overlap.
//!
//! Checked: from the moment the agent reports the outage (`/readyz` 503) to the server's
//! return, it sends no actuating write, counted at the client
//! (`kerf_agent_api_actuating_requests_total{outcome="sent"}`, which counts refused
//! connections too); after the return every change completes or rolls back under the id it
//! had, the rsr's recorded values are the ones the pods run, and the hub holds each event
//! once. With `KERF_E2E_WRITE_GUARD_OFF=1` the agent runs with the fail point
//! `write-guard-off` and the scenario fails: writes go out during the outage.

mod e2e_support;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use e2e_support::{CLUSTER, Env, eventually, metric_sample, pod_resources};
use k8s_openapi::api::apps::v1::StatefulSet;
use kerf_api::event::EventType;
use kerf_api::hub::Recommendation;
use kerf_sim::api::outage::OutagePlan;
use kerf_sim::sim::SimConfig;
use kerf_testkit::{AgentBuild, KillOnDrop, agent_binary, agent_run, free_port};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

/// Each third of the outage.
const THIRD: Duration = Duration::from_secs(5);

const SENT: &str = "kerf_agent_api_actuating_requests_total{outcome=\"sent\"}";

/// The policy of workload `app`: auto-patch with `strategy`, a 10 minute watch and
/// cooldown, and `apply` merged into its apply settings.
fn policy(app: &str, strategy: &str, apply: Value) -> Value {
    let mut spec = json!({
        "priority": 10,
        "selector": {"workloadSelector": {"matchLabels": {"app": app}}},
        "mode": "auto-patch",
        "guardrails": {"learningPeriod": "1s", "minConfidence": "0.5", "cooldown": "10m",
            "rollback": {"watchDuration": "10m"}},
        "apply": {"strategy": strategy, "fallbackAfter": "60s", "minWindowRemaining": "1s"},
    });
    if let (Some(a), Some(extra)) = (spec["apply"].as_object_mut(), apply.as_object()) {
        a.extend(extra.clone());
    }
    spec
}

/// StatefulSet `db`: 3 pods at 200m/256Mi, updated `OnDelete`.
async fn statefulset(env: &Env) -> anyhow::Result<()> {
    let labels = json!({"app": "db"});
    let s: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": env.ns, "labels": labels},
        "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "OnDelete"},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                "name": "app", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}]}}}
    }))?;
    let api: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    api.create(&PostParams::default(), &s).await?;
    Ok(())
}

/// 150m/200Mi for Deployment `name` (or the StatefulSet `db`).
fn rec(env: &Env, name: &str) -> anyhow::Result<Recommendation> {
    let kind = if name == "db" {
        "StatefulSet"
    } else {
        "Deployment"
    };
    let id = format!("rec-{name}");
    kerf_testkit::hub_recommendation([&env.ns, kind, name], &id, ["150m", "200Mi"], "0.9")
}

/// Starts `kerf-agent run` (with fail points) against the sim, its metrics on `port`.
fn start_agent(env: &Env, port: u16, args: &[&str]) -> anyhow::Result<KillOnDrop> {
    let sim = env.sim.as_ref().ok_or_else(|| anyhow::anyhow!("no sim"))?;
    let bin = agent_binary(AgentBuild::FailPoints)?;
    let mut cmd = agent_run(&bin, CLUSTER, &env.hub.url(), "1s");
    cmd.env("KUBECONFIG", sim.kubeconfig_path())
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // KERF_E2E_AGENT_LOG=FILE keeps the agent's log, for a failure to be read.
    if let Some(path) = std::env::var_os("KERF_E2E_AGENT_LOG") {
        let log = std::fs::File::create(path)?;
        cmd.stdout(log.try_clone()?).stderr(log);
    }
    if std::env::var_os("KERF_E2E_WRITE_GUARD_OFF").is_some() {
        cmd.env(kerf_agent::failpoints::ENV, "write-guard-off=on");
    }
    Ok(KillOnDrop(cmd.spawn()?))
}

/// The agent's `path` on `port`: status code and body.
async fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    let r = client
        .get(format!("http://127.0.0.1:{port}{path}"))
        .send()
        .await
        .ok()?;
    let code = r.status().as_u16();
    Some((code, r.text().await.unwrap_or_default()))
}

/// Actuating writes the agent has sent so far.
async fn sent(port: u16) -> anyhow::Result<f64> {
    let (_, body) = get(port, "/metrics")
        .await
        .ok_or_else(|| anyhow::anyhow!("no /metrics"))?;
    Ok(metric_sample(&body, SENT))
}

async fn ready(port: u16) -> anyhow::Result<()> {
    eventually("agent ready", Duration::from_secs(60), || async {
        get(port, "/readyz").await.filter(|(c, _)| *c == 200)
    })
    .await
    .map(|_| ())
}

/// The rsr of every workload, by name.
async fn rsrs(env: &Env, names: &[&str]) -> Option<BTreeMap<String, Value>> {
    let mut out = BTreeMap::new();
    for n in names {
        out.insert((*n).to_owned(), env.rsr(n).await.ok()??);
    }
    Some(out)
}

/// CPU requests of the pods of `name`, sorted.
async fn pod_cpu(env: &Env, name: &str) -> Vec<String> {
    let mut cpu: Vec<String> = env
        .pods(name)
        .await
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let r = pod_resources(p);
            r["requests"]["cpu"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    cpu.sort();
    cpu
}

fn change(r: &Value) -> &Value {
    &r["status"]["change"]
}

/// Phase 1, at the full write rate: `watched` and `breach` applied and watching, `db`'s
/// template changed with every pod still to replace (a settle time of a minute).
async fn phase_one(env: &Env) -> anyhow::Result<()> {
    env.deployment("watched", 1, "200m", "256Mi").await?;
    env.deployment("breach", 4, "200m", "256Mi").await?;
    statefulset(env).await?;
    for (name, strategy) in [
        ("watched", "in-place"),
        ("breach", "in-place"),
        ("db", "rollout"),
    ] {
        env.policy(name, policy(name, strategy, json!({}))).await?;
    }
    env.recommend(vec![
        rec(env, "watched")?,
        rec(env, "breach")?,
        rec(env, "db")?,
    ]);
    let port = free_port()?;
    let _agent = start_agent(env, port, &["--on-delete-settle", "60s"])?;
    let r = eventually("phase one in place", Duration::from_secs(20), || async {
        let r = rsrs(env, &["watched", "breach", "db"]).await?;
        let watching = |n: &str| {
            change(&r[n])["state"] == "Applied"
                && r[n]["status"]["watch"]["baselines"]
                    .as_object()
                    .is_some_and(|b| !b.is_empty())
        };
        (watching("watched") && watching("breach") && change(&r["db"])["state"] == "Applied")
            .then_some(())
    })
    .await;
    if r.is_err() {
        let r = rsrs(env, &["watched", "breach", "db"])
            .await
            .unwrap_or_default();
        for (n, v) in r {
            eprintln!("{n}: {}", v["status"]);
        }
    }
    r
}

/// What was in flight when the outage started, per workload: the change id and a stage.
fn stages(r: &BTreeMap<String, Value>) -> BTreeMap<String, (String, String)> {
    r.iter()
        .map(|(name, rsr)| {
            let c = change(rsr);
            let stage = match (c["state"].as_str(), c["canary"]["stage"].as_str()) {
                (Some(state), Some(canary)) => format!("{state}, canary {canary}"),
                (Some(state), None) => state.to_owned(),
                _ => "none".to_owned(),
            };
            (name.clone(), (c["id"].to_string(), stage))
        })
        .collect()
}

// rule: design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_with_changes_at_every_stage_sends_no_write_and_each_completes_once()
-> anyhow::Result<()> {
    let config = SimConfig {
        kubelet_ready_delay: Duration::from_secs(1),
        ..kerf_testkit::sim_config()
    };
    let env = Env::start_sim("e2e-outage-in-flight", config).await?;
    let sim = env.sim.as_ref().ok_or_else(|| anyhow::anyhow!("no sim"))?;
    phase_one(&env).await?;

    // Phase 2: a restarted agent at one actuating write a second.
    phase_two_workloads(&env).await?;
    let port = free_port()?;
    let limit = [
        "--max-writes-per-second",
        "1",
        "--write-burst",
        "1",
        "--on-delete-settle",
        "3s",
    ];
    let mut agent = start_agent(&env, port, &limit)?;
    ready(port).await?;
    let names = ["watched", "breach", "db", "inplace", "roll", "canary"];
    recommend_every_change(&env, &names).await?;

    // The outage starts once the rollback is under way, the in-place change is in flight,
    // the canary holds and the rollout has begun.
    let at_start = every_stage_in_flight(&env, &names).await?;
    let inplace_cpu = pod_cpu(&env, "inplace").await;
    let outage = sim.context().state.outage.clone();
    let run = tokio::spawn(async move {
        outage
            .run(OutagePlan {
                refused: THIRD,
                unavailable: THIRD,
                hanging: THIRD,
            })
            .await
    });
    let started = stages(&at_start);
    eprintln!("in flight at the outage's start: {started:#?}");

    // From the agent's first 503 to the server's return: no actuating write sent.
    let (noticed, sent_then) = eventually("/readyz 503", THIRD, || async {
        let (code, _) = get(port, "/readyz").await?;
        let n = sent(port).await.ok()?;
        (code == 503).then_some((Instant::now(), n))
    })
    .await?;
    run.await?;
    let sent_after = sent(port).await?;
    assert!(
        agent.0.try_wait()?.is_none(),
        "the agent exited during the outage"
    );
    assert_eq!(
        sent_after - sent_then,
        0.0,
        "actuating writes sent during the outage ({:?} after it was noticed)",
        noticed.elapsed()
    );
    eprintln!("in-place pods at the outage's start: {inplace_cpu:?}");

    // After the return: every change done under the id it had.
    ready(port).await?;
    every_change_done_once(&env, &names, &started).await?;
    drop(agent);
    Ok(())
}

/// Phase 2's workloads: Deployments `inplace`, `roll` and `canary`, Ready, each with its
/// policy.
async fn phase_two_workloads(env: &Env) -> anyhow::Result<()> {
    for (n, pods) in [("inplace", 4), ("roll", 3), ("canary", 3)] {
        env.deployment(n, pods, "200m", "256Mi").await?;
    }
    for (n, pods) in [("inplace", 4), ("roll", 3), ("canary", 3)] {
        env.wait_ready(n, pods).await?;
    }
    env.policy("inplace", policy("inplace", "in-place", json!({})))
        .await?;
    env.policy("roll", policy("roll", "rollout", json!({})))
        .await?;
    let canary = json!({"canary": {"pods": 1, "duration": "40s"}});
    env.policy("canary", policy("canary", "in-place", canary))
        .await?;
    Ok(())
}

/// Recommends a change for each of `names`, the canary and the rollout first: the canary's
/// hold (40 s) outlasts the in-place change and the rollback that follow at one write a
/// second, so all are in flight at once. Then OOM-kills a pod of `breach`.
async fn recommend_every_change(env: &Env, names: &[&str]) -> anyhow::Result<()> {
    env.recommend(
        ["watched", "breach", "db", "canary", "roll"]
            .iter()
            .map(|n| rec(env, n))
            .collect::<anyhow::Result<Vec<_>>>()?,
    );
    eventually("the canary holds", Duration::from_secs(30), || async {
        let canary = env.rsr("canary").await.ok()??;
        let roll = env.rsr("roll").await.ok()??;
        (change(&canary)["canary"]["stage"] == "Watching" && change(&roll)["id"].is_string())
            .then_some(())
    })
    .await?;
    let recs = names
        .iter()
        .map(|n| rec(env, n))
        .collect::<anyhow::Result<Vec<_>>>()?;
    env.recommend(recs);
    let victim = env.pods("breach").await?[0]
        .metadata
        .name
        .clone()
        .unwrap_or_default();
    env.oom_kill(&victim)?;
    Ok(())
}

/// Waits until the rollback is under way, the in-place change is in flight, the canary
/// holds and the rollout has begun; gives the rsrs then.
async fn every_stage_in_flight(
    env: &Env,
    names: &[&str],
) -> anyhow::Result<BTreeMap<String, Value>> {
    let at_start = eventually("every stage in flight", Duration::from_secs(20), || async {
        let r = rsrs(env, names).await?;
        let inplace = matches!(
            change(&r["inplace"])["state"].as_str(),
            Some("Intent" | "Applying")
        );
        let rolling_back = change(&r["breach"])["state"] == "RollingBack";
        let holding = change(&r["canary"])["canary"]["stage"] == "Watching";
        // The rollout has its change (its id is compared after the return).
        let rolling = change(&r["roll"])["id"].is_string();
        (inplace && rolling_back && holding && rolling).then_some(r)
    })
    .await;
    match at_start {
        Ok(r) => Ok(r),
        Err(e) => {
            let r = rsrs(env, names).await.unwrap_or_default();
            anyhow::bail!("{e}: {:#?}", stages(&r));
        }
    }
}

/// After the return: every change done under the id it had at the outage's start
/// (`started`), the pods at the recorded values and each event once at the hub. Done
/// takes about 25 s on a quiet machine: what is left of the canary's 40 s hold, then the
/// writes queued behind it at one a second and the OnDelete replacement with 3 s of settle
/// a pod. The wait allows for a loaded machine; what is checked is that each completes,
/// once, not how fast.
async fn every_change_done_once(
    env: &Env,
    names: &[&str],
    started: &BTreeMap<String, (String, String)>,
) -> anyhow::Result<()> {
    let waited = Instant::now();
    let done = eventually("every change done", Duration::from_secs(150), || async {
        let r = rsrs(env, names).await?;
        let state = |n: &str| {
            change(&r[n])["state"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        let applied = ["watched", "inplace", "roll", "canary", "db"]
            .iter()
            .all(|n| state(n) == "Applied" && r[*n]["status"]["phase"] == "Applied");
        (applied && state("breach") == "RolledBack").then_some(r)
    })
    .await;
    eprintln!("every change done after the return: {:?}", waited.elapsed());
    let done = match done {
        Ok(r) => r,
        Err(e) => {
            let r = rsrs(env, names).await.unwrap_or_default();
            anyhow::bail!("{e}: {:#?}", stages(&r));
        }
    };
    for (name, (id, stage)) in started {
        let now = change(&done[name])["id"].to_string();
        assert_eq!(
            &now, id,
            "{name} ({stage} at the outage) has a new change id"
        );
    }
    for n in ["watched", "inplace", "canary", "roll", "db"] {
        let want = if n == "roll" || n == "db" { 3 } else { 0 };
        let cpu = pod_cpu(env, n).await;
        assert!(cpu.iter().all(|c| c == "150m"), "{n}: {cpu:?}");
        assert!(want == 0 || cpu.len() == want, "{n}: {cpu:?}");
    }
    let breach = pod_cpu(env, "breach").await;
    assert!(
        breach.iter().all(|c| c == "150m"),
        "breach keeps its cpu: {breach:?}"
    );
    for p in env.pods("breach").await? {
        assert_eq!(pod_resources(&p)["requests"]["memory"], "256Mi");
    }
    for n in names.iter().copied() {
        let applied = env.hub_events(n, EventType::Applied).len();
        assert_eq!(applied, 1, "{n}: applied events at the hub");
    }
    assert_eq!(env.hub_events("breach", EventType::RolledBack).len(), 1);
    Ok(())
}
