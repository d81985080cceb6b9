//! e2e: the annotation `kerf.getkerf.dev/revert: "true"` puts a workload whose reduced
//! values outlived `mode: off` back to its template values, in place, through the intent
//! of a change; an agent stopped after the intent leaves the next one to finish it once;
//! the workload is then held while the annotation stays. With `--features failpoints` the
//! stop is exact (a fail point); without, the agent is killed once the intent shows.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, Web, assert_pod_requests, event_cpu_requests, pod_resources};
use k8s_openapi::api::apps::v1::Deployment;
use kerf_api::event::EventType;
use kerf_sim::sim::SimConfig;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

async fn annotate_revert(env: &Env, value: &str) -> anyhow::Result<()> {
    let body = json!({"metadata": {"annotations": {"kerf.getkerf.dev/revert": value}}});
    env.deployments()
        .patch("web", &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map(|_: Deployment| ())
        .map_err(Into::into)
}

fn pod_uids(pods: &[k8s_openapi::api::core::v1::Pod]) -> Vec<String> {
    let mut uids: Vec<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    uids.sort();
    uids
}

/// `web` applied in place (200m/256Mi -> 150m/200Mi on 2 pods), then released by
/// `mode: off`: the pods keep the reduced values.
async fn released_with_reduced_pods(env: &Env) -> anyhow::Result<Vec<String>> {
    env.wait_phase("web", "Applied").await?;
    env.policy_of("p", "off", "in-place").await?;
    env.wait_phase("web", "Released").await?;
    let pods = env.wait_ready("web", 2).await?;
    for p in &pods {
        assert_pod_requests(p, "150m", "200Mi");
    }
    Ok(pod_uids(&pods))
}

// portable
// rule: design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revert_puts_the_template_values_back_in_place_and_holds_them() -> anyhow::Result<()> {
    let mut env = Env::start_web("e2e-revert", Web::policy("p", "auto-patch", "in-place")).await?;
    let uids = released_with_reduced_pods(&env).await?;

    kerf_agent::failpoints::configure("after-intent=error");
    annotate_revert(&env, "true").await?;
    let rsr = env
        .wait_rsr("web", "the revert's intent", e2e_support::WAIT, |r| {
            r["status"]["change"]["revert"] == true
        })
        .await?;
    env.kill_agent().await;
    kerf_agent::failpoints::configure("");
    let intent = rsr["status"]["change"].clone();
    if cfg!(feature = "failpoints") {
        // Intent first: recorded before any pod was resized.
        assert_eq!(intent["state"], "Intent", "{intent}");
        assert_eq!(rsr["status"]["phase"], "Applying", "{}", rsr["status"]);
        assert_eq!(cpu_of_pods(&env).await?, vec!["150m", "150m"]);
    }

    env.start_agent(&AgentOptions::default()).await?;
    let rsr = env
        .wait_rsr("web", "the revert done", e2e_support::WAIT, |r| {
            r["status"]["change"]["state"] == "Released" && r["status"]["change"]["revert"] == true
        })
        .await?;
    assert_eq!(
        rsr["status"]["change"]["id"], intent["id"],
        "a second revert"
    );
    let pods = env.wait_ready("web", 2).await?;
    for p in &pods {
        assert_pod_requests(p, "200m", "256Mi");
    }
    assert_eq!(pod_uids(&pods), uids, "pods were replaced, not resized");
    assert!(rsr["status"]["live"].is_null(), "{}", rsr["status"]);
    assert!(rsr["status"]["watch"].is_null(), "{}", rsr["status"]);

    the_revert_is_reported_once(&env).await?;

    // Back to auto-patch with the annotation still there: nothing changes, and the event
    // is not sent again.
    env.policy_of("p", "auto-patch", "in-place").await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cpu_of_pods(&env).await?, vec!["200m", "200m"]);
    let rsr = env.rsr("web").await?.unwrap_or(Value::Null);
    assert_eq!(rsr["status"]["phase"], "Released", "{}", rsr["status"]);
    assert_eq!(rsr["status"]["summary"]["reason"], "Reverted");
    let cpu = rsr["status"]["summary"]["cpu"].as_str().unwrap_or_default();
    assert!(
        cpu.starts_with("200m"),
        "the row shows the pods' 200m: {cpu}"
    );
    let again = env.hub_events("web", EventType::Released);
    assert_eq!(again.iter().filter(|e| e.reason == "Reverted").count(), 1);
    let k8s = env.k8s_events(Some("web"), Some("Reverted")).await?;
    assert_eq!(k8s.len(), 1, "{k8s:#?}");
    env.stop_agent().await;
    Ok(())
}

/// The revert reported: Released, reason Reverted, no health watch, and one released
/// event, Reverted, from 150m to 200m, its id on the rsr.
async fn the_revert_is_reported_once(env: &Env) -> anyhow::Result<()> {
    let rsr = env
        .wait_rsr("web", "the revert reported", e2e_support::WAIT, |r| {
            r["status"]["phase"] == "Released" && r["status"]["summary"]["reason"] == "Reverted"
        })
        .await?;
    let health = e2e_support::condition(&rsr, "HealthWatch").cloned();
    assert!(
        health.is_none_or(|c| c["reason"] != "Watching"),
        "{}",
        rsr["status"]
    );
    let reverted = env.wait_hub_event("web", EventType::Released).await?;
    let reverted: Vec<_> = reverted
        .into_iter()
        .filter(|e| e.reason == "Reverted")
        .collect();
    assert_eq!(reverted.len(), 1, "{reverted:#?}");
    let e = &reverted[0];
    assert_eq!(event_cpu_requests(e), (Some("150m"), Some("200m")));
    assert_eq!(
        rsr["status"]["change"]["eventIds"]["released"],
        e.id.to_string()
    );
    Ok(())
}

// sim
// rule: design D25
// The kubelet of this kerf-sim takes a second to actuate a resize (half its 2 s ready
// delay): passes run while the pods' spec holds the template's values and their status
// still reports the reduced ones. The revert runs once all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_place_revert_runs_once_while_the_kubelet_actuates_it() -> anyhow::Result<()> {
    let config = SimConfig {
        kubelet_ready_delay: Duration::from_secs(2),
        ..kerf_testkit::sim_config()
    };
    let web = Web::policy("p", "auto-patch", "in-place");
    let mut env = Env::start_web_sim("e2e-revert-slow", web, config).await?;
    released_with_reduced_pods(&env).await?;
    annotate_revert(&env, "true").await?;
    let rsr = env
        .wait_rsr("web", "the revert released", e2e_support::WAIT, |r| {
            r["status"]["change"]["state"] == "Released" && r["status"]["change"]["revert"] == true
        })
        .await?;
    let id = rsr["status"]["change"]["id"].clone();
    kerf_testkit::eventually("the pods report 200m", e2e_support::WAIT, || async {
        let reported = status_cpu_of_pods(&env).await.ok()?;
        (reported == ["200m", "200m"]).then_some(())
    })
    .await?;
    // Checks that nothing more happens: a few passes after the pods settled.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rsr = env.rsr("web").await?.unwrap_or(Value::Null);
    assert_eq!(rsr["status"]["change"]["id"], id, "a second revert");
    let reverted = env.hub_events("web", EventType::Released);
    assert_eq!(
        reverted.iter().filter(|e| e.reason == "Reverted").count(),
        1,
        "{reverted:#?}"
    );
    env.stop_agent().await;
    Ok(())
}

/// The CPU request container `app` of every pod of `web` reports in its status, sorted.
async fn status_cpu_of_pods(env: &Env) -> anyhow::Result<Vec<String>> {
    let mut cpu: Vec<String> = env
        .pods("web")
        .await?
        .iter()
        .filter_map(|p| {
            let statuses = p.status.as_ref()?.container_statuses.as_ref()?;
            let requests = statuses.first()?.resources.as_ref()?.requests.as_ref()?;
            Some(requests.get("cpu")?.0.clone())
        })
        .collect();
    cpu.sort();
    Ok(cpu)
}

// portable
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_revert_value_is_named_and_reverts_nothing() -> anyhow::Result<()> {
    let mut env =
        Env::start_web("e2e-revert-bad", Web::policy("p", "auto-patch", "in-place")).await?;
    env.wait_phase("web", "Applied").await?;
    annotate_revert(&env, "yes").await?;
    let rsr = env
        .wait_rsr(
            "web",
            "Valid=False naming the annotation",
            e2e_support::WAIT,
            |r| e2e_support::condition(r, "Valid").is_some_and(|c| c["status"] == "False"),
        )
        .await?;
    let valid = e2e_support::condition(&rsr, "Valid")
        .cloned()
        .unwrap_or_default();
    let message = valid["message"].as_str().unwrap_or_default();
    assert!(message.contains("kerf.getkerf.dev/revert"), "{message}");
    assert!(message.contains("nothing is reverted"), "{message}");
    // Counted as off: released, the pods keep their values (no revert).
    env.wait_phase("web", "Released").await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(cpu_of_pods(&env).await?, vec!["150m", "150m"]);
    env.stop_agent().await;
    Ok(())
}

/// The CPU request of container `app` of every pod of `web`, sorted.
async fn cpu_of_pods(env: &Env) -> anyhow::Result<Vec<String>> {
    let mut cpu: Vec<String> = env
        .pods("web")
        .await?
        .iter()
        .map(|p| {
            pod_resources(p)["requests"]["cpu"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    cpu.sort();
    Ok(cpu)
}

// portable
// rule: design D21
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revert_after_a_rollout_restores_the_template_and_hands_the_fields_over()
-> anyhow::Result<()> {
    let mut env = Env::start_web(
        "e2e-revert-rollout",
        Web::policy("p", "auto-patch", "rollout"),
    )
    .await?;
    env.wait_phase("web", "Applied").await?;
    let d = env.deployment_json("web").await?;
    e2e_support::assert_template_requests(&d, "150m", "200Mi");

    annotate_revert(&env, "true").await?;
    let rsr = env
        .wait_rsr("web", "the revert released", e2e_support::WAIT, |r| {
            r["status"]["change"]["revert"] == true && r["status"]["change"]["state"] == "Released"
        })
        .await?;
    assert_eq!(rsr["status"]["change"]["strategy"], "rollout");
    let d = env.deployment_json("web").await?;
    e2e_support::assert_template_requests(&d, "200m", "256Mi");
    assert!(
        e2e_support::manager(&d, "kerf").is_none()
            && e2e_support::manager(&d, "kerf-released").is_none(),
        "kerf still owns fields: {}",
        d["metadata"]["managedFields"]
    );
    for p in env.wait_ready("web", 2).await? {
        assert_pod_requests(&p, "200m", "256Mi");
    }
    let released = env.wait_hub_event("web", EventType::Released).await?;
    assert_eq!(released.len(), 1, "{released:#?}");
    assert_eq!(released[0].reason, "Reverted");
    env.stop_agent().await;
    Ok(())
}
