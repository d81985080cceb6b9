//! e2e: a scoped agent (docs/configuration.md#scoped-installs). A workload in the scope
//! gets its rsr and its change; a workload outside it gets no rsr and no write, and its
//! hub recommendation is reported once as skipped `OutOfScope`, however many polls and
//! mirrorings follow.

mod e2e_support;

use std::time::Duration;

use e2e_support::{
    AgentOptions, CLUSTER, Env, assert_pod_requests, assert_template_requests, ensure_namespace,
    eventually, manager, scope_of,
};
use k8s_openapi::api::apps::v1::Deployment;
use kerf_api::event::{Event, EventType};
use kerf_api::hub::Recommendation;
use kerf_api::wellknown::REASON_OUT_OF_SCOPE;
use kerf_sim::api::audit::AuditRecord;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

/// Deployment `ns/name` of one pod requesting 200m/256Mi, labelled `app: <name>` and
/// `labels`.
async fn deployment(
    env: &Env,
    ns: &str,
    name: &str,
    labels: serde_json::Value,
) -> anyhow::Result<()> {
    let mut d = kerf_testkit::deployment_json(
        ns,
        name,
        1,
        kerf_testkit::App {
            image: "registry.k8s.io/pause:3.10",
            requests: ["200m", "256Mi"],
            limits: None,
        },
    );
    if let Some(extra) = labels.as_object() {
        for (k, v) in extra {
            d["metadata"]["labels"][k] = v.clone();
        }
    }
    let api: Api<Deployment> = Api::namespaced(env.client.clone(), ns);
    api.create(&PostParams::default(), &serde_json::from_value(d)?)
        .await?;
    Ok(())
}

/// The `OutOfScope` events the dev hub stored for `ns/name`.
fn out_of_scope_events(env: &Env, ns: &str, name: &str) -> Vec<Event> {
    env.hub
        .events(CLUSTER)
        .into_iter()
        .filter(|e| e.workload.namespace == ns && e.workload.name == name)
        .filter(|e| e.type_ == EventType::Skipped && e.reason == REASON_OUT_OF_SCOPE)
        .collect()
}

/// Waits for `n` `OutOfScope` events for `ns/name` at the hub.
async fn wait_out_of_scope(env: &Env, ns: &str, name: &str, n: usize) -> anyhow::Result<()> {
    let what = format!("{n} skipped OutOfScope events for {ns}/{name} at the hub");
    eventually(&what, Duration::from_secs(30), || async {
        (out_of_scope_events(env, ns, name).len() >= n).then_some(())
    })
    .await
}

/// The mutating requests after request `after` whose path `touches`.
fn writes_after(env: &Env, after: u64, touches: impl Fn(&str) -> bool) -> Vec<AuditRecord> {
    let Some(sim) = env.sim.as_ref() else {
        return Vec::new();
    };
    sim.audit()
        .snapshot()
        .records
        .into_iter()
        .filter(|r| r.seq > after && r.is_mutating() && touches(&r.path))
        .collect()
}

/// The position of the last request the API server answered.
fn last_seq(env: &Env) -> u64 {
    env.sim
        .as_ref()
        .and_then(|s| s.audit().snapshot().records.last().map(|r| r.seq))
        .unwrap_or(0)
}

/// The rsrs of namespace `ns`.
async fn rsrs_in(env: &Env, ns: &str) -> anyhow::Result<Vec<String>> {
    let api = e2e_support::rsr_api(&env.client, ns);
    let list = api.list(&Default::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect())
}

// sim
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_outside_the_scope_gets_no_rsr_no_write_and_one_skip() -> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-scope-ns").await? else {
        return Ok(());
    };
    let (a, b) = (env.ns.clone(), format!("{}-b", env.ns));
    let out = two_namespaces(&env, &b).await?;
    let mut settings = env.settings(&AgentOptions::default())?;
    settings.scope = scope_of(&["--scope-namespaces", &a])?;
    let started = last_seq(&env);
    env.start_agent_with(settings).await;

    env.wait_phase("web", "Applied").await?;
    for p in env.wait_ready("web", 1).await? {
        assert_pod_requests(&p, "150m", "200Mi");
    }
    skipped_once(&env, &b, out).await?;
    nothing_made_or_written_in(&env, &b, started).await?;

    // A new recommendation for the workload is reported once too.
    let newer = kerf_testkit::hub_recommendation(
        [&b, "Deployment", "web"],
        "rec-b-2",
        ["120m", "200Mi"],
        "0.9",
    )?;
    env.recommend(vec![
        env.recommendation("web", "140m", "200Mi", "0.9")?,
        newer,
    ]);
    wait_out_of_scope(&env, &b, "web", 2).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(out_of_scope_events(&env, &b, "web").len(), 2);
    env.stop_agent().await;
    Ok(())
}

/// Deployment `web` in the harness's namespace (Ready) and in `b`, one policy selecting
/// both (only the scope keeps the agent out of `b`), and a recommendation for each; gives
/// the one for `b`.
async fn two_namespaces(env: &Env, b: &str) -> anyhow::Result<Recommendation> {
    let a = env.ns.clone();
    ensure_namespace(&env.client, b, true).await?;
    env.deployment("web", 1, "200m", "256Mi").await?;
    deployment(env, b, "web", json!({})).await?;
    env.wait_ready("web", 1).await?;
    let mut spec = e2e_support::policy_spec(&a, "auto-patch", "in-place");
    spec["selector"]["namespaces"] = json!([a, b]);
    env.policy("both", spec).await?;
    let out = kerf_testkit::hub_recommendation(
        [b, "Deployment", "web"],
        "rec-b-1",
        ["150m", "200Mi"],
        "0.9",
    )?;
    env.recommend(vec![
        env.recommendation("web", "150m", "200Mi", "0.9")?,
        out.clone(),
    ]);
    Ok(out)
}

/// The recommendation `out` for `b/web` is reported skipped `OutOfScope` once, naming the
/// setting, and stays reported once through polls and a new hub state.
async fn skipped_once(env: &Env, b: &str, out: Recommendation) -> anyhow::Result<()> {
    wait_out_of_scope(env, b, "web", 1).await?;
    let e = &out_of_scope_events(env, b, "web")[0];
    assert_eq!(e.recommendation_id.as_deref(), Some("rec-b-1"));
    let message = e.message.as_deref().unwrap_or_default();
    assert!(message.contains("scope.namespaces"), "{message}");

    // Polls, and a new hub state that mirrors everything again: still exactly one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    env.recommend(vec![
        env.recommendation("web", "140m", "200Mi", "0.9")?,
        out,
    ]);
    env.wait_rsr(
        "web",
        "the new recommendation mirrored",
        e2e_support::WAIT,
        |r| r["spec"]["containers"][0]["requests"]["cpu"] == "140m",
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let events = out_of_scope_events(env, b, "web");
    assert_eq!(events.len(), 1, "{events:#?}");
    Ok(())
}

/// No rsr in `b`, no write there since request `started`, and its Deployment's template
/// as it was made.
async fn nothing_made_or_written_in(env: &Env, b: &str, started: u64) -> anyhow::Result<()> {
    assert!(rsrs_in(env, b).await?.is_empty(), "an rsr was made in {b}");
    let in_b = format!("/namespaces/{b}/");
    assert!(
        !writes_after(env, 0, |p| p.contains(&in_b)).is_empty(),
        "the request log shows the Deployment made in {b} before the agent started"
    );
    let writes = writes_after(env, started, |p| p.contains(&in_b));
    assert!(writes.is_empty(), "writes in {b}: {writes:#?}");
    let api: Api<Deployment> = Api::namespaced(env.client.clone(), b);
    let d = serde_json::to_value(api.get("web").await?)?;
    e2e_support::assert_template_requests(&d, "200m", "256Mi");
    Ok(())
}

// sim
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_without_the_scope_label_gets_no_rsr_no_write_and_one_skip() -> anyhow::Result<()>
{
    let Some(mut env) = Env::start_sim_only("e2e-scope-label").await? else {
        return Ok(());
    };
    let ns = env.ns.clone();
    deployment(&env, &ns, "web", json!({"kerf": "on"})).await?;
    deployment(&env, &ns, "api", json!({})).await?;
    env.wait_ready("web", 1).await?;
    env.wait_ready("api", 1).await?;
    env.policy_of("auto", "auto-patch", "in-place").await?;
    env.recommend(vec![
        env.recommendation("web", "150m", "200Mi", "0.9")?,
        env.recommendation("api", "150m", "200Mi", "0.9")?,
    ]);
    let mut settings = env.settings(&AgentOptions::default())?;
    settings.scope = scope_of(&["--scope-workload-selector", "kerf=on"])?;
    let started = last_seq(&env);
    env.start_agent_with(settings).await;

    env.wait_phase("web", "Applied").await?;
    for p in env.wait_ready("web", 1).await? {
        assert_pod_requests(&p, "150m", "200Mi");
    }
    wait_out_of_scope(&env, &ns, "api", 1).await?;
    let e = &out_of_scope_events(&env, &ns, "api")[0];
    let message = e.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("scope.workloadSelector \"kerf=on\""),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(out_of_scope_events(&env, &ns, "api").len(), 1);
    assert!(
        env.hub_events("web", EventType::Skipped)
            .iter()
            .all(|e| e.reason != REASON_OUT_OF_SCOPE),
        "the workload in the scope is not skipped"
    );

    assert_eq!(rsrs_in(&env, &ns).await?, ["web"]);
    let writes = writes_after(&env, started, |p| {
        p.contains("/deployments/api") || p.contains("/pods/api-")
    });
    assert!(writes.is_empty(), "writes to api: {writes:#?}");
    env.assert_cpu_unchanged("api", "200m").await?;

    // Labelled, the workload joins the scope: the next mirroring (here a new hub state)
    // makes its rsr and it gets its change.
    let api: Api<Deployment> = Api::namespaced(env.client.clone(), &ns);
    let patch = json!({"metadata": {"labels": {"kerf": "on"}}});
    api.patch("api", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    env.recommend(vec![
        env.recommendation("web", "150m", "200Mi", "0.9")?,
        env.recommendation("api", "140m", "200Mi", "0.9")?,
    ]);
    env.wait_phase("api", "Applied").await?;
    for p in env.wait_ready("api", 1).await? {
        assert_pod_requests(&p, "140m", "200Mi");
    }
    env.stop_agent().await;
    Ok(())
}

// A workload that leaves the scope (its label removed) is wound down as when it leaves
// auto-patch: its applied rollout is released (the template keeps the values, `kerf` owns
// no field of it), one `released` event goes to the hub, and then nothing more is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_that_leaves_the_scope_is_released_then_left_alone() -> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-scope-leave").await? else {
        return Ok(());
    };
    let ns = env.ns.clone();
    deployment(&env, &ns, "web", json!({"kerf": "on"})).await?;
    env.wait_ready("web", 1).await?;
    env.policy_of("auto", "auto-patch", "rollout").await?;
    env.recommend(vec![env.recommendation("web", "150m", "200Mi", "0.9")?]);
    let mut settings = env.settings(&AgentOptions::default())?;
    settings.scope = scope_of(&["--scope-workload-selector", "kerf=on"])?;
    env.start_agent_with(settings).await;
    env.wait_phase("web", "Applied").await?;
    let d = env.deployment_json("web").await?;
    assert!(manager(&d, "kerf").is_some(), "{}", d["metadata"]);

    let api: Api<Deployment> = Api::namespaced(env.client.clone(), &ns);
    let patch = json!({"metadata": {"labels": {"kerf": null}}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let rsr = env.wait_phase("web", "Released").await?;
    assert_eq!(
        rsr["status"]["summary"]["mode"], "off (outside the scope)",
        "{}",
        rsr["status"]
    );
    assert_eq!(
        rsr["status"]["change"]["state"], "Released",
        "{}",
        rsr["status"]
    );
    let released = env.wait_hub_event("web", EventType::Released).await?;
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(
        released[0].details.get("newMode").map(String::as_str),
        Some("off")
    );
    let d = env.deployment_json("web").await?;
    assert_template_requests(&d, "150m", "200Mi");
    let managers: Vec<&str> = d["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(
        !managers.iter().any(|m| m.starts_with("kerf")),
        "{managers:?}"
    );

    // Released, the workload is left alone: a new recommendation for it is reported once
    // as out of scope, and nothing is written to it.
    let after = last_seq(&env);
    env.recommend(vec![env.recommendation("web", "120m", "180Mi", "0.9")?]);
    wait_out_of_scope(&env, &ns, "web", 1).await?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let writes = writes_after(&env, after, |p| {
        p.contains("/deployments/web") || p.contains("/pods/web-")
    });
    assert!(writes.is_empty(), "writes after the release: {writes:#?}");
    // The released event leaves the rsr's status once the hub has it.
    env.wait_rsr("web", "no pending events", e2e_support::WAIT, |r| {
        r["status"]["change"]["pendingEvents"]
            .as_array()
            .is_none_or(|a| a.is_empty())
    })
    .await?;
    assert_eq!(env.hub_events("web", EventType::Released).len(), 1);
    env.stop_agent().await;
    Ok(())
}
