//! The kubelet's pure status logic: the status of a started pod, the resize decision
//! (in sync, Infeasible, Deferred, actuate) and the status of each resize phase, shaped as
//! a Kubernetes 1.33+ kubelet reports them.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::resources::{
    Amount, changed_resources, container_status, pod_spec_requests, qos_class, reported_resources,
    running_containers,
};
use super::scheduler::NodeView;
use crate::controllers::common::{int_at, rfc3339, set_condition, uid};

/// What the kubelet does about a running pod's resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResizeDecision {
    /// Spec and status agree.
    InSync,
    /// The resize can never be actuated on this node.
    Infeasible(String),
    /// The node has no room now; re-checked when room frees up.
    Deferred(String),
    /// Actuate it.
    Actuate,
}

fn hex_id(seed: &str) -> String {
    hex::encode(Sha256::digest(seed.as_bytes()))
}

/// The requests the kubelet allocates for a container (requests, defaulted from limits).
fn allocated_of(resources: &Value) -> Value {
    reported_resources(resources)
        .get("requests")
        .cloned()
        .unwrap_or_else(|| json!({}))
}

fn container_entry(pod: &Value, c: &Value, started_at: &str) -> Value {
    let name = c.get("name").and_then(Value::as_str).unwrap_or("");
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    let res = c.get("resources").unwrap_or(&Value::Null);
    let repo = image.split(':').next().unwrap_or(image);
    json!({
        "name": name,
        "state": {"running": {"startedAt": started_at}},
        "lastState": {},
        "ready": true,
        "restartCount": 0,
        "image": image,
        "imageID": format!("{repo}@sha256:{}", hex_id(image)),
        "containerID": format!("containerd://{}", hex_id(&format!("{}/{name}/0", uid(pod)))),
        "started": true,
        "allocatedResources": allocated_of(res),
        "resources": reported_resources(res),
    })
}

/// Sets a pod condition (with `lastProbeTime: null` and, except PodScheduled, the observed
/// generation).
pub fn set_pod_condition(
    status: &mut Value,
    kind: &str,
    ok: bool,
    extra: Value,
    generation: i64,
    now: &str,
) {
    let mut conditions = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut cond =
        json!({"type": kind, "status": if ok { "True" } else { "False" }, "lastProbeTime": null});
    if kind != "PodScheduled" {
        cond["observedGeneration"] = json!(generation);
    }
    if let (Some(c), Some(e)) = (cond.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    set_condition(&mut conditions, cond, now);
    status["conditions"] = Value::Array(conditions);
}

/// Removes a pod condition.
pub fn remove_pod_condition(status: &mut Value, kind: &str) {
    if let Some(c) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        c.retain(|c| c.get("type").and_then(Value::as_str) != Some(kind));
    }
}

/// The status of a pod the kubelet has just started: Running, Ready, one running status
/// per long-running container (plain init containers are shown as completed).
pub fn running_status(pod: &Value, host_ip: &str, pod_ip: &str, now: DateTime<Utc>) -> Value {
    let now_s = rfc3339(now);
    let generation = int_at(pod, "/metadata/generation", 1);
    let mut status = pod.get("status").cloned().unwrap_or_else(|| json!({}));
    status["phase"] = json!("Running");
    status["observedGeneration"] = json!(generation);
    status["hostIP"] = json!(host_ip);
    status["hostIPs"] = json!([{"ip": host_ip}]);
    status["podIP"] = json!(pod_ip);
    status["podIPs"] = json!([{"ip": pod_ip}]);
    status["startTime"] = json!(now_s);
    status["qosClass"] = json!(qos_class(pod));
    for kind in [
        "PodScheduled",
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
    ] {
        set_pod_condition(&mut status, kind, true, json!({}), generation, &now_s);
    }
    let mut regular = Vec::new();
    let mut init = Vec::new();
    for (key, c) in running_containers(pod) {
        let entry = container_entry(pod, c, &now_s);
        if key == "containerStatuses" {
            regular.push(entry)
        } else {
            init.push(entry)
        }
    }
    for c in pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if c.get("restartPolicy").and_then(Value::as_str) != Some("Always") {
            let mut e = container_entry(pod, c, &now_s);
            e["state"] = json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now_s, "finishedAt": now_s}});
            e["ready"] = json!(true);
            e["started"] = json!(false);
            init.push(e);
        }
    }
    status["containerStatuses"] = Value::Array(regular);
    if !init.is_empty() {
        status["initContainerStatuses"] = Value::Array(init);
    }
    status
}

/// The resources whose spec differs from what the kubelet reports, per container name.
fn pending_changes(pod: &Value) -> Vec<(String, Vec<&'static str>)> {
    running_containers(pod)
        .into_iter()
        .filter_map(|(_, c)| {
            let name = c.get("name").and_then(Value::as_str)?;
            let actual = container_status(pod, name)?.get("resources")?;
            let desired = reported_resources(c.get("resources").unwrap_or(&Value::Null));
            let changed = changed_resources(&desired, actual);
            (!changed.is_empty()).then(|| (name.to_string(), changed))
        })
        .collect()
}

/// Decides a running pod's resize. `node` describes the pod's node with this pod's own
/// allocation left out of `used`.
pub fn resize_decision(pod: &Value, node: &NodeView, swap: bool) -> ResizeDecision {
    let changes = pending_changes(pod);
    if changes.is_empty() {
        return ResizeDecision::InSync;
    }
    if swap && changes.iter().any(|(_, r)| r.contains(&"memory")) {
        return ResizeDecision::Infeasible(
            "In-place resize of containers with swap is not supported.".into(),
        );
    }
    let req = pod_spec_requests(pod);
    let fields = |a: Amount| [("cpu", a.cpu_milli), ("memory", a.memory)];
    let alloc = fields(node.allocatable);
    for ((name, want), (_, cap)) in fields(req).into_iter().zip(alloc) {
        if want > cap {
            return ResizeDecision::Infeasible(format!(
                "Node didn't have enough capacity: {name}, requested: {want}, capacity: {cap}"
            ));
        }
    }
    for (((name, want), (_, used)), (_, cap)) in
        fields(req).into_iter().zip(fields(node.used)).zip(alloc)
    {
        if want + used > cap {
            return ResizeDecision::Deferred(format!(
                "Node didn't have enough resource: {name}, requested: {want}, used: {used}, capacity: {cap}"
            ));
        }
    }
    ResizeDecision::Actuate
}

/// Whether a resize the kubelet first deferred at `since` is still deferred at `now`, with
/// `SimConfig::resize_defer` as `defer`.
pub fn still_deferred(
    since: DateTime<Utc>,
    defer: std::time::Duration,
    now: DateTime<Utc>,
) -> bool {
    chrono::Duration::from_std(defer).is_ok_and(|d| now < since + d)
}

/// The message of a resize deferred for want of room on `node` (the pod's own allocation
/// left out of `used`), worded as a kubelet words it; the simulated deferral names CPU.
pub fn deferred_message(pod: &Value, node: &NodeView) -> String {
    let want = pod_spec_requests(pod).cpu_milli;
    let used = node.used.cpu_milli;
    let cap = node.allocatable.cpu_milli;
    format!(
        "Node didn't have enough resource: cpu, requested: {want}, used: {used}, capacity: {cap}"
    )
}

/// The status of a pod whose resize waits: `PodResizePending` with the reason and message.
pub fn pending_status(pod: &Value, reason: &str, message: &str, now: DateTime<Utc>) -> Value {
    let (mut status, generation) = observed_status(pod);
    remove_pod_condition(&mut status, "PodResizeInProgress");
    let extra = json!({"reason": reason, "message": message});
    set_pod_condition(
        &mut status,
        "PodResizePending",
        true,
        extra,
        generation,
        &rfc3339(now),
    );
    status
}

fn each_status(status: &mut Value, mut f: impl FnMut(&mut Value)) {
    for key in ["containerStatuses", "initContainerStatuses"] {
        if let Some(list) = status.get_mut(key).and_then(Value::as_array_mut) {
            list.iter_mut().for_each(&mut f);
        }
    }
}

fn spec_of<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    running_containers(pod)
        .into_iter()
        .map(|(_, c)| c)
        .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
}

/// The pod's status with `observedGeneration` set to the pod's generation, and that
/// generation.
fn observed_status(pod: &Value) -> (Value, i64) {
    let generation = int_at(pod, "/metadata/generation", 1);
    let mut status = pod.get("status").cloned().unwrap_or_else(|| json!({}));
    status["observedGeneration"] = json!(generation);
    (status, generation)
}

/// The `name` of a container status.
fn status_name(s: &Value) -> String {
    s.get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The status while a resize is actuated: the new requests allocated, `PodResizeInProgress`.
pub fn in_progress_status(pod: &Value, now: DateTime<Utc>) -> Value {
    let (mut status, generation) = observed_status(pod);
    each_status(&mut status, |s| {
        let name = status_name(s);
        if let Some(c) = spec_of(pod, &name) {
            s["allocatedResources"] = allocated_of(c.get("resources").unwrap_or(&Value::Null));
        }
    });
    remove_pod_condition(&mut status, "PodResizePending");
    set_pod_condition(
        &mut status,
        "PodResizeInProgress",
        true,
        json!({}),
        generation,
        &rfc3339(now),
    );
    status
}

/// Restarts a container status entry: the running state becomes `lastState.terminated`
/// with `exit_code` and `reason`, and the restart count goes up.
pub fn restart_entry(
    entry: &mut Value,
    pod_uid: &str,
    exit_code: i64,
    reason: &str,
    now: DateTime<Utc>,
) {
    let now_s = rfc3339(now);
    let started = entry
        .pointer("/state/running/startedAt")
        .cloned()
        .unwrap_or_else(|| json!(now_s));
    let count = entry
        .get("restartCount")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        + 1;
    let name = entry
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    entry["lastState"] = json!({"terminated": {
        "exitCode": exit_code,
        "reason": reason,
        "startedAt": started,
        "finishedAt": now_s,
        "containerID": entry.get("containerID").cloned().unwrap_or(Value::Null),
    }});
    entry["restartCount"] = json!(count);
    entry["state"] = json!({"running": {"startedAt": now_s}});
    entry["containerID"] = json!(format!(
        "containerd://{}",
        hex_id(&format!("{pod_uid}/{name}/{count}"))
    ));
}

/// Whether the container's resizePolicy asks for a restart when `resource` changes.
fn needs_restart(c: &Value, resource: &str) -> bool {
    c.get("resizePolicy")
        .and_then(Value::as_array)
        .is_some_and(|p| {
            p.iter().any(|p| {
                p.get("resourceName").and_then(Value::as_str) == Some(resource)
                    && p.get("restartPolicy").and_then(Value::as_str) == Some("RestartContainer")
            })
        })
}

/// The status once a resize is actuated: reported resources equal the spec, containers whose
/// resizePolicy says RestartContainer for a changed resource restarted, no resize condition.
pub fn finished_status(pod: &Value, now: DateTime<Utc>) -> Value {
    let changes = pending_changes(pod);
    let (mut status, generation) = observed_status(pod);
    each_status(&mut status, |s| {
        let name = status_name(s);
        let Some(c) = spec_of(pod, &name) else { return };
        let res = c.get("resources").unwrap_or(&Value::Null);
        s["allocatedResources"] = allocated_of(res);
        s["resources"] = reported_resources(res);
        let restart = changes
            .iter()
            .find(|(n, _)| *n == name)
            .is_some_and(|(_, r)| r.iter().any(|r| needs_restart(c, r)));
        if restart {
            restart_entry(s, uid(pod), 0, "Completed", now);
        }
    });
    remove_pod_condition(&mut status, "PodResizePending");
    remove_pod_condition(&mut status, "PodResizeInProgress");
    let now_s = rfc3339(now);
    for kind in [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
    ] {
        set_pod_condition(&mut status, kind, true, json!({}), generation, &now_s);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(cpu: i64, used: i64) -> NodeView {
        NodeView {
            name: "n".into(),
            labels: json!({}),
            allocatable: Amount {
                cpu_milli: cpu,
                memory: 8 << 30,
            },
            max_pods: 110,
            used: Amount {
                cpu_milli: used,
                memory: 0,
            },
            pods: 0,
            schedulable: true,
        }
    }

    fn running_pod(spec_cpu: &str, status_cpu: &str) -> Value {
        let pod = json!({"metadata": {"uid": "u", "generation": 2},
            "spec": {"containers": [{"name": "app", "image": "img:1",
                "resources": {"requests": {"cpu": spec_cpu, "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]}]}});
        let mut started = pod.clone();
        started["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!(status_cpu);
        let status = running_status(&started, "127.0.0.1", "10.244.0.2", Utc::now());
        let mut pod = pod;
        pod["status"] = status;
        pod
    }

    #[test]
    fn resize_decisions_follow_node_room() {
        let pod = running_pod("1500m", "100m");
        assert_eq!(
            resize_decision(&running_pod("100m", "100m"), &node(4000, 0), false),
            ResizeDecision::InSync
        );
        assert_eq!(
            resize_decision(&pod, &node(4000, 1000), false),
            ResizeDecision::Actuate
        );
        assert!(matches!(
            resize_decision(&pod, &node(4000, 3000), false),
            ResizeDecision::Deferred(_)
        ));
        assert_eq!(
            resize_decision(&pod, &node(1000, 0), false),
            ResizeDecision::Infeasible(
                "Node didn't have enough capacity: cpu, requested: 1500, capacity: 1000".into()
            )
        );
        // A CPU-only resize is fine on a swap node; memory is not.
        assert_eq!(
            resize_decision(&pod, &node(4000, 0), true),
            ResizeDecision::Actuate
        );
        let mut mem = running_pod("100m", "100m");
        mem["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("192Mi");
        assert!(matches!(
            resize_decision(&mem, &node(4000, 0), true),
            ResizeDecision::Infeasible(_)
        ));
    }

    #[test]
    fn a_resize_is_deferred_for_the_configured_time() {
        let since = Utc::now();
        let defer = std::time::Duration::from_secs(3);
        assert!(still_deferred(since, defer, since));
        assert!(still_deferred(
            since,
            defer,
            since + chrono::Duration::milliseconds(2999)
        ));
        assert!(!still_deferred(
            since,
            defer,
            since + chrono::Duration::seconds(3)
        ));
        assert!(!still_deferred(since, std::time::Duration::ZERO, since));
        let pod = running_pod("1500m", "100m");
        assert_eq!(
            deferred_message(&pod, &node(4000, 1000)),
            "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 4000"
        );
    }

    #[test]
    fn finished_resize_reports_spec_and_restarts_when_policy_says_so() {
        let pod = running_pod("150m", "100m");
        let status = finished_status(&pod, Utc::now());
        let c = &status["containerStatuses"][0];
        assert_eq!(c["resources"]["requests"]["cpu"], "150m");
        assert_eq!(c["allocatedResources"]["cpu"], "150m");
        assert_eq!(c["restartCount"], 0, "cpu has no RestartContainer policy");
        assert_eq!(status["observedGeneration"], 2);

        let mut mem = running_pod("100m", "100m");
        mem["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("192Mi");
        let status = finished_status(&mem, Utc::now());
        let c = &status["containerStatuses"][0];
        assert_eq!(c["restartCount"], 1);
        assert_eq!(c["lastState"]["terminated"]["reason"], "Completed");
    }

    #[test]
    fn running_status_has_qos_and_conditions() {
        let pod = running_pod("100m", "100m");
        assert_eq!(pod["status"]["qosClass"], "Burstable");
        assert_eq!(pod["status"]["phase"], "Running");
        assert_eq!(
            pod["status"]["conditions"].as_array().map(Vec::len),
            Some(5)
        );
        assert_eq!(pod["status"]["containerStatuses"][0]["ready"], true);
    }
}
