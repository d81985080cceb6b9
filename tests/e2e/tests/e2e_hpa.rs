//! e2e: HPA coordination (design D22): a CPU decrease under an HPA on CPU utilization goes
//! in as a rollout, the HPA target rises once the rollout completed, the applied event
//! names the HPA and both targets, and leaving auto-patch writes the old target back; a
//! health breach rolls the change back and the HPA target with it.

mod e2e_support;

use e2e_support::{
    AgentOptions, Env, WAIT, condition, eventually, policy_spec, template_resources,
};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kerf_api::event::EventType;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

/// The CPU utilization target of HPA `name`.
async fn cpu_target(api: &Api<HorizontalPodAutoscaler>, name: &str) -> anyhow::Result<i32> {
    let h = api.get(name).await?;
    let m = h
        .spec
        .and_then(|s| s.metrics)
        .and_then(|m| m.into_iter().next())
        .and_then(|m| m.resource)
        .and_then(|r| r.target.average_utilization);
    m.ok_or_else(|| anyhow::anyhow!("HPA {name} has no CPU utilization target"))
}

/// Creates HPA `web` on Deployment `web` with a CPU utilization target of 60.
async fn hpa_at_60(env: &Env) -> anyhow::Result<Api<HorizontalPodAutoscaler>> {
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(env.client.clone(), &env.ns);
    let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": env.ns},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 2,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}]}
    }))?;
    hpas.create(&PostParams::default(), &hpa).await?;
    Ok(hpas)
}

// sim
// rule: RB-24, RB-06
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_restores_the_hpa_target_with_the_requests() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-hpa-rollback").await?;
    let Some(sim) = env.sim.as_ref().map(|s| s.context().clone()) else {
        env.sim_only("e2e-hpa-rollback");
        return Ok(());
    };
    env.deployment("web", 2, "200m", "256Mi").await?;
    env.wait_ready("web", 2).await?;
    let hpas = hpa_at_60(&env).await?;
    let mut spec = policy_spec(&env.ns, "auto-patch", "rollout");
    spec["guardrails"]["cooldown"] = json!("10m");
    spec["guardrails"]["rollback"] = json!({"watchDuration": "60s", "restarts": 1});
    env.policy("auto", spec).await?;
    env.recommend(vec![env.recommendation("web", "150m", "256Mi", "0.9")?]);
    env.start_agent(&AgentOptions::default()).await?;
    env.wait_rsr("web", "HPA target written, watching", WAIT, |r| {
        r["status"]["change"]["hpa"]["written"] == true
            && condition(r, "HealthWatch").is_some_and(|c| c["reason"] == "Watching")
            && r["status"]["watch"]["baselines"]
                .as_object()
                .is_some_and(|b| !b.is_empty())
    })
    .await?;
    assert_eq!(cpu_target(&hpas, "web").await?, 80);

    // A container restart breaches the watch (restarts: 1): every touched resource goes
    // back, and the HPA target with the CPU request.
    let pods = env.wait_ready("web", 2).await?;
    let pod = pods[0].metadata.name.clone().unwrap_or_default();
    kerf_sim::kubelet::inject(
        &sim,
        kerf_sim::kubelet::Fault::Restart {
            namespace: env.ns.clone(),
            pod,
            container: "app".to_owned(),
        },
    )?;
    let rsr = env
        .wait_rsr("web", "change RolledBack", WAIT, |r| {
            r["status"]["change"]["state"] == "RolledBack"
        })
        .await?;
    assert_eq!(rsr["status"]["lastRollback"]["reason"], "Restarts");
    eventually("the HPA target back at 60", WAIT, || async {
        (cpu_target(&hpas, "web").await.ok()? == 60).then_some(())
    })
    .await?;
    let d = env.deployment_json("web").await?;
    assert_eq!(template_resources(&d)["requests"]["cpu"], "200m");
    let e = env.wait_hub_event("web", EventType::RolledBack).await?;
    assert_eq!(e[0].reason, "Restarts");
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: AP-22, EV-60, D22
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpa_target_follows_a_cpu_decrease_and_is_restored_on_leaving() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-hpa").await?;
    env.deployment("web", 2, "200m", "256Mi").await?;
    env.wait_ready("web", 2).await?;
    let hpas = hpa_at_60(&env).await?;
    // in-place configured: a change that coordinates an HPA uses rollout (AP-22).
    env.policy("auto", policy_spec(&env.ns, "auto-patch", "in-place"))
        .await?;
    env.recommend(vec![env.recommendation("web", "150m", "256Mi", "0.9")?]);
    env.start_agent(&AgentOptions::default()).await?;

    let rsr = env
        .wait_rsr("web", "HPA target written", WAIT, |r| {
            r["status"]["change"]["hpa"]["written"] == true
        })
        .await?;
    let change = &rsr["status"]["change"];
    assert_eq!(change["strategy"], "rollout", "{change}");
    assert_eq!(change["hpa"]["name"], "web");
    assert_eq!(change["hpa"]["resource"], "cpu");
    assert_eq!(change["hpa"]["from"], 60);
    assert_eq!(change["hpa"]["to"], 80, "60 * 200 / 150");
    assert_eq!(change["hpa"]["order"], "after");
    assert_eq!(cpu_target(&hpas, "web").await?, 80);
    let d = env.deployment_json("web").await?;
    assert_eq!(template_resources(&d)["requests"]["cpu"], "150m");

    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    let e = &applied[0];
    assert_eq!(e.strategy.as_deref(), Some("rollout"));
    let detail = |k: &str| e.details.get(k).map(String::as_str);
    assert_eq!(detail("hpa"), Some("web"), "{:?}", e.details);
    assert_eq!(detail("hpaResource"), Some("cpu"));
    assert_eq!(detail("hpaTargetFrom"), Some("60"));
    assert_eq!(detail("hpaTargetTo"), Some("80"));

    // Leaving auto-patch writes the old target back (D22).
    env.policy("auto", policy_spec(&env.ns, "audit", "in-place"))
        .await?;
    env.wait_phase("web", "Released").await?;
    eventually("the HPA target back at 60", WAIT, || async {
        (cpu_target(&hpas, "web").await.ok()? == 60).then_some(())
    })
    .await?;
    env.stop_agent().await;
    Ok(())
}
