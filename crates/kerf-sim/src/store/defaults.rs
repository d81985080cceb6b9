//! API defaulting, as the real server fills fields on every write of the built-in kinds.

use serde_json::{Value, json};

use super::gvr::{self, Gvr};

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
    if *g == gvr::NAMESPACES {
        namespace(obj);
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
            rolling_update(
                spec,
                "strategy",
                &[("maxUnavailable", json!("25%")), ("maxSurge", json!("25%"))],
            );
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(spec, "progressDeadlineSeconds", json!(600));
        }
        "ReplicaSet" => set_default(spec, "replicas", json!(1)),
        "StatefulSet" => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            rolling_update(spec, "updateStrategy", &[("partition", json!(0))]);
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
        }
        _ => {
            rolling_update(
                spec,
                "updateStrategy",
                &[("maxUnavailable", json!(1)), ("maxSurge", json!(0))],
            );
            set_default(spec, "revisionHistoryLimit", json!(10));
        }
    }
}

/// Defaults an update strategy as the apps/v1 defaulters do: a missing or empty `type` is
/// `RollingUpdate`, and a rolling update gets `rollingUpdate` with each of `fields` it lacks
/// (so `strategy: {}` from a generated body ends up fully defaulted).
fn rolling_update(spec: &mut Value, key: &str, fields: &[(&str, Value)]) {
    set_default(spec, key, json!({}));
    let Some(strategy) = spec.get_mut(key).filter(|s| s.is_object()) else {
        return;
    };
    if strategy
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        strategy["type"] = json!("RollingUpdate");
    }
    if strategy["type"] != "RollingUpdate" {
        return;
    }
    if strategy.get("rollingUpdate").is_none_or(Value::is_null) {
        strategy["rollingUpdate"] = json!({});
    }
    for (field, v) in fields {
        set_default(&mut strategy["rollingUpdate"], field, v.clone());
    }
}

/// Fills what the namespace strategy sets on create: the `kubernetes` finalizer and phase
/// `Active` (an update keeps what the object holds).
fn namespace(obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    set_default(obj, "spec", json!({}));
    if obj["spec"].get("finalizers").is_none_or(Value::is_null) {
        obj["spec"]["finalizers"] = json!(["kubernetes"]);
    }
    set_default(obj, "status", json!({}));
    set_default(&mut obj["status"], "phase", json!("Active"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_deployment_strategy_gets_a_defaulted_rolling_update() {
        let mut d = json!({"spec": {"strategy": {}, "template": {"spec": {"containers": []}}}});
        let g = gvr::DEPLOYMENTS;
        apply(&g, &mut d);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let mut r = json!({"spec": {"strategy": {"type": "Recreate"}}});
        apply(&g, &mut r);
        assert_eq!(r["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn a_daemonset_and_statefulset_get_their_rolling_update_fields() {
        let mut ds = json!({"spec": {"updateStrategy": {"rollingUpdate": {"maxSurge": 1}}}});
        apply(&gvr::DAEMONSETS, &mut ds);
        assert_eq!(
            ds["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}})
        );
        let mut sts = json!({"spec": {"updateStrategy": {"type": ""}}});
        apply(&gvr::STATEFULSETS, &mut sts);
        assert_eq!(
            sts["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
    }

    #[test]
    fn a_new_namespace_is_active_with_the_kubernetes_finalizer() {
        let mut ns = json!({"metadata": {"name": "a"}});
        apply(&gvr::NAMESPACES, &mut ns);
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(ns["status"]["phase"], "Active");
        let mut ending = json!({"metadata": {"name": "b"}, "status": {"phase": "Terminating"}});
        apply(&gvr::NAMESPACES, &mut ending);
        assert_eq!(ending["status"]["phase"], "Terminating");
    }
}
