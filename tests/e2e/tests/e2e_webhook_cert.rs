//! e2e: an in-place change waits while the agent's webhook has no usable certificate (pods
//! created meanwhile would start with the template's values), shows why on the rsr, and
//! goes in by itself once the certificate files are written.

mod e2e_support;

use e2e_support::{AgentOptions, Env, condition};
use kerf_api::event::EventType;
use kerf_testkit::TestCa;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_place_waits_for_the_webhook_certificate_and_goes_in_once_it_is_written()
-> anyhow::Result<()> {
    let mut env = Env::start("e2e-webhook-cert").await?;
    env.web(2).await?;
    env.policy_of("p", "auto-patch", "in-place").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    let dir = tempfile::tempdir()?;
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let mut settings = env.settings(&AgentOptions::default())?;
    settings.webhook.cert_file = cert.clone();
    settings.webhook.key_file = key.clone();
    env.start_agent_with(settings).await;

    let rsr = env.wait_phase("web", "Blocked").await?;
    let blocked = condition(&rsr, "Blocked").cloned().unwrap_or_default();
    assert_eq!(
        blocked["reason"], "WebhookCertificateUnusable",
        "{}",
        rsr["status"]
    );
    let message = blocked["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&cert.display().to_string()),
        "the message names the file: {message}"
    );
    assert_eq!(
        rsr["status"]["summary"]["reason"], "WebhookCertificateUnusable",
        "the row shows why: {}",
        rsr["status"]
    );
    let events = env.wait_hub_event("web", EventType::Blocked).await?;
    assert_eq!(events[0].reason, "WebhookCertificateUnusable");
    assert!(env.hub_events("web", EventType::Applied).is_empty());

    let leaf = TestCa::new()?.leaf("kerf-agent-webhook.kerf-system.svc", "kerf-agent")?;
    std::fs::write(&key, leaf.key_pem)?;
    std::fs::write(&cert, leaf.cert_pem)?;
    env.wait_phase("web", "Applied").await?;
    env.wait_hub_event("web", EventType::Applied).await?;
    Ok(())
}
