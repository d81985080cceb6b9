//! API defaulting, as the real server fills fields on every write of the built-in kinds.

use serde_json::{Value, json};

use crate::store::{Gvr, gvr};

fn set_default(obj: &mut Value, key: &str, v: Value) {
    if let Some(m) = obj.as_object_mut()
        && !m.contains_key(key)
    {
        m.insert(key.to_string(), v);
    }
}

/// Fills the defaults of a container.
fn container(c: &mut Value) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
    let last = image.rsplit('/').next().unwrap_or_default();
    let latest = !last.contains(':') && !image.contains('@') || last.ends_with(":latest");
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    set_default(
        c,
        "imagePullPolicy",
        json!(if latest { "Always" } else { "IfNotPresent" }),
    );
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            set_default(p, "protocol", json!("TCP"));
        }
    }
    if let Some(res) = c.get_mut("resources").and_then(Value::as_object_mut) {
        // requests default to limits where only limits are given
        if let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() {
            let req = res.entry("requests").or_insert_with(|| json!({}));
            if let Some(req) = req.as_object_mut() {
                for (k, v) in limits {
                    req.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// Fills the defaults of a pod spec.
pub fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    for key in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(key).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(container);
        }
    }
}

/// Fills the defaults of a kind's object before validation and storage.
pub fn apply(g: &Gvr, obj: &mut Value) {
    let kind = g.kind;
    if *g == gvr::PODS {
        let spec = obj.get_mut("spec");
        if let Some(spec) = spec {
            pod_spec(spec);
            set_default(spec, "enableServiceLinks", json!(true));
        }
        return;
    }
    if !matches!(
        kind,
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
    ) || g.group != "apps"
    {
        return;
    }
    let Some(spec) = obj.get_mut("spec") else {
        return;
    };
    if let Some(tspec) = spec.pointer_mut("/template/spec") {
        pod_spec(tspec);
    }
    match kind {
        "Deployment" => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "strategy", json!({"type": "RollingUpdate"}));
            if spec["strategy"]["type"] == "RollingUpdate" {
                set_default(&mut spec["strategy"], "rollingUpdate", json!({}));
                set_default(
                    &mut spec["strategy"]["rollingUpdate"],
                    "maxUnavailable",
                    json!("25%"),
                );
                set_default(
                    &mut spec["strategy"]["rollingUpdate"],
                    "maxSurge",
                    json!("25%"),
                );
            }
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(spec, "progressDeadlineSeconds", json!(600));
        }
        "ReplicaSet" => set_default(spec, "replicas", json!(1)),
        "StatefulSet" => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
        }
        _ => {
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            set_default(spec, "revisionHistoryLimit", json!(10));
        }
    }
}
