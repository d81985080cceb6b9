//! e2e: what a scoped agent reads (docs/configuration.md#scoped-installs). With
//! `scope.namespaces` the agent lists, watches and gets pods, ReplicaSets, workloads,
//! HPAs, PDBs and rsrs in the listed namespaces only, and the workload there still gets its
//! change; an agent without a namespace list still lists them over the cluster. Every
//! request the agent made is read back from kerf-sim's request log.

mod e2e_support;

use std::sync::Arc;

use e2e_support::{AgentOptions, Env, assert_pod_requests, ensure_namespace, scope_of};
use kerf_agent::clock::SystemClock;
use kerf_agent::runtime::Agent;
use kerf_agent::scope::Scope;
use kerf_sim::api::audit::AuditRecord;
use serde_json::json;

/// The User-Agent of the agent's client: its requests are told from the test's by it.
const AGENT_UA: &str = "kerf-scope-reads/0";

/// The namespaced kinds the agent caches, as their path segments.
const NAMESPACED: [&str; 8] = [
    "pods",
    "replicasets",
    "deployments",
    "statefulsets",
    "daemonsets",
    "horizontalpodautoscalers",
    "poddisruptionbudgets",
    "rightsizingrecommendations",
];

/// The reads (lists, watches and gets) the agent made of the namespaced kinds it caches.
fn agent_reads(env: &Env) -> Vec<AuditRecord> {
    let Some(sim) = env.sim.as_ref() else {
        return Vec::new();
    };
    sim.audit()
        .snapshot()
        .records
        .into_iter()
        .filter(|r| r.user_agent == AGENT_UA && r.method == http::Method::GET)
        .filter(|r| r.path.split('/').any(|s| NAMESPACED.contains(&s)))
        .collect()
}

/// Whether `path` names namespace `ns` (`.../namespaces/<ns>/...`).
fn in_namespace(path: &str, ns: &str) -> bool {
    path.contains(&format!("/namespaces/{ns}/"))
}

/// Namespaces `a` (the harness's) and `b`, a Deployment `web` in each, a policy selecting
/// both and a recommendation for `a`'s; returns `b`.
async fn seed(env: &Env) -> anyhow::Result<String> {
    let (a, b) = (env.ns.clone(), format!("{}-b", env.ns));
    ensure_namespace(&env.client, &b, true).await?;
    env.deployment("web", 1, "200m", "256Mi").await?;
    let d = kerf_testkit::deployment_json(
        &b,
        "web",
        1,
        kerf_testkit::App {
            image: "registry.k8s.io/pause:3.10",
            requests: ["200m", "256Mi"],
            limits: None,
        },
    );
    let api: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(env.client.clone(), &b);
    api.create(&Default::default(), &serde_json::from_value(d)?)
        .await?;
    env.wait_ready("web", 1).await?;
    let mut spec = e2e_support::policy_spec(&a, "auto-patch", "in-place");
    spec["selector"]["namespaces"] = json!([a, b]);
    env.policy("both", spec).await?;
    env.recommend(vec![env.recommendation("web", "150m", "200Mi", "0.9")?]);
    Ok(b)
}

/// Runs an agent with `scope` on a client of its own ([`AGENT_UA`]) until `a`'s `web` has its change.
async fn run_until_applied(env: &Env, scope: Scope) -> anyhow::Result<()> {
    let mut settings = env.settings(&AgentOptions::default())?;
    settings.scope = scope;
    let agent = Agent::start(
        env.client_as(AGENT_UA).await?,
        settings,
        Arc::new(SystemClock),
    )
    .await?;
    env.wait_phase("web", "Applied").await?;
    for p in env.wait_ready("web", 1).await? {
        assert_pod_requests(&p, "150m", "200Mi");
    }
    agent.stop().await;
    Ok(())
}

// sim
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_scoped_agent_reads_the_namespaced_kinds_of_its_namespaces_only()
-> anyhow::Result<()> {
    let Some(env) = Env::start_sim_only("e2e-scope-reads").await? else {
        return Ok(());
    };
    let a = env.ns.clone();
    seed(&env).await?;
    run_until_applied(&env, scope_of(&["--scope-namespaces", &a])?).await?;

    let reads = agent_reads(&env);
    let outside: Vec<_> = reads
        .iter()
        .filter(|r| !in_namespace(&r.path, &a))
        .collect();
    assert!(outside.is_empty(), "reads outside {a}: {outside:#?}");
    for kind in NAMESPACED {
        let watched = reads.iter().any(|r| {
            r.path.ends_with(&format!("/namespaces/{a}/{kind}")) && r.query.contains("watch=true")
        });
        assert!(watched, "no watch of {kind} in {a}: {reads:#?}");
    }
    Ok(())
}

/// Runs an agent with `scope` on a fresh cluster and asserts that it listed pods and
/// Deployments over the cluster, without a label selector.
async fn lists_over_the_cluster(name: &str, scope: Scope) -> anyhow::Result<()> {
    let Some(env) = Env::start_sim_only(name).await? else {
        return Ok(());
    };
    seed(&env).await?;
    run_until_applied(&env, scope).await?;

    let reads = agent_reads(&env);
    for path in ["/api/v1/pods", "/apis/apps/v1/deployments"] {
        let listed = reads
            .iter()
            .any(|r| r.path == path && !r.query.contains("labelSelector"));
        assert!(listed, "no list of {path}: {reads:#?}");
    }
    Ok(())
}

// sim
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unscoped_agent_lists_the_namespaced_kinds_over_the_cluster() -> anyhow::Result<()> {
    lists_over_the_cluster("e2e-scope-reads-all", Scope::default()).await
}

// sim
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_selector_keeps_the_watches_over_the_cluster_and_unfiltered()
-> anyhow::Result<()> {
    let scope = scope_of(&["--scope-workload-selector", "app=web"])?;
    lists_over_the_cluster("e2e-scope-reads-label", scope).await
}
