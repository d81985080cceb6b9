//! e2e: what a platform engineer sees, through the real kubectl (1.32) against kerf-sim
//! and the agent: `kubectl get rsr -A` (CPU, MEMORY and REASON per phase), `-o wide`
//! (policy, confidence, last change, next), `kubectl describe rsr` (event ids, pod counts,
//! Progressing) and the Kubernetes Events (values in the message, Warning for an invalid
//! annotation and for an annotation key Kerf does not read, which changes nothing).

mod e2e_support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_support::{AgentOptions, Env, WAIT};
use k8s_openapi::api::apps::v1::Deployment;
use kerf_testkit::table;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

/// Runs kubectl against the scenario's cluster (kerf-sim, or the real cluster's
/// kubeconfig); fails when kubectl is missing.
fn kubectl(env: &Env, args: &[&str]) -> anyhow::Result<String> {
    kerf_testkit::kubectl_stdout(&env.kubeconfig_path(), args)
}

fn cell<'a>(
    rows: &'a BTreeMap<String, BTreeMap<String, String>>,
    name: &str,
    col: &str,
) -> &'a str {
    rows.get(name)
        .and_then(|r| r.get(col))
        .map_or("(missing)", String::as_str)
}

/// Asserts the PHASE, CPU, MEMORY and REASON cells of rsr `name`.
fn assert_row(text: &str, name: &str, want: [&str; 4]) {
    let rows = table(text);
    let got = ["PHASE", "CPU", "MEMORY", "REASON"].map(|c| cell(&rows, name, c).to_owned());
    assert_eq!(got, want.map(str::to_owned), "rsr {name}:\n{text}");
}

/// auto-patch in place, a long cooldown (nothing new after a change) and a 60s watch.
fn policy(ns: &str) -> Value {
    let rollback = json!({"watchDuration": "60s"});
    let mut spec = e2e_support::watched_policy_spec(ns, "in-place", "1h", rollback);
    spec["apply"]["fallbackAfter"] = json!("30s");
    spec
}

async fn annotate(env: &Env, name: &str, key: &str, value: &str) -> anyhow::Result<()> {
    let body = json!({"metadata": {"annotations": {key: value}}});
    env.deployments()
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map(|_: Deployment| ())
        .map_err(Into::into)
}

/// The scenario's workloads: web (in place), search (audit), bad (`mode: banana`), shaky
/// (low confidence) and roll (by rollout); the agent running.
async fn workloads(env: &mut Env) -> anyhow::Result<()> {
    env.deployment("web", 2, "500m", "512Mi").await?;
    env.deployment("search", 1, "800m", "2Gi").await?;
    env.deployment("bad", 1, "200m", "256Mi").await?;
    env.deployment("shaky", 1, "200m", "256Mi").await?;
    env.deployment("roll", 1, "200m", "256Mi").await?;
    annotate(env, "search", "kerf.getkerf.dev/mode", "audit").await?;
    annotate(env, "bad", "kerf.getkerf.dev/mode", "banana").await?;
    annotate(env, "roll", "kerf.getkerf.dev/strategy", "rollout").await?;
    // A misspelt opt-out: named on the rsr, and web is changed all the same.
    annotate(env, "web", "kerf.getkerf.dev/modee", "off").await?;
    env.wait_ready("web", 2).await?;
    env.policy("view", policy(&env.ns)).await?;
    env.recommend(vec![
        env.recommendation("web", "300m", "384Mi", "0.9")?,
        env.recommendation("search", "400m", "1536Mi", "0.9")?,
        env.recommendation("bad", "150m", "200Mi", "0.9")?,
        env.recommendation("shaky", "150m", "200Mi", "0.3")?,
        env.recommendation("roll", "150m", "200Mi", "0.9")?,
    ]);
    env.start_agent(&AgentOptions::default()).await?;
    env.wait_rsr("web", "Applied, watching with baselines", WAIT, |r| {
        let w = &r["status"]["watch"];
        r["status"]["change"]["state"] == "Applied"
            && w["baselines"].as_object().is_some_and(|b| b.len() >= 2)
    })
    .await?;
    env.wait_phase("search", "Skipped").await?;
    env.wait_phase("bad", "Skipped").await?;
    env.wait_phase("shaky", "Blocked").await?;
    env.wait_phase("roll", "Applied").await?;
    Ok(())
}

/// The Kubernetes Events on rsr `name`: (type, reason, message).
fn events_of(env: &Env, name: &str) -> anyhow::Result<Vec<(String, String, String)>> {
    let text = kubectl(env, &["get", "events", "-n", &env.ns, "-o", "json"])?;
    let list: Value = serde_json::from_str(&text)?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["name"] == name)
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (s("type"), s("reason"), s("message"))
        })
        .collect())
}

fn assert_default_table(env: &Env) -> anyhow::Result<()> {
    let t = kubectl(env, &["get", "rsr", "-A"])?;
    // Applied, and later passes with nothing to do keep its reason.
    assert_row(
        &t,
        "web",
        ["Applied", "300m", "384Mi", "RecommendationApplied"],
    );
    assert_row(
        &t,
        "search",
        ["Skipped", "800m→400m", "2Gi→1536Mi", "ModeAudit"],
    );
    assert_row(
        &t,
        "bad",
        ["Skipped", "200m→150m", "256Mi→200Mi", "InvalidAnnotation"],
    );
    assert_row(
        &t,
        "shaky",
        ["Blocked", "200m→150m", "256Mi→200Mi", "LowConfidence"],
    );
    assert_row(
        &t,
        "roll",
        ["Applied", "150m", "200Mi", "RecommendationApplied"],
    );
    assert!(
        !t.contains("POLICY"),
        "priority-1 columns only with -o wide:\n{t}"
    );
    // A MODE set by an annotation, not by the policy (auto-patch), says so.
    let rows = table(&t);
    let modes = ["web", "search", "bad", "roll"].map(|n| cell(&rows, n, "MODE").to_owned());
    assert_eq!(
        modes,
        [
            "auto-patch",
            "audit (annotation)",
            "off (annotation)",
            "auto-patch"
        ],
        "{t}"
    );
    Ok(())
}

/// web's misspelt `kerf.getkerf.dev/modee`: Valid=False naming it and the nearest key.
async fn assert_unknown_key_named(env: &Env) -> anyhow::Result<()> {
    let web = env.rsr("web").await?.unwrap_or_default();
    let valid = e2e_support::condition(&web, "Valid")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (valid["status"].as_str(), valid["reason"].as_str()),
        (Some("False"), Some("UnknownAnnotation")),
        "{valid}"
    );
    let message = valid["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("kerf.getkerf.dev/modee = \"off\": not an annotation Kerf reads")
            && message.contains("the nearest known key is kerf.getkerf.dev/mode)"),
        "{message}"
    );
    Ok(())
}

fn assert_wide_table(env: &Env) -> anyhow::Result<()> {
    let t = kubectl(env, &["get", "rsr", "-n", &env.ns, "-o", "wide"])?;
    let rows = table(&t);
    for name in ["web", "search", "bad", "shaky", "roll"] {
        assert_eq!(cell(&rows, name, "POLICY"), "view", "{t}");
    }
    assert_eq!(cell(&rows, "web", "CONFIDENCE"), "0.9", "{t}");
    assert_eq!(cell(&rows, "shaky", "CONFIDENCE"), "0.3", "{t}");
    let last = cell(&rows, "web", "LAST CHANGE");
    assert!(last.ends_with('s'), "web LAST CHANGE {last:?}:\n{t}");
    // An absent value is an empty cell, as with a real API server.
    assert_eq!(cell(&rows, "search", "LAST CHANGE"), "", "{t}");
    // A low confidence waits for the hub, not for a time: no next time.
    assert_eq!(cell(&rows, "shaky", "NEXT"), "", "{t}");
    // Where the recommendation comes from (docs/sources.md).
    assert_eq!(cell(&rows, "web", "SOURCE"), "hub", "{t}");
    Ok(())
}

fn assert_describe_applied(env: &Env) -> anyhow::Result<()> {
    let web = kubectl(env, &["describe", "rsr", "-n", &env.ns, "web"])?;
    assert!(web.contains("Applied:"), "{web}");
    assert!(
        web.lines().any(|l| l
            .trim()
            .strip_prefix("Source:")
            .is_some_and(|v| v.trim() == "hub")),
        "describe names the source:\n{web}"
    );
    for never in [
        "Failed:",
        "Rolled Back:",
        "Fallback:",
        "Released:",
        "Progressing",
    ] {
        assert!(
            !web.contains(never),
            "{never} in describe of an in-place change:\n{web}"
        );
    }
    let pods: Vec<String> = web
        .lines()
        .filter(|l| l.contains("Pods Accepted:") || l.contains("Pods Total:"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(pods, ["Pods Accepted: 2", "Pods Total: 2"], "{web}");
    let search = kubectl(env, &["describe", "rsr", "-n", &env.ns, "search"])?;
    assert!(!search.contains("Progressing"), "audit:\n{search}");
    let roll = kubectl(env, &["describe", "rsr", "-n", &env.ns, "roll"])?;
    assert!(roll.contains("Progressing"), "rollout:\n{roll}");
    for never in ["Pods Accepted", "Failed:", "Rolled Back:"] {
        assert!(
            !roll.contains(never),
            "{never} in describe of a rollout:\n{roll}"
        );
    }
    Ok(())
}

fn assert_events(env: &Env) -> anyhow::Result<()> {
    let web = events_of(env, "web")?;
    assert!(
        web.iter().any(|(t, r, m)| t == "Normal"
            && r == "RecommendationApplied"
            && m == "cpu 500m→300m, memory 512Mi→384Mi in place on 2 pods"),
        "{web:#?}"
    );
    let roll = events_of(env, "roll")?;
    assert!(
        roll.iter().any(|(_, r, m)| r == "RecommendationApplied"
            && m == "cpu 200m→150m, memory 256Mi→200Mi by rollout"),
        "{roll:#?}"
    );
    let search = events_of(env, "search")?;
    assert!(
        search.iter().any(|(t, r, m)| t == "Normal"
            && r == "ModeAudit"
            && m.ends_with("(cpu 800m→400m, memory 2Gi→1536Mi)")),
        "{search:#?}"
    );
    let bad = events_of(env, "bad")?;
    let warnings: Vec<_> = bad
        .iter()
        .filter(|(t, r, _)| t == "Warning" && r == "InvalidAnnotation")
        .collect();
    assert_eq!(warnings.len(), 1, "{bad:#?}");
    assert!(warnings[0].2.contains("banana"), "{bad:#?}");
    let unknown: Vec<_> = web
        .iter()
        .filter(|(t, r, _)| t == "Warning" && r == "UnknownAnnotation")
        .collect();
    assert_eq!(unknown.len(), 1, "{web:#?}");
    assert!(unknown[0].2.contains("kerf.getkerf.dev/modee"), "{web:#?}");
    Ok(())
}

// portable (the rollback after an OOM kill at its end: sim)
// rule: RB-05, EV-07, EV-08, design D5
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_what_the_pods_run_and_why_in_every_phase() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-rsr-view").await?;
    workloads(&mut env).await?;
    // A few more passes that find nothing to do.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_default_table(&env)?;
    assert_wide_table(&env)?;
    assert_describe_applied(&env)?;
    assert_events(&env)?;
    assert_unknown_key_named(&env).await?;

    // An OOM kill rolls memory back; the pods keep the new cpu. The kill is kerf-sim's
    // fault injection: on a real cluster this part is reported as skipped.
    if !env.sim_only("e2e_rsr_view: the rows after an OOM kill") {
        env.stop_agent().await;
        return Ok(());
    }
    let pods = env.wait_ready("web", 2).await?;
    env.oom_kill(pods[0].metadata.name.as_deref().unwrap_or_default())?;
    env.wait_rsr("web", "change RolledBack", WAIT, |r| {
        r["status"]["change"]["state"] == "RolledBack"
    })
    .await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t = kubectl(&env, &["get", "rsr", "-A"])?;
    assert_row(&t, "web", ["RolledBack", "300m", "512Mi→384Mi", "OOMKills"]);
    let web = kubectl(&env, &["describe", "rsr", "-n", &env.ns, "web"])?;
    assert!(web.contains("Rolled Back:"), "{web}");
    assert!(!web.contains("Failed:"), "{web}");
    let events = events_of(&env, "web")?;
    assert!(
        events.iter().any(|(t, r, m)| t == "Warning"
            && r == "OOMKills"
            && m.ends_with("restored memory 384Mi→512Mi")),
        "{events:#?}"
    );
    env.stop_agent().await;
    Ok(())
}
