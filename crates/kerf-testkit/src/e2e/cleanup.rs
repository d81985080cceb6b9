//! The namespaces a scenario needs, and what it leaves on a real cluster.

use std::io::Write;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::{AGENT_LEASE, AGENT_NAMESPACE, Env, policy_api};

/// Creates namespace `name` (labelled `kerf-e2e=true` when `scenario`); an existing one is
/// kept.
pub async fn ensure_namespace(client: &Client, name: &str, scenario: bool) -> anyhow::Result<()> {
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut body = json!({"metadata": {"name": name}});
    if scenario {
        body["metadata"]["labels"] = json!({"kerf-e2e": "true"});
    }
    match nss
        .create(&PostParams::default(), &serde_json::from_value(body)?)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 && !scenario => Ok(()),
        Err(e) => Err(anyhow::anyhow!("creating namespace {name}: {e}")),
    }
}

/// What a scenario leaves on a real cluster: its namespace (with its workloads and rsrs),
/// the policies it made or that select its namespace, and the agent's kept hub state and
/// Lease in [`AGENT_NAMESPACE`].
pub async fn clean_up(client: &Client, ns: &str, policies: &[String]) -> anyhow::Result<()> {
    let dp = DeleteParams::background();
    let gone = |r: Result<_, kube::Error>| match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    };
    let api = policy_api(client);
    let mut names = policies.to_vec();
    for p in api.list(&ListParams::default()).await?.items {
        let selects = p.data["spec"]["selector"]["namespaces"]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n == ns));
        if let Some(name) = p.metadata.name.filter(|_| selects) {
            names.push(name);
        }
    }
    names.sort();
    names.dedup();
    for name in &names {
        gone(api.delete(name, &dp).await.map(|_| ()))?;
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), AGENT_NAMESPACE);
    gone(
        cms.delete(kerf_agent::hub::persist::CONFIG_MAP_NAME, &dp)
            .await
            .map(|_| ()),
    )?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), AGENT_NAMESPACE);
    gone(leases.delete(AGENT_LEASE, &dp).await.map(|_| ()))?;
    let nss: Api<Namespace> = Api::all(client.clone());
    gone(nss.delete(ns, &dp).await.map(|_| ()))?;
    Ok(())
}

impl Drop for Env {
    /// On a real cluster: stops the agent and deletes what the scenario made (see
    /// [`clean_up`]), from a thread of its own with a client of its own, since the
    /// scenario's runtime cannot be blocked on. A failed cleanup is reported on stderr.
    fn drop(&mut self) {
        drop(self.agent.take());
        if self.sim.is_some() {
            return;
        }
        let ns = self.ns.clone();
        let policies = self.policies.lock().map(|p| p.clone()).unwrap_or_default();
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let client = Client::try_default().await?;
                clean_up(&client, &ns, &policies).await
            })
        });
        let outcome = match cleanup.join() {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "the cleanup thread panicked".to_owned(),
        };
        let _ = std::io::stderr()
            .write_all(format!("e2e cleanup of {} failed: {outcome}\n", self.ns).as_bytes());
    }
}
