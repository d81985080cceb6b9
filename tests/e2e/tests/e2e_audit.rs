//! e2e: a workload in audit gets an rsr and one skipped event, never a change.

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env};
use kerf_api::event::EventType;

// portable
// rule: EV-14, EV-28, EV-51, design D4
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_creates_the_rsr_and_one_skipped_mode_audit_event() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-audit").await?;
    let uid = env.deployment("web", 2, "200m", "256Mi").await?;
    env.wait_ready("web", 2).await?;
    env.policy_of("audit", "audit", "in-place").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;

    let rsr = env.wait_phase("web", "Skipped").await?;
    let labels = &rsr["metadata"]["labels"];
    assert_eq!(labels["kerf.getkerf.dev/workload-kind"], "Deployment");
    assert_eq!(labels["kerf.getkerf.dev/workload-name"], "web");
    let owners = rsr["metadata"]["ownerReferences"].as_array().cloned();
    let owners = owners.unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(owners[0]["kind"], "Deployment");
    assert_eq!(owners[0]["name"], "web");
    assert_eq!(owners[0]["uid"], uid.as_str());
    assert_eq!(owners[0]["controller"], false);
    assert_ne!(owners[0]["blockOwnerDeletion"], true);
    assert!(
        rsr["metadata"]["finalizers"]
            .as_array()
            .is_none_or(|f| f.is_empty())
    );
    assert_eq!(rsr["spec"]["workloadRef"]["uid"], uid.as_str());
    assert_eq!(
        rsr["status"]["summary"]["reason"], "ModeAudit",
        "{}",
        rsr["status"]
    );

    let skipped = env.wait_hub_event("web", EventType::Skipped).await?;
    assert_eq!(skipped[0].reason, "ModeAudit");
    assert_eq!(
        skipped[0].recommendation_id.as_deref(),
        rsr["spec"]["recommendationID"].as_str(),
        "the skipped event names the rsr's recommendation"
    );
    // Several polls and passes later there is still exactly one.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let skipped = env.hub_events("web", EventType::Skipped);
    assert_eq!(skipped.len(), 1, "{skipped:#?}");
    assert!(env.hub_events("web", EventType::Applied).is_empty());
    let rsr = env.wait_phase("web", "Skipped").await?;
    let reported = rsr["status"]["reported"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(reported.len(), 1, "{}", rsr["status"]);
    assert_eq!(reported[0]["reason"], "ModeAudit");
    // Nothing changed on the workload.
    for p in env.pods("web").await? {
        assert_eq!(e2e_support::pod_resources(&p)["requests"]["cpu"], "200m");
    }
    env.stop_agent().await;
    Ok(())
}
