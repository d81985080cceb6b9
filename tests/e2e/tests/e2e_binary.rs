//! e2e: the released binary, `kerf-agent run`, against a cluster named by a kubeconfig.
//! The in-process scenarios start the agent as a library; this one runs the binary as a
//! user would, so process-level set-up (TLS providers, logging, signals) is covered too.

mod e2e_support;

use std::process::Stdio;

use e2e_support::{CLUSTER, Env};
use kerf_testkit::{AgentBuild, KillOnDrop, agent_binary, agent_run};

// portable
// rule: EV-28
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_command_mirrors_a_recommendation_into_an_rsr() -> anyhow::Result<()> {
    let env = Env::start("e2e-binary").await?;
    env.web(1).await?;
    env.policy_of("binary", "audit", "in-place").await?;
    env.recommend_web("150m", "200Mi", "0.9")?;

    let bin = agent_binary(AgentBuild::FailPoints)?;
    let mut cmd = agent_run(&bin, CLUSTER, &env.hub.url(), "1s");
    if let Some(sim) = &env.sim {
        cmd.env("KUBECONFIG", sim.kubeconfig_path());
    }
    let child = cmd
        .args(["--metrics-addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut agent = KillOnDrop(child);

    let rsr = env.wait_phase("web", "Skipped").await?;
    assert_eq!(rsr["status"]["summary"]["reason"], "ModeAudit", "{rsr:#}");
    assert!(
        agent.0.try_wait()?.is_none(),
        "kerf-agent run exited while it should keep running"
    );
    Ok(())
}
