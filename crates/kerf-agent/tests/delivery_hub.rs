//! Event delivery from the outbox to the dev hub over real HTTP on loopback.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use kerf_agent::cache::WorkloadKey;
use kerf_agent::clock::{Clock, SharedClock, TestClock};
use kerf_agent::hub::{HubClient, HubClientConfig, HubMetrics};
use kerf_agent::outbox::{DeliveryReport, Outbox, OutboxConfig, OutboxMetrics, Reporter};
use kerf_agent::reconcile::memory::{InFlight, ReportLedger};
use kerf_api::WorkloadKind;
use kerf_api::event::{Event, EventType, EventWorkload};
use kerf_decide::dedup::Candidate;
use kerf_sim::hub::{DevHub, DevHubConfig, Endpoint, Fault, start};
use prometheus_client::registry::Registry;
use uuid::Uuid;

const CLUSTER: &str = "dev";

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-04T10:00:00Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

fn event(time: DateTime<Utc>, n: usize) -> Event {
    let workload = EventWorkload {
        namespace: "payments-prod".into(),
        kind: "Deployment".into(),
        name: format!("checkout-{n}"),
    };
    let mut e = Event::new(Uuid::new_v4(), EventType::Blocked, time, workload, "Cooldown")
        .with_message("last change or rollback was less than guardrails.cooldown ago; waiting for the cooldown to end before the next change");
    e.recommendation_id = Some(Uuid::new_v4().to_string());
    e
}

struct Rig {
    hub: DevHub,
    outbox: Outbox,
    registry: Registry,
    reports: Arc<Mutex<Vec<DeliveryReport>>>,
    _sender: tokio::task::JoinHandle<()>,
}

async fn rig(
    hub_cfg: DevHubConfig,
    outbox_cfg: OutboxConfig,
) -> Result<Rig, Box<dyn std::error::Error>> {
    let token = hub_cfg.token.clone();
    let hub = start(hub_cfg).await?;
    let dir = tempfile::tempdir()?;
    let mut cfg = HubClientConfig::new(hub.url(), CLUSTER);
    if let Some(t) = token {
        let path = dir.keep().join("token");
        std::fs::write(&path, t)?;
        cfg.token_file = Some(path);
    }
    cfg.backoff_base = Duration::from_millis(5);
    let mut registry = Registry::with_prefix("kerf_agent");
    let clock: SharedClock = Arc::new(TestClock::new(t0()));
    let client = Arc::new(HubClient::new(
        cfg,
        HubMetrics::register(&mut registry),
        clock,
    )?);
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let reporter: Reporter =
        Arc::new(move |r| sink.lock().unwrap_or_else(|e| e.into_inner()).push(r));
    let outbox = Outbox::new(
        outbox_cfg,
        OutboxMetrics::register(&mut registry),
        Some(reporter),
    );
    let sender = outbox.spawn(client);
    Ok(Rig {
        hub,
        outbox,
        registry,
        reports,
        _sender: sender,
    })
}

fn fast() -> OutboxConfig {
    OutboxConfig {
        backoff_base: Duration::from_millis(5),
        backoff_max: Duration::from_millis(50),
        ..OutboxConfig::default()
    }
}

/// A rig with the default hub, which is down, and the [`fast`] outbox as `bound` sets it.
#[allow(clippy::unwrap_used)] // test helper: a failure fails the test
async fn rig_in_outage(bound: impl FnOnce(&mut OutboxConfig)) -> Rig {
    let mut outbox_cfg = fast();
    bound(&mut outbox_cfg);
    let rig = rig(DevHubConfig::default(), outbox_cfg).await.unwrap();
    rig.hub.set_down(true).await;
    rig
}

/// Waits (real time, bounded) until the hub stored `n` events and the outbox is empty.
async fn delivered(rig: &Rig, n: usize) -> bool {
    for _ in 0..2000 {
        if rig.hub.events(CLUSTER).len() >= n && rig.outbox.is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

fn metrics_text(registry: &Registry) -> String {
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

// rule: EV-01, EV-02, EV-03
#[tokio::test]
async fn stored_events_equal_emitted_events_under_retries_and_duplicate_sends() {
    let rig = rig(
        DevHubConfig {
            token: Some("s3cret".into()),
            ..DevHubConfig::default()
        },
        fast(),
    )
    .await
    .unwrap();
    rig.hub
        .fail_next(Some(Endpoint::Events), Fault::ServerError, 2);
    rig.hub
        .fail_next(Some(Endpoint::Events), Fault::Unavailable, 1);
    let emitted: Vec<Event> = (0..1200).map(|n| event(t0(), n)).collect();
    for e in &emitted {
        assert!(rig.outbox.enqueue(e.clone()).unwrap());
    }
    // A resumed action emits again with the same ids (design D25): buffered once.
    assert_eq!(rig.outbox.restore(emitted[..100].to_vec()), 0);
    assert!(delivered(&rig, 1200).await);
    // Sending delivered ids again stores nothing new.
    rig.hub.fail_next(Some(Endpoint::Events), Fault::BadJson, 1);
    assert_eq!(rig.outbox.restore(emitted[..50].to_vec()), 50);
    for _ in 0..500 {
        if rig.hub.duplicates(CLUSTER) >= 100 && rig.outbox.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(rig.hub.events(CLUSTER), emitted);
    assert_eq!(
        rig.hub.duplicates(CLUSTER),
        100,
        "the 200-with-bad-body batch was resent whole"
    );
    assert!(
        rig.hub
            .requests_to(Endpoint::Events)
            .iter()
            .filter(|r| r.status >= 500)
            .count()
            == 3
    );
    assert!(
        metrics_text(&rig.registry).contains("kerf_agent_events_sent_total{type=\"blocked\"} 1250")
    );
    let acked: usize = rig
        .reports
        .lock()
        .unwrap()
        .iter()
        .map(|r| match r {
            DeliveryReport::Acked(ids) => ids.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(acked, 1250);
}

// rule: EV-04, RB-30
#[tokio::test]
async fn an_hour_of_outage_at_two_events_per_second_loses_nothing_with_default_bounds() {
    let rig = rig(DevHubConfig::default(), fast()).await.unwrap();
    rig.hub.set_down(true).await;
    let clock = TestClock::new(t0());
    let mut emitted = Vec::new();
    let started = Instant::now();
    for n in 0..7200 {
        let e = event(clock.now(), n);
        rig.outbox.enqueue(e.clone()).unwrap();
        emitted.push(e);
        clock.advance(chrono::Duration::milliseconds(500));
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "enqueue never waits for the hub"
    );
    assert_eq!(clock.now() - t0(), chrono::Duration::hours(1));
    assert_eq!(rig.outbox.len(), 7200);
    assert!(metrics_text(&rig.registry).contains("kerf_agent_events_dropped_total 0"));
    rig.hub.set_down(false).await;
    assert!(delivered(&rig, 7200).await);
    assert_eq!(rig.hub.events(CLUSTER), emitted);
}

// rule: EV-05, EV-06
#[tokio::test]
async fn an_outage_past_the_bounds_drops_the_oldest_first_and_counts_each_drop() {
    let rig = rig_in_outage(|c| c.max_events = 100).await;
    let emitted: Vec<Event> = (0..250).map(|n| event(t0(), n)).collect();
    for e in &emitted {
        rig.outbox.enqueue(e.clone()).unwrap();
    }
    assert_eq!(rig.outbox.len(), 100);
    assert!(metrics_text(&rig.registry).contains("kerf_agent_events_dropped_total 150"));
    let dropped: Vec<Uuid> = rig
        .reports
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| match r {
            DeliveryReport::Dropped(ids) => ids.clone(),
            _ => vec![],
        })
        .collect();
    assert_eq!(
        dropped,
        emitted[..150].iter().map(|e| e.id).collect::<Vec<_>>()
    );
    rig.hub.set_down(false).await;
    assert!(delivered(&rig, 100).await);
    assert_eq!(rig.hub.events(CLUSTER), emitted[150..].to_vec());
}

// rule: EV-05, EV-14
#[tokio::test]
async fn a_block_dropped_from_a_full_outbox_is_sent_again() {
    let rig = rig_in_outage(|c| c.max_events = 1).await;
    let key = WorkloadKey::new("payments-prod", WorkloadKind::Deployment, "checkout-0");
    let candidate = Candidate::new(EventType::Blocked, "Cooldown", None).unwrap();
    let mut ledger = ReportLedger::default();
    let first = event(t0(), 0);
    ledger.in_flight.insert(
        first.id,
        InFlight {
            key: key.clone(),
            candidate: candidate.clone(),
            values: Default::default(),
            policy_hash: "p".into(),
        },
    );
    rig.outbox.enqueue(first.clone()).unwrap();
    rig.outbox.enqueue(event(t0(), 1)).unwrap();
    assert!(ledger.sent(&key, &candidate), "sent, not acknowledged yet");
    let reports: Vec<DeliveryReport> = rig.reports.lock().unwrap().drain(..).collect();
    assert_eq!(reports, vec![DeliveryReport::Dropped(vec![first.id])]);
    for r in reports {
        assert!(ledger.handle(r).is_empty(), "a drop records nothing");
    }
    assert!(
        !ledger.sent(&key, &candidate),
        "a dropped block no longer waits for an acknowledgement that never comes"
    );
    assert!(ledger.acked_reports.is_empty());
}

// rule: EV-05
#[tokio::test]
async fn the_byte_bound_drops_the_oldest_first() {
    let rig = rig_in_outage(|c| c.max_bytes = 20_000).await;
    for n in 0..200 {
        rig.outbox.enqueue(event(t0(), n)).unwrap();
    }
    assert!(rig.outbox.bytes() <= 20_000);
    assert!(rig.outbox.len() < 200 && rig.outbox.len() > 10);
}

// rule: EV-03
#[tokio::test]
async fn rate_limited_batch_waits_for_retry_after() {
    let rig = rig(DevHubConfig::default(), fast()).await.unwrap();
    rig.hub.fail_next(
        Some(Endpoint::Events),
        Fault::RateLimited {
            retry_after: "1".into(),
        },
        1,
    );
    rig.outbox.enqueue(event(t0(), 0)).unwrap();
    assert!(delivered(&rig, 1).await);
    let reqs = rig.hub.requests_to(Endpoint::Events);
    assert_eq!(
        reqs.iter().map(|r| r.status).collect::<Vec<_>>(),
        vec![429, 200]
    );
    assert!(reqs[1].at - reqs[0].at >= Duration::from_secs(1));
}

// rule: EV-01
#[tokio::test]
async fn invalid_item_drops_only_that_item_and_resends_the_rest() {
    let rig = rig(DevHubConfig::default(), fast()).await.unwrap();
    let emitted: Vec<Event> = (0..5).map(|n| event(t0(), n)).collect();
    rig.hub.reject_event(emitted[2].id);
    for e in &emitted {
        rig.outbox.enqueue(e.clone()).unwrap();
    }
    assert!(delivered(&rig, 4).await);
    let mut expected = emitted.clone();
    expected.remove(2);
    assert_eq!(rig.hub.events(CLUSTER), expected);
    let reports = rig.reports.lock().unwrap().clone();
    assert!(
        reports
            .iter()
            .any(|r| matches!(r, DeliveryReport::Rejected { id, .. } if *id == emitted[2].id))
    );
}

// rule: EV-03
#[tokio::test]
async fn too_large_halves_the_batch() {
    let hub_cfg = DevHubConfig {
        body_limit: 40_000,
        ..DevHubConfig::default()
    };
    let rig = rig(hub_cfg, fast()).await.unwrap();
    rig.hub.set_down(true).await;
    let emitted: Vec<Event> = (0..300).map(|n| event(t0(), n)).collect();
    for e in &emitted {
        rig.outbox.enqueue(e.clone()).unwrap();
    }
    rig.hub.set_down(false).await;
    assert!(delivered(&rig, 300).await);
    assert_eq!(rig.hub.events(CLUSTER), emitted);
    assert!(
        rig.hub
            .requests_to(Endpoint::Events)
            .iter()
            .any(|r| r.status == 413)
    );
}

// rule: EV-48
#[tokio::test]
async fn an_invalid_event_is_never_buffered() {
    let rig = rig(DevHubConfig::default(), fast()).await.unwrap();
    let mut e = event(t0(), 0);
    e.workload.name.clear();
    assert!(rig.outbox.enqueue(e).is_err());
    let mut e = event(t0(), 1);
    e.reason = "RecommendationApplied".into();
    assert!(rig.outbox.enqueue(e).is_err(), "a reason of another type");
    assert!(rig.outbox.is_empty());
}

// rule: RB-30
#[tokio::test]
async fn enqueue_does_not_wait_for_a_slow_hub() {
    let rig = rig(DevHubConfig::default(), fast()).await.unwrap();
    rig.hub
        .set_fault(Some(Endpoint::Events), Fault::Slow(Duration::from_secs(3)));
    rig.outbox.enqueue(event(t0(), 0)).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    for n in 1..1000 {
        rig.outbox.enqueue(event(t0(), n)).unwrap();
    }
    assert!(started.elapsed() < Duration::from_millis(500));
}
