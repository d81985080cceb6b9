//! e2e: what every event of a workload's life carries. A block, an apply that changes
//! only cpu and a release: each event names the rsr's recommendation, is stamped with the
//! moment it happened, and is mirrored as a Kubernetes Event on the rsr.

mod e2e_support;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use e2e_support::{AgentOptions, CLUSTER, Env, WAIT, eventually};
use kerf_api::event::{Event, EventType};
use serde_json::json;
use uuid::Uuid;

/// Hub events of `name` by id, each with the first moment the test saw it stored.
type Seen = BTreeMap<Uuid, (Event, DateTime<Utc>)>;

/// Records the hub events of `name` not seen before, with the current time.
fn note(env: &Env, name: &str, seen: &mut Seen) {
    let now = Utc::now();
    for e in env.hub.events(CLUSTER) {
        if e.workload.name == name && e.workload.namespace == env.ns {
            seen.entry(e.id).or_insert((e, now));
        }
    }
}

/// Polls the hub every 100 ms, noting events, until an event of type `t` is stored.
async fn note_until(env: &Env, name: &str, t: EventType, seen: &mut Seen) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        note(env, name, seen);
        if seen.values().any(|(e, _)| e.type_ == t) {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("no {t} event for {name} at the hub; seen {seen:#?}");
        }
        tokio::time::sleep(e2e_support::POLL).await;
    }
}

// portable
// rule: EV-07, EV-08, EV-49, EV-51, EV-52, EV-55, EV-56
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_names_its_recommendation_its_time_and_has_a_kubernetes_event()
-> anyhow::Result<()> {
    let started = Utc::now();
    let mut env = Env::start("e2e-events").await?;
    env.web(2).await?;
    env.policy_of("events", "auto-patch", "rollout").await?;
    let mut seen = Seen::new();
    // Too little confidence: blocked. The memory recommendation equals the current value.
    env.recommend_web("150m", "256Mi", "0.3")?;
    env.start_agent(&AgentOptions::default()).await?;
    let rsr = env.wait_phase("web", "Blocked").await?;
    note_until(&env, "web", EventType::Blocked, &mut seen).await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    note(&env, "web", &mut seen);
    let mut ids: BTreeMap<Uuid, String> = BTreeMap::new();
    let first = rsr["spec"]["recommendationID"].as_str().unwrap_or_default();
    assert_eq!(first, "rec-web-150m-256Mi", "{}", rsr["spec"]);
    for id in seen.keys() {
        ids.insert(*id, first.to_owned());
    }

    // A confident recommendation changing only cpu: applied.
    env.recommend_web("140m", "256Mi", "0.9")?;
    note_until(&env, "web", EventType::Applied, &mut seen).await?;
    let rsr = env.wait_phase("web", "Applied").await?;
    let second = rsr["spec"]["recommendationID"].as_str().unwrap_or_default();
    assert_eq!(second, "rec-web-140m-256Mi", "{}", rsr["spec"]);
    let applied: Vec<&Event> = seen
        .values()
        .map(|(e, _)| e)
        .filter(|e| e.type_ == EventType::Applied)
        .collect();
    assert_eq!(applied.len(), 1, "{applied:#?}");
    // EV-52, EV-55, EV-56: strategy, and from/to of cpu only (memory did not change).
    assert_eq!(applied[0].strategy.as_deref(), Some("rollout"));
    assert_eq!(
        serde_json::to_value(&applied[0].containers)?,
        json!([{"name": "app", "from": {"requests": {"cpu": "200m"}},
            "to": {"requests": {"cpu": "140m"}}}])
    );

    // Leaving auto-patch: released.
    env.policy_of("events", "audit", "rollout").await?;
    note_until(&env, "web", EventType::Released, &mut seen).await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    note(&env, "web", &mut seen);
    for id in seen.keys() {
        ids.entry(*id).or_insert_with(|| second.to_owned());
    }

    each_event_named_stamped_and_mirrored(&env, &seen, &ids, started).await?;
    env.stop_agent().await;
    Ok(())
}

/// Each event in `seen` names the recommendation `ids` gives it, is stamped between
/// `started` and when it was seen, and has a Kubernetes Event on the rsr; a blocked, an
/// applied and a released event are among them.
async fn each_event_named_stamped_and_mirrored(
    env: &Env,
    seen: &Seen,
    ids: &BTreeMap<Uuid, String>,
    started: DateTime<Utc>,
) -> anyhow::Result<()> {
    let k8s = eventually("a Kubernetes Event per hub event", WAIT, || async {
        let k8s = env.k8s_events(Some("web"), None).await.ok()?;
        (k8s.len() >= seen.len()).then_some(k8s)
    })
    .await?;
    for (id, (e, seen_at)) in seen {
        // EV-51: the recommendation the rsr held when it happened.
        assert_eq!(e.recommendation_id.as_ref(), ids.get(id), "{e:#?}");
        // EV-49: stamped when it happened, not later than the hub stored it.
        assert!(
            e.time >= started && e.time <= *seen_at,
            "{} {}: time {} not within [{started}, {seen_at}]",
            e.type_,
            e.reason,
            e.time
        );
        // EV-07, EV-08: a Kubernetes Event on the rsr with the same reason; Warning only
        // for failed, rolled_back and fallback.
        let want = match e.type_ {
            EventType::Failed | EventType::RolledBack | EventType::Fallback => "Warning",
            _ => "Normal",
        };
        let same = k8s
            .iter()
            .filter(|k| k.reason.as_deref() == Some(&e.reason));
        let types: Vec<_> = same.map(|k| k.type_.clone().unwrap_or_default()).collect();
        assert!(!types.is_empty(), "no Kubernetes Event for {e:#?}");
        assert!(types.iter().all(|t| t == want), "{} {types:?}", e.reason);
    }
    let types: Vec<EventType> = seen.values().map(|(e, _)| e.type_).collect();
    for t in [EventType::Blocked, EventType::Applied, EventType::Released] {
        assert!(types.contains(&t), "no {t} event: {types:?}");
    }
    Ok(())
}
