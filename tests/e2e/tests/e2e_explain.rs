//! e2e: `kerf-agent explain` reads the cluster and the hub and explains one workload.

mod e2e_support;

use e2e_support::{AgentOptions, Env, Web};
use kube::api::{Patch, PatchParams};

// portable
// rule: design section 10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_the_policy_layers_the_steps_and_the_decision() -> anyhow::Result<()> {
    let mut env = Env::start_web(
        "e2e-explain",
        Web::policy("explained", "auto-patch", "in-place").recommend("150m", "200Mi", "0.3"),
    )
    .await?;
    env.wait_phase("web", "Blocked").await?;

    let settings = env.settings(&AgentOptions::default())?;
    let target = format!("{}/deployment/web", env.ns);
    let text =
        kerf_agent::explain_cmd::explain_with(env.client.clone(), &target, &settings).await?;
    for want in [
        "Effective policy (RightsizingPolicy: explained)",
        "guardrails.learningPeriod",
        "(policy explained)",
        "(built-in)",
        "Values (current \u{2192} target)",
        "app/cpu: request 200m \u{2192} 150m",
        "app/memory: request 256Mi \u{2192} 200Mi",
        "blocked LowConfidence",
        "Decision: LowConfidence",
        "Maintenance windows: none configured",
        "waits for something that does not end by itself",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    let missing = kerf_agent::explain_cmd::explain_with(
        env.client.clone(),
        &format!("{}/deployment/nope", env.ns),
        &settings,
    )
    .await;
    assert!(missing.is_err(), "{missing:?}");
    env.stop_agent().await;
    Ok(())
}

// portable
// rule: design section 10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_in_audit_says_what_would_move_and_names_an_unknown_annotation_key()
-> anyhow::Result<()> {
    let mut env = Env::start_web(
        "e2e-explain-audit",
        Web::policy("audited", "audit", "in-place"),
    )
    .await?;
    env.wait_phase("web", "Skipped").await?;
    // A misspelt opt-out on the workload: named, and it changes nothing.
    let body = serde_json::json!({"metadata": {"annotations": {"kerf.getkerf.dev/modee": "off"}}});
    env.deployments()
        .patch("web", &PatchParams::default(), &Patch::Merge(&body))
        .await?;

    let settings = env.settings(&AgentOptions::default())?;
    let target = format!("{}/deployment/web", env.ns);
    let text =
        kerf_agent::explain_cmd::explain_with(env.client.clone(), &target, &settings).await?;
    for want in [
        "app/cpu: request 200m \u{2192} 150m",
        "cpu and memory would move in auto-patch (cpu:audit,memory:audit)",
        "invalid: kerf.getkerf.dev/modee = \"off\" (annotation): not an annotation Kerf reads \
         (the nearest known key is kerf.getkerf.dev/mode); ignored, it changes nothing",
        "Decision: ModeAudit",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    assert!(!text.contains("no value moves"), "{text}");
    env.stop_agent().await;
    Ok(())
}
