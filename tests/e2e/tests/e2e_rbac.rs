//! e2e: the chart's RBAC grants exactly what the agent calls. The agent runs on kerf-sim
//! through an in-place change and its rollback, a rollout coupled to an HPA and its
//! release, an OnDelete StatefulSet (evictions), a DaemonSet rollout, leader election and
//! the hub state ConfigMap (created, then updated); every request it made is read back from
//! kerf-sim's request log and compared, by resource, subresource, verb (and name where the
//! Role names one), with the ClusterRole and Role that `helm template` renders
//! (rbac_support; e2e_rbac_scoped does the same with `scope.namespaces`).
//! Needs helm (see `kerf_testkit::helm`).

mod e2e_support;
mod rbac_support;

use std::collections::{BTreeMap, BTreeSet};

use e2e_support::Env;
use kerf_agent::scope::Scope;
use rbac_support::{
    agent_calls, agent_client, assert_discovery_only, covers, missing, rendered_perms, scenarios,
    set_up,
};

/// Grants the code holds for paths a run on kerf-sim does not reach, each with the file
/// that makes the call and the text of the call there. Kept minimal: an entry the run does
/// reach fails the test.
const UNREACHED: [(&str, &str, &str); 2] = [
    // A resize answered 409 Conflict is retried after reading the pod again.
    (
        "core pods get",
        "crates/kerf-agent/src/executor/resize.rs",
        "api.get_opt(pod)",
    ),
    // An rsr whose spec does not convert: its spec is read to write Valid=False.
    (
        "kerf.getkerf.dev rightsizingrecommendations get",
        "crates/kerf-agent/src/reconcile/writer.rs",
        "self.api.get_opt(&self.name)",
    ),
];

fn pin_unreached() -> anyhow::Result<()> {
    let root = kerf_testkit::repo_root();
    for (grant, file, call) in UNREACHED {
        let text = std::fs::read_to_string(root.join(file))?;
        anyhow::ensure!(
            text.contains(call),
            "{grant} is kept for `{call}` in {file}, which no longer makes it: remove the grant"
        );
    }
    Ok(())
}

// sim
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_grants_exactly_what_the_agent_calls() -> anyhow::Result<()> {
    let perms = rendered_perms(&[])?;
    pin_unreached()?;
    let Some(mut env) = Env::start_sim_only("rbac").await? else {
        return Ok(());
    };
    set_up(&mut env).await?;
    let client = agent_client(&env).await?;
    scenarios(&mut env, client, Scope::default()).await?;
    let (calls, discovery) = agent_calls(&env)?;

    assert_discovery_only(&discovery);
    let missing = missing(&calls, &perms);
    let unreached: BTreeSet<&str> = UNREACHED.iter().map(|u| u.0).collect();
    let extra: BTreeSet<String> = perms
        .iter()
        .filter(|p| !calls.iter().any(|c| covers(p, c)) && !unreached.contains(p.key().as_str()))
        .map(|p| format!("{} name={:?} ns={:?}", p.key(), p.name, p.namespace))
        .collect();
    let used: BTreeMap<String, usize> = calls.iter().fold(BTreeMap::new(), |mut m, c| {
        *m.entry(c.key()).or_default() += 1;
        m
    });
    let reached: Vec<&&str> = unreached
        .iter()
        .filter(|u| used.contains_key(**u))
        .collect();
    for u in &unreached {
        assert!(
            perms.iter().any(|p| p.key() == *u),
            "{u} is listed as granted for an unreached path but the chart does not grant it"
        );
    }
    assert!(
        missing.is_empty() && extra.is_empty() && reached.is_empty(),
        "calls without a grant: {missing:#?}\ngrants no call used: {extra:#?}\n\
         UNREACHED entries the run reached (drop them from the list): {reached:?}\n\
         calls made: {used:#?}"
    );
    Ok(())
}
