//! The dev hub's HTTP side: auth, strict event validation, de-duplication, ETag, limits,
//! faults and the hub file.

use std::time::Duration;

use kerf_api::event::EventType;
use kerf_api::hub::{HubError, PauseScope};
use kerf_sim::hub::{DevHub, DevHubConfig, Endpoint, Fault, start};
use serde_json::{Value, json};

mod support;

fn event(id: &str, ty: &str) -> Value {
    json!({"id": id, "type": ty, "time": "2026-11-04T10:15:00Z",
           "workload": {"namespace": "shop", "kind": "Deployment", "name": "web"},
           "reason": "Cooldown"})
}

const A: &str = "6f1c2a8e-0d7b-4c55-a0b1-8f9e2f0d1c3a";
const B: &str = "7f1c2a8e-0d7b-4c55-a0b1-8f9e2f0d1c3a";

#[allow(clippy::unwrap_used)]
async fn hub() -> DevHub {
    start(DevHubConfig {
        token: Some("tok".into()),
        body_limit: 64 * 1024,
        ..DevHubConfig::default()
    })
    .await
    .unwrap()
}

#[allow(clippy::unwrap_used)]
async fn post(hub: &DevHub, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/v1/clusters/dev/events", hub.url()))
        .bearer_auth("tok")
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The status code of the answer to `request`.
#[allow(clippy::unwrap_used)]
async fn status_of(request: reqwest::RequestBuilder) -> u16 {
    request.send().await.unwrap().status().as_u16()
}

/// Named `hub::...` so `cargo test -p kerf-sim hub` selects them.
mod hub {
    use super::*;

    #[tokio::test]
    async fn a_missing_or_wrong_token_is_401_with_the_error_shape() {
        let hub = hub().await;
        let url = format!("{}/v1/clusters/dev/config", hub.url());
        let r = reqwest::Client::new()
            .get(&url)
            .bearer_auth("nope")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401);
        let e: HubError = r.json().await.unwrap();
        assert_eq!(e.code, "unauthorized");
        let r = reqwest::get(&url).await.unwrap();
        assert_eq!(r.status().as_u16(), 401);
    }

    // rule: EV-62, EV-48
    #[tokio::test]
    async fn a_batch_with_an_invalid_item_is_refused_whole_naming_the_item() {
        let hub = hub().await;
        let (status, body) = post(
            &hub,
            &json!({"events": [event(A, "blocked"), event(B, "config_changed")]}),
        )
        .await;
        assert_eq!(status, 400);
        assert_eq!(body["code"], "invalid_item");
        assert_eq!(body["index"], 1);
        assert_eq!(body["id"], B);
        assert!(
            hub.events("dev").is_empty(),
            "nothing of the batch is stored"
        );
        let mut missing = event(B, "blocked");
        missing.as_object_mut().unwrap().remove("reason");
        let (status, body) = post(&hub, &json!({"events": [missing]})).await;
        assert_eq!((status, body["index"].clone()), (400, json!(0)));
        assert!(body["message"].as_str().unwrap().contains("reason"));
    }

    // rule: EV-03
    #[tokio::test]
    async fn events_are_stored_once_per_id_and_counted_per_type() {
        let hub = hub().await;
        let (status, body) = post(&hub, &json!({"events": [event(A, "blocked")]})).await;
        assert_eq!(
            (status, body),
            (200, json!({"accepted": 1, "duplicates": 0}))
        );
        let (status, body) = post(
            &hub,
            &json!({"events": [event(A, "blocked"), event(B, "blocked")]}),
        )
        .await;
        assert_eq!(
            (status, body),
            (200, json!({"accepted": 1, "duplicates": 1}))
        );
        assert_eq!(hub.events("dev").len(), 2);
        let counts = hub.counts("dev");
        assert_eq!(counts.get(&EventType::Blocked), Some(&2));
        assert_eq!(hub.duplicates("dev"), 1);
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_413() {
        let hub = hub().await;
        let events: Vec<Value> = (0..400)
            .map(|_| event(&uuid::Uuid::new_v4().to_string(), "blocked"))
            .collect();
        let (status, body) = post(&hub, &json!({"events": events})).await;
        assert_eq!((status, body["code"].clone()), (413, json!("too_large")));
        assert!(hub.events("dev").is_empty());
    }

    #[tokio::test]
    async fn recommendations_carry_an_etag_and_answer_304_to_it() {
        let hub = hub().await;
        let c = reqwest::Client::new();
        let url = format!("{}/v1/clusters/dev/recommendations", hub.url());
        let r = c.get(&url).bearer_auth("tok").send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let tag = r.headers()["etag"].to_str().unwrap().to_owned();
        let r = c
            .get(&url)
            .bearer_auth("tok")
            .header("if-none-match", &tag)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 304);
        hub.set_recommendations("dev", vec![]);
        hub.pause("dev", Some(PauseScope::Cluster));
        let r = c
            .get(format!("{}/v1/clusters/dev/config", hub.url()))
            .bearer_auth("tok")
            .send()
            .await
            .unwrap();
        let config: Value = r.json().await.unwrap();
        assert_eq!(
            config["flags"],
            json!({"paused": true, "pauseScope": "cluster"})
        );
    }

    #[tokio::test]
    async fn fault_switches_change_the_answers() {
        let hub = hub().await;
        let c = reqwest::Client::new();
        let url = format!("{}/v1/clusters/dev/config", hub.url());
        hub.fail_next(
            Some(Endpoint::Config),
            Fault::RateLimited {
                retry_after: "7".into(),
            },
            1,
        );
        let r = c.get(&url).bearer_auth("tok").send().await.unwrap();
        assert_eq!(
            (
                r.status().as_u16(),
                r.headers()["retry-after"].to_str().unwrap()
            ),
            (429, "7")
        );
        hub.fail_next(None, Fault::ServerError, 1);
        assert_eq!(status_of(c.get(&url).bearer_auth("tok")).await, 500);
        hub.fail_next(None, Fault::WrongTypes, 1);
        let body = support::json_body(c.get(&url).bearer_auth("tok"))
            .await
            .unwrap();
        assert_eq!(body["flags"]["paused"], "yes");
        hub.set_down(true).await;
        assert!(
            c.get(&url)
                .bearer_auth("tok")
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .unwrap_err()
                .is_connect()
        );
        hub.set_down(false).await;
        assert_eq!(status_of(c.get(&url).bearer_auth("tok")).await, 200);
    }

    #[tokio::test]
    async fn the_hub_file_sets_recommendations_and_config() {
        let dir = tempfile::tempdir().unwrap();
        let config = "    config: {flags: {paused: true, pauseScope: fleet}}\n";
        let path = support::hub_file(dir.path(), config).unwrap();
        let hub = DevHub::from_file(&path, DevHubConfig::default())
            .await
            .unwrap();
        let url = format!("{}/v1/clusters/dev/recommendations", hub.url());
        let list = support::json_body(reqwest::Client::new().get(url))
            .await
            .unwrap();
        assert_eq!(list["recommendations"][0]["recommendationID"], "r-1");
    }
}

/// The hub file example of docs/sim.md loads and is served.
#[tokio::test]
async fn the_documented_hub_file_example_loads() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/sim.md")).unwrap();
    let start = doc.find("```yaml\nclusters:").unwrap() + "```yaml\n".len();
    let len = doc[start..].find("```").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hub.yaml");
    std::fs::write(&path, &doc[start..start + len]).unwrap();
    let hub = kerf_sim::hub::DevHub::from_file(&path, kerf_sim::hub::DevHubConfig::default())
        .await
        .unwrap();
    let get = |what: &str| {
        let url = format!("{}/v1/clusters/dev/{what}", hub.url());
        support::json_body(reqwest::Client::new().get(url))
    };
    let list = get("recommendations").await.unwrap();
    assert_eq!(list["recommendations"][0]["recommendationID"], "r-1");
    let config = get("config").await.unwrap();
    assert_eq!(config["approvals"][0]["approvalId"], "a-1");
}
