//! e2e: a one-time approval in the hub's config (design D27). It applies the approved
//! recommendation once to a workload in audit, with the guardrails, and records
//! `applied ApprovedOnce` with the approval's id and actor; it never applies twice, never to
//! another recommendation, not after it expired, and not through a pause.

mod e2e_support;

use std::time::Duration;

use chrono::Utc;
use e2e_support::{
    AgentOptions, CLUSTER, Env, assert_pod_requests, assert_template_requests, condition, manager,
    pod_names, pod_resources, template_resources,
};
use kerf_api::event::{EventType, EventWorkload};
use kerf_api::hub::{Approval, ClusterConfig, ClusterFlags, PauseScope};
use serde_json::{Value, json};

/// The approver every approval of these scenarios names.
const APPROVER: &str = "alice@example.com";

/// An approval of `recommendation_id` for Deployment `name`, lapsing `expires_in` from now.
fn approval(
    env: &Env,
    id: &str,
    name: &str,
    recommendation_id: &str,
    expires_in: chrono::Duration,
) -> Approval {
    Approval {
        approval_id: id.to_owned(),
        workload: EventWorkload {
            namespace: env.ns.clone(),
            kind: "Deployment".to_owned(),
            name: name.to_owned(),
        },
        recommendation_id: recommendation_id.to_owned(),
        approved_by: APPROVER.to_owned(),
        expires_at: Utc::now() + expires_in,
    }
}

/// Publishes a cluster config carrying `approvals`, paused when `paused`.
fn config(env: &Env, approvals: Vec<Approval>, paused: bool) {
    let flags = ClusterFlags {
        paused,
        pause_scope: paused.then_some(PauseScope::Cluster),
    };
    env.hub.set_config(
        CLUSTER,
        ClusterConfig {
            flags,
            approvals,
            ..ClusterConfig::default()
        },
    );
}

/// Publishes a cluster config with one approval `id` of `recommendation_id` for `web`,
/// lapsing in an hour; paused when `paused`.
fn approve(env: &Env, id: &str, recommendation_id: &str, paused: bool) {
    let expires_in = chrono::Duration::hours(1);
    config(
        env,
        vec![approval(env, id, "web", recommendation_id, expires_in)],
        paused,
    );
}

/// The template requests of `web` and the requests of each of its pods.
async fn requests(env: &Env) -> anyhow::Result<(Value, Vec<Value>)> {
    let d = env.deployment_json("web").await?;
    let pods = env.pods("web").await?;
    Ok((
        template_resources(&d)["requests"].clone(),
        pods.iter()
            .map(|p| pod_resources(p)["requests"].clone())
            .collect(),
    ))
}

/// Waits for the rsr of `web` to hold recommendation `id` (mirrored from the hub).
async fn wait_recommendation(env: &Env, id: &str) -> anyhow::Result<Value> {
    env.wait_rsr(
        "web",
        &format!("recommendation {id}"),
        e2e_support::WAIT,
        |r| r["spec"]["recommendationID"] == id,
    )
    .await
}

// portable
// rule: EV-24, EV-25, EV-26, GR-02, RB-01, design D27
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_applies_its_recommendation_once_to_a_workload_in_audit() -> anyhow::Result<()>
{
    let mut env = Env::start("e2e-approved").await?;
    env.web(2).await?;
    env.policy_of("approved", "audit", "rollout").await?;
    let rec1 = env.recommendation("web", "150m", "200Mi", "0.9")?;
    let rec1_id = rec1.recommendation_id.clone();
    env.recommend(vec![rec1]);
    env.start_agent(&AgentOptions::default()).await?;
    env.wait_phase("web", "Skipped").await?;

    // The hub approves the current recommendation once.
    approve(&env, "appr-1", &rec1_id, false);
    the_approved_change_is_applied_once(&env, &rec1_id).await?;

    // The new pods carry the approved values.
    env.wait_rsr("web", "rollout done", e2e_support::WAIT, |r| {
        r["status"]["watch"]["end"].is_string()
    })
    .await?;
    let pods = env.wait_ready("web", 2).await?;
    for p in &pods {
        assert_pod_requests(p, "150m", "200Mi");
    }

    // A new recommendation: the approval of the old one does not carry it over (the
    // cooldown of 1s is long over by the time it is checked).
    let rec2_id = a_new_recommendation_is_not_approved(&env).await?;

    // A second approval, for the new recommendation, listed after the spent one.
    config(
        &env,
        vec![
            approval(&env, "appr-1", "web", &rec1_id, chrono::Duration::hours(1)),
            approval(&env, "appr-2", "web", &rec2_id, chrono::Duration::hours(1)),
        ],
        false,
    );
    the_second_approval_applies(&env, &rec2_id).await?;

    // D27: the mode becoming off releases the fields.
    env.policy_of("approved", "off", "rollout").await?;
    let released = env.wait_hub_event("web", EventType::Released).await?;
    assert_eq!(released.len(), 1, "{released:#?}");
    assert_eq!(released[0].reason, "ModeChanged");
    assert_eq!(
        released[0].details.get("previousMode").map(String::as_str),
        Some("audit")
    );
    assert_eq!(
        released[0].details.get("newMode").map(String::as_str),
        Some("off")
    );
    let d = env.deployment_json("web").await?;
    assert!(
        manager(&d, "kerf").is_none(),
        "{}",
        d["metadata"]["managedFields"]
    );
    assert_template_requests(&d, "120m", "180Mi");
    env.stop_agent().await;
    Ok(())
}

/// The approved change is Applied, watched, mirrored on the rsr and reported once to the
/// hub, with the mode still audit.
async fn the_approved_change_is_applied_once(env: &Env, rec1_id: &str) -> anyhow::Result<()> {
    let rsr = env
        .wait_rsr(
            "web",
            "the approved change Applied and watched",
            e2e_support::WAIT,
            |r| r["status"]["change"]["state"] == "Applied" && r["status"]["phase"] == "Applied",
        )
        .await?;
    let st = &rsr["status"];
    assert_eq!(
        rsr["spec"]["approval"],
        json!({"approvalId": "appr-1", "approvedBy": APPROVER}),
        "spec.approval mirrors the hub's approval"
    );
    assert_eq!(st["change"]["approvalId"], "appr-1", "{st}");
    assert_eq!(st["change"]["recommendationID"], rec1_id, "{st}");
    assert_eq!(st["consumedApprovals"], json!(["appr-1"]), "{st}");
    // EV-25: the mode is still audit.
    assert_eq!(
        st["mode"],
        json!({"cpu": "audit", "memory": "audit"}),
        "{st}"
    );
    // RB-01: an approved change is watched like an automatic one.
    let watch = condition(&rsr, "HealthWatch").cloned().unwrap_or_default();
    assert_eq!(
        watch["reason"], "Watching",
        "no health watch after the approved change: {st}"
    );
    let (template, _) = requests(env).await?;
    assert_eq!(template, json!({"cpu": "150m", "memory": "200Mi"}));

    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    assert_eq!(applied.len(), 1, "{applied:#?}");
    let e = &applied[0];
    assert_eq!(e.reason, "ApprovedOnce");
    assert_eq!(e.recommendation_id.as_deref(), Some(rec1_id));
    assert_eq!(e.strategy.as_deref(), Some("rollout"));
    assert_eq!(
        e.details.get("approvalId").map(String::as_str),
        Some("appr-1")
    );
    assert_eq!(
        e.details.get("approvedBy").map(String::as_str),
        Some(APPROVER)
    );
    assert_eq!(st["change"]["eventIds"]["applied"], e.id.to_string());
    Ok(())
}

/// A new recommendation: the approval of the old one does not carry it over (the cooldown
/// of 1s is long over by the time it is checked). Gives the new recommendation's id.
async fn a_new_recommendation_is_not_approved(env: &Env) -> anyhow::Result<String> {
    let rec2 = env.recommendation("web", "120m", "180Mi", "0.9")?;
    let rec2_id = rec2.recommendation_id.clone();
    env.recommend(vec![rec2]);
    let rsr = wait_recommendation(env, &rec2_id).await?;
    assert!(
        rsr["spec"]["approval"].is_null(),
        "the old approval is mirrored onto another recommendation: {}",
        rsr["spec"]
    );
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (template, _) = requests(env).await?;
    assert_eq!(template, json!({"cpu": "150m", "memory": "200Mi"}));
    assert_eq!(env.hub_events("web", EventType::Applied).len(), 1);
    // D27: after an approved rollout kerf keeps its fields while the mode is audit.
    let d = env.deployment_json("web").await?;
    assert!(
        manager(&d, "kerf").is_some(),
        "kerf released an approved rollout in audit: {}",
        d["metadata"]["managedFields"]
    );
    assert!(env.hub_events("web", EventType::Released).is_empty());
    Ok(rec2_id)
}

/// The second approval's change is applied once, both approvals consumed.
#[allow(clippy::panic)] // test helper: a failure fails the test
async fn the_second_approval_applies(env: &Env, rec2_id: &str) -> anyhow::Result<()> {
    let applied = e2e_support::eventually("a second applied event", e2e_support::WAIT, || {
        let found = env.hub_events("web", EventType::Applied);
        async move { (found.len() == 2).then_some(found) }
    })
    .await?;
    let second = applied
        .iter()
        .find(|e| e.recommendation_id.as_deref() == Some(rec2_id))
        .cloned()
        .unwrap_or_else(|| panic!("no applied event of {rec2_id}: {applied:#?}"));
    assert_eq!(second.reason, "ApprovedOnce");
    assert_eq!(
        second.details.get("approvalId").map(String::as_str),
        Some("appr-2")
    );
    assert_eq!(
        second.details.get("approvedBy").map(String::as_str),
        Some(APPROVER)
    );
    let rsr = env.wait_rsr("web", "both approvals consumed", e2e_support::WAIT, |r| {
        r["status"]["consumedApprovals"] == json!(["appr-1", "appr-2"])
    });
    rsr.await?;
    let (template, _) = requests(env).await?;
    assert_eq!(template, json!({"cpu": "120m", "memory": "180Mi"}));
    Ok(())
}

// portable
// rule: GR-02, GR-45, EV-24, EV-26, EV-40
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_approval_does_nothing_and_a_pause_holds_an_approved_change()
-> anyhow::Result<()> {
    let mut env = Env::start("e2e-approved-guard").await?;
    let before = env.web(2).await?;
    env.policy_of("approved", "audit", "in-place").await?;
    let rec = env.recommendation("web", "150m", "200Mi", "0.9")?;
    let rec_id = rec.recommendation_id.clone();
    env.recommend(vec![rec]);
    // An approval that lapsed a minute ago.
    config(
        &env,
        vec![approval(
            &env,
            "appr-old",
            "web",
            &rec_id,
            chrono::Duration::minutes(-1),
        )],
        false,
    );
    env.start_agent(&AgentOptions::default()).await?;
    env.wait_phase("web", "Skipped").await?;
    the_expired_approval_does_nothing(&env).await?;

    // A fresh approval, but automation is paused: the guardrails hold it (GR-02).
    approve(&env, "appr-new", &rec_id, true);
    the_pause_holds_the_approved_change(&env).await?;

    // Resumed: the approved change goes in once, in place, on the same pods.
    approve(&env, "appr-new", &rec_id, false);
    let rsr = env.wait_phase("web", "Applied").await?;
    assert_eq!(rsr["status"]["change"]["approvalId"], "appr-new");
    assert!(rsr["status"]["live"].is_object(), "{}", rsr["status"]);
    let applied = env.wait_hub_event("web", EventType::Applied).await?;
    assert_eq!(applied[0].reason, "ApprovedOnce");
    assert_eq!(applied[0].strategy.as_deref(), Some("in-place"));
    assert_eq!(
        applied[0].details.get("approvalId").map(String::as_str),
        Some("appr-new")
    );
    assert_eq!(
        applied[0].details.get("approvedBy").map(String::as_str),
        Some(APPROVER)
    );
    let pods = env.wait_ready("web", 2).await?;
    assert_eq!(
        pod_names(&pods),
        pod_names(&before),
        "in-place keeps the pods"
    );
    for p in &pods {
        assert_pod_requests(p, "150m", "200Mi");
    }
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(env.hub_events("web", EventType::Applied).len(), 1);
    env.stop_agent().await;
    Ok(())
}

/// The lapsed approval changes nothing: skipped as audit, the template and the pods at
/// their values, no approval consumed.
async fn the_expired_approval_does_nothing(env: &Env) -> anyhow::Result<()> {
    let skipped = env.wait_hub_event("web", EventType::Skipped).await?;
    assert_eq!(skipped[0].reason, "ModeAudit");
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (template, pods) = requests(env).await?;
    assert_eq!(template, json!({"cpu": "200m", "memory": "256Mi"}));
    for p in &pods {
        assert_eq!(p, &json!({"cpu": "200m", "memory": "256Mi"}));
    }
    assert!(env.hub_events("web", EventType::Applied).is_empty());
    let rsr = env.rsr("web").await?.unwrap_or_default();
    assert!(
        rsr["status"]["consumedApprovals"].is_null(),
        "{}",
        rsr["status"]
    );
    Ok(())
}

/// The pause holds the approved change: Blocked Paused, one blocked event, the pods at
/// their values.
async fn the_pause_holds_the_approved_change(env: &Env) -> anyhow::Result<()> {
    let rsr = env
        .wait_rsr("web", "Blocked Paused", e2e_support::WAIT, |r| {
            condition(r, "Blocked")
                .is_some_and(|c| c["status"] == "True" && c["reason"] == "Paused")
        })
        .await?;
    assert_eq!(rsr["status"]["phase"], "Blocked", "{}", rsr["status"]);
    let blocked = env.wait_hub_event("web", EventType::Blocked).await?;
    assert_eq!(blocked.len(), 1, "{blocked:#?}");
    assert_eq!(blocked[0].reason, "Paused");
    assert_eq!(
        blocked[0].details.get("pauseScope").map(String::as_str),
        Some("cluster")
    );
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, pods) = requests(env).await?;
    for p in &pods {
        assert_eq!(p, &json!({"cpu": "200m", "memory": "256Mi"}));
    }
    assert!(env.hub_events("web", EventType::Applied).is_empty());
    Ok(())
}
