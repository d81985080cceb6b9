//! e2e: changes in auto-patch: in-place through pods/resize, rollout through the template,
//! deferred until a maintenance window opens.

mod e2e_support;

use std::time::Duration;

use e2e_support::{
    AgentOptions, Env, assert_pod_requests, assert_template_requests, event_cpu_requests, manager,
    pod_resources, policy_spec, template_resources,
};
use k8s_openapi::api::apps::v1::ReplicaSet;
use kerf_api::event::EventType;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};

/// The names of the ReplicaSets of Deployment `name` (label `app=<name>`).
async fn replica_sets(env: &Env, name: &str) -> anyhow::Result<Vec<String>> {
    let api: Api<ReplicaSet> = Api::namespaced(env.client.clone(), &env.ns);
    let lp = ListParams::default().labels(&format!("app={name}"));
    let sets = api.list(&lp).await?.items;
    Ok(sets.into_iter().filter_map(|s| s.metadata.name).collect())
}

// portable
// rule: AP-04, AP-05, EV-10, EV-12, EV-23, EV-51, EV-52
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_place_resizes_the_pods_and_leaves_the_template() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-inplace").await?;
    let before = env.web(2).await?;
    let generation = env.deployment_json("web").await?["metadata"]["generation"].clone();
    env.policy_of("auto", "auto-patch", "in-place").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    let rsr = env.wait_phase("web", "Applied").await?;
    let live = &rsr["status"]["live"]["containers"][0];
    assert_eq!(live["name"], "app", "{}", rsr["status"]);
    assert_eq!(live["requests"], json!({"cpu": "150m", "memory": "200Mi"}));
    assert_eq!(
        live["base"]["requests"],
        json!({"cpu": "200m", "memory": "256Mi"})
    );
    assert_eq!(rsr["status"]["change"]["strategy"], "in-place");

    // The same pods, resized; the template and its generation unchanged.
    let pods = env.wait_ready("web", 2).await?;
    let mut names: Vec<_> = pods.iter().map(|p| p.metadata.name.clone()).collect();
    let mut old: Vec<_> = before.iter().map(|p| p.metadata.name.clone()).collect();
    names.sort();
    old.sort();
    assert_eq!(names, old, "pods were replaced");
    for p in &pods {
        assert_pod_requests(p, "150m", "200Mi");
    }
    let d = env.deployment_json("web").await?;
    assert_template_requests(&d, "200m", "256Mi");
    assert_eq!(d["metadata"]["generation"], generation);
    assert!(
        manager(&d, "kerf").is_none(),
        "{}",
        d["metadata"]["managedFields"]
    );

    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = env.hub_events("web", EventType::Applied);
    assert_eq!(again.len(), 1, "{again:#?}");
    let e = &applied[0];
    assert_eq!(e.reason, "RecommendationApplied");
    assert_eq!(e.strategy.as_deref(), Some("in-place"));
    assert_eq!(e.containers.len(), 1);
    assert_eq!(e.containers[0].name, "app");
    assert_eq!(event_cpu_requests(e), (Some("200m"), Some("150m")));
    assert_eq!(
        rsr["status"]["change"]["eventIds"]["applied"],
        e.id.to_string(),
        "the applied event carries the id of the intent"
    );
    assert_eq!(
        e.recommendation_id.as_deref(),
        rsr["spec"]["recommendationID"].as_str(),
        "the applied event names the rsr's recommendation"
    );
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: AP-07, AP-19, AP-20, EV-11, EV-12, EV-51, EV-52, EV-55, EV-56
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_patches_the_template_as_kerf_owning_only_cpu_and_memory() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-rollout").await?;
    let before = env.web(2).await?;
    let old_pods: Vec<String> = before
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let old_sets = replica_sets(&env, "web").await?;
    assert!(!old_sets.is_empty(), "no ReplicaSet before the change");
    env.policy_of("auto", "auto-patch", "rollout").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    let rsr = env.wait_phase("web", "Applied").await?;
    assert_eq!(
        rsr["status"]["change"]["strategy"], "rollout",
        "{}",
        rsr["status"]
    );
    assert!(
        rsr["status"].get("live").is_none_or(|l| l.is_null()),
        "{}",
        rsr["status"]
    );
    let d = env.deployment_json("web").await?;
    assert_template_requests(&d, "150m", "200Mi");
    kerf_owns_only_cpu_and_memory(&d)?;

    // The Deployment rolls: new pods with the new values.
    e2e_support::eventually("the rollout to finish", e2e_support::WAIT, || async {
        let pods = env.pods("web").await.ok()?;
        let done = pods.len() == 2
            && pods.iter().all(|p| {
                e2e_support::is_ready(p)
                    && pod_resources(p)["requests"] == json!({"cpu": "150m", "memory": "200Mi"})
            });
        done.then_some(())
    })
    .await?;
    // AP-07: the template patch started a rolling restart: a new ReplicaSet, none of the
    // old pods left.
    let sets = replica_sets(&env, "web").await?;
    assert!(
        sets.iter().any(|s| !old_sets.contains(s)),
        "no new ReplicaSet: before {old_sets:?}, now {sets:?}"
    );
    for p in env.pods("web").await? {
        let name = p.metadata.name.clone().unwrap_or_default();
        assert!(!old_pods.contains(&name), "old pod {name} still runs");
    }

    one_applied_event_of_the_rollout(&env).await?;
    env.stop_agent().await;
    Ok(())
}

/// Deployment `d`'s managed fields: kerf's entry, an apply, owns the requests' cpu and
/// memory alone; the user's entry owns neither.
fn kerf_owns_only_cpu_and_memory(d: &Value) -> anyhow::Result<()> {
    let kerf =
        manager(d, "kerf").ok_or_else(|| anyhow::anyhow!("no kerf entry: {}", d["metadata"]))?;
    assert_eq!(kerf["operation"], "Apply");
    assert_eq!(
        kerf["fieldsV1"],
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {
            ".": {}, "f:name": {}, "f:resources": {"f:requests": {"f:cpu": {}, "f:memory": {}}}}}}}}})
    );
    let user = manager(d, e2e_support::USER_MANAGER).map(|m| m["fieldsV1"].to_string());
    let user = user.unwrap_or_default();
    assert!(
        !user.contains("f:cpu") && !user.contains("f:memory"),
        "{user}"
    );
    Ok(())
}

/// One applied event of the rollout, with the values before and after and the rsr's
/// recommendation.
async fn one_applied_event_of_the_rollout(env: &Env) -> anyhow::Result<()> {
    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(env.hub_events("web", EventType::Applied).len(), 1);
    assert_eq!(applied[0].strategy.as_deref(), Some("rollout"));
    assert_eq!(applied[0].reason, "RecommendationApplied");
    assert_eq!(applied[0].containers.len(), 1);
    // EV-55, EV-56: from/to hold the values before and after, of the changed resources.
    assert_eq!(
        serde_json::to_value(&applied[0].containers[0])?,
        json!({"name": "app",
            "from": {"requests": {"cpu": "200m", "memory": "256Mi"}},
            "to": {"requests": {"cpu": "150m", "memory": "200Mi"}}})
    );
    // EV-51: the event names the recommendation of the rsr.
    let rsr = env.rsr("web").await?.unwrap_or_default();
    assert_eq!(
        applied[0].recommendation_id.as_deref(),
        rsr["spec"]["recommendationID"].as_str()
    );
    assert_eq!(
        applied[0].recommendation_id.as_deref(),
        Some("rec-web-150m-200Mi")
    );
    Ok(())
}

// portable
// rule: AP-24, AP-25, AP-26, AP-27
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_waits_for_the_window_then_goes_in_as_a_rollout() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-deferred").await?;
    env.web(2).await?;
    let start = chrono::Utc::now() + chrono::Duration::seconds(6);
    let start = start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let opens = chrono::DateTime::parse_from_rfc3339(&start)?.to_utc();
    let end =
        (opens + chrono::Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut spec = policy_spec(&env.ns, "auto-patch", "deferred");
    spec["apply"]["maintenanceWindows"] = json!([{"start": start, "end": end}]);
    env.policy("deferred", spec).await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    let rsr = env.wait_phase("web", "Deferred").await?;
    let next: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(rsr["status"]["nextWindow"].clone())?;
    assert_eq!(next, opens);
    let blocked = e2e_support::condition(&rsr, "Blocked")
        .cloned()
        .unwrap_or_default();
    assert_eq!(blocked["status"], "True", "{blocked}");
    assert_eq!(blocked["reason"], "OutsideMaintenanceWindow");
    let events = env.wait_hub_event("web", EventType::Blocked).await?;
    assert_eq!(events[0].reason, "OutsideMaintenanceWindow");
    let d = env.deployment_json("web").await?;
    assert_eq!(
        template_resources(&d)["requests"]["cpu"],
        "200m",
        "changed before the window"
    );

    // The window opens: the change goes in as a rollout.
    let rsr = env
        .wait_rsr(
            "web",
            "phase Applied after the window opened",
            Duration::from_secs(15),
            |r| r["status"]["phase"] == "Applied",
        )
        .await?;
    assert!(
        chrono::Utc::now() >= opens,
        "applied before the window opened"
    );
    let d = env.deployment_json("web").await?;
    assert_template_requests(&d, "150m", "200Mi");
    assert!(manager(&d, "kerf").is_some());
    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    assert_eq!(applied.len(), 1);
    assert!(applied[0].time >= opens, "{:?}", applied[0].time);
    assert_eq!(
        applied[0].strategy.as_deref(),
        Some("rollout"),
        "{:?}",
        applied[0]
    );
    assert!(
        rsr["status"].get("nextWindow").is_none_or(|n| n.is_null()),
        "{}",
        rsr["status"]
    );
    env.stop_agent().await;
    Ok(())
}
