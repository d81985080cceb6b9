//! e2e: the `vpa` recommendation source without a hub (docs/sources.md). A
//! VerticalPodAutoscaler in `Off` mode recommends; the agent mirrors its target into the
//! rsr (`spec.source: vpa`), the guardrails pass, the change goes in place and the health
//! watch ends Healthy, with the events kept in the cluster. A VPA in `Auto` mode holds its
//! workload `VPAActive`. Runs on kerf-sim only (the VPA CRD is applied from
//! tests/e2e/crds/verticalpodautoscaler-v1.yaml).

mod e2e_support;

use e2e_support::{
    AgentOptions, Env, WAIT, assert_pod_requests, assert_template_requests, condition, eventually,
    metric_sample, policy_spec,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kerf_agent::settings::Settings;
use kerf_agent::source::vpa::vpa_resource;
use kerf_api::rsr::RecommendationSource;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::{Value, json};

/// The VPA CRD the scenarios apply.
const VPA_CRD: &str = include_str!("../crds/verticalpodautoscaler-v1.yaml");

/// Applies the VPA CRD and waits until VPAs are served.
async fn apply_vpa_crd(env: &Env) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let crd = CustomResourceDefinition::deserialize(serde_yaml::Deserializer::from_str(VPA_CRD))?;
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let vpas = vpa_api(env);
    eventually("VPAs to be served", WAIT, || async {
        vpas.list(&ListParams::default()).await.ok().map(|_| ())
    })
    .await
}

fn vpa_api(env: &Env) -> Api<DynamicObject> {
    Api::namespaced_with(env.client.clone(), &env.ns, &vpa_resource())
}

/// Creates VPA `name` on Deployment `target` in `mode`, then writes its recommendation
/// (status subresource, as VPA's recommender does): `cpu`/`memory` with bounds 10 %
/// either side.
async fn vpa(
    env: &Env,
    name: &str,
    target: &str,
    mode: &str,
    cpu: &str,
    memory: &str,
) -> anyhow::Result<()> {
    let api = vpa_api(env);
    let body: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": env.ns},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                 "updatePolicy": {"updateMode": mode}},
    }))?;
    api.create(&PostParams::default(), &body)
        .await
        .map_err(|e| anyhow::anyhow!("create VPA {name}: {e}"))?;
    let status = json!({"status": {
        "recommendation": {"containerRecommendations": [{
            "containerName": "app",
            "target": {"cpu": cpu, "memory": memory},
            "lowerBound": {"cpu": "140m", "memory": "190Mi"},
            "upperBound": {"cpu": "160m", "memory": "210Mi"},
            "uncappedTarget": {"cpu": cpu, "memory": memory},
        }]},
        "conditions": [{"type": "RecommendationProvided", "status": "True",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// The agent's settings for the vpa source: the harness's, without a hub.
fn vpa_settings(env: &Env) -> anyhow::Result<Settings> {
    let mut settings = env.settings(&AgentOptions::default())?;
    settings.hub.url = None;
    settings.recommendation_source = RecommendationSource::Vpa;
    Ok(settings)
}

/// The policy of the scenarios: auto-patch, in place, and no learning period (a VPA just
/// made covers 0h).
fn policy(ns: &str) -> Value {
    let mut spec = policy_spec(ns, "auto-patch", "in-place");
    spec["guardrails"]["learningPeriod"] = json!("0s");
    spec
}

// sim
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_off_mode_vpa_recommends_and_the_change_goes_in_place_without_a_hub()
-> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-source-vpa").await? else {
        return Ok(());
    };
    apply_vpa_crd(&env).await?;
    env.web(2).await?;
    env.policy("vpa", policy(&env.ns)).await?;
    vpa(&env, "web", "web", "Off", "150m", "200Mi").await?;
    env.start_agent_with(vpa_settings(&env)?).await;

    let rsr = env.wait_phase("web", "Applied").await?;
    assert_eq!(rsr["spec"]["source"], "vpa", "{}", rsr["spec"]);
    assert_eq!(rsr["spec"]["confidence"], "0.88", "{}", rsr["spec"]);
    let id = rsr["spec"]["recommendationID"].as_str().unwrap_or_default();
    assert!(id.starts_with("vpa-"), "{id}");
    assert_eq!(rsr["status"]["change"]["strategy"], "in-place");
    for p in &env.wait_ready("web", 2).await? {
        assert_pod_requests(p, "150m", "200Mi");
    }
    assert_template_requests(&env.deployment_json("web").await?, "200m", "256Mi");
    let wide = kerf_testkit::kubectl_stdout(
        &env.kubeconfig_path(),
        &["get", "rsr", "-n", &env.ns, "-o", "wide"],
    )?;
    let rows = kerf_testkit::table(&wide);
    let source = rows.get("web").and_then(|r| r.get("SOURCE"));
    assert_eq!(source.map(String::as_str), Some("vpa"), "{wide}");

    let rsr = env
        .wait_rsr("web", "HealthWatch True/Healthy", WAIT, |r| {
            condition(r, "HealthWatch").is_some_and(|c| c["status"] == "True")
        })
        .await?;
    let hw = condition(&rsr, "HealthWatch").cloned().unwrap_or_default();
    assert_eq!(hw["reason"], "Healthy", "{hw}");

    // The events stay in the cluster: a Kubernetes Event on the rsr, nothing buffered for
    // a hub, and no lifecycle event left pending in the rsr.
    let name = rsr["metadata"]["name"].as_str().unwrap_or("web");
    let applied = env
        .k8s_events(Some(name), Some("RecommendationApplied"))
        .await?;
    assert_eq!(applied.len(), 1, "{applied:#?}");
    let metrics = env.agent_metrics()?;
    assert_eq!(metric_sample(&metrics, "kerf_agent_events_buffered"), 0.0);
    let pending = &rsr["status"]["change"]["pendingEvents"];
    assert!(pending.as_array().is_none_or(Vec::is_empty), "{pending}");
    env.stop_agent().await;
    Ok(())
}

// sim
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_mode_vpa_holds_its_workload_vpa_active() -> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-source-vpa-auto").await? else {
        return Ok(());
    };
    apply_vpa_crd(&env).await?;
    env.web(1).await?;
    env.policy("vpa-auto", policy(&env.ns)).await?;
    vpa(&env, "web", "web", "Auto", "150m", "200Mi").await?;
    env.start_agent_with(vpa_settings(&env)?).await;

    let rsr = env.wait_phase("web", "Blocked").await?;
    assert_eq!(
        rsr["status"]["summary"]["reason"], "VPAActive",
        "{}",
        rsr["status"]
    );
    assert_eq!(rsr["spec"]["source"], "vpa");
    let name = rsr["metadata"]["name"].as_str().unwrap_or("web");
    let events = env.k8s_events(Some(name), Some("VPAActive")).await?;
    let message = events
        .first()
        .and_then(|e| e.message.clone())
        .unwrap_or_default();
    assert!(message.contains("updateMode Auto"), "{events:#?}");
    env.assert_cpu_unchanged("web", "200m").await?;

    // Set to Off, the VPA no longer holds it: the change goes in.
    let off = json!({"spec": {"updatePolicy": {"updateMode": "Off"}}});
    vpa_api(&env)
        .patch("web", &PatchParams::default(), &Patch::Merge(&off))
        .await?;
    env.wait_phase("web", "Applied").await?;
    env.stop_agent().await;
    Ok(())
}

// The in-cluster approve-once (annotation kerf.getkerf.dev/approve, docs/sources.md): in
// audit the VPA's recommendation waits; the annotation naming its id lets it in once.
// sim
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approve_annotation_lets_an_audit_recommendation_in_once() -> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("e2e-source-vpa-approve").await? else {
        return Ok(());
    };
    apply_vpa_crd(&env).await?;
    env.web(1).await?;
    let mut spec = policy(&env.ns);
    spec["mode"] = json!("audit");
    env.policy("vpa-audit", spec).await?;
    vpa(&env, "web", "web", "Off", "150m", "200Mi").await?;
    env.start_agent_with(vpa_settings(&env)?).await;

    let rsr = env.wait_phase("web", "Skipped").await?;
    assert_eq!(rsr["status"]["summary"]["reason"], "ModeAudit");
    let id = rsr["spec"]["recommendationID"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // An annotation naming another recommendation approves nothing.
    annotate(&env, "vpa-0000000000000000").await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    env.assert_cpu_unchanged("web", "200m").await?;

    annotate(&env, &id).await?;
    let rsr = env.wait_phase("web", "Applied").await?;
    assert_eq!(
        rsr["status"]["summary"]["reason"], "ApprovedOnce",
        "{}",
        rsr["status"]
    );
    let approval = rsr["status"]["change"]["approvalId"]
        .as_str()
        .unwrap_or_default();
    assert!(approval.starts_with("annotation-"), "{approval}");
    assert_eq!(rsr["status"]["consumedApprovals"], json!([approval]));
    env.stop_agent().await;
    Ok(())
}

/// Sets the annotation `kerf.getkerf.dev/approve` of Deployment `web` to `id`.
async fn annotate(env: &Env, id: &str) -> anyhow::Result<()> {
    let patch = json!({"metadata": {"annotations": {kerf_api::wellknown::ANNOTATION_APPROVE: id}}});
    env.deployments()
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}
