//! The health watch and rollback against kerf-sim: faults injected into the simulated
//! kubelet, pods read through kube's real Client, the rsr status written with its
//! resourceVersion precondition.

mod health_support;

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{Duration, Utc};
use health_support::*;
use kerf_agent::cache::PodInfo;
use kerf_agent::executor::WorkloadId;
use kerf_agent::executor::resize::resize_pod;
use kerf_agent::executor::rollout::apply_template;
use kerf_agent::health::{
    HealthStep, RollbackCtx, RollbackOutcome, StatusWriter, ThrottlingSource, WatchInput, Watcher,
    rollback::RollbackWrite,
};
use kerf_agent::intent::IntentError;
use kerf_api::event::EventType;
use kerf_api::rsr::{ChangeRecord, RightsizingRecommendationStatus};
use kerf_api::{Resource, ResourceRequirements, ResourceValues, Strategy};
use kerf_decide::health::{Breach, BreachReason};
use kerf_sim::clock::Clock;
use kerf_sim::kubelet::{Fault, inject};
use kerf_sim::sim::{Sim, SimConfig};
use serde_json::json;

async fn start(clock: Clock) -> anyhow::Result<Sim> {
    let sim = Sim::start(SimConfig {
        clock,
        ..kerf_testkit::sim_config()
    })
    .await?;
    kerf_testkit::apply_crds(&sim.client()).await?;
    Ok(sim)
}

/// Records every status written and the pods' memory requests at that moment.
struct Recording {
    inner: RsrWriter,
    client: kube::Client,
    workload: String,
    writes: Vec<(RightsizingRecommendationStatus, Vec<ResourceValues>)>,
}

impl StatusWriter for Recording {
    async fn write(&mut self, s: &RightsizingRecommendationStatus) -> Result<(), IntentError> {
        let pods = pods(&self.client, &self.workload).await.unwrap_or_default();
        self.writes.push((s.clone(), pod_requests(&pods)));
        self.inner.write(s).await
    }
}

fn fault(kind: &str, pod: &str) -> Fault {
    let (namespace, pod, container) = (NS.to_owned(), pod.to_owned(), "app".to_owned());
    match kind {
        "oom" => Fault::OomKill {
            namespace,
            pod,
            container,
        },
        _ => Fault::Restart {
            namespace,
            pod,
            container,
        },
    }
}

fn input<'a>(pods: &'a [Arc<PodInfo>], now: chrono::DateTime<Utc>) -> WatchInput<'a> {
    WatchInput {
        namespace: NS,
        pods,
        thresholds: thresholds(Duration::seconds(1)),
        watch_duration: Duration::minutes(30),
        rollout_complete: true,
        now,
    }
}

/// Evaluates until a breach (pod updates read again each time), at most ~10 s.
async fn breach_of(
    w: &Watcher,
    client: &kube::Client,
    name: &str,
    status: &mut RightsizingRecommendationStatus,
    now: impl Fn() -> chrono::DateTime<Utc>,
) -> anyhow::Result<Breach> {
    for _ in 0..400 {
        let ps = pods(client, name).await?;
        if let HealthStep::Breach(b) = w.step(client, status, &input(&ps, now())).await {
            return Ok(*b);
        }
        tokio::time::sleep(StdDuration::from_millis(25)).await;
    }
    anyhow::bail!("no breach")
}

fn always() -> bool {
    true
}

async fn roll_back<W: StatusWriter>(
    w: &Watcher,
    client: &kube::Client,
    wl: &WorkloadId,
    status: &mut RightsizingRecommendationStatus,
    breach: &Breach,
    writer: &mut W,
) -> anyhow::Result<(RollbackOutcome, Vec<(RollbackWrite, Option<String>)>)> {
    let ps = pods(client, &wl.name).await?;
    let wrote = std::sync::Mutex::new(Vec::new());
    let note = |object, answer| {
        let mut list = wrote
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        list.push((object, answer));
    };
    let ctx = RollbackCtx {
        client,
        workload: wl.clone(),
        event_workload: event_workload(wl),
        pods: &ps,
        hpas: &[],
        may_write: &always,
        wrote: &note,
        metrics: &kerf_agent::executor::metrics::ExecutorMetrics::default(),
        now: Utc::now(),
    };
    let out =
        kerf_agent::reconcile::rollback_step::roll_back(w, &ctx, status, breach, writer).await?;
    let wrote = wrote
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok((out, wrote))
}

async fn in_place(
    client: &kube::Client,
    name: &str,
    change: &ChangeRecord,
) -> anyhow::Result<Vec<Arc<PodInfo>>> {
    let ps = running_pods(client, name, 2, || {}).await?;
    let to: Vec<(String, ResourceRequirements)> = change
        .containers
        .iter()
        .map(|c| (c.name.clone(), c.to.clone()))
        .collect();
    for p in &ps {
        resize_pod(client.clone(), NS, &p.name, &to, &[]).await?;
    }
    Ok(ps)
}

// rule: RB-05, RB-20, RB-21, RB-22, RB-25, RB-26, RB-27, RB-35, RB-40
#[tokio::test]
async fn rb_22_an_oom_kill_after_an_in_place_memory_change_resizes_the_pods_back()
-> anyhow::Result<()> {
    let sim = start(Clock::real()).await?;
    let client = sim.client();
    let wl = deployment(
        &client,
        "oom",
        2,
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}}),
    )
    .await?;
    let mut writer = Recording {
        inner: rsr(&client, &wl).await?,
        client: client.clone(),
        workload: "oom".into(),
        writes: Vec::new(),
    };
    let change = cpu_memory_change(Utc::now());
    let ps = in_place(&client, "oom", &change).await?;
    let mut status = watching(
        change.clone(),
        Utc::now(),
        Some(Utc::now() + Duration::minutes(30)),
    );
    status.live = Some(Default::default());
    let w = Watcher::with_source(ThrottlingSource::Off, Duration::minutes(2));
    let first = w.step(&client, &mut status, &input(&ps, Utc::now())).await;
    assert!(matches!(first, HealthStep::Watching { .. }), "{first:?}");
    writer.write(&status).await?;

    inject(sim.context(), fault("oom", &ps[0].name))?;
    let breach = breach_of(&w, &client, "oom", &mut status, Utc::now).await?;
    assert_eq!(breach.reason, BreachReason::OomKills);
    let (out, wrote) = roll_back(&w, &client, &wl, &mut status, &breach, &mut writer).await?;
    // Each pod's resize back is reported with the resourceVersion of its answer, so the
    // next pass waits until the cache shows it.
    for p in &ps {
        assert!(
            wrote
                .iter()
                .any(|(o, rv)| *o == RollbackWrite::Pod(p.name.to_string()) && rv.is_some()),
            "{wrote:?}"
        );
    }

    marked_rolled_back_first(&writer.writes);
    // Memory resized back; CPU keeps the change's value (RB-22, RB-35).
    let now_pods = pods(&client, "oom").await?;
    for r in pod_requests(&now_pods) {
        assert_eq!((r.cpu, r.memory), (Some("80m".into()), Some("64Mi".into())));
    }
    rsr_status_names_the_oom_rollback(&writer.inner).await?;
    one_rolled_back_event_with_the_numbers(out, &change)?;
    // The watch ended with the rollback (RB-04).
    let again = w
        .step(&client, &mut status, &input(&now_pods, Utc::now()))
        .await;
    assert_eq!(again, HealthStep::Idle);
    Ok(())
}

/// The first status written marks the change RolledBack, with the pods still at the
/// change's values (RB-20, RB-21).
#[allow(clippy::unwrap_used)] // test helper: a failure fails the test
fn marked_rolled_back_first(writes: &[(RightsizingRecommendationStatus, Vec<ResourceValues>)]) {
    let (marked, pods_then) = &writes[1];
    assert_eq!(marked.phase, Some(kerf_api::rsr::Phase::RolledBack));
    assert_eq!(
        marked.change.as_ref().unwrap().state,
        kerf_api::rsr::ChangeState::RollingBack
    );
    assert!(marked.live.is_none());
    assert!(
        pods_then.iter().all(|r| r.memory == Some("48Mi".into())),
        "{pods_then:?}"
    );
}

/// The rsr's status names the rollback of memory for OOM kills.
#[allow(clippy::unwrap_used)] // test helper: a failure fails the test
async fn rsr_status_names_the_oom_rollback(writer: &RsrWriter) -> anyhow::Result<()> {
    let st = rsr_status(writer).await?;
    assert_eq!(st["phase"], "RolledBack");
    assert_eq!(st["change"]["state"], "RolledBack");
    assert_eq!(st["lastRollback"]["reason"], "OOMKills");
    assert_eq!(st["lastRollback"]["resources"], json!(["memory"]));
    let hw = st["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "HealthWatch")
        .unwrap();
    assert_eq!(
        (hw["status"].as_str(), hw["reason"].as_str()),
        (Some("False"), Some("OOMKills"))
    );
    Ok(())
}

/// One rolled_back event with the numbers (RB-25 to RB-27, EV-59).
#[allow(clippy::unwrap_used, clippy::panic)] // test helper: a failure fails the test
fn one_rolled_back_event_with_the_numbers(
    out: RollbackOutcome,
    change: &ChangeRecord,
) -> anyhow::Result<()> {
    let RollbackOutcome::Done { events } = out else {
        panic!("rollback not done: {out:?}")
    };
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(e.type_, EventType::RolledBack);
    assert_eq!(e.reason, "OOMKills");
    assert_eq!(
        e.id.to_string(),
        change.event_ids.rolled_back.clone().unwrap()
    );
    assert_eq!(e.details["oomKills"], "1");
    assert_eq!(e.details["watchDuration"], "30m");
    assert_eq!(e.containers[0].from.requests.memory, Some("48Mi".into()));
    assert_eq!(e.containers[0].to.requests.memory, Some("64Mi".into()));
    assert_eq!(e.containers[0].to.requests.cpu, None);
    e.validate()?;
    assert_eq!(kerf_api::wellknown::k8s_event_type(e.type_), "Warning");
    Ok(())
}

// rule: RB-06, RB-07, RB-22
#[tokio::test]
async fn rb_07_restarts_roll_back_every_touched_resource() -> anyhow::Result<()> {
    let sim = start(Clock::real()).await?;
    let client = sim.client();
    let wl = deployment(
        &client,
        "rst",
        2,
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}}),
    )
    .await?;
    let mut writer = rsr(&client, &wl).await?;
    let change = cpu_memory_change(Utc::now());
    let ps = in_place(&client, "rst", &change).await?;
    let mut status = watching(change, Utc::now(), Some(Utc::now() + Duration::minutes(30)));
    let w = Watcher::with_source(ThrottlingSource::Off, Duration::minutes(2));
    w.step(&client, &mut status, &input(&ps, Utc::now())).await;
    writer.write(&status).await?;
    for p in [&ps[0], &ps[1], &ps[0]] {
        inject(sim.context(), fault("restart", &p.name))?;
    }
    let breach = breach_of(&w, &client, "rst", &mut status, Utc::now).await?;
    assert_eq!(breach.reason, BreachReason::Restarts);
    let (out, _wrote) = roll_back(&w, &client, &wl, &mut status, &breach, &mut writer).await?;
    assert!(matches!(out, RollbackOutcome::Done { .. }), "{out:?}");
    for r in pod_requests(&pods(&client, "rst").await?) {
        assert_eq!(
            (r.cpu, r.memory),
            (Some("100m".into()), Some("64Mi".into()))
        );
    }
    assert_eq!(
        rsr_status(&writer).await?["lastRollback"]["resources"],
        json!(["cpu", "memory"])
    );
    Ok(())
}

// rule: RB-23
#[tokio::test]
async fn rb_23_a_rollout_change_rolls_back_by_template_apply() -> anyhow::Result<()> {
    let sim = start(Clock::real()).await?;
    let client = sim.client();
    let wl = deployment(
        &client,
        "ro",
        2,
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}}),
    )
    .await?;
    let mut writer = rsr(&client, &wl).await?;
    let change = applied_change(
        Strategy::Rollout,
        vec![Resource::Memory],
        vec![app_change(req(None, Some("64Mi")), req(None, Some("96Mi")))],
        Utc::now(),
    );
    running_pods(&client, "ro", 2, || {}).await?;
    let to = app_to(&change);
    apply_template(client.clone(), &wl, &to, &[Resource::Memory]).await?;
    let mut rolled = Vec::new();
    for _ in 0..400 {
        rolled = pods(&client, "ro").await?;
        let done = rolled.len() == 2
            && rolled
                .iter()
                .all(|p| p.ready && p.containers[0].requests.memory == Some("96Mi".into()));
        if done {
            break;
        }
        tokio::time::sleep(StdDuration::from_millis(25)).await;
    }
    let mut status = watching(change, Utc::now(), None);
    let w = Watcher::with_source(ThrottlingSource::Off, Duration::minutes(2));
    w.step(&client, &mut status, &input(&rolled, Utc::now()))
        .await;
    writer.write(&status).await?;
    inject(sim.context(), fault("oom", &rolled[1].name))?;
    let breach = breach_of(&w, &client, "ro", &mut status, Utc::now).await?;
    let (out, _wrote) = roll_back(&w, &client, &wl, &mut status, &breach, &mut writer).await?;
    assert!(matches!(out, RollbackOutcome::Done { .. }), "{out:?}");
    let api: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(client.clone(), NS);
    let d = serde_json::to_value(api.get("ro").await?)?;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"],
        "64Mi"
    );
    Ok(())
}

// rule: RB-12, RB-14, RB-15, RB-17
#[tokio::test]
async fn rb_17_throttling_through_the_cadvisor_fallback_rolls_cpu_back() -> anyhow::Result<()> {
    let clock = Clock::manual(Utc::now());
    let sim = start(clock.clone()).await?;
    let client = sim.client();
    let wl = deployment(
        &client,
        "thr",
        2,
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}}),
    )
    .await?;
    let mut writer = rsr(&client, &wl).await?;
    let tick = || clock.advance(StdDuration::from_millis(100));
    let ps = running_pods(&client, "thr", 2, tick).await?;
    let t0 = clock.now();
    let change = cpu_change(t0);
    let to = app_to(&change);
    for p in &ps {
        resize_pod(client.clone(), NS, &p.name, &to, &[]).await?;
    }
    let mut status = watching(change, t0, Some(t0 + Duration::minutes(30)));
    let w = Watcher::with_source(ThrottlingSource::Cadvisor, Duration::minutes(2));
    let mut th = thresholds(Duration::minutes(2));
    th.throttling_ratio = kerf_decide::effective::Ratio(250_000);
    let eval = |now| WatchInput {
        namespace: NS,
        pods: &ps,
        thresholds: th,
        watch_duration: Duration::minutes(30),
        rollout_complete: true,
        now,
    };
    for p in &ps {
        inject(sim.context(), throttle(&p.name, 0.4))?;
    }
    // The first two minutes do not count (RB-14).
    clock.advance(StdDuration::from_secs(60));
    let step = w.step(&client, &mut status, &eval(clock.now())).await;
    assert!(
        matches!(
            step,
            HealthStep::Watching {
                recheck_at: Some(_),
                ..
            }
        ),
        "{step:?}"
    );
    clock.advance(StdDuration::from_secs(61));
    let step = w.step(&client, &mut status, &eval(clock.now())).await;
    assert!(
        matches!(step, HealthStep::Watching { .. }),
        "first scrape: {step:?}"
    );
    // 10 s on two pods: 200 periods, below 300 (RB-15).
    clock.advance(StdDuration::from_secs(10));
    let step = w.step(&client, &mut status, &eval(clock.now())).await;
    assert!(
        matches!(step, HealthStep::Watching { .. }),
        "200 periods: {step:?}"
    );
    clock.advance(StdDuration::from_secs(10));
    let step = w.step(&client, &mut status, &eval(clock.now())).await;
    let HealthStep::Breach(b) = step else {
        panic!("expected a throttling breach, got {step:?}")
    };
    assert_eq!(b.reason, BreachReason::Throttling);
    assert_eq!(b.restore, vec![Resource::Cpu]);
    assert_eq!(b.details["throttlingRatio"], "0.4");
    writer.write(&status).await?;
    let (out, _wrote) = roll_back(&w, &client, &wl, &mut status, &b, &mut writer).await?;
    assert!(matches!(out, RollbackOutcome::Done { .. }), "{out:?}");
    for r in pod_requests(&pods(&client, "thr").await?) {
        assert_eq!(r.cpu, Some("100m".into()));
    }
    Ok(())
}
