//! e2e: the savings report. `kerf-agent report` run as a binary against the cluster its
//! kubeconfig names, and `GET /report` on the running agent's metrics port, both sum the
//! namespace's workloads as computed by hand: two audited workloads with a
//! recommendation and one without.

mod e2e_support;

use std::process::Command;

use e2e_support::{AgentOptions, Env, eventually};
use kerf_testkit::{AgentBuild, agent_binary};
use serde_json::Value;

const MI: i64 = 1 << 20;

/// The namespace's totals in a report document.
fn namespace<'a>(report: &'a Value, ns: &str) -> anyhow::Result<&'a Value> {
    report["namespaces"]
        .as_array()
        .and_then(|list| list.iter().find(|n| n["namespace"] == ns))
        .ok_or_else(|| anyhow::anyhow!("namespace {ns} missing from {report:#}"))
}

/// web: 2 × 200m/256Mi → 150m/200Mi; api: 3 × 500m/512Mi → 250m/256Mi; legacy:
/// 1 × 100m/64Mi without a recommendation. Both recommendations are in audit.
fn assert_totals(report: &Value, ns: &str) -> anyhow::Result<()> {
    assert_eq!(report["version"], 1, "{report:#}");
    let t = namespace(report, ns)?;
    assert_eq!(t["workloads"], 3, "{t:#}");
    assert_eq!(t["recommendedWorkloads"], 2, "{t:#}");
    assert_eq!(t["cpu"]["requested"], 2 * 200 + 3 * 500 + 100, "{t:#}");
    assert_eq!(t["cpu"]["recommended"], 2 * 150 + 3 * 250 + 100, "{t:#}");
    assert_eq!(t["cpu"]["savings"]["decrease"], 850, "{t:#}");
    assert_eq!(t["cpu"]["savings"]["increase"], 0, "{t:#}");
    assert_eq!(
        t["memory"]["requested"],
        (2 * 256 + 3 * 512 + 64) * MI,
        "{t:#}"
    );
    assert_eq!(
        t["memory"]["recommended"],
        (2 * 200 + 3 * 256 + 64) * MI,
        "{t:#}"
    );
    assert_eq!(t["memory"]["savings"]["net"], 880 * MI, "{t:#}");
    assert_eq!(t["cpu"]["applied"]["net"], 0, "{t:#}");
    let held = &t["heldBack"];
    assert_eq!(held.as_array().map(Vec::len), Some(1), "{held:#}");
    assert_eq!(held[0]["reason"], "ModeAudit", "{held:#}");
    assert_eq!(held[0]["workloads"], 2, "{held:#}");
    assert_eq!(held[0]["cpu"]["net"], 850, "{held:#}");
    Ok(())
}

/// `kerf-agent report <args>` against the scenario's cluster: its standard output.
fn run_report(env: &Env, args: &[&str]) -> anyhow::Result<String> {
    let mut cmd = Command::new(agent_binary(AgentBuild::FailPoints)?);
    if let Some(sim) = &env.sim {
        cmd.env("KUBECONFIG", sim.kubeconfig_path());
    }
    let out = cmd.arg("report").args(args).output()?;
    anyhow::ensure!(
        out.status.success(),
        "kerf-agent report {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

// portable
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_command_and_endpoint_sum_requests_recommendations_and_holds()
-> anyhow::Result<()> {
    let mut env = Env::start("e2e-report").await?;
    env.web(2).await?;
    env.deployment("api", 3, "500m", "512Mi").await?;
    env.deployment("legacy", 1, "100m", "64Mi").await?;
    env.wait_ready("api", 3).await?;
    env.policy_of("report", "audit", "in-place").await?;
    env.recommend(vec![
        env.recommendation("web", "150m", "200Mi", "0.9")?,
        env.recommendation("api", "250m", "256Mi", "0.9")?,
    ]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut settings = env.settings(&AgentOptions::default())?;
    settings.metrics_addr = ([127, 0, 0, 1], port).into();
    env.start_agent_with(settings).await;
    env.wait_phase("web", "Skipped").await?;
    env.wait_phase("api", "Skipped").await?;

    let url = format!("http://127.0.0.1:{port}/report");
    let ns = env.ns.clone();
    let served: Value = eventually("/report to sum the namespace", e2e_support::WAIT, || {
        let url = url.clone();
        let ns = ns.clone();
        async move {
            let body: Value = reqwest::get(&url).await.ok()?.json().await.ok()?;
            assert_totals(&body, &ns).is_ok().then_some(body)
        }
    })
    .await?;
    assert_totals(&served, &env.ns)?;

    let json: Value = serde_json::from_str(&run_report(&env, &["-o", "json"])?)?;
    assert_totals(&json, &env.ns)?;
    let lines = |w: &str| -> Vec<Value> {
        json["workloads"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|l| l["namespace"] == env.ns && l["name"] == w)
            .cloned()
            .collect()
    };
    assert_eq!(lines("api")[0]["cpu"]["heldBack"], "ModeAudit", "{json:#}");
    assert_eq!(lines("legacy")[0]["recommended"], false, "{json:#}");

    let table = run_report(&env, &[])?;
    for line in table.lines() {
        assert!(
            line.chars().count() <= 120,
            "wider than 120 columns: {line:?}"
        );
    }
    for want in [
        "Kerf savings report at",
        "TOTAL",
        "ModeAudit",
        "850m",
        "880Mi",
    ] {
        assert!(table.contains(want), "{want:?} missing from:\n{table}");
    }
    env.stop_agent().await;
    Ok(())
}
