//! The simulated cluster tests start, Kerf's CRDs applied to a cluster, polling with a
//! deadline, and requests and watches as a client makes them (feature `sim`).

use std::future::Future;
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kerf_api::{RightsizingPolicy, RightsizingRecommendation};
use kerf_sim::sim::{Sim, SimConfig};
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// Kerf's CRDs as the repository ships them (`config/crds/kerf.getkerf.dev.yaml`).
pub const CRDS: &str = include_str!("../../../config/crds/kerf.getkerf.dev.yaml");

/// How long set-up waits for the cluster (CRDs served and the like).
pub const WAIT: Duration = Duration::from_secs(15);

/// How often [`eventually`] checks its condition.
pub const POLL: Duration = Duration::from_millis(50);

/// The simulated cluster tests start by default: [`SimConfig::default`] with pods Ready
/// 50 ms after they are bound.
pub fn sim_config() -> SimConfig {
    SimConfig {
        kubelet_ready_delay: Duration::from_millis(50),
        ..SimConfig::default()
    }
}

/// A simulated cluster of [`sim_config`]: API server, controllers and kubelet.
pub async fn sim() -> anyhow::Result<Sim> {
    Sim::start(sim_config()).await
}

/// A simulated API server alone: no controllers and no kubelet, so objects stay as the
/// test writes them.
pub async fn api_sim() -> anyhow::Result<Sim> {
    Sim::start(SimConfig {
        run_controllers: false,
        ..SimConfig::default()
    })
    .await
}

/// Polls `check` every [`POLL`] until it gives a value, for `timeout` at most; the error
/// names `what` was awaited.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_every(POLL, what, timeout, check).await
}

/// [`eventually`], polling every `poll`.
pub async fn eventually_every<T, F, Fut>(
    poll: Duration,
    what: &str,
    timeout: Duration,
    mut check: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(poll).await;
    }
}

/// Waits up to `timeout` until at least `n` pods of namespace `ns` match the label
/// selector `labels`; answers them as JSON. A failed list is an error at once.
pub async fn pods(
    client: &Client,
    ns: &str,
    labels: &str,
    n: usize,
    timeout: Duration,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let what = format!("{n} pods of {labels} in {ns}");
    let items = eventually(&what, timeout, || async {
        match api.list(&ListParams::default().labels(labels)).await {
            Err(e) => Some(Err(e)),
            Ok(list) => (list.items.len() >= n).then_some(Ok(list.items)),
        }
    })
    .await??;
    items
        .into_iter()
        .map(|p| Ok(serde_json::to_value(p)?))
        .collect()
}

/// The objects of `api` labelled `app=<app>`, as JSON.
pub async fn app_objects<K>(api: &Api<K>, app: &str) -> anyhow::Result<Vec<serde_json::Value>>
where
    K: Clone + DeserializeOwned + std::fmt::Debug + serde::Serialize,
{
    let list = api
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await?;
    list.items
        .into_iter()
        .map(|o| Ok(serde_json::to_value(o)?))
        .collect()
}

/// Applies [`CRDS`] (an existing CRD is kept) and waits until RightsizingPolicies and
/// RightsizingRecommendations are served.
pub async fn apply_crds(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for doc in serde_yaml::Deserializer::from_str(CRDS) {
        let crd = CustomResourceDefinition::deserialize(doc)?;
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let policies = dynamic_api(client, &ApiResource::erase::<RightsizingPolicy>(&()));
    let rsrs = dynamic_api(
        client,
        &ApiResource::erase::<RightsizingRecommendation>(&()),
    );
    eventually("Kerf's CRDs to be served", WAIT, || async {
        let served = policies.list(&ListParams::default()).await.is_ok()
            && rsrs.list(&ListParams::default()).await.is_ok();
        served.then_some(())
    })
    .await
}

/// A request to `sim` as curl sends it (`User-Agent: curl/7.88.1`), as the admin,
/// accepting JSON.
pub fn curl(sim: &Sim, method: &str, path: &str) -> anyhow::Result<reqwest::RequestBuilder> {
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(sim.ca_pem().as_bytes())?)
        .user_agent("curl/7.88.1")
        .build()?;
    Ok(client
        .request(method.parse()?, format!("{}{path}", sim.url()))
        .header("accept", "application/json")
        .header("authorization", "Bearer test-admin-token"))
}

/// A watch of `api` from its current resourceVersion (listed first), ending after
/// `timeout_secs` seconds.
pub async fn watch_from_now<K>(
    api: &Api<K>,
    timeout_secs: u32,
) -> anyhow::Result<BoxStream<'static, kube::Result<WatchEvent<K>>>>
where
    K: Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let rv = api
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let wp = WatchParams::default().timeout(timeout_secs);
    Ok(api.watch(&wp, &rv).await?.boxed())
}

fn dynamic_api(client: &Client, ar: &ApiResource) -> Api<DynamicObject> {
    Api::all_with(client.clone(), ar)
}
