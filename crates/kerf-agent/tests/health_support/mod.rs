//! Helpers of the health watch tests: hand-made slim pods, changes, and a kerf-sim cluster
//! with the Kerf CRDs, a Deployment and an rsr.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kerf_agent::cache::pods::PodWire;
use kerf_agent::cache::{Interner, PodInfo};
use kerf_agent::executor::WorkloadId;
use kerf_agent::health::StatusWriter;
use kerf_api::event::EventWorkload;
use kerf_api::rsr::{
    ChangeRecord, ChangeState, ContainerChange, EventIds, RightsizingRecommendationStatus,
    WatchStatus,
};
use kerf_api::{Resource, ResourceRequirements, ResourceValues, Strategy, WorkloadKind};
use kerf_decide::effective::Ratio;
use kerf_decide::health::Thresholds;
use kube::api::PostParams;
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::{Value, json};

/// Namespace of every test workload.
pub const NS: &str = "default";

/// A kubelet fault that throttles the `app` container of `pod` at `ratio`.
pub fn throttle(pod: &str, ratio: f64) -> kerf_sim::kubelet::Fault {
    kerf_sim::kubelet::Fault::Throttle {
        namespace: NS.into(),
        pod: pod.to_owned(),
        container: "app".into(),
        ratio,
    }
}

/// Requests and limits from optional strings.
pub fn req(cpu: Option<&str>, memory: Option<&str>) -> ResourceValues {
    ResourceValues {
        cpu: cpu.map(Into::into),
        memory: memory.map(Into::into),
    }
}

/// A container change of `app`.
pub fn app_change(from: ResourceValues, to: ResourceValues) -> ContainerChange {
    ContainerChange {
        name: "app".into(),
        from: ResourceRequirements {
            requests: from,
            limits: ResourceValues::default(),
        },
        to: ResourceRequirements {
            requests: to,
            limits: ResourceValues::default(),
        },
    }
}

/// An applied in-place change of `app`'s memory request, 64Mi to 48Mi.
pub fn memory_change(at: DateTime<Utc>) -> ChangeRecord {
    applied_change(
        Strategy::InPlace,
        vec![Resource::Memory],
        vec![app_change(req(None, Some("64Mi")), req(None, Some("48Mi")))],
        at,
    )
}

/// An applied in-place change of `app`'s CPU request, 100m to 80m.
pub fn cpu_change(at: DateTime<Utc>) -> ChangeRecord {
    applied_change(
        Strategy::InPlace,
        vec![Resource::Cpu],
        vec![app_change(req(Some("100m"), None), req(Some("80m"), None))],
        at,
    )
}

/// An applied in-place change of `app`'s requests, 100m/64Mi to 80m/48Mi.
pub fn cpu_memory_change(at: DateTime<Utc>) -> ChangeRecord {
    applied_change(
        Strategy::InPlace,
        vec![Resource::Cpu, Resource::Memory],
        vec![app_change(
            req(Some("100m"), Some("64Mi")),
            req(Some("80m"), Some("48Mi")),
        )],
        at,
    )
}

/// The new resources of the first container of `change`, as a resize sends them to `app`.
pub fn app_to(change: &ChangeRecord) -> Vec<(String, ResourceRequirements)> {
    vec![("app".to_owned(), change.containers[0].to.clone())]
}

/// An applied change record with fresh event ids.
pub fn applied_change(
    strategy: Strategy,
    resources: Vec<Resource>,
    containers: Vec<ContainerChange>,
    at: DateTime<Utc>,
) -> ChangeRecord {
    let id = || uuid::Uuid::new_v4().to_string();
    ChangeRecord {
        id: id(),
        state: ChangeState::Applied,
        recommendation_id: "rec-1".into(),
        approval_id: None,
        strategy,
        resources,
        started_at: at,
        first_resize_at: None,
        applied_at: Some(at),
        containers,
        hpa: None,
        event_ids: EventIds {
            applied: Some(id()),
            fallback: Some(id()),
            rolled_back: Some(id()),
            released: Some(id()),
            failed: Some(id()),
        },
        pending_events: Vec::new(),
        progress: None,
        canary: None,
        revert: false,
    }
}

/// A status with `change` applied and its watch started at `start`.
pub fn watching(
    change: ChangeRecord,
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
) -> RightsizingRecommendationStatus {
    RightsizingRecommendationStatus {
        phase: Some(kerf_api::rsr::Phase::Applied),
        change: Some(Box::new(change)),
        watch: Some(WatchStatus {
            start,
            end,
            baselines: Default::default(),
            aggregated: None,
        }),
        ..Default::default()
    }
}

/// The default thresholds with `delay` as the throttling delay.
pub fn thresholds(delay: Duration) -> Thresholds {
    Thresholds {
        oom_kills: 1,
        restarts: 3,
        throttling_ratio: Ratio(250_000),
        throttling_delay: delay,
    }
}

/// A slim pod from its JSON form.
pub fn pod_info(v: Value) -> anyhow::Result<Arc<PodInfo>> {
    let wire = PodWire::deserialize(v)?;
    Ok(Arc::new(PodInfo::from_wire(wire, &mut Interner::default())))
}

/// A running pod of `app` with the given counters, created at `created`.
pub fn hand_pod(
    name: &str,
    restarts: u32,
    last_reason: Option<&str>,
    created: DateTime<Utc>,
) -> anyhow::Result<Arc<PodInfo>> {
    hand_pod_at(name, restarts, last_reason.map(|r| (r, None)), created)
}

/// [`hand_pod`] whose last termination (reason, `finishedAt`) is `last`.
pub fn hand_pod_at(
    name: &str,
    restarts: u32,
    last: Option<(&str, Option<DateTime<Utc>>)>,
    created: DateTime<Utc>,
) -> anyhow::Result<Arc<PodInfo>> {
    let last = last.map_or(json!({}), |(r, at)| {
        let mut t = json!({"reason": r, "exitCode": 137});
        if let Some(at) = at {
            t["finishedAt"] = json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        }
        json!({ "terminated": t })
    });
    pod_info(json!({
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "creationTimestamp": created.to_rfc3339()},
        "spec": {"nodeName": "sim-node-1", "containers": [{"name": "app",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
        "status": {"phase": "Running", "containerStatuses": [{"name": "app", "ready": true,
            "restartCount": restarts, "lastState": last, "state": {"running": {}}}]}
    }))
}

/// A client that never connects (for evaluations that read no metrics).
pub fn offline_client() -> anyhow::Result<Client> {
    kerf_sim::api::tls::ensure_crypto_provider();
    let config = kube::Config::new("http://127.0.0.1:9".parse()?);
    Ok(Client::try_from(config)?)
}

/// Creates Deployment `name` with `replicas` pods of container `app` with `resources`.
pub async fn deployment(
    client: &Client,
    name: &str,
    replicas: i32,
    resources: Value,
) -> anyhow::Result<WorkloadId> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": resources}]}}}
    }))?;
    let made = api.create(&PostParams::default(), &d).await?;
    Ok(WorkloadId {
        namespace: NS.into(),
        name: name.into(),
        uid: made.metadata.uid.unwrap_or_default(),
        kind: WorkloadKind::Deployment,
    })
}

/// The pods of Deployment `name` (label `app=name`) as slim pods.
pub async fn pods(client: &Client, name: &str) -> anyhow::Result<Vec<Arc<PodInfo>>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pods = kerf_testkit::app_objects(&api, name).await?;
    pods.into_iter().map(pod_info).collect()
}

/// Waits until `n` pods of `name` run with every container ready, while `tick` moves time.
pub async fn running_pods(
    client: &Client,
    name: &str,
    n: usize,
    tick: impl Fn(),
) -> anyhow::Result<Vec<Arc<PodInfo>>> {
    for _ in 0..400 {
        tick();
        let ps = pods(client, name).await?;
        let running = ps
            .iter()
            .filter(|p| p.phase == kerf_agent::cache::PodPhase::Running && p.ready)
            .count();
        if running == n && ps.len() == n {
            return Ok(ps);
        }
        tokio::time::sleep(StdDuration::from_millis(25)).await;
    }
    anyhow::bail!("{name}: {n} pods never ran")
}

/// A status writer over one rsr of a test, as the pass's writer sends it.
#[derive(Clone, Debug)]
pub struct RsrWriter {
    /// The rsr API of the namespace.
    pub api: Api<kube::api::DynamicObject>,
    /// The rsr's name.
    pub name: String,
    /// The resourceVersion the next write requires.
    pub resource_version: String,
    /// The spec as read (sent along with the status).
    pub spec: Option<Value>,
    /// The status as the API server holds it.
    pub last: RightsizingRecommendationStatus,
}

impl StatusWriter for RsrWriter {
    async fn write(
        &mut self,
        status: &RightsizingRecommendationStatus,
    ) -> Result<(), kerf_agent::intent::IntentError> {
        if *status == self.last {
            return Ok(());
        }
        let rv = kerf_agent::intent::write_status(
            &self.api,
            &self.name,
            &self.resource_version,
            self.spec.as_ref(),
            status,
        )
        .await?;
        self.resource_version = rv;
        self.last = status.clone();
        Ok(())
    }
}

/// Creates the rsr of a workload and returns a writer for its status.
pub async fn rsr(client: &Client, w: &WorkloadId) -> anyhow::Result<RsrWriter> {
    let api = kerf_agent::rsr_sync::rsr_api(client.clone(), NS);
    let spec = json!({"workloadRef": {"kind": "Deployment", "name": w.name, "uid": w.uid},
        "recommendationID": "rec-1", "containers": [{"name": "app", "requests": {"memory": "48Mi"}}]});
    let obj: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingRecommendation",
        "metadata": {"name": w.name, "namespace": NS}, "spec": spec}))?;
    let made = api.create(&PostParams::default(), &obj).await?;
    Ok(RsrWriter {
        api,
        name: w.name.clone(),
        resource_version: made.metadata.resource_version.unwrap_or_default(),
        spec: Some(spec),
        last: RightsizingRecommendationStatus::default(),
    })
}

/// The rsr's status as the API server holds it.
pub async fn rsr_status(writer: &RsrWriter) -> anyhow::Result<Value> {
    let obj = writer.api.get(&writer.name).await?;
    Ok(obj.data["status"].clone())
}

/// The event workload of a Deployment.
pub fn event_workload(w: &WorkloadId) -> EventWorkload {
    EventWorkload {
        namespace: w.namespace.clone(),
        kind: "Deployment".into(),
        name: w.name.clone(),
    }
}

/// Spec requests of container `app` of every pod.
pub fn pod_requests(pods: &[Arc<PodInfo>]) -> Vec<ResourceValues> {
    pods.iter()
        .filter_map(|p| p.containers.first().map(|c| c.requests.clone()))
        .collect()
}
