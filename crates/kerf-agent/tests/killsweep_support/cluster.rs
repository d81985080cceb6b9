//! The sweep's cluster: a kerf-sim with four nodes, Kerf's CRDs, the dev hub, and what the
//! checks read from them (pods, templates, rsrs).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kerf_api::event::Event;
use kerf_api::hub::ClusterConfig;
use kerf_sim::hub::{DevHub, DevHubConfig};
use kerf_sim::sim::{Sim, SimConfig};
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// The cluster name the agent uses at the dev hub.
pub const CLUSTER: &str = "killsweep";
/// The agent's namespace.
pub const AGENT_NAMESPACE: &str = "kerf-system";
/// The field manager of the workloads' owner.
pub const USER_MANAGER: &str = "kubectl-client-side-apply";
/// The node the fallback workload and its filler are pinned to.
pub const PINNED_NODE: &str = "sim-node-4";

/// CPU in millicores and memory in MiB: the values a change moves a container to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Values {
    /// CPU request, millicores.
    pub cpu: u64,
    /// Memory request, MiB.
    pub mem: u64,
}

impl Values {
    /// The requests as the API takes them.
    pub fn requests(self) -> Value {
        json!({"cpu": format!("{}m", self.cpu), "memory": format!("{}Mi", self.mem)})
    }

    /// The values of a `requests` object; `None` when a value is missing or unreadable.
    pub fn read(requests: &Value) -> Option<Values> {
        let cpu = kerf_sim::quantity::quantity(&requests["cpu"])?;
        let mem = kerf_sim::quantity::quantity(&requests["memory"])?;
        Some(Values {
            cpu: (cpu * 1000.0).round() as u64,
            mem: (mem / 1024.0 / 1024.0).round() as u64,
        })
    }
}

impl std::fmt::Display for Values {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}m/{}Mi", self.cpu, self.mem)
    }
}

/// The simulated cluster, a client of it and the dev hub.
pub struct Cluster {
    /// The cluster.
    pub sim: Sim,
    /// A client of the cluster.
    pub client: Client,
    /// The dev hub.
    pub hub: DevHub,
}

impl Cluster {
    /// Four nodes of 4 CPUs, pods Ready 50 ms after binding, the CRDs, the agent's
    /// namespace and a dev hub with no recommendations.
    pub async fn start() -> anyhow::Result<Cluster> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let sim = Sim::start(SimConfig {
            nodes: 4,
            kubelet_ready_delay: Duration::from_millis(50),
            ..SimConfig::default()
        })
        .await?;
        let client = kerf_sim::sim::client_for(sim.kubeconfig_path()).await?;
        kerf_testkit::apply_crds(&client).await?;
        let hub = kerf_sim::hub::start(DevHubConfig::default()).await?;
        hub.set_recommendations(CLUSTER, Vec::new());
        hub.set_config(CLUSTER, ClusterConfig::default());
        let cluster = Cluster { sim, client, hub };
        cluster.namespace(AGENT_NAMESPACE).await?;
        Ok(cluster)
    }

    /// Creates namespace `name`.
    pub async fn namespace(&self, name: &str) -> anyhow::Result<()> {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let ns = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        api.create(&PostParams::default(), &ns).await?;
        Ok(())
    }

    /// Creates `obj` (a Deployment or StatefulSet as JSON) as `kubectl apply` would.
    pub async fn create(&self, ns: &str, kind: &str, obj: &Value) -> anyhow::Result<()> {
        let obj: DynamicObject = serde_json::from_value(obj.clone())?;
        let pp = PostParams {
            field_manager: Some(USER_MANAGER.into()),
            ..PostParams::default()
        };
        self.workload_api(ns, kind).create(&pp, &obj).await?;
        Ok(())
    }

    /// Deletes the Deployment `name` of `ns`.
    pub async fn delete_deployment(&self, ns: &str, name: &str) -> anyhow::Result<()> {
        let api = self.workload_api(ns, "Deployment");
        api.delete(name, &Default::default()).await?;
        Ok(())
    }

    /// Deployments or StatefulSets of `ns` as dynamic objects.
    pub fn workload_api(&self, ns: &str, kind: &str) -> Api<DynamicObject> {
        let plural = format!("{}s", kind.to_lowercase());
        let ar = ApiResource {
            group: "apps".into(),
            version: "v1".into(),
            api_version: "apps/v1".into(),
            kind: kind.into(),
            plural,
        };
        Api::namespaced_with(self.client.clone(), ns, &ar)
    }

    /// The workload `kind/name` of `ns` as JSON, if it exists.
    pub async fn workload(&self, ns: &str, kind: &str, name: &str) -> anyhow::Result<Value> {
        let found = self.workload_api(ns, kind).get_opt(name).await?;
        Ok(found
            .map(serde_json::to_value)
            .transpose()?
            .unwrap_or_default())
    }

    /// The pods with label `app=<name>` in `ns`, terminating ones included.
    pub async fn pods(&self, ns: &str, name: &str) -> anyhow::Result<Vec<Value>> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let lp = ListParams::default().labels(&format!("app={name}"));
        let pods = api.list(&lp).await?.items;
        pods.into_iter()
            .map(|p| Ok(serde_json::to_value(p)?))
            .collect()
    }

    /// The rsr `name` of `ns` as JSON (`Null` while it does not exist).
    pub async fn rsr(&self, ns: &str, name: &str) -> anyhow::Result<Value> {
        let api = kerf_agent::rsr_sync::rsr_api(self.client.clone(), ns);
        let found = api.get_opt(name).await?;
        Ok(found
            .map(serde_json::to_value)
            .transpose()?
            .unwrap_or_default())
    }

    /// Creates or replaces RightsizingPolicy `name`.
    pub async fn policy(&self, name: &str, spec: &Value) -> anyhow::Result<()> {
        let body = json!({
            "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingPolicy",
            "metadata": {"name": name}, "spec": spec,
        });
        let ar = ApiResource::erase::<kerf_api::RightsizingPolicy>(&());
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let pp = PatchParams::apply(USER_MANAGER).force();
        api.patch(name, &pp, &Patch::Apply(&body)).await?;
        Ok(())
    }

    /// OOM-kills container `app` of pod `pod` in `ns`.
    pub fn oom_kill(&self, ns: &str, pod: &str) -> anyhow::Result<()> {
        let fault = kerf_sim::kubelet::Fault::OomKill {
            namespace: ns.to_owned(),
            pod: pod.to_owned(),
            container: "app".to_owned(),
        };
        kerf_sim::kubelet::inject(self.sim.context(), fault)?;
        Ok(())
    }

    /// The events the dev hub stored for the sweep's cluster.
    pub fn hub_events(&self) -> Vec<Event> {
        self.hub.events(CLUSTER)
    }
}

/// Whether a pod is being deleted.
pub fn terminating(pod: &Value) -> bool {
    !pod["metadata"]["deletionTimestamp"].is_null()
}

/// Whether a pod is Ready.
pub fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// The name of a pod.
pub fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

/// The requests of container `app` in a pod spec or a template spec.
pub fn spec_values(spec: &Value) -> Option<Values> {
    Values::read(&spec["containers"][0]["resources"]["requests"])
}

/// What is wrong with the pods of a workload that should run `replicas` Ready pods at
/// `want`, each resize finished: `None` when nothing is.
pub fn pods_wrong(pods: &[Value], replicas: usize, want: Values) -> Option<String> {
    let live: Vec<&Value> = pods.iter().filter(|p| !terminating(p)).collect();
    if live.len() != replicas || pods.len() != replicas {
        return Some(format!(
            "{} pods ({} terminating), want {replicas}",
            pods.len(),
            pods.len() - live.len()
        ));
    }
    for p in live {
        let has = spec_values(&p["spec"]);
        if has != Some(want) {
            let has = has.map_or("unreadable".to_owned(), |v| v.to_string());
            return Some(format!("pod {} requests {has}, want {want}", name(p)));
        }
        if let Some(why) = resize_unfinished(p) {
            return Some(format!("pod {} {why}", name(p)));
        }
        if !ready(p) {
            return Some(format!("pod {} not Ready", name(p)));
        }
    }
    None
}

/// Why a pod's resize is not finished: a pending or in-progress resize condition, or
/// container status resources that differ from the spec.
fn resize_unfinished(pod: &Value) -> Option<String> {
    let conditions = pod["status"]["conditions"].as_array();
    if let Some(c) = conditions
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PodResizePending" || c["type"] == "PodResizeInProgress")
    {
        return Some(format!("has condition {}", c["type"]));
    }
    let status = &pod["status"]["containerStatuses"][0]["resources"]["requests"];
    if status.is_null() {
        return None;
    }
    let (spec, actual) = (spec_values(&pod["spec"]), Values::read(status));
    (spec != actual).then(|| {
        let actual = actual.map_or("unreadable".to_owned(), |v| v.to_string());
        format!("runs at {actual}, between values")
    })
}
