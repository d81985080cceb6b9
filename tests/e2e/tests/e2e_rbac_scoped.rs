//! e2e: the chart's RBAC with `scope.namespaces` (docs/install.md#scoped-install) grants
//! what a scoped agent calls, and the agent calls nothing outside its scope. The scenarios
//! of e2e_rbac (rbac_support) run with the agent's `--scope-namespaces` set to their
//! namespaces and the chart rendered with the same `scope.namespaces`; a Deployment of
//! another namespace, under a policy and with a recommendation, is left alone. Every
//! request the agent made is read back from kerf-sim's request log: each must be granted
//! by the Role of its namespace or by the ClusterRole, and none may go to a namespace
//! outside the scope but the release namespace's Lease and hub state ConfigMap and the
//! policies' Events in `default`. Needs helm (see `kerf_testkit::helm`).

mod e2e_support;
mod rbac_support;

use std::collections::BTreeSet;

use e2e_support::{Env, ensure_namespace, rsr_api};
use kerf_agent::scope::Scope;
use rbac_support::{
    Call, DS_NS, HPA_NS, RELEASE_NS, STS_NS, agent_calls, agent_client, assert_discovery_only,
    create, missing, pod_template, policy, recommendation, rendered_perms, scenarios, set_up_with,
};
use serde_json::json;

/// A namespace outside the scope, with a workload the agent would change were it in.
const OUTSIDE_NS: &str = "rbac-outside";

/// Whether `c` stays within the scope `scope`: a namespace of the scope, the release
/// namespace's Lease and hub state ConfigMap, the policies' Events in `default`, or no
/// namespace (cluster-scoped kinds; a list over the cluster of a namespaced kind needs a
/// ClusterRole grant, which the check of the grants finds missing).
fn within(c: &Call, scope: &[String]) -> bool {
    match c.namespace.as_deref() {
        None => true,
        Some(ns) if scope.iter().any(|s| s == ns) => true,
        Some(RELEASE_NS) => matches!(c.resource.as_str(), "leases" | "configmaps"),
        Some("default") => c.resource == "events" && c.verb == "create",
        Some(_) => false,
    }
}

/// Deployment `web` in [`OUTSIDE_NS`] under policy `outside` in auto-patch.
async fn outside_workload(env: &Env) -> anyhow::Result<()> {
    ensure_namespace(&env.client, OUTSIDE_NS, false).await?;
    create(
        &env.client,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": OUTSIDE_NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": pod_template("web")}}),
    )
    .await?;
    env.policy("outside", policy(OUTSIDE_NS, "auto-patch", "in-place"))
        .await
}

// sim
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_agent_calls_only_what_the_scoped_chart_grants_and_only_in_its_scope()
-> anyhow::Result<()> {
    let Some(mut env) = Env::start_sim_only("rbac-scoped").await? else {
        return Ok(());
    };
    let scope: Vec<String> = [env.ns.as_str(), HPA_NS, STS_NS, DS_NS]
        .map(str::to_owned)
        .to_vec();
    let list = format!("scope.namespaces={}", serde_json::to_string(&scope)?);
    let perms = rendered_perms(&["--set-json", &list])?;
    let cluster_wide: BTreeSet<String> = perms
        .iter()
        .filter(|p| p.namespace.is_none())
        .map(|p| p.resource.clone())
        .collect();
    assert!(
        !cluster_wide.contains("pods") && !cluster_wide.contains("deployments"),
        "the scoped chart's ClusterRole grants namespaced kinds: {cluster_wide:?}"
    );
    outside_workload(&env).await?;
    let outside_rec = recommendation(OUTSIDE_NS, "Deployment", "web")?;
    set_up_with(&mut env, vec![outside_rec]).await?;
    let client = agent_client(&env).await?;
    let agent_scope = Scope {
        namespaces: scope.clone(),
        ..Scope::default()
    };
    scenarios(&mut env, client, agent_scope).await?;
    let (calls, discovery) = agent_calls(&env)?;

    assert_discovery_only(&discovery);
    let missing = missing(&calls, &perms);
    let outside: BTreeSet<String> = calls
        .iter()
        .filter(|c| !within(c, &scope))
        .map(|c| format!("{} ns={:?} name={:?}", c.key(), c.namespace, c.name))
        .collect();
    let namespaces: BTreeSet<&str> = calls
        .iter()
        .filter_map(|c| c.namespace.as_deref())
        .collect();
    for ns in &scope {
        assert!(
            namespaces.contains(ns.as_str()),
            "no call in {ns}: {namespaces:?}"
        );
    }
    assert!(
        rsr_api(&env.client, OUTSIDE_NS)
            .get_opt("web")
            .await?
            .is_none(),
        "the workload outside the scope got an rsr"
    );
    assert!(
        missing.is_empty() && outside.is_empty(),
        "calls without a grant: {missing:#?}\ncalls outside the scope: {outside:#?}"
    );
    Ok(())
}
