//! The hub client against the dev hub over real HTTP on loopback.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kerf_agent::clock::{SharedClock, TestClock};
use kerf_agent::hub::{Fetch, HubClient, HubClientConfig, HubClientError, HubMetrics};
use kerf_api::hub::{ClusterConfig, PauseScope, Recommendation};
use kerf_sim::hub::{DevHub, DevHubConfig, Endpoint, Fault, start};
use prometheus_client::registry::Registry;

const CLUSTER: &str = "dev";

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-04T10:00:00Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

#[allow(clippy::unwrap_used)]
fn recommendation(name: &str) -> Recommendation {
    serde_json::from_value(kerf_testkit::api::recommendation_json("shop", name)).unwrap()
}

struct Rig {
    hub: DevHub,
    client: HubClient,
    clock: TestClock,
    registry: Registry,
    token_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

async fn rig(token: &str, file_token: &str) -> Result<Rig, Box<dyn std::error::Error>> {
    let hub = start(DevHubConfig {
        token: Some(token.into()),
        ..DevHubConfig::default()
    })
    .await?;
    let dir = tempfile::tempdir()?;
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, file_token)?;
    let mut cfg = HubClientConfig::new(hub.url(), CLUSTER);
    cfg.token_file = Some(token_file.clone());
    cfg.backoff_base = Duration::from_millis(5);
    cfg.auth_backoff = Duration::from_secs(600);
    let clock = TestClock::new(t0());
    let shared: SharedClock = Arc::new(clock.clone());
    let mut registry = Registry::with_prefix("kerf_agent");
    let client = HubClient::new(cfg, HubMetrics::register(&mut registry), shared)?;
    Ok(Rig {
        hub,
        client,
        clock,
        registry,
        token_file,
        _dir: dir,
    })
}

fn metrics_text(registry: &Registry) -> String {
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

fn statuses(hub: &DevHub, e: Endpoint) -> Vec<u16> {
    hub.requests_to(e).iter().map(|r| r.status).collect()
}

#[tokio::test]
async fn the_list_kept_until_the_next_answer_has_no_room_beyond_its_recommendations() {
    let rig = rig("t", "t").await.unwrap();
    let list: Vec<Recommendation> = (0..5).map(|i| recommendation(&format!("w{i}"))).collect();
    rig.hub.set_recommendations(CLUSTER, list);
    rig.client.fetch_recommendations().await.unwrap();
    // Read in place: a clone would have exact room whatever the kept list has.
    let state = rig.client.subscribe();
    let state = state.borrow();
    let good = &state.last_good_recommendations.as_ref().unwrap().value;
    // Decoded, five recommendations had room for eight, and each one container for four.
    assert_eq!(good.recommendations.len(), 5);
    assert_eq!(good.recommendations.capacity(), 5);
    for r in &good.recommendations {
        assert_eq!(r.containers.capacity(), r.containers.len());
    }
}

// rule: EV-37
#[tokio::test]
async fn etag_304_keeps_the_list_and_counts_as_a_successful_fetch() {
    let rig = rig("t", "t").await.unwrap();
    rig.hub
        .set_recommendations(CLUSTER, vec![recommendation("web")]);
    assert_eq!(
        rig.client.fetch_recommendations().await.unwrap(),
        Fetch::Updated
    );
    rig.clock.advance(chrono::Duration::minutes(10));
    assert_eq!(
        rig.client.fetch_recommendations().await.unwrap(),
        Fetch::Unchanged
    );
    assert_eq!(
        statuses(&rig.hub, Endpoint::Recommendations),
        vec![200, 304]
    );
    let s = rig.client.state();
    let good = s.last_good_recommendations.unwrap();
    assert_eq!(good.value.recommendations[0].workload.name, "web");
    assert_eq!(good.fetched_at, t0() + chrono::Duration::minutes(10));
    assert_eq!(s.fresh_until, None, "no config fetched yet");
    rig.client.fetch_config().await.unwrap();
    let s = rig.client.state();
    assert_eq!(s.fresh_until, Some(t0() + chrono::Duration::minutes(40)));
    assert!(
        metrics_text(&rig.registry)
            .contains("kerf_agent_hub_requests_total{endpoint=\"recommendations\",code=\"304\"} 1")
    );
}

// rule: EV-38, AP-43
#[tokio::test]
async fn the_pause_is_read_from_config_flags() {
    let rig = rig("t", "t").await.unwrap();
    rig.hub.pause(CLUSTER, Some(PauseScope::Fleet));
    rig.client.fetch_config().await.unwrap();
    let config = rig.client.state().last_good_config.unwrap().value;
    assert!(config.flags.paused);
    assert_eq!(config.flags.pause_scope, Some(PauseScope::Fleet));
}

#[tokio::test]
async fn a_malformed_answer_is_a_clear_error_and_the_last_good_state_stays() {
    let rig = rig("t", "t").await.unwrap();
    rig.hub
        .set_recommendations(CLUSTER, vec![recommendation("web")]);
    rig.hub.set_config(CLUSTER, ClusterConfig::default());
    rig.client.fetch_recommendations().await.unwrap();
    rig.client.fetch_config().await.unwrap();
    let before = rig.client.state();
    rig.hub
        .set_recommendations(CLUSTER, vec![recommendation("api")]);

    rig.hub.fail_next(None, Fault::BadJson, 1);
    let e = rig.client.fetch_recommendations().await.unwrap_err();
    assert!(matches!(e, HubClientError::Decode { .. }), "{e}");
    rig.hub.fail_next(None, Fault::WrongTypes, 2);
    let e = rig.client.fetch_recommendations().await.unwrap_err();
    assert!(
        e.to_string().contains("recommendations"),
        "names the field: {e}"
    );
    let e = rig.client.fetch_config().await.unwrap_err();
    assert!(matches!(e, HubClientError::Decode { .. }), "{e}");
    rig.hub.fail_next(None, Fault::HugeBody(17 << 20), 1);
    let e = rig.client.fetch_recommendations().await.unwrap_err();
    assert!(matches!(e, HubClientError::BodyTooLarge { .. }), "{e}");
    assert_eq!(rig.client.state(), before);
    rig.client.fetch_recommendations().await.unwrap();
    assert_eq!(
        rig.client
            .state()
            .last_good_recommendations
            .unwrap()
            .value
            .recommendations[0]
            .workload
            .name,
        "api"
    );
}

#[tokio::test]
async fn unauthorized_gives_no_retry_storm_and_a_changed_token_file_is_read_again() {
    let rig = rig("right", "wrong").await.unwrap();
    for _ in 0..5 {
        let e = rig.client.fetch_recommendations().await.unwrap_err();
        assert!(
            matches!(e, HubClientError::Unauthorized { status: 401, .. }),
            "{e}"
        );
        assert!(!e.to_string().contains("wrong"), "the token is never shown");
    }
    let _ = rig.client.post_events(&[]).await.unwrap_err();
    assert_eq!(rig.hub.requests().len(), 1, "one request, then a pause");
    assert!(metrics_text(&rig.registry).contains("kerf_agent_hub_auth_failed 1"));
    std::fs::write(&rig.token_file, "right\n").unwrap();
    assert_eq!(
        rig.client.fetch_recommendations().await.unwrap(),
        Fetch::Updated
    );
    assert!(metrics_text(&rig.registry).contains("kerf_agent_hub_auth_failed 0"));
}

#[tokio::test]
async fn retries_transient_failures_and_honours_retry_after() {
    let rig = rig("t", "t").await.unwrap();
    rig.hub
        .fail_next(Some(Endpoint::Config), Fault::Unavailable, 1);
    rig.hub.fail_next(
        Some(Endpoint::Config),
        Fault::RateLimited {
            retry_after: "1".into(),
        },
        1,
    );
    rig.client.fetch_config().await.unwrap();
    let reqs = rig.hub.requests_to(Endpoint::Config);
    assert_eq!(
        reqs.iter().map(|r| r.status).collect::<Vec<_>>(),
        vec![503, 429, 200]
    );
    assert!(reqs[2].at - reqs[1].at >= Duration::from_secs(1));
}

#[tokio::test]
async fn a_hub_that_is_down_is_a_transport_error() {
    let rig = rig("t", "t").await.unwrap();
    rig.hub.set_down(true).await;
    let e = rig.client.fetch_config().await.unwrap_err();
    assert!(matches!(e, HubClientError::Transport { .. }), "{e}");
    assert!(rig.client.state().last_good_config.is_none());
    assert!(metrics_text(&rig.registry).contains("code=\"error\""));
    rig.hub.set_down(false).await;
    rig.client.fetch_config().await.unwrap();
}

#[tokio::test]
async fn inventory_is_put() {
    let rig = rig("t", "t").await.unwrap();
    let inv = kerf_api::hub::Inventory::default();
    rig.client.put_inventory(&inv).await.unwrap();
    assert_eq!(rig.hub.inventory(CLUSTER), Some(inv));
}

// A poll that brings nothing new notifies no one: the reconciler decides nothing again.
#[tokio::test]
async fn an_idle_poll_notifies_no_subscriber_and_a_change_or_regained_freshness_does() {
    let rig = rig("t", "t").await.unwrap();
    rig.hub
        .set_recommendations(CLUSTER, vec![recommendation("web")]);
    let mut rx = rig.client.subscribe();
    rig.client.fetch_config().await.unwrap();
    rig.client.fetch_recommendations().await.unwrap();
    assert!(rx.has_changed().unwrap(), "the first fetches are news");
    rx.borrow_and_update();
    let fresh_until = rig.client.state().fresh_until.unwrap();

    rig.clock.advance(chrono::Duration::minutes(1));
    assert_eq!(rig.client.fetch_config().await.unwrap(), Fetch::Unchanged);
    assert_eq!(
        rig.client.fetch_recommendations().await.unwrap(),
        Fetch::Unchanged
    );
    assert!(
        !rx.has_changed().unwrap(),
        "same config and a 304 are no news"
    );
    assert_eq!(
        rig.client.state().fresh_until,
        Some(fresh_until + chrono::Duration::minutes(1)),
        "the fetch times still move"
    );

    rig.hub.pause(CLUSTER, Some(PauseScope::Fleet));
    assert_eq!(rig.client.fetch_config().await.unwrap(), Fetch::Updated);
    assert!(rx.has_changed().unwrap(), "a changed configuration is news");
    rx.borrow_and_update();

    // Stale, then fresh again with the same values: decided again (EV-37).
    rig.clock.advance(chrono::Duration::hours(2));
    rig.client.fetch_config().await.unwrap();
    assert!(
        !rx.has_changed().unwrap(),
        "one fetch alone leaves it stale"
    );
    rig.client.fetch_recommendations().await.unwrap();
    assert!(rx.has_changed().unwrap(), "regained freshness is news");
}

/// `kerf_agent_hub_last_success_timestamp_seconds{endpoint}` in `text`, if present.
fn last_success(text: &str, endpoint: &str) -> Option<f64> {
    let prefix =
        format!("kerf_agent_hub_last_success_timestamp_seconds{{endpoint=\"{endpoint}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn a_successful_fetch_sets_the_hub_last_success_timestamp_and_a_failure_keeps_it() {
    let rig = rig("t", "t").await.unwrap();
    assert_eq!(last_success(&metrics_text(&rig.registry), "config"), None);
    rig.client.fetch_config().await.unwrap();
    let first = t0().timestamp() as f64;
    assert_eq!(
        last_success(&metrics_text(&rig.registry), "config"),
        Some(first)
    );
    rig.clock.advance(chrono::Duration::minutes(5));
    rig.hub.set_down(true).await;
    rig.client.fetch_config().await.unwrap_err();
    let text = metrics_text(&rig.registry);
    assert_eq!(last_success(&text, "config"), Some(first), "{text}");
    rig.hub.set_down(false).await;
    rig.client.fetch_config().await.unwrap();
    assert_eq!(
        last_success(&metrics_text(&rig.registry), "config"),
        Some(first + 300.0)
    );
}

/// With `scope.namespaces`, the recommendations outside them are handed to the reconciler
/// once: the hub state lets the list go once it is taken, and the same list again is not
/// handed over again (what it holds was reported), a changed one is.
// rule: EV-48
#[tokio::test]
async fn the_recommendations_outside_the_namespaces_are_handed_over_once_per_list() {
    let hub = start(DevHubConfig {
        token: Some("t".into()),
        ..DevHubConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "t").unwrap();
    let mut cfg = HubClientConfig::new(hub.url(), CLUSTER);
    cfg.token_file = Some(token_file);
    cfg.scope_namespaces = vec!["other".to_owned()];
    let shared: SharedClock = Arc::new(TestClock::new(t0()));
    let mut registry = Registry::with_prefix("kerf_agent");
    let client = HubClient::new(cfg, HubMetrics::register(&mut registry), shared).unwrap();
    let names = |list: &kerf_agent::hub::scoped::OutsideScopeList| -> Vec<String> {
        list.iter().map(|o| o.name.to_owned()).collect()
    };

    hub.set_recommendations(CLUSTER, vec![recommendation("web"), recommendation("api")]);
    assert_eq!(
        client.fetch_recommendations().await.unwrap(),
        Fetch::Updated
    );
    let state = client.state();
    let list = state.outside_scope.take().expect("handed over");
    assert_eq!(names(&list), ["web", "api"]);
    assert!(state.outside_scope.take().is_none(), "once");
    assert!(
        client.state().outside_scope.take().is_none(),
        "the hub state lets it go"
    );
    assert!(
        client
            .state()
            .last_good_recommendations
            .unwrap()
            .value
            .recommendations
            .is_empty(),
        "nothing in scope"
    );

    // The same list again, in a new answer (200, a new ETag): nothing new to hand over.
    hub.set_recommendations(CLUSTER, vec![recommendation("web"), recommendation("api")]);
    client.fetch_recommendations().await.unwrap();
    assert_eq!(statuses(&hub, Endpoint::Recommendations), vec![200, 200]);
    assert!(client.state().outside_scope.take().is_none());

    // A changed list is handed over.
    hub.set_recommendations(CLUSTER, vec![recommendation("web"), recommendation("db")]);
    assert_eq!(
        client.fetch_recommendations().await.unwrap(),
        Fetch::Updated
    );
    let list = client.state().outside_scope.take().expect("handed over");
    assert_eq!(names(&list), ["web", "db"]);
}

/// One HTTP/1.1 answer of `body` on `sock`, after reading the request's head.
#[allow(clippy::unwrap_used)] // test helper: a failure fails the test
async fn answer_once(sock: &mut tokio::net::TcpStream, body: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            sock.read(&mut byte).await.unwrap(),
            1,
            "a whole request head"
        );
        head.push(byte[0]);
    }
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(answer.as_bytes()).await.unwrap();
}

/// Whether the client closed `sock` within `wait` (it read to the end), or kept it open.
async fn closed_within(sock: &mut tokio::net::TcpStream, wait: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(wait, sock.read(&mut buf)).await,
        Ok(Ok(0))
    )
}

/// The recommendations are fetched on a connection of their own, which the client closes
/// once the answer is read: a connection kept for reuse would keep the read buffer it grew
/// for the list. The configuration's connection is kept for the next request.
#[tokio::test]
async fn the_recommendations_connection_is_closed_once_the_answer_is_read() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let shared: SharedClock = Arc::new(TestClock::new(t0()));
    let mut registry = Registry::with_prefix("kerf_agent");
    let client = Arc::new(
        HubClient::new(
            HubClientConfig::new(url, CLUSTER),
            HubMetrics::register(&mut registry),
            shared,
        )
        .unwrap(),
    );

    let fetch = tokio::spawn({
        let client = client.clone();
        async move { client.fetch_recommendations().await }
    });
    let (mut sock, _) = listener.accept().await.unwrap();
    answer_once(
        &mut sock,
        r#"{"recommendations": [], "generatedAt": "2026-11-04T10:00:00Z"}"#,
    )
    .await;
    assert_eq!(fetch.await.unwrap().unwrap(), Fetch::Updated);
    assert!(
        closed_within(&mut sock, Duration::from_secs(5)).await,
        "the recommendations' connection is closed"
    );

    let fetch = tokio::spawn({
        let client = client.clone();
        async move { client.fetch_config().await }
    });
    let (mut sock, _) = listener.accept().await.unwrap();
    answer_once(&mut sock, "{}").await;
    assert_eq!(fetch.await.unwrap().unwrap(), Fetch::Updated);
    assert!(
        !closed_within(&mut sock, Duration::from_millis(500)).await,
        "the configuration's connection is kept"
    );
}
