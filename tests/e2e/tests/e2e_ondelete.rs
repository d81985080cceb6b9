//! e2e: an OnDelete StatefulSet: after the rollout patched its template, the agent evicts
//! the outdated pods itself, highest ordinal first, one per run, each once every pod has
//! been Ready for `onDelete.settle`; a PodDisruptionBudget's refusal is recorded as
//! `blocked PodDisruptionBudget` with the pod and the eviction is tried again.

mod e2e_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use e2e_support::{AgentOptions, CLUSTER, Env, USER_MANAGER, eventually, is_ready, policy_spec};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kerf_agent::clock::SystemClock;
use kerf_agent::runtime::Agent;
use kerf_api::event::EventType;
use kerf_api::hub::Recommendation;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

async fn statefulset(env: &Env, name: &str) -> anyhow::Result<()> {
    let labels = json!({"app": name});
    let s: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": env.ns, "labels": labels},
        "spec": {"replicas": 3, "serviceName": name, "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "OnDelete"},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                "name": "app", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}]}}}
    }))?;
    let pp = PostParams {
        field_manager: Some(USER_MANAGER.into()),
        ..PostParams::default()
    };
    let api: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    api.create(&pp, &s).await?;
    Ok(())
}

fn recommendation(env: &Env, name: &str) -> anyhow::Result<Recommendation> {
    kerf_testkit::hub_recommendation(
        [&env.ns, "StatefulSet", name],
        &format!("rec-{name}"),
        ["150m", "256Mi"],
        "0.9",
    )
}

/// Long enough for a refused eviction: the eviction timeout and a margin.
fn executor_wait() -> Duration {
    kerf_agent::executor::ondelete::EVICTION_TIMEOUT + Duration::from_secs(20)
}

/// Waits until the change went into the template (`status.change.state` Applied). The
/// phase reads Applying until the outdated pods are replaced, so the replacement is
/// watched from here.
async fn template_applied(env: &Env) -> anyhow::Result<()> {
    env.wait_rsr("db", "the change in the template", e2e_support::WAIT, |r| {
        r["status"]["change"]["state"] == "Applied"
    })
    .await?;
    Ok(())
}

/// An agent with `onDelete.settle` `settle`.
async fn agent(env: &Env, settle: Duration) -> anyhow::Result<Agent> {
    let mut settings = env.settings(&AgentOptions::default())?;
    settings.on_delete.settle = settle;
    assert_eq!(settings.on_delete.max_pod_deletes_per_run, 1);
    Ok(Agent::start(env.client.clone(), settings, Arc::new(SystemClock)).await?)
}

/// The pods' uids by name and their CPU requests, once every pod is Ready.
async fn ready_pods(env: &Env, name: &str) -> Option<BTreeMap<String, (String, String)>> {
    let pods = env.pods(name).await.ok()?;
    if pods.len() != 3 || !pods.iter().all(is_ready) {
        return None;
    }
    Some(
        pods.iter()
            .map(|p| {
                let cpu = e2e_support::pod_resources(p)["requests"]["cpu"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let uid = p.metadata.uid.clone().unwrap_or_default();
                (p.metadata.name.clone().unwrap_or_default(), (uid, cpu))
            })
            .collect(),
    )
}

// portable
// rule: AP-52, AP-53, AP-54, AP-56, AP-59
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outdated_on_delete_pods_are_evicted_highest_ordinal_first() -> anyhow::Result<()> {
    let env = Env::start("e2e-ondelete").await?;
    statefulset(&env, "db").await?;
    let before = eventually("3 Ready pods", e2e_support::WAIT, || ready_pods(&env, "db")).await?;
    env.policy_of("auto", "auto-patch", "rollout").await?;
    env.hub
        .set_recommendations(CLUSTER, vec![recommendation(&env, "db")?]);
    let agent = agent(&env, Duration::from_secs(1)).await?;
    template_applied(&env).await?;

    // Poll the pods and note the order in which they were replaced.
    let mut order: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while order.len() < 3 {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "pods replaced so far: {order:?}"
        );
        let pods = env.pods("db").await?;
        let missing = 3 - pods.len().min(3);
        let not_ready = pods.iter().filter(|p| !is_ready(p)).count();
        assert!(
            missing + not_ready <= 1,
            "more than one pod replaced at once"
        );
        for p in &pods {
            let name = p.metadata.name.clone().unwrap_or_default();
            let replaced = before
                .get(&name)
                .is_some_and(|(uid, _)| p.metadata.uid.as_deref() != Some(uid.as_str()));
            if replaced && !order.contains(&name) {
                order.push(name);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(order, ["db-2", "db-1", "db-0"]);
    let after = eventually("3 Ready pods", e2e_support::WAIT, || ready_pods(&env, "db")).await?;
    for (name, (_, cpu)) in &after {
        assert_eq!(cpu, "150m", "{name}");
    }
    agent.stop().await;
    Ok(())
}

// portable
// rule: AP-60, AP-61
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_eviction_is_blocked_pod_disruption_budget_and_retried() -> anyhow::Result<()> {
    let env = Env::start("e2e-ondelete-pdb").await?;
    statefulset(&env, "db").await?;
    eventually("3 Ready pods", e2e_support::WAIT, || ready_pods(&env, "db")).await?;
    env.policy_of("auto", "auto-patch", "rollout").await?;
    env.hub
        .set_recommendations(CLUSTER, vec![recommendation(&env, "db")?]);
    // The pods settle for 4s: the budget goes in after the template patch, before the
    // first eviction (a budget allowing no disruption would block the change itself).
    let agent = agent(&env, Duration::from_secs(4)).await?;
    template_applied(&env).await?;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), &env.ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": env.ns},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "db"}}}
    }))?;
    pdbs.create(&PostParams::default(), &pdb).await?;

    // The client retries a 429 itself for a while before the refusal shows (EV-42).
    let wait = executor_wait();
    let blocked = eventually("a blocked PodDisruptionBudget event", wait, || async {
        let found: Vec<_> = env
            .hub_events("db", EventType::Blocked)
            .into_iter()
            .filter(|e| e.reason == "PodDisruptionBudget")
            .collect();
        (!found.is_empty()).then_some(found)
    })
    .await?;
    assert_eq!(
        blocked[0].details.get("pod").map(String::as_str),
        Some("db-2")
    );
    let pods = env.pods("db").await?;
    assert!(
        pods.iter()
            .all(|p| e2e_support::pod_resources(p)["requests"]["cpu"] == "200m"),
        "a pod was replaced despite the budget"
    );

    // Once the budget allows it, the retry replaces the pods.
    pdbs.delete("db", &DeleteParams::default()).await?;
    eventually("every pod at 150m", wait, || async {
        let pods = ready_pods(&env, "db").await?;
        pods.values().all(|(_, cpu)| cpu == "150m").then_some(())
    })
    .await?;
    let again = env
        .hub_events("db", EventType::Blocked)
        .into_iter()
        .filter(|e| e.reason == "PodDisruptionBudget")
        .count();
    assert_eq!(again, 1, "the refusal is reported once");
    agent.stop().await;
    Ok(())
}

// sim
// rule: AP-58
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_breach_stops_the_ondelete_replacement_and_rolls_back() -> anyhow::Result<()> {
    let env = Env::start("e2e-ondelete-breach").await?;
    let Some(sim) = env.sim.as_ref().map(|s| s.context().clone()) else {
        env.sim_only("e2e-ondelete-breach");
        return Ok(());
    };
    statefulset(&env, "db").await?;
    let before = eventually("3 Ready pods", e2e_support::WAIT, || ready_pods(&env, "db")).await?;
    let mut spec = policy_spec(&env.ns, "auto-patch", "rollout");
    spec["guardrails"]["cooldown"] = json!("10m");
    spec["guardrails"]["rollback"] = json!({"watchDuration": "60s", "restarts": 1});
    env.policy("auto", spec).await?;
    env.hub
        .set_recommendations(CLUSTER, vec![recommendation(&env, "db")?]);
    // With `KERF_E2E_BREACH_GUARD_OFF=1` the pass does not see the breach and the test
    // fails: db-1 is replaced with the change's values.
    if std::env::var_os("KERF_E2E_BREACH_GUARD_OFF").is_some() {
        kerf_agent::failpoints::configure(kerf_agent::reconcile::BREACH_GUARD_OFF);
    }
    // Every pod must be Ready for 3s before the next eviction (AP-56).
    let agent = agent(&env, Duration::from_secs(3)).await?;
    template_applied(&env).await?;
    let replaced = |pods: &BTreeMap<String, (String, String)>, name: &str| {
        pods.get(name).map(|p| &p.0) != before.get(name).map(|p| &p.0)
    };
    eventually("db-2 replaced and Ready", e2e_support::WAIT, || async {
        let pods = ready_pods(&env, "db").await?;
        replaced(&pods, "db-2").then_some(())
    })
    .await?;
    // The replaced pod restarts: a breach while db-1 and db-0 are still outdated.
    kerf_sim::kubelet::inject(
        &sim,
        kerf_sim::kubelet::Fault::Restart {
            namespace: env.ns.clone(),
            pod: "db-2".to_owned(),
            container: "app".to_owned(),
        },
    )?;
    // Until well past the settle time after the rollback, db-1 and db-0 never run with the
    // change's values: the breach stopped the replacement.
    let mut rolled_back_at = None;
    let deadline = tokio::time::Instant::now() + e2e_support::WAIT;
    loop {
        for p in env.pods("db").await? {
            let name = p.metadata.name.clone().unwrap_or_default();
            let cpu = e2e_support::pod_resources(&p)["requests"]["cpu"].clone();
            assert!(
                name == "db-2" || cpu != "150m",
                "{name} was replaced with the change's values despite the breach"
            );
        }
        let rsr = env.rsr("db").await?.unwrap_or_default();
        if rolled_back_at.is_none() && rsr["status"]["change"]["state"] == "RolledBack" {
            assert_eq!(rsr["status"]["lastRollback"]["reason"], "Restarts");
            rolled_back_at = Some(tokio::time::Instant::now());
        }
        match rolled_back_at {
            Some(t) if t.elapsed() > Duration::from_secs(5) => break,
            None => anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "no rollback after the breach"
            ),
            Some(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    agent.stop().await;
    Ok(())
}
