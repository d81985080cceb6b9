//! e2e: leaving auto-patch for one resource releases that resource only (design D21). A
//! rollout hands the fields of that resource over and `kerf` keeps the others; a freeze or
//! a pause holds the release and the workload reports that block for the resource; under
//! in-place the resource leaves `live` and the running pods keep their values.

mod e2e_support;

use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use e2e_support::{
    AgentOptions, CLUSTER, Env, WAIT, assert_pod_requests, assert_template_requests, condition,
    manager, pod_names, policy_spec, template_resources,
};
use kerf_api::Resource;
use kerf_api::event::{Event, EventType};
use kerf_api::hub::PauseScope;
use serde_json::{Value, json};

/// The policy spec in auto-patch with `strategy`, `cpu_mode` and `memory_mode` per resource.
fn spec(ns: &str, strategy: &str, cpu_mode: &str, memory_mode: &str) -> Value {
    let mut s = policy_spec(ns, "auto-patch", strategy);
    s["resources"] = json!({"cpu": {"mode": cpu_mode}, "memory": {"mode": memory_mode}});
    s
}

/// A one-off freeze window from an hour ago to an hour from now.
fn open_freeze() -> Value {
    let now = Utc::now();
    let fmt = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    json!([{"start": fmt(now - chrono::Duration::hours(1)),
        "end": fmt(now + chrono::Duration::hours(1))}])
}

/// The CPU and memory fields `kerf` owns in container `app` of the template, sorted
/// (`requests.cpu`, `requests.memory`).
fn kerf_fields(d: &Value) -> Vec<String> {
    let Some(m) = manager(d, "kerf") else {
        return Vec::new();
    };
    let app = &m["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"]
        ["f:resources"];
    let mut out = Vec::new();
    for side in ["requests", "limits"] {
        for r in ["cpu", "memory"] {
            if app[format!("f:{side}")][format!("f:{r}")].is_object() {
                out.push(format!("{side}.{r}"));
            }
        }
    }
    out
}

/// Starts `web` (2 pods at 200m/256Mi) under policy `name` in auto-patch with `strategy`,
/// recommends 150m/200Mi and waits until the change is Applied (and, for a rollout, until
/// the rollout completed).
async fn applied(env: &mut Env, name: &str, strategy: &str) -> anyhow::Result<Value> {
    env.web(2).await?;
    env.policy(name, spec(&env.ns, strategy, "auto-patch", "auto-patch"))
        .await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;
    env.wait_hub_event("web", EventType::Applied).await?;
    let rsr = env
        .wait_rsr("web", "Applied, watch end known", WAIT, |r| {
            r["status"]["phase"] == "Applied" && r["status"]["watch"]["end"].is_string()
        })
        .await?;
    env.wait_ready("web", 2).await?;
    Ok(rsr)
}

/// The released events of `web` at the hub.
fn released(env: &Env) -> Vec<Event> {
    env.hub_events("web", EventType::Released)
}

/// Waits for `n` released events of `web` at the hub.
async fn wait_released(env: &Env, n: usize) -> anyhow::Result<Vec<Event>> {
    e2e_support::eventually(&format!("{n} released events"), WAIT, || {
        let found = released(env);
        async move { (found.len() == n).then_some(found) }
    })
    .await
}

// portable
// rule: AP-20, AP-21, EV-46, EV-52, EV-54, design D21
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_auto_patch_for_cpu_releases_cpu_only() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-release-cpu").await?;
    let rsr = applied(&mut env, "release-res", "rollout").await?;
    let rec_id = rsr["spec"]["recommendationID"].clone();
    let d = env.deployment_json("web").await?;
    assert_eq!(kerf_fields(&d), ["requests.cpu", "requests.memory"]);
    let generation = d["metadata"]["generation"].clone();

    // CPU leaves auto-patch; memory stays.
    env.policy(
        "release-res",
        spec(&env.ns, "rollout", "audit", "auto-patch"),
    )
    .await?;
    let events = wait_released(&env, 1).await?;
    let e = &events[0];
    assert_eq!(e.reason, "ModeChanged");
    assert_eq!(e.resources, vec![Resource::Cpu], "{e:?}");
    assert_eq!(e.strategy.as_deref(), Some("rollout"));
    assert_eq!(e.recommendation_id.as_deref(), rec_id.as_str());
    assert_eq!(
        e.details.get("previousMode").map(String::as_str),
        Some("auto-patch")
    );
    assert_eq!(e.details.get("newMode").map(String::as_str), Some("audit"));
    let d = env.deployment_json("web").await?;
    assert_eq!(kerf_fields(&d), ["requests.memory"], "{}", d["metadata"]);
    assert_eq!(
        template_resources(&d)["requests"],
        json!({"cpu": "150m", "memory": "200Mi"}),
        "the template keeps its values"
    );
    assert_eq!(d["metadata"]["generation"], generation, "no new rollout");
    // Memory is still kerf's change: the phase stays Applied; the status shows the new
    // mode of cpu once the pass that released it has written.
    let rsr = env
        .wait_rsr("web", "Applied with cpu in audit", e2e_support::WAIT, |r| {
            r["status"]["phase"] == "Applied" && r["status"]["mode"]["cpu"] == "audit"
        })
        .await?;
    let st = &rsr["status"];
    assert_eq!(st["change"]["state"], "Applied", "{st}");
    assert_eq!(st["change"]["resources"], json!(["memory"]), "{st}");
    assert_eq!(
        st["mode"],
        json!({"cpu": "audit", "memory": "auto-patch"}),
        "{st}"
    );
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(released(&env).len(), 1, "released once");

    // Memory leaves too: the rest is released, with the id the intent recorded.
    env.policy("release-res", spec(&env.ns, "rollout", "audit", "audit"))
        .await?;
    let events = wait_released(&env, 2).await?;
    let last = events
        .iter()
        .find(|e| e.resources == vec![Resource::Memory])
        .cloned()
        .unwrap_or_else(|| panic!("no release of memory: {events:#?}"));
    let rsr = env.wait_phase("web", "Released").await?;
    assert_eq!(
        rsr["status"]["change"]["eventIds"]["released"],
        last.id.to_string()
    );
    let d = env.deployment_json("web").await?;
    assert!(kerf_fields(&d).is_empty(), "{}", d["metadata"]);
    assert!(manager(&d, "kerf").is_none(), "{}", d["metadata"]);
    assert_template_requests(&d, "150m", "200Mi");
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: AP-35, EV-39, EV-40, design D21
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freeze_or_a_pause_holds_the_release_and_is_reported_for_its_resource()
-> anyhow::Result<()> {
    let mut env = Env::start("e2e-release-hold").await?;
    applied(&mut env, "release-res", "rollout").await?;

    // CPU leaves auto-patch while a freeze window of the policy is open.
    let mut frozen = spec(&env.ns, "rollout", "audit", "auto-patch");
    frozen["apply"]["freezeWindows"] = open_freeze();
    env.policy("release-res", frozen).await?;
    let blocked = env.wait_hub_event("web", EventType::Blocked).await?;
    let freeze: Vec<&Event> = blocked
        .iter()
        .filter(|e| e.reason == "FreezeWindow")
        .collect();
    assert!(!freeze.is_empty(), "{blocked:#?}");
    let held: Vec<&&Event> = freeze
        .iter()
        .filter(|e| e.resources.contains(&Resource::Cpu))
        .collect();
    assert_eq!(
        held.len(),
        1,
        "the freeze is reported for cpu: {blocked:#?}"
    );
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(released(&env).is_empty(), "released during a freeze");
    assert!(
        env.hub_events("web", EventType::Skipped)
            .iter()
            .all(|e| !(e.reason == "ModeAudit" && e.resources.contains(&Resource::Cpu))),
        "the release's block, not the mode, is reported for cpu"
    );
    let d = env.deployment_json("web").await?;
    assert_eq!(kerf_fields(&d), ["requests.cpu", "requests.memory"]);

    // The freeze ends; the hub pauses automation instead: still held, reported as Paused.
    env.hub.pause(CLUSTER, Some(PauseScope::Cluster));
    env.wait_rsr("web", "Blocked Paused", WAIT, |r| {
        condition(r, "Blocked").is_some_and(|c| c["status"] == "True" && c["reason"] == "Paused")
    })
    .await?;
    env.policy(
        "release-res",
        spec(&env.ns, "rollout", "audit", "auto-patch"),
    )
    .await?;
    let paused = e2e_support::eventually("a Paused block for cpu", WAIT, || {
        let found: Vec<Event> = env
            .hub_events("web", EventType::Blocked)
            .into_iter()
            .filter(|e| e.reason == "Paused")
            .collect();
        async move { (!found.is_empty()).then_some(found) }
    })
    .await?;
    assert_eq!(
        paused[0].details.get("pauseScope").map(String::as_str),
        Some("cluster")
    );
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(released(&env).is_empty(), "released during a pause");
    let d = env.deployment_json("web").await?;
    assert_eq!(kerf_fields(&d), ["requests.cpu", "requests.memory"]);

    // Resumed: the release goes in, for cpu only.
    env.hub.pause(CLUSTER, None);
    let events = wait_released(&env, 1).await?;
    assert_eq!(events[0].resources, vec![Resource::Cpu]);
    let d = env.deployment_json("web").await?;
    assert_eq!(kerf_fields(&d), ["requests.memory"]);
    assert_template_requests(&d, "150m", "200Mi");
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: EV-46, EV-52, design D20, design D21
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_in_place_leaving_auto_patch_clears_live_and_leaves_the_pods_alone()
-> anyhow::Result<()> {
    let mut env = Env::start("e2e-release-inplace").await?;
    applied(&mut env, "release-res", "in-place").await?;
    let rsr = env.rsr("web").await?.unwrap_or_default();
    let live = &rsr["status"]["live"]["containers"][0];
    assert_eq!(
        live["requests"],
        json!({"cpu": "150m", "memory": "200Mi"}),
        "{live}"
    );
    let before = env.wait_ready("web", 2).await?;

    // CPU leaves auto-patch: live gives new pods the template's cpu again, memory stays.
    env.policy(
        "release-res",
        spec(&env.ns, "in-place", "audit", "auto-patch"),
    )
    .await?;
    let events = wait_released(&env, 1).await?;
    assert_eq!(events[0].resources, vec![Resource::Cpu]);
    assert_eq!(events[0].strategy.as_deref(), Some("in-place"));
    let rsr = env
        .wait_rsr("web", "cpu out of live", WAIT, |r| {
            r["status"]["live"]["containers"][0]["requests"]["cpu"] == "200m"
        })
        .await?;
    let live = &rsr["status"]["live"]["containers"][0];
    assert_eq!(
        live["requests"],
        json!({"cpu": "200m", "memory": "200Mi"}),
        "{live}"
    );
    assert_eq!(rsr["status"]["phase"], "Applied");

    // Memory leaves too: live is cleared, the rsr is Released.
    env.policy("release-res", spec(&env.ns, "in-place", "audit", "audit"))
        .await?;
    wait_released(&env, 2).await?;
    let rsr = env.wait_phase("web", "Released").await?;
    assert!(rsr["status"]["live"].is_null(), "{}", rsr["status"]);

    // The running pods were left alone: the same pods, still at the change's values.
    let pods = env.wait_ready("web", 2).await?;
    assert_eq!(pod_names(&pods), pod_names(&before));
    for p in &pods {
        assert_pod_requests(p, "150m", "200Mi");
    }
    let d = env.deployment_json("web").await?;
    assert_template_requests(&d, "200m", "256Mi");
    assert!(manager(&d, "kerf").is_none());
    env.stop_agent().await;
    Ok(())
}
