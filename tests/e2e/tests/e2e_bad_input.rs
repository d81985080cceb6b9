//! e2e: bad input from outside the agent's control: a hub recommendation the rsr's schema
//! refuses is named on the rsr (Valid=False, one Warning Event per recommendation id) and
//! not retried, and so is an rsr whose stored spec the schema refuses (written past an
//! older CRD); neither changes a pod.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, WAIT, condition, policy_spec};
use kerf_api::event::EventType;
use serde_json::{Value, json};

/// The recommendation `env.recommendation("web", cpu, "200Mi", "0.9")` with its id set.
fn rec_with(env: &Env, id: &str, cpu: &str) -> anyhow::Result<kerf_api::hub::Recommendation> {
    let mut rec = serde_json::to_value(env.recommendation("web", cpu, "200Mi", "0.9")?)?;
    rec["recommendationID"] = json!(id);
    Ok(serde_json::from_value(rec)?)
}

/// The rsr's refusal annotation, if any.
fn refusal(rsr: &Value) -> Option<&str> {
    rsr["metadata"]["annotations"][kerf_agent::rsr_sync::ANNOTATION_INVALID].as_str()
}

/// The messages of the Warning Kubernetes Events on rsr `web` that name a refused
/// recommendation (reason InvalidSpec).
async fn refusal_warnings(env: &Env) -> anyhow::Result<Vec<String>> {
    let events = env.k8s_events(Some("web"), Some("InvalidSpec")).await?;
    Ok(events
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| e.message.unwrap_or_default())
        .collect())
}

// portable
// rule: design D3
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recommendation_the_schema_refuses_is_named_on_the_rsr_and_not_retried()
-> anyhow::Result<()> {
    let mut env = Env::start("e2e-hub-refused").await?;
    env.deployment("web", 2, "200m", "256Mi").await?;
    env.wait_ready("web", 2).await?;
    env.policy("auto", policy_spec(&env.ns, "auto-patch", "in-place"))
        .await?;
    // The hub's quantity `12Q` is no Kubernetes quantity: the rsr's schema refuses it.
    env.recommend(vec![rec_with(&env, "rec-bad", "12Q")?]);
    env.start_agent(&AgentOptions::default()).await?;
    let text = the_refusal_is_named(&env).await?;
    // Polls go on every second; the rsr's spec and annotations are not written again for
    // the same recommendation (on kerf-sim, its request log shows no such write at all).
    let before = rsr_spec_writes(&env);
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        rsr_spec_writes(&env),
        before,
        "the refused recommendation was retried"
    );
    let later = env.rsr("web").await?.unwrap_or_default();
    assert_eq!(refusal(&later), Some(text.as_str()));
    env.assert_cpu_unchanged("web", "200m").await?;
    assert!(env.hub_events("web", EventType::Applied).is_empty());
    // One Warning Event for the refused recommendation, not one per pass or restart.
    let warnings = refusal_warnings(&env).await?;
    assert_eq!(warnings, vec![text.clone()], "after 4 s of passes");
    env.stop_agent().await;
    env.start_agent(&AgentOptions::default()).await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        refusal_warnings(&env).await?,
        vec![text.clone()],
        "after a restart"
    );

    // The hub's next recommendation is valid: written, the refusal gone, applied.
    env.recommend(vec![rec_with(&env, "rec-good", "150m")?]);
    let rsr = env
        .wait_rsr("web", "the good recommendation written", WAIT, |r| {
            r["spec"]["recommendationID"] == "rec-good"
        })
        .await?;
    assert_eq!(refusal(&rsr), None, "{}", rsr["metadata"]);
    env.wait_phase("web", "Applied").await?;
    env.stop_agent().await;
    Ok(())
}

/// Waits for the refusal of `rec-bad` named on a new rsr that holds no value, then in its
/// status: Valid=False, and InvalidSpec in the Reason column. Gives the refusal's text.
async fn the_refusal_is_named(env: &Env) -> anyhow::Result<String> {
    let rsr = env
        .wait_rsr("web", "the refusal named on a new rsr", WAIT, |r| {
            refusal(r).is_some()
        })
        .await?;
    let text = refusal(&rsr).unwrap_or_default().to_owned();
    assert!(text.contains("rec-bad"), "{text}");
    assert!(
        text.contains("spec.containers[0].requests.cpu: \"12Q\" is not a quantity"),
        "{text}"
    );
    assert_eq!(rsr["spec"]["recommendationID"], "rec-bad");
    assert_eq!(
        rsr["spec"]["containers"],
        json!([]),
        "no refused value is held"
    );
    assert!(
        rsr["metadata"]["annotations"][kerf_agent::rsr_sync::ANNOTATION_WITHDRAWN].is_string(),
        "the agent acts on nothing: {}",
        rsr["metadata"]
    );
    let rsr = env
        .wait_rsr("web", "Valid=False naming the field", WAIT, |r| {
            condition(r, "Valid").is_some_and(|c| c["status"] == "False")
        })
        .await?;
    let valid = condition(&rsr, "Valid").cloned().unwrap_or_default();
    assert_eq!(valid["reason"], "InvalidSpec");
    assert_eq!(valid["message"], text.as_str());
    assert_eq!(rsr["status"]["summary"]["reason"], "InvalidSpec");
    Ok(text)
}

/// The writes of rsr `web` that kerf-sim's request log shows (none off kerf-sim).
fn rsr_spec_writes(env: &Env) -> usize {
    let Some(sim) = env.sim.as_ref() else {
        return 0;
    };
    let path = format!(
        "/apis/kerf.getkerf.dev/v1alpha1/namespaces/{}/rightsizingrecommendations/web",
        env.ns
    );
    sim.context()
        .audit
        .snapshot()
        .writes_except_leases()
        .iter()
        .filter(|r| r.path == path)
        .count()
}

// sim
// rule: design D3
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rsr_stored_with_a_refused_value_is_marked_invalid_naming_the_field()
-> anyhow::Result<()> {
    let mut env = Env::start("e2e-rsr-by-hand").await?;
    let Some(sim) = env.sim.as_ref().map(|s| s.context().clone()) else {
        env.sim_only("e2e-rsr-by-hand");
        return Ok(());
    };
    env.deployment("web", 2, "200m", "256Mi").await?;
    env.wait_ready("web", 2).await?;
    env.policy("auto", policy_spec(&env.ns, "auto-patch", "in-place"))
        .await?;
    // Written past the API server's schema check, as an older CRD would have stored it.
    let gvr = kerf_sim::store::gvr::Gvr::dynamic(
        "kerf.getkerf.dev",
        "v1alpha1",
        "rightsizingrecommendations",
        "RightsizingRecommendation",
        true,
    );
    let rsr = json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingRecommendation",
        "metadata": {"name": "web", "namespace": env.ns, "labels": {
            "kerf.getkerf.dev/workload-kind": "Deployment",
            "kerf.getkerf.dev/workload-name": "web"}},
        "spec": {"workloadRef": {"kind": "Deployment", "name": "web"},
            "recommendationID": "by-hand",
            "containers": [{"name": "app", "requests": {"cpu": "12Q", "memory": "200Mi"}}]},
    });
    sim.store.create(&gvr, rsr, "kubectl-edit")?;
    env.start_agent(&AgentOptions::default()).await?;
    let rsr = env
        .wait_rsr("web", "Valid=False", WAIT, |r| {
            condition(r, "Valid").is_some_and(|c| c["status"] == "False")
        })
        .await?;
    let valid = condition(&rsr, "Valid").cloned().unwrap_or_default();
    assert_eq!(valid["reason"], "InvalidSpec");
    let message = valid["message"].as_str().unwrap_or_default();
    assert!(message.contains("\"by-hand\""), "{message}");
    assert!(
        message.contains("spec.containers[0].requests.cpu: \"12Q\" is not a quantity"),
        "{message}"
    );
    assert_eq!(rsr["status"]["summary"]["reason"], "InvalidSpec");
    // The refused values are dropped from the spec; the agent acts on nothing.
    assert_eq!(rsr["spec"]["containers"], json!([]), "{}", rsr["spec"]);
    assert!(
        rsr["metadata"]["annotations"][kerf_agent::rsr_sync::ANNOTATION_WITHDRAWN].is_string(),
        "{}",
        rsr["metadata"]
    );
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    env.assert_cpu_unchanged("web", "200m").await?;
    assert!(env.hub_events("web", EventType::Applied).is_empty());
    env.stop_agent().await;
    Ok(())
}
