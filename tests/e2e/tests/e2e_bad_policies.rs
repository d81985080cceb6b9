//! e2e (kerf-sim only): the bad policies of docs/reliability.md's table, each stored past
//! the API server's schema (as an older CRD or a lenient client would leave it) over a
//! workload with a recommendation that a good policy applies. For each: the policy shows
//! `Valid=False` naming the bad field (what the user sees), and kerf-sim's audit log shows
//! no actuating write from the agent, the pods keep their values and no change is recorded
//! (nothing wider than the message). A maintenance window only gates the `deferred`
//! strategy, so the window cases use it, with windows that would be open now: a bad window
//! counts as closed. A good policy put in last applies the change, so the scenario would
//! see a write.

mod e2e_support;

use std::time::{Duration, Instant};

use e2e_support::{AgentOptions, Env, WAIT, eventually, policy_spec};
use kerf_api::event::EventType;
use kerf_sim::store::gvr::Gvr;
use serde_json::{Value, json};

fn policy_gvr() -> Gvr {
    Gvr::dynamic(
        "kerf.getkerf.dev",
        "v1alpha1",
        "rightsizingpolicies",
        "RightsizingPolicy",
        false,
    )
}

/// A bad policy: its name, how the good spec is spoiled, the fields the condition names.
type BadPolicy = (&'static str, fn(&mut Value), &'static [&'static str]);

/// The bad policies: a name, how the good spec is spoiled, and the fields the condition
/// must name. Seventeen maintenance windows (one over the limit) are not here: the agent
/// still uses each valid window, which is what sixteen of them would let in, so a write
/// there is no wider than good input (`kerf-api/tests/crd_bad_input.rs` names the list).
fn bad_policies() -> Vec<BadPolicy> {
    vec![
        ("mode", |s| s["mode"] = json!("auto"), &["spec.mode"]),
        (
            "strategy",
            |s| s["apply"]["strategy"] = json!("yolo"),
            &["spec.apply.strategy"],
        ),
        (
            "max-change",
            |s| s["guardrails"]["maxChangePercent"] = json!(101),
            &["spec.guardrails.maxChangePercent"],
        ),
        (
            "schedule-and-start",
            |s| {
                s["apply"]["strategy"] = json!("deferred");
                s["apply"]["maintenanceWindows"] = json!([{"schedule": "* * * * *",
                    "duration": "1h", "start": "2026-12-20T00:00:00Z"}])
            },
            &["spec.apply.maintenanceWindows[0]"],
        ),
        (
            "end-before-start",
            |s| {
                s["apply"]["strategy"] = json!("deferred");
                s["apply"]["maintenanceWindows"] = json!([{"start": "2026-12-21T00:00:00Z",
                    "end": "2026-12-20T00:00:00Z"}])
            },
            &["spec.apply.maintenanceWindows[0].end"],
        ),
        (
            "duration",
            |s| s["guardrails"]["learningPeriod"] = json!("7 days"),
            &["spec.guardrails.learningPeriod"],
        ),
        (
            "confidence",
            |s| s["guardrails"]["minConfidence"] = json!("1.5"),
            &["spec.guardrails.minConfidence"],
        ),
        (
            "several",
            |s| {
                s["guardrails"]["maxChangePercent"] = json!(101);
                s["guardrails"]["minConfidence"] = json!("1.5");
            },
            &[
                "spec.guardrails.maxChangePercent",
                "spec.guardrails.minConfidence",
            ],
        ),
        (
            "freeze",
            |s| {
                s["apply"]["freezeWindows"] = json!([{"schedule": "0 25 * * *",
                    "duration": "1h", "timeZone": "Mars/Olympus_Mons"}])
            },
            &[
                "spec.apply.freezeWindows[0].schedule",
                "spec.apply.freezeWindows[0].timeZone",
            ],
        ),
    ]
}

/// The agent's actuating writes kerf-sim received since `from`.
fn actuating_writes(env: &Env, from: Instant) -> Vec<String> {
    let Some(sim) = env.sim.as_ref() else {
        return Vec::new();
    };
    sim.audit()
        .snapshot()
        .records
        .iter()
        .filter(|r| r.received >= from)
        .filter(|r| kerf_agent::apiclient::is_actuating(&r.method, &r.path, Some(&r.query)))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// The message of the policy's `Valid=False` condition, once it has one.
async fn invalid_message(env: &Env, name: &str) -> anyhow::Result<String> {
    let api = e2e_support::policy_api(&env.client);
    let message = eventually(&format!("policy {name} Valid=False"), WAIT, || async {
        let p = api.get(name).await.ok()?;
        let conditions = p.data["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .find(|c| c["type"] == "Valid" && c["status"] == "False")
            .and_then(|c| c["message"].as_str().map(str::to_owned))
    })
    .await;
    match message {
        Ok(m) => Ok(m),
        Err(e) => Err(anyhow::anyhow!("{e}: {:?}", api.get(name).await)),
    }
}

// sim
// rule: design D3
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_policy_is_named_and_writes_nothing_to_the_workload() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-bad-policies").await?;
    let Some(sim) = env.sim.as_ref().map(|s| s.context().clone()) else {
        env.sim_only("e2e-bad-policies");
        return Ok(());
    };
    env.web(2).await?;
    env.recommend_web("150m", "200Mi", "0.9")?;
    env.start_agent(&AgentOptions::default()).await?;
    let good = policy_spec(&env.ns, "auto-patch", "in-place");
    let from = Instant::now();
    for (name, spoil, fields) in bad_policies() {
        let mut spec = good.clone();
        spoil(&mut spec);
        let policy = json!({
            "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingPolicy",
            "metadata": {"name": name}, "spec": spec,
        });
        // Written past the API server's schema check.
        sim.store.create(&policy_gvr(), policy, "kubectl-edit")?;
        let message = invalid_message(&env, name).await?;
        for field in fields {
            assert!(
                message.contains(field),
                "{name}: {field} not named: {message}"
            );
        }
        // Checks that nothing is written: a few passes with the bad policy in place.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            actuating_writes(&env, from),
            Vec::<String>::new(),
            "{name}: actuating writes"
        );
        env.assert_cpu_unchanged("web", "200m").await?;
        let rsr = env.rsr("web").await?.unwrap_or_default();
        assert!(
            rsr["status"]["change"].is_null(),
            "{name}: {}",
            rsr["status"]
        );
        sim.store.delete(&policy_gvr(), None, name)?;
    }
    assert!(env.hub_events("web", EventType::Applied).is_empty());

    // The same workload under a good policy: the change goes in.
    env.policy("good", good).await?;
    env.wait_phase("web", "Applied").await?;
    assert!(!actuating_writes(&env, from).is_empty());
    env.stop_agent().await;
    Ok(())
}
