//! e2e: leaving auto-patch after a rollout hands the template fields back.

mod e2e_support;

use e2e_support::{Env, Web, assert_template_requests, manager};
use kerf_api::event::EventType;
use serde_json::{Value, json};

// portable
// rule: AP-21, EV-46, EV-51, EV-52
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_auto_patch_releases_the_fields_and_keeps_the_values() -> anyhow::Result<()> {
    let mut env = Env::start_web("e2e-release", Web::policy("p", "auto-patch", "rollout")).await?;
    env.wait_phase("web", "Applied").await?;
    env.wait_hub_event("web", EventType::Applied).await?;
    let d = env.deployment_json("web").await?;
    assert!(
        manager(&d, "kerf").is_some(),
        "{}",
        d["metadata"]["managedFields"]
    );

    let applied_generation = d["metadata"]["generation"].clone();

    env.policy_of("p", "audit", "rollout").await?;
    let rsr = env.wait_phase("web", "Released").await?;
    assert_eq!(
        rsr["status"]["change"]["state"], "Released",
        "{}",
        rsr["status"]
    );
    let d = env.deployment_json("web").await?;
    assert_template_requests(&d, "150m", "200Mi");
    no_kerf_manager_left(&d, &applied_generation);
    one_released_event(&env, &rsr).await?;

    // A GitOps server-side apply that does not force conflicts takes the fields.
    gitops_apply(&env).await?;
    let d = env.deployment_json("web").await?;
    assert_template_requests(&d, "250m", "300Mi");

    // The next `kubectl apply` from Git restores the Git values.
    let git = json!({
        "spec": {"template": {"spec": {"containers": [{"name": "app",
            "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}]}}}
    });
    let pp = kube::api::PatchParams {
        field_manager: Some(e2e_support::USER_MANAGER.into()),
        ..Default::default()
    };
    env.deployments()
        .patch("web", &pp, &kube::api::Patch::Strategic(&git))
        .await?;
    let d = env.deployment_json("web").await?;
    assert_template_requests(&d, "200m", "256Mi");

    // Git moves to the recommended values, then the policy back to auto-patch: nothing is
    // left to change, and the row's phase and reason change with the mode.
    let git = json!({
        "spec": {"template": {"spec": {"containers": [{"name": "app",
            "resources": {"requests": {"cpu": "150m", "memory": "200Mi"}}}]}}}
    });
    env.deployments()
        .patch("web", &pp, &kube::api::Patch::Strategic(&git))
        .await?;
    env.policy_of("p", "auto-patch", "rollout").await?;
    let rsr = env
        .wait_rsr("web", "MODE auto-patch", e2e_support::WAIT, |r| {
            r["status"]["summary"]["mode"] == "auto-patch"
        })
        .await?;
    let st = &rsr["status"];
    assert_eq!(
        (&st["phase"], &st["summary"]["reason"]),
        (&json!("Skipped"), &json!("NoSignificantChange")),
        "{st}"
    );
    env.stop_agent().await;
    Ok(())
}

/// No ghost owner: neither `kerf` nor `kerf-released` (nor any `kerf*`) is left, and
/// removing the entries changed neither the values nor the generation (no rollout).
fn no_kerf_manager_left(d: &Value, applied_generation: &Value) {
    let managers: Vec<&str> = d["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(
        !managers.iter().any(|m| m.starts_with("kerf")),
        "a kerf manager is left: {}",
        d["metadata"]["managedFields"]
    );
    assert_eq!(&d["metadata"]["generation"], applied_generation);
}

/// One released event, ModeChanged from auto-patch to audit, of the rollout and of the
/// rsr's recommendation, its id on the rsr.
async fn one_released_event(env: &Env, rsr: &Value) -> anyhow::Result<()> {
    let released = env.wait_hub_event("web", EventType::Released).await?;
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].reason, "ModeChanged");
    assert_eq!(
        released[0].strategy.as_deref(),
        Some("rollout"),
        "{:?}",
        released[0]
    );
    assert_eq!(
        released[0].recommendation_id.as_deref(),
        rsr["spec"]["recommendationID"].as_str()
    );
    assert_eq!(
        released[0].details.get("previousMode").map(String::as_str),
        Some("auto-patch")
    );
    assert_eq!(
        released[0].details.get("newMode").map(String::as_str),
        Some("audit")
    );
    assert_eq!(
        rsr["status"]["change"]["eventIds"]["released"],
        released[0].id.to_string()
    );
    Ok(())
}

/// A server-side apply of other requests by the manager `gitops`, not forcing conflicts.
async fn gitops_apply(env: &Env) -> anyhow::Result<()> {
    let gitops = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": env.ns},
        "spec": {"template": {"spec": {"containers": [{"name": "app",
            "resources": {"requests": {"cpu": "250m", "memory": "300Mi"}}}]}}}
    });
    env.deployments()
        .patch(
            "web",
            &kube::api::PatchParams::apply("gitops"),
            &kube::api::Patch::Apply(&gitops),
        )
        .await?;
    Ok(())
}
