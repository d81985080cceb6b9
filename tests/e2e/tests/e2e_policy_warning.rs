//! e2e: an invalid policy gets one Warning Kubernetes Event with the words of its
//! `Valid=False` condition, once per generation and message, not once per status write.

mod e2e_support;

use k8s_openapi::api::core::v1::Event as K8sEvent;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use e2e_support::{AgentOptions, Env, WAIT, eventually, policy_api, policy_spec};

/// The Warning Events on policy `name` (policies are cluster-scoped: in `default`).
async fn policy_warnings(env: &Env, name: &str) -> anyhow::Result<Vec<K8sEvent>> {
    let api: Api<K8sEvent> = Api::namespaced(env.client.clone(), "default");
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("RightsizingPolicy")
                && e.involved_object.name.as_deref() == Some(name)
        })
        .collect())
}

/// The policy's Valid condition once it is False for `generation`.
async fn invalid_condition(env: &Env, name: &str, generation: i64) -> anyhow::Result<Value> {
    eventually("Valid=False on the policy", WAIT, || async {
        let p = policy_api(&env.client).get(name).await.ok()?;
        let status = p.data.get("status")?.clone();
        let c = status["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Valid")?
            .clone();
        (c["status"] == "False" && c["observedGeneration"] == generation).then_some(c)
    })
    .await
}

/// Waits until exactly `n` Warnings are on the policy; returns them.
async fn warnings(env: &Env, name: &str, n: usize) -> anyhow::Result<Vec<K8sEvent>> {
    eventually(&format!("{n} Warning Events on {name}"), WAIT, || async {
        let found = policy_warnings(env, name).await.ok()?;
        (found.len() == n).then_some(found)
    })
    .await
}

// portable
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_policy_gets_one_warning_per_generation_and_message() -> anyhow::Result<()> {
    let mut env = Env::start("e2e-policy-warning").await?;
    let name = format!("{}-bad", env.ns);
    env.web(1).await?;
    let mut spec = policy_spec(&env.ns, "audit", "in-place");
    spec["apply"]["freezeWindows"] = json!([{"schedule": "0 25 * * *", "duration": "2h"}]);
    env.policy(&name, spec.clone()).await?;
    env.start_agent(&AgentOptions::default()).await?;

    let valid = invalid_condition(&env, &name, 1).await?;
    let first = warnings(&env, &name, 1).await?;
    let event = &first[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reason.as_deref(), Some("InvalidSpec"));
    assert_eq!(event.message.as_deref(), valid["message"].as_str());
    assert!(
        event
            .message
            .as_deref()
            .is_some_and(|m| m.contains("freezeWindows[0].schedule")),
        "{event:?}"
    );

    // Another status write (a second workload now matches: an invalid field counts as its
    // safe value, so the policy still governs web and api) is no news.
    env.deployment("api", 1, "100m", "128Mi").await?;
    eventually("the count written", WAIT, || async {
        let p = policy_api(&env.client).get(&name).await.ok()?;
        (p.data["status"]["matchedWorkloads"] == 2 && p.data["status"]["conditions"].is_array())
            .then_some(())
    })
    .await?;
    // Checks that nothing more happens in the next passes (a negative check: there is no
    // condition to wait for).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(policy_warnings(&env, &name).await?.len(), 1, "one per news");

    // A new generation with another mistake is news.
    spec["apply"]["freezeWindows"] =
        json!([{"schedule": "0 2 * * *", "duration": "2h", "timeZone": "Europe/Berln"}]);
    env.policy(&name, spec).await?;
    let valid = invalid_condition(&env, &name, 2).await?;
    let both = warnings(&env, &name, 2).await?;
    assert!(
        both.iter()
            .any(|e| e.message.as_deref() == valid["message"].as_str()
                && valid["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("Europe/Berln"))),
        "{both:?}"
    );
    env.stop_agent().await;
    Ok(())
}
