//! e2e: an upgrade keeps everything (docs/upgrade.md). A kerf-sim cluster starts from the
//! CRDs of the previous release (until the first release, those of commit 6b1b166:
//! tests/e2e/upgrade/crds-6b1b166.yaml), holds two policies and two rsrs whose changes
//! stopped after their intent (fail point `after-intent`), and is upgraded by the documented
//! path: the current CRDs by server-side apply with force, as `kubectl apply --server-side
//! --force-conflicts` sends them, then the current agent. Every stored policy and rsr reads
//! with the current types and validates; each change completes once under its recorded id;
//! nothing stored is lost. Runs on kerf-sim only (it replaces the cluster's CRDs), and only
//! with the `failpoints` feature (the default).

mod e2e_support;

use std::time::Duration;

use e2e_support::{AgentOptions, Env, WAIT, assert_pod_requests, eventually, policy_spec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kerf_api::event::EventType;
use kerf_api::validate::{validate_policy, validate_recommendation_spec};
use kerf_api::{RightsizingPolicy, RightsizingRecommendation};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::{Value, json};

/// The CRDs the cluster starts from.
const OLD_CRDS: &str = include_str!("../upgrade/crds-6b1b166.yaml");
/// The commit [`OLD_CRDS`] come from.
const OLD_COMMIT: &str = "6b1b166";
/// The field manager `kubectl apply --server-side` writes with.
const KUBECTL: &str = "kubectl";
/// The workloads under the auto-patch policy: name, pods, recommended cpu and memory.
const WORKLOADS: [(&str, i32, &str, &str); 2] =
    [("web", 2, "150m", "200Mi"), ("api", 1, "120m", "180Mi")];

/// Every CRD of `yaml` (one YAML stream) as JSON.
fn crd_docs(yaml: &str) -> anyhow::Result<Vec<Value>> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|d| Ok(Value::deserialize(d)?))
        .collect()
}

/// Creates the CRDs of the previous release, as its first `helm install` did.
async fn install_old_crds(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for doc in crd_docs(OLD_CRDS)? {
        let crd: CustomResourceDefinition = serde_json::from_value(doc)?;
        let pp = PostParams {
            field_manager: Some("helm".into()),
            ..PostParams::default()
        };
        crds.create(&pp, &crd).await?;
    }
    Ok(())
}

/// `kubectl apply --server-side --force-conflicts -f charts/kerf-agent/crds/`: the current
/// CRDs, server-side applied by manager `kubectl` with force.
async fn apply_current_crds(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply(KUBECTL).force();
    for doc in crd_docs(e2e_support::CRDS)? {
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        crds.patch(&name, &pp, &Patch::Apply(&doc)).await?;
    }
    Ok(())
}

/// Whether the served RightsizingRecommendation schema declares `spec.source`.
async fn rsr_schema_has_source(client: &Client) -> anyhow::Result<bool> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .get("rightsizingrecommendations.kerf.getkerf.dev")
        .await?;
    let crd = serde_json::to_value(crd)?;
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    Ok(spec["properties"].get("source").is_some())
}

/// The stored objects as the upgrade must keep them: every policy (name → spec) and every
/// rsr of the namespace (name → spec and status).
#[derive(Debug, PartialEq)]
struct Stored {
    policies: Vec<(String, Value)>,
    rsrs: Vec<(String, Value, Value)>,
}

/// Reads every policy and rsr with the current kerf-api types (a list fails when one does
/// not deserialize), checks each with its validator, and answers them as JSON.
async fn read_and_validate(env: &Env) -> anyhow::Result<Stored> {
    let policies: Api<RightsizingPolicy> = Api::all(env.client.clone());
    let mut stored = Stored {
        policies: Vec::new(),
        rsrs: Vec::new(),
    };
    for p in policies.list(&ListParams::default()).await?.items {
        let name = p.metadata.name.clone().unwrap_or_default();
        let errors = validate_policy(&p.spec);
        assert!(errors.is_empty(), "policy {name}: {errors:?}");
        stored.policies.push((name, serde_json::to_value(&p.spec)?));
    }
    let rsrs: Api<RightsizingRecommendation> = Api::namespaced(env.client.clone(), &env.ns);
    for r in rsrs.list(&ListParams::default()).await?.items {
        let name = r.metadata.name.clone().unwrap_or_default();
        let errors = validate_recommendation_spec(&r.spec);
        assert!(errors.is_empty(), "rsr {name}: {errors:?}");
        let status = serde_json::to_value(&r.status)?;
        stored
            .rsrs
            .push((name, serde_json::to_value(&r.spec)?, status));
    }
    Ok(stored)
}

/// The workloads, the two policies (`auto` governs the namespace in auto-patch, in place;
/// `elsewhere` audits another namespace, with recommendation and guardrail settings of
/// its own) and the hub's recommendations.
async fn workloads_and_policies(env: &Env) -> anyhow::Result<()> {
    let mut recs = Vec::new();
    for (name, pods, cpu, memory) in WORKLOADS {
        env.deployment(name, pods, "200m", "256Mi").await?;
        env.wait_ready(name, usize::try_from(pods)?).await?;
        recs.push(env.recommendation(name, cpu, memory, "0.9")?);
    }
    env.policy("auto", policy_spec(&env.ns, "auto-patch", "in-place"))
        .await?;
    let mut elsewhere = policy_spec("e2e-upgrade-elsewhere", "audit", "rollout");
    elsewhere["priority"] = json!(5);
    elsewhere["recommendation"] = json!({"cpuPercentile": 90, "memoryPercentile": 99});
    elsewhere["guardrails"]["minMemory"] = json!("64Mi");
    env.policy("elsewhere", elsewhere).await?;
    env.recommend(recs);
    Ok(())
}

/// Runs the current agent on the old CRDs with fail point `after-intent=error` until every
/// workload's change is recorded, then kills it; answers the rsrs as they were then.
async fn changes_stopped_after_intent(env: &mut Env) -> anyhow::Result<Vec<Value>> {
    kerf_agent::failpoints::configure("after-intent=error");
    env.start_agent(&AgentOptions::default()).await?;
    let mut recorded = Vec::new();
    for (name, ..) in WORKLOADS {
        let rsr = env
            .wait_rsr(name, "an intent in status.change", WAIT, |r| {
                r["status"]["change"]["id"].is_string()
            })
            .await?;
        recorded.push(rsr);
    }
    env.kill_agent().await;
    kerf_agent::failpoints::configure("");
    Ok(recorded)
}

/// The status fields of a change the upgrade must keep: its id, recommendation, start,
/// strategy, containers (from and to) and the event ids it recorded.
fn change_record(rsr: &Value) -> Value {
    let c = &rsr["status"]["change"];
    json!({"id": c["id"], "recommendationID": c["recommendationID"], "startedAt": c["startedAt"],
           "strategy": c["strategy"], "containers": c["containers"], "eventIds": c["eventIds"]})
}

/// The cluster before the upgrade: the old CRDs, the workloads and policies, each change
/// stopped after its intent and nothing actuated; answers the rsrs as recorded then and
/// every stored object as read and validated then.
async fn before_the_upgrade(env: &mut Env) -> anyhow::Result<(Vec<Value>, Stored)> {
    assert!(
        !rsr_schema_has_source(&env.client).await?,
        "not the CRDs of {OLD_COMMIT}"
    );
    workloads_and_policies(env).await?;
    let intents = changes_stopped_after_intent(env).await?;
    for rsr in &intents {
        assert_eq!(
            rsr["status"]["change"]["state"], "Intent",
            "{}",
            rsr["status"]
        );
        // The old schema pruned the field it does not know, as an old cluster does.
        assert!(rsr["spec"].get("source").is_none(), "{}", rsr["spec"]);
    }
    for (name, ..) in WORKLOADS {
        for p in env.pods(name).await? {
            assert_pod_requests(&p, "200m", "256Mi");
        }
        assert!(env.hub_events(name, EventType::Applied).is_empty());
    }
    let before = read_and_validate(env).await?;
    assert_eq!(before.policies.len(), 2, "{before:#?}");
    assert_eq!(before.rsrs.len(), WORKLOADS.len(), "{before:#?}");
    Ok((intents, before))
}

/// Waits until the current agent finished the change recorded in `intent` for workload
/// `(name, pods, cpu, memory)`: the same change, its applied event at the hub with the
/// recorded id, the pods at the new values, and `spec.source` written again.
async fn change_finished(
    env: &Env,
    (name, pods, cpu, memory): (&str, i32, &str, &str),
    intent: &Value,
) -> anyhow::Result<()> {
    let rsr = env.wait_phase(name, "Applied").await?;
    let (was, now) = (change_record(intent), change_record(&rsr));
    assert_eq!(now["id"], was["id"], "{name}: a second change was made");
    assert_eq!(now, was, "{name}: the recorded change was not kept");
    let applied = env.wait_hub_event(name, EventType::Applied).await?;
    let recorded = was["eventIds"]["applied"].as_str().unwrap_or_default();
    assert_eq!(applied[0].id.to_string(), recorded);
    for p in env.wait_ready(name, usize::try_from(pods)?).await? {
        assert_pod_requests(&p, cpu, memory);
    }
    // The field the old schema pruned is written again.
    env.wait_rsr(name, "spec.source hub", WAIT, |r| {
        r["spec"]["source"] == "hub"
    })
    .await?;
    Ok(())
}

/// After the upgrade: one applied event per change, the policies' specs and the rsrs'
/// recommendations as before, every object still valid, and each policy's status written.
async fn nothing_lost(env: &Env, before: &Stored) -> anyhow::Result<()> {
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (name, ..) in WORKLOADS {
        let applied = env.hub_events(name, EventType::Applied);
        assert_eq!(applied.len(), 1, "{name}: {applied:#?}");
    }
    let after = read_and_validate(env).await?;
    assert_eq!(after.policies, before.policies, "a policy changed");
    for ((name, spec, _), (_, was, _)) in after.rsrs.iter().zip(&before.rsrs) {
        let kept = |s: &Value| json!([s["workloadRef"], s["recommendationID"], s["containers"]]);
        assert_eq!(
            kept(spec),
            kept(was),
            "{name}: the recommendation was not kept"
        );
    }
    let policies: Api<RightsizingPolicy> = Api::all(env.client.clone());
    eventually(
        "the policies' status written by the new agent",
        WAIT,
        || async {
            let list = policies.list(&ListParams::default()).await.ok()?;
            list.items.iter().all(|p| p.status.is_some()).then_some(())
        },
    )
    .await
}

// sim
// rule: EV-12, design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the failpoints feature: the changes must stop after their intent"
)]
async fn an_upgrade_from_the_previous_crds_keeps_every_object_and_finishes_the_change_once()
-> anyhow::Result<()> {
    e2e_support::init_crypto();
    let config = kerf_sim::sim::SimConfig {
        watch_delay: e2e_support::watch_delay_from_env()?,
        ..kerf_testkit::sim_config()
    };
    let sim = kerf_sim::sim::Sim::start(config).await?;
    install_old_crds(&sim.client()).await?;
    // The harness keeps CRDs that exist: the cluster serves those of the old commit.
    let mut env = Env::with_sim("e2e-upgrade", sim).await?;
    let (intents, before) = before_the_upgrade(&mut env).await?;

    apply_current_crds(&env.client).await?;
    assert!(rsr_schema_has_source(&env.client).await?);
    let after_crds = read_and_validate(&env).await?;
    assert_eq!(after_crds, before, "the CRD upgrade changed stored objects");

    env.start_agent(&AgentOptions::default()).await?;
    for (workload, intent) in WORKLOADS.into_iter().zip(&intents) {
        change_finished(&env, workload, intent).await?;
    }
    nothing_lost(&env, &before).await?;
    env.stop_agent().await;
    Ok(())
}
