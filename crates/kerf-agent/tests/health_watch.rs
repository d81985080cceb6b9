//! The health watch's evaluation over slim pods filled by hand: baselines, counting since
//! the change, the watch window and which signals apply.

mod health_support;

use chrono::{Duration, Utc};
use health_support::*;
use kerf_agent::health::{HealthStep, ThrottlingSource, WatchInput, Watcher};
use kerf_api::{Resource, Strategy};
use kerf_decide::health::BreachReason;

fn watcher() -> Watcher {
    Watcher::with_source(ThrottlingSource::Off, Duration::minutes(2))
}

fn input<'a>(
    pods: &'a [std::sync::Arc<kerf_agent::cache::PodInfo>],
    now: chrono::DateTime<Utc>,
) -> WatchInput<'a> {
    WatchInput {
        namespace: NS,
        pods,
        thresholds: thresholds(Duration::minutes(2)),
        watch_duration: Duration::minutes(30),
        rollout_complete: false,
        now,
    }
}

/// A watch of a change made at `t0` for 30 minutes, over pods made an hour before it.
struct Rig {
    client: kube::Client,
    t0: chrono::DateTime<Utc>,
    status: kerf_api::rsr::RightsizingRecommendationStatus,
}

impl Rig {
    #[allow(clippy::unwrap_used)] // test helper: a failure fails the test
    fn new(t0: chrono::DateTime<Utc>, change: kerf_api::rsr::ChangeRecord) -> Rig {
        let status = watching(change, t0, Some(t0 + Duration::minutes(30)));
        let client = offline_client().unwrap();
        Rig { client, t0, status }
    }

    /// The `app` pods `(name, restarts, last termination reason)`, made before the change.
    #[allow(clippy::unwrap_used)] // test helper: a failure fails the test
    fn pods(&self, specs: &[(&str, u32, Option<&str>)]) -> Vec<PodRef> {
        let created = self.t0 - Duration::hours(1);
        let pod = |(name, restarts, reason): &(&str, u32, Option<&str>)| {
            hand_pod(name, *restarts, *reason, created).unwrap()
        };
        specs.iter().map(pod).collect()
    }

    /// One step of `w` over `pods`, `after` the change.
    async fn step(&mut self, w: &Watcher, pods: &[PodRef], after: Duration) -> HealthStep {
        let input = input(pods, self.t0 + after);
        w.step(&self.client, &mut self.status, &input).await
    }
}

type PodRef = std::sync::Arc<kerf_agent::cache::PodInfo>;

// rule: RB-05, RB-09, RB-11
#[tokio::test]
async fn rb_05_an_oom_kill_after_a_memory_change_breaches_at_the_pod_update() {
    let t0 = Utc::now();
    let mut rig = Rig::new(t0, memory_change(t0));
    let w = watcher();
    // An OOM kill before the change is in the baseline and does not count.
    let before = rig.pods(&[("a", 1, Some("OOMKilled"))]);
    let step = rig.step(&w, &before, Duration::zero()).await;
    assert!(matches!(step, HealthStep::Watching { .. }), "{step:?}");
    let watch = rig.status.watch.as_ref().unwrap();
    let b = watch
        .baselines
        .get("uid-a")
        .and_then(|c| c.get("app"))
        .unwrap();
    assert_eq!((b.restarts, b.oom_kills), (1, 1));
    // The next pod update shows one more OOM kill: breach at once, memory only.
    let after = rig.pods(&[("a", 2, Some("OOMKilled"))]);
    let step = rig.step(&w, &after, Duration::seconds(5)).await;
    let HealthStep::Breach(b) = step else {
        panic!("expected a breach, got {step:?}")
    };
    assert_eq!(b.reason, BreachReason::OomKills);
    assert_eq!(b.restore, vec![Resource::Memory]);
    assert_eq!(b.details["oomKills"], "1");
    assert_eq!(b.details["watchDuration"], "30m");
}

// rule: RB-05
#[tokio::test]
async fn rb_05_oom_kills_are_not_watched_when_memory_was_not_touched() {
    let t0 = Utc::now();
    let mut rig = Rig::new(t0, cpu_change(t0));
    let w = watcher();
    let pods = rig.pods(&[("a", 0, None)]);
    rig.step(&w, &pods, Duration::zero()).await;
    let pods = rig.pods(&[("a", 1, Some("OOMKilled"))]);
    let step = rig.step(&w, &pods, Duration::seconds(5)).await;
    assert!(matches!(step, HealthStep::Watching { .. }), "{step:?}");
}

// rule: RB-06, RB-07, RB-10
#[tokio::test]
async fn rb_10_restarts_add_up_over_all_pods_and_roll_back_every_touched_resource() {
    let t0 = Utc::now();
    let mut rig = Rig::new(t0, cpu_memory_change(t0));
    let w = watcher();
    let pods = rig.pods(&[("a", 5, Some("Error")), ("b", 0, None)]);
    rig.step(&w, &pods, Duration::zero()).await;
    let pods = rig.pods(&[("a", 7, Some("Error")), ("b", 0, None)]);
    let step = rig.step(&w, &pods, Duration::seconds(1)).await;
    assert!(
        matches!(step, HealthStep::Watching { .. }),
        "2 restarts: {step:?}"
    );
    // A pod created after the change counts from zero.
    let mut pods = rig.pods(&[("a", 7, Some("Error")), ("b", 0, None)]);
    pods.push(hand_pod("c", 1, Some("Error"), t0 + Duration::seconds(2)).unwrap());
    let step = rig.step(&w, &pods, Duration::seconds(3)).await;
    let HealthStep::Breach(b) = step else {
        panic!("expected a breach, got {step:?}")
    };
    assert_eq!(b.reason, BreachReason::Restarts);
    assert_eq!(b.restore, vec![Resource::Cpu, Resource::Memory]);
    assert_eq!(b.details["restarts"], "3");
}

/// A memory change watched from 40 minutes ago for 30 minutes, its baselines taken at
/// minute 1; at minute 38 pod `a` shows one OOM kill that pod status dates `killed_at`
/// after the change. `restarted`: a new watcher (a restarted agent) looks at it.
async fn oom_kill_seen_after_the_end(
    killed_at: Duration,
    restarted: bool,
) -> anyhow::Result<HealthStep> {
    let client = offline_client()?;
    let t0 = Utc::now() - Duration::minutes(40);
    let created = t0 - Duration::hours(1);
    let mut status = watching(memory_change(t0), t0, Some(t0 + Duration::minutes(30)));
    let w = watcher();
    let pods = vec![hand_pod("a", 0, None, created)?];
    w.step(
        &client,
        &mut status,
        &input(&pods, t0 + Duration::minutes(1)),
    )
    .await;
    let at = Some(t0 + killed_at);
    let pods = vec![hand_pod_at("a", 1, Some(("OOMKilled", at)), created)?];
    let w = if restarted { watcher() } else { w };
    Ok(w.step(
        &client,
        &mut status,
        &input(&pods, t0 + Duration::minutes(38)),
    )
    .await)
}

// rule: RB-03, RB-19
#[tokio::test]
async fn rb_03_a_signal_after_the_watch_ended_does_nothing() {
    // The kill that pod status dates 10 s after the end.
    let after = Duration::minutes(30) + Duration::seconds(10);
    assert_eq!(
        oom_kill_seen_after_the_end(after, false).await.unwrap(),
        HealthStep::Healthy
    );
    assert_eq!(
        oom_kill_seen_after_the_end(after, true).await.unwrap(),
        HealthStep::Healthy
    );
}

// rule: RB-03, RB-05
#[tokio::test]
async fn rb_03_an_oom_kill_inside_the_watch_seen_after_its_end_still_rolls_back() {
    // The agent was down at the end of the watch: the next one reads the kill pod status
    // dates at minute 25 and rolls back.
    let step = oom_kill_seen_after_the_end(Duration::minutes(25), true)
        .await
        .unwrap();
    let HealthStep::Breach(b) = step else {
        panic!("expected a breach, got {step:?}")
    };
    assert_eq!(b.reason, BreachReason::OomKills);
    assert_eq!(b.restore, vec![Resource::Memory]);
}

// rule: RB-09
#[tokio::test]
async fn rb_09_a_restarted_agent_counts_from_the_baselines_in_status() {
    let t0 = Utc::now();
    let mut rig = Rig::new(t0, memory_change(t0));
    let pods = rig.pods(&[("a", 1, Some("OOMKilled"))]);
    rig.step(&watcher(), &pods, Duration::zero()).await;
    // A new agent (empty memory) sees the pod after one more OOM kill.
    let pods = rig.pods(&[("a", 2, Some("OOMKilled"))]);
    let step = rig.step(&watcher(), &pods, Duration::seconds(9)).await;
    assert!(
        matches!(step, HealthStep::Breach(ref b) if b.reason == BreachReason::OomKills),
        "{step:?}"
    );
}

// rule: RB-16
#[tokio::test]
async fn rb_16_without_endpoint_or_fallback_throttling_is_never_sampled() {
    let t0 = Utc::now() - Duration::minutes(10);
    let mut rig = Rig::new(t0, cpu_change(t0));
    let pods = rig.pods(&[("a", 0, None)]);
    let step = rig.step(&watcher(), &pods, Utc::now() - t0).await;
    assert_eq!(
        step,
        HealthStep::Watching {
            until: Some(t0 + Duration::minutes(30)),
            recheck_at: None
        }
    );
}

// rule: RB-39
#[tokio::test]
async fn a_rollout_watch_ends_watch_duration_after_the_rollout_completes() {
    let client = offline_client().unwrap();
    let t0 = Utc::now();
    let created = t0 - Duration::hours(1);
    let mut change = memory_change(t0);
    change.strategy = Strategy::Rollout;
    let mut status = watching(change, t0, None);
    let pods = vec![hand_pod("a", 0, None, created).unwrap()];
    let w = watcher();
    let step = w.step(&client, &mut status, &input(&pods, t0)).await;
    assert!(
        matches!(step, HealthStep::Watching { until: None, .. }),
        "{step:?}"
    );
    let mut done = input(&pods, t0 + Duration::minutes(3));
    done.rollout_complete = true;
    let step = w.step(&client, &mut status, &done).await;
    let end = t0 + Duration::minutes(33);
    assert!(
        matches!(step, HealthStep::Watching { until: Some(u), .. } if u == end),
        "{step:?}"
    );
    assert_eq!(status.watch.as_ref().unwrap().end, Some(end));
}
