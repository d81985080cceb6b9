//! e2e: what the agent takes from the hub and gives back. A pause in the hub config blocks
//! every change with Paused; the last good config survives a restart in the ConfigMap
//! `kerf-hub-state` until `staleAfter`, and without it the agent fails closed; the
//! inventory tells the hub what the agent sees.

mod e2e_support;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use e2e_support::{
    AgentOptions, CLUSTER, Env, assert_pod_requests, condition, eventually, policy_spec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kerf_api::event::EventType;
use kerf_api::hub::{ClusterConfig, PauseScope};
use kerf_sim::hub::{Endpoint, Fault};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The agent's namespace in the harness settings.
const AGENT_NS: &str = "kerf-system";

/// Makes the agent's namespace (a real cluster may not have it).
async fn agent_namespace(env: &Env) -> anyhow::Result<()> {
    let nss: Api<Namespace> = Api::all(env.client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": AGENT_NS}}))?;
    match nss.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn config_maps(env: &Env) -> Api<ConfigMap> {
    Api::namespaced(env.client.clone(), AGENT_NS)
}

/// The data of `kerf-hub-state` once it shows a config whose `flags.paused` is `paused`.
async fn hub_state_data(env: &Env, paused: bool) -> anyhow::Result<BTreeMap<String, String>> {
    let api = config_maps(env);
    eventually(
        "kerf-hub-state with the hub's config",
        e2e_support::WAIT,
        || async {
            let data = api.get_opt("kerf-hub-state").await.ok()??.data?;
            let config: Value = serde_json::from_str(data.get("config")?).ok()?;
            (config["flags"]["paused"].as_bool().unwrap_or(false) == paused).then_some(data)
        },
    )
    .await
}

fn blocked_reason(rsr: &Value) -> Option<&str> {
    condition(rsr, "Blocked")
        .filter(|c| c["status"] == "True")
        .and_then(|c| c["reason"].as_str())
}

// portable
// rule: AP-43, EV-38, EV-40, GR-47
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_in_the_hub_blocks_changes_with_paused_until_resumed() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-hubpause").await?;
    agent_namespace(&env).await?;
    env.web(2).await?;
    env.policy_of("auto", "auto-patch", "in-place").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.hub.pause(CLUSTER, Some(PauseScope::Cluster));
    env.start_agent(&AgentOptions::default()).await?;

    let rsr = env
        .wait_rsr("web", "Blocked Paused", e2e_support::WAIT, |r| {
            blocked_reason(r) == Some("Paused")
        })
        .await?;
    assert_eq!(rsr["status"]["phase"], "Blocked", "{}", rsr["status"]);
    let events = env.wait_hub_event("web", EventType::Blocked).await?;
    assert_eq!(events[0].reason, "Paused", "{events:#?}");
    assert_eq!(
        events[0].details.get("pauseScope").map(String::as_str),
        Some("cluster"),
        "{events:#?}"
    );
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    env.assert_cpu_unchanged("web", "200m").await?;
    assert!(env.hub_events("web", EventType::Applied).is_empty());

    // Resumed in the hub: the next poll lifts the block and the change goes in.
    env.hub.pause(CLUSTER, None);
    env.wait_phase("web", "Applied").await?;
    for p in env.wait_ready("web", 2).await? {
        assert_pod_requests(&p, "150m", "200Mi");
    }
    let data = hub_state_data(&env, false).await?;
    assert_eq!(data["cluster"], CLUSTER);
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: design D26, AP-43, EV-37, EV-40
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_kept_config_holds_the_pause_until_stale_after() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-hubstate").await?;
    agent_namespace(&env).await?;
    env.web(2).await?;
    env.policy_of("p", "audit", "in-place").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.hub.pause(CLUSTER, Some(PauseScope::Cluster));
    env.start_agent(&AgentOptions::default()).await?;
    env.wait_phase("web", "Skipped").await?;

    // The last good config and its fetch time are kept in kerf-hub-state.
    let data = hub_state_data(&env, true).await?;
    assert_eq!(data["cluster"], CLUSTER);
    let kept: ClusterConfig = serde_json::from_str(&data["config"])?;
    assert!(kept.flags.paused);
    assert_eq!(kept.flags.pause_scope, Some(PauseScope::Cluster));
    let fetched_at: DateTime<Utc> = data["fetchedAt"].parse()?;
    assert!(fetched_at <= Utc::now());
    env.stop_agent().await;

    // Restart with the hub's config unreachable (its recommendations still served) and the
    // workload now in auto-patch: the kept pause blocks it, until staleAfter has passed.
    env.hub
        .set_fault(Some(Endpoint::Config), Fault::Unavailable);
    env.policy_of("p", "auto-patch", "in-place").await?;
    let stale_after = chrono::Duration::seconds(15);
    let opts = AgentOptions {
        stale_after: "15s",
        ..AgentOptions::default()
    };
    env.start_agent(&opts).await?;
    let rsr = env
        .wait_rsr(
            "web",
            "Blocked Paused from the kept config",
            e2e_support::WAIT,
            |r| blocked_reason(r) == Some("Paused"),
        )
        .await?;
    assert_eq!(rsr["status"]["phase"], "Blocked", "{}", rsr["status"]);
    assert!(Utc::now() < fetched_at + stale_after);
    // The first pass may block HubUnreachable before the first recommendations arrive.
    let paused = eventually("a Paused block at the hub", e2e_support::WAIT, || async {
        let events = env.hub_events("web", EventType::Blocked);
        events.into_iter().find(|e| e.reason == "Paused")
    })
    .await?;
    assert_eq!(
        paused.details.get("pauseScope").map(String::as_str),
        Some("cluster"),
        "{paused:#?}"
    );

    let rsr = env
        .wait_rsr(
            "web",
            "Blocked HubUnreachable",
            Duration::from_secs(30),
            |r| blocked_reason(r) == Some("HubUnreachable"),
        )
        .await?;
    assert!(
        Utc::now() >= fetched_at + stale_after,
        "the kept config went stale before staleAfter: {}",
        rsr["status"]
    );
    env.assert_cpu_unchanged("web", "200m").await?;
    // Nothing new was fetched, so nothing was written.
    let again = hub_state_data(&env, true).await?;
    assert_eq!(again["fetchedAt"], data["fetchedAt"]);
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: design D26, EV-37
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_kept_config_and_the_hub_down_every_workload_is_blocked() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-hubclosed").await?;
    agent_namespace(&env).await?;
    for name in ["web", "api"] {
        env.deployment(name, 1, "200m", "256Mi").await?;
    }
    env.wait_ready("web", 1).await?;
    env.wait_ready("api", 1).await?;
    env.policy_of("p", "audit", "in-place").await?;
    env.recommend(vec![
        env.recommendation("web", "150m", "200Mi", "0.9")?,
        env.recommendation("api", "150m", "200Mi", "0.9")?,
    ]);
    env.start_agent(&AgentOptions::default()).await?;
    env.wait_phase("web", "Skipped").await?;
    env.wait_phase("api", "Skipped").await?;
    hub_state_data(&env, false).await?;
    env.stop_agent().await;

    config_maps(&env)
        .delete("kerf-hub-state", &DeleteParams::default())
        .await?;
    env.hub.set_down(true).await;
    env.policy_of("p", "auto-patch", "in-place").await?;
    env.start_agent(&AgentOptions::default()).await?;
    for name in ["web", "api"] {
        env.wait_rsr(name, "Blocked HubUnreachable", e2e_support::WAIT, |r| {
            blocked_reason(r) == Some("HubUnreachable")
        })
        .await?;
    }

    // Back up with fresh recommendations but still no config: still closed.
    env.hub
        .set_fault(Some(Endpoint::Config), Fault::Unavailable);
    env.hub.set_down(false).await;
    let before = env.hub.requests_to(Endpoint::Recommendations).len();
    eventually("two recommendation fetches", e2e_support::WAIT, || async {
        (env.hub.requests_to(Endpoint::Recommendations).len() >= before + 2).then_some(())
    })
    .await?;
    for name in ["web", "api"] {
        let rsr = env.rsr(name).await?.unwrap_or_default();
        assert_eq!(
            blocked_reason(&rsr),
            Some("HubUnreachable"),
            "{}",
            rsr["status"]
        );
        env.assert_cpu_unchanged(name, "200m").await?;
    }
    assert!(
        config_maps(&env).get_opt("kerf-hub-state").await?.is_none(),
        "no config was fetched, so none may be kept"
    );

    // The config arrives: both changes go in and the config is kept.
    env.hub.clear_faults();
    env.wait_phase("web", "Applied").await?;
    env.wait_phase("api", "Applied").await?;
    hub_state_data(&env, false).await?;
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: design D26
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inventory_lists_the_workloads_with_values_mode_and_settings() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-inventory").await?;
    agent_namespace(&env).await?;
    let web_uid = env.deployment("web", 1, "200m", "256Mi").await?;
    env.deployment("api", 1, "100m", "128Mi").await?;
    let mut spec = policy_spec(&env.ns, "audit", "rollout");
    spec["recommendation"] = json!({"cpuPercentile": 95, "headroomPercent": 20});
    env.policy("inv", spec).await?;
    let config: ClusterConfig = serde_json::from_value(json!({
        "defaults": {"cluster": {"recommendation": {"window": "168h"}}}
    }))?;
    env.hub.set_config(CLUSTER, config);
    env.start_agent(&AgentOptions::default()).await?;

    let ns = env.ns.clone();
    let listed = || {
        let inv = env.hub.inventory(CLUSTER)?;
        let mine: Vec<Value> = inv
            .workloads
            .iter()
            .filter(|w| w.namespace == ns)
            .map(|w| serde_json::to_value(w).unwrap_or_default())
            .collect();
        Some(mine)
    };
    let mine = eventually(
        "both workloads in the inventory",
        e2e_support::WAIT,
        || async { listed().filter(|m| m.len() == 2) },
    )
    .await?;
    let (api, web) = (&mine[0], &mine[1]);
    assert_eq!(api["name"], "api");
    assert_eq!(web["name"], "web");
    assert_eq!(web["kind"], "Deployment");
    assert_eq!(web["uid"], web_uid.as_str());
    assert_eq!(
        web["containers"],
        json!([{"name": "app", "requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {}}])
    );
    assert_eq!(web["mode"], json!({"cpu": "audit", "memory": "audit"}));
    assert_eq!(web["strategy"], "rollout");
    assert_eq!(
        web["settings"],
        json!({"window": "168h", "cpuPercentile": 95, "headroomPercent": 20})
    );
    assert_eq!(api["containers"][0]["requests"]["cpu"], "100m");

    // Unchanged: not put again on every poll.
    let puts = env.hub.requests_to(Endpoint::Inventory).len();
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        env.hub.requests_to(Endpoint::Inventory).len() <= puts + 1,
        "the inventory was put again though nothing changed"
    );

    // A changed workload is reported at the next poll.
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "app", "resources": {"requests": {"cpu": "300m"}}}]}}}});
    env.deployments()
        .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    eventually(
        "web at 300m in the inventory",
        e2e_support::WAIT,
        || async {
            let mine = listed()?;
            let web = mine.iter().find(|w| w["name"] == "web")?;
            (web["containers"][0]["requests"]["cpu"] == "300m").then_some(())
        },
    )
    .await?;
    env.stop_agent().await;
    Ok(())
}
