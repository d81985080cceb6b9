//! e2e: a resize the API server refuses for another reason than node room (design D17).
//! A ResourceQuota refuses it with 403: the change records `failed ResizeError` with the
//! server's words once its retries are spent, keeps retrying with backoff, never falls back
//! to a rollout, and goes in once the quota allows it. RBAC refusing `pods/resize` is
//! handled the same way, and each denial is counted in `kerf_agent_permission_denied_total`.

mod e2e_support;

use std::time::Duration;

use e2e_support::{
    AgentOptions, Env, WAIT, assert_template_requests, pod_names, pod_resources, policy_spec,
};
use kerf_api::event::EventType;
use kerf_sim::api::resize::faults::ADMIN_USER;

// sim
// rule: EV-08, EV-13, EV-47, EV-51, design D17
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_refused_by_a_quota_records_failed_resize_error_and_never_falls_back()
-> anyhow::Result<()> {
    let mut env = Env::start("e2e-failed").await?;
    let Some(faults) = env.sim.as_ref().map(|s| s.context().state.resize.clone()) else {
        env.sim_only("e2e-failed");
        return Ok(());
    };
    let before = env.web(2).await?;
    let generation = env.deployment_json("web").await?["metadata"]["generation"].clone();
    // Two pods at 200m use 400m of 450m: raising one pod to 300m exceeds the quota.
    faults.set_quota(&env.ns, "compute", &[("requests.cpu", "450m")]);
    env.policy_of("failed", "auto-patch", "in-place").await?;
    env.recommend_web("300m", "256Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    // Three refused attempts (1 s and 2 s apart), then one failed event.
    one_failed_event_with_the_servers_words(&env).await?;

    // No fallback: the strategy stays in-place, the template and the pods are untouched
    // while the quota refuses, and failed is not repeated on later attempts.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(env.hub_events("web", EventType::Fallback).is_empty());
    assert_eq!(env.hub_events("web", EventType::Failed).len(), 1);
    assert!(env.hub_events("web", EventType::Applied).is_empty());
    the_status_and_metrics_name_the_failing_change(&env).await?;
    let d = env.deployment_json("web").await?;
    assert_eq!(d["metadata"]["generation"], generation);
    assert_template_requests(&d, "200m", "256Mi");
    assert!(e2e_support::manager(&d, "kerf").is_none());
    for p in env.pods("web").await? {
        assert_eq!(pod_resources(&p)["requests"]["cpu"], "200m");
    }

    // The quota is raised: a later retry resizes the same pods in place.
    faults.clear_quota(&env.ns);
    let rsr = env
        .wait_rsr(
            "web",
            "Applied after the retry",
            Duration::from_secs(40),
            |r| r["status"]["change"]["state"] == "Applied",
        )
        .await?;
    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    assert_eq!(applied.len(), 1);
    assert_eq!(applied[0].strategy.as_deref(), Some("in-place"));
    assert_eq!(
        rsr["status"]["change"]["eventIds"]["applied"],
        applied[0].id.to_string()
    );
    let pods = env.wait_ready("web", 2).await?;
    assert_eq!(pod_names(&pods), pod_names(&before));
    for p in &pods {
        assert_eq!(pod_resources(p)["requests"]["cpu"], "300m");
    }
    assert!(env.hub_events("web", EventType::Fallback).is_empty());
    assert_eq!(env.hub_events("web", EventType::Failed).len(), 1);
    env.stop_agent().await;
    Ok(())
}

/// Three refused attempts (1 s and 2 s apart), then one failed event naming the quota, on
/// the rsr and as a Warning Kubernetes Event (EV-08).
async fn one_failed_event_with_the_servers_words(env: &Env) -> anyhow::Result<()> {
    let failed = env.wait_hub_event("web", EventType::Failed).await?;
    assert_eq!(failed.len(), 1, "{failed:#?}");
    let f = &failed[0];
    assert_eq!(f.reason, "ResizeError", "{f:?}");
    let message = f.message.clone().unwrap_or_default();
    assert!(
        message.contains("exceeded quota: compute"),
        "the server's words are in the message: {message}"
    );
    assert!(
        f.details
            .get("error")
            .is_some_and(|e| e.contains("exceeded quota")),
        "{f:?}"
    );
    let rsr = env.rsr("web").await?.unwrap_or_default();
    let st = &rsr["status"];
    assert_eq!(
        f.recommendation_id.as_deref(),
        rsr["spec"]["recommendationID"].as_str()
    );
    assert_eq!(st["change"]["eventIds"]["failed"], f.id.to_string(), "{st}");
    assert_ne!(st["change"]["state"], "Applied", "{st}");
    // A Warning Kubernetes Event on the rsr (EV-08).
    let k8s = e2e_support::eventually("the ResizeError Kubernetes Event", WAIT, || async {
        let found = env
            .k8s_events(Some("web"), Some("ResizeError"))
            .await
            .ok()?;
        (!found.is_empty()).then_some(found)
    })
    .await?;
    assert_eq!(k8s.len(), 1);
    assert_eq!(k8s[0].type_.as_deref(), Some("Warning"));
    Ok(())
}

/// The status shows the failing change in place, and the metrics count every refused
/// resize.
async fn the_status_and_metrics_name_the_failing_change(env: &Env) -> anyhow::Result<()> {
    let rsr = env.rsr("web").await?.unwrap_or_default();
    assert_eq!(rsr["status"]["change"]["strategy"], "in-place");
    assert_eq!(rsr["status"]["phase"], "Applying", "{}", rsr["status"]);
    // The status shows what the failing change is, written with its intent: the effective
    // strategy, mode and summary (a change that never succeeds still has them).
    assert_eq!(
        rsr["status"]["strategy"]["effective"], "in-place",
        "{}",
        rsr["status"]
    );
    assert_eq!(
        rsr["status"]["mode"]["cpu"], "auto-patch",
        "{}",
        rsr["status"]
    );
    assert!(
        rsr["status"]["summary"]["cpu"].is_string(),
        "{}",
        rsr["status"]
    );
    // Every refused resize is counted as an action; a quota refusal is no RBAC denial.
    let metrics = env.agent_metrics()?;
    let series = |s: &str| e2e_support::metric_sample(&metrics, s);
    assert!(
        series("kerf_agent_actions_total{action=\"resize\",result=\"forbidden\"}") >= 3.0,
        "{metrics}"
    );
    assert!(
        series("kerf_agent_decisions_total{type=\"applied\",reason=\"RecommendationApplied\"}")
            >= 1.0,
        "{metrics}"
    );
    let reconciles =
        e2e_support::metric_sum(&metrics, "kerf_agent_reconcile_duration_seconds_count", &[]);
    assert!(reconciles >= 3.0, "{metrics}");
    assert!(
        !metrics.contains("kerf_agent_permission_denied_total{"),
        "{metrics}"
    );
    Ok(())
}

// sim
// rule: EV-13, EV-47, design D17
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_refused_by_rbac_is_failed_counted_and_names_the_permission() -> anyhow::Result<()>
{
    let mut env = Env::start("e2e-failed-rbac").await?;
    let Some(faults) = env.sim.as_ref().map(|s| s.context().state.resize.clone()) else {
        env.sim_only("e2e-failed-rbac");
        return Ok(());
    };
    let before = env.web(2).await?;
    // RBAC refuses pods/resize to the agent's user.
    faults.deny_user(ADMIN_USER);
    env.policy(
        "failed-rbac",
        policy_spec(&env.ns, "auto-patch", "in-place"),
    )
    .await?;
    env.recommend_web("300m", "256Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    // An RBAC 403 is no node-room refusal: failed ResizeError, never a fallback.
    let failed = env.wait_hub_event("web", EventType::Failed).await?;
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0].reason, "ResizeError", "{:?}", failed[0]);
    let message = failed[0].message.clone().unwrap_or_default();
    assert!(
        message.contains("cannot patch resource \"pods/resize\""),
        "the server's words are in the message: {message}"
    );
    assert!(env.hub_events("web", EventType::Fallback).is_empty());
    // Each refused call counts as a forbidden resize and as an RBAC denial of pods/resize.
    let metrics = env.agent_metrics()?;
    let series = |s: &str| e2e_support::metric_sample(&metrics, s);
    let denied = series("kerf_agent_permission_denied_total{resource=\"pods/resize\"}");
    assert!(denied >= 3.0, "{denied} denials:\n{metrics}");
    assert_eq!(
        series("kerf_agent_actions_total{action=\"resize\",result=\"forbidden\"}"),
        denied,
        "{metrics}"
    );
    let d = env.deployment_json("web").await?;
    assert!(e2e_support::manager(&d, "kerf").is_none(), "no rollout");
    for p in env.pods("web").await? {
        assert_eq!(pod_resources(&p)["requests"]["cpu"], "200m");
    }

    // Granted: a later retry resizes the same pods in place.
    faults.allow_user(ADMIN_USER);
    env.wait_rsr(
        "web",
        "Applied once allowed",
        Duration::from_secs(40),
        |r| r["status"]["change"]["state"] == "Applied",
    )
    .await?;
    let pods = env.wait_ready("web", 2).await?;
    assert_eq!(pods.len(), before.len());
    for p in &pods {
        assert_eq!(pod_resources(p)["requests"]["cpu"], "300m");
    }
    env.stop_agent().await;
    Ok(())
}
