//! The `pods/resize` subresource (Kubernetes >= 1.33): only container resources change,
//! the QoS class must stay, limits cannot be removed and, from 1.36, a resize beyond the
//! node's allocatable is refused by the PodResizeValidator admission (403). RBAC denials
//! and ResourceQuota refusals are switched on through [`faults::ResizeFaults`].

pub mod faults;

use serde_json::{Value, json};

use super::Req;
use super::target::{Target, existing};
use super::validation::{Cause, pod_spec_causes};
use crate::context::SimContext;
use crate::quantity::quantity;
use crate::store::fields;
use crate::store::{ApiError, format_time, gvr};

/// The QoS class of a pod spec.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|k| spec.get(*k).and_then(Value::as_array).into_iter().flatten())
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let res = &c["resources"];
        for r in ["cpu", "memory"] {
            let req = res.pointer(&format!("/requests/{r}")).and_then(quantity);
            let lim = res.pointer(&format!("/limits/{r}")).and_then(quantity);
            any |= req.is_some_and(|v| v > 0.0) || lim.is_some_and(|v| v > 0.0);
            let req = req.or(lim);
            if lim.is_none() || req != lim {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The current pod with only the container resources taken from `patched`.
fn take_resources(current: &Value, patched: &Value) -> Value {
    let mut out = current.clone();
    for key in ["containers", "initContainers"] {
        let Some(list) = out
            .pointer_mut(&format!("/spec/{key}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in list.iter_mut() {
            let name = c["name"].clone();
            let new = patched
                .pointer(&format!("/spec/{key}"))
                .and_then(Value::as_array)
                .and_then(|l| l.iter().find(|x| x["name"] == name));
            if let Some(new) = new {
                match new.get("resources") {
                    Some(r) => c["resources"] = r.clone(),
                    None => {
                        if let Some(m) = c.as_object_mut() {
                            m.remove("resources");
                        }
                    }
                }
            }
        }
    }
    out
}

fn validate(name: &str, old: &Value, new: &Value) -> Result<(), ApiError> {
    let mut causes: Vec<Cause> = Vec::new();
    for (i, (o, n)) in old["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(new["spec"]["containers"].as_array().into_iter().flatten())
        .enumerate()
    {
        for (which, label) in [("limits", "limits"), ("requests", "requests")] {
            let had = o["resources"][which]
                .as_object()
                .map(|m| m.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default();
            let removed = had
                .iter()
                .any(|k| n["resources"][which].get(k).is_none_or(Value::is_null));
            if removed {
                causes.push((
                    "FieldValueForbidden".into(),
                    format!("spec.containers[{i}].resources.{which}"),
                    format!("Forbidden: resource {label} cannot be removed"),
                ));
            }
        }
    }
    if causes.is_empty() {
        causes.extend(pod_spec_causes(&new["spec"], "spec"));
    }
    if causes.is_empty() {
        let before = qos_class(&old["spec"]);
        if before != qos_class(&new["spec"]) {
            causes.push((
                "FieldValueInvalid".into(),
                "spec".into(),
                format!("Invalid value: \"{before}\": Pod QOS Class may not change as a result of resizing"),
            ));
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid("Pod", "", name, &causes))
}

/// Sum of the containers' requests of a pod spec, in millicores and bytes.
pub fn pod_requests(spec: &Value) -> (f64, f64) {
    let mut cpu = 0.0;
    let mut mem = 0.0;
    for c in spec["containers"].as_array().into_iter().flatten() {
        let res = &c["resources"];
        let get = |r: &str| {
            res.pointer(&format!("/requests/{r}"))
                .or(res.pointer(&format!("/limits/{r}")))
                .and_then(quantity)
                .unwrap_or(0.0)
        };
        cpu += get("cpu");
        mem += get("memory");
    }
    (cpu * 1000.0, mem)
}

/// The PodResizeValidator admission: a pod whose requests exceed its node's allocatable.
fn admit(ctx: &SimContext, name: &str, pod: &Value) -> Result<(), ApiError> {
    if ctx.config.kubernetes_minor < 36 {
        return Ok(());
    }
    let Some(node_name) = pod.pointer("/spec/nodeName").and_then(Value::as_str) else {
        return Ok(());
    };
    let Some(node) = ctx.store.get(&gvr::NODES, None, node_name) else {
        return Ok(());
    };
    let alloc = &node["status"]["allocatable"];
    let (cpu, mem) = pod_requests(&pod["spec"]);
    let alloc_cpu = alloc.get("cpu").and_then(quantity).map(|c| c * 1000.0);
    let alloc_mem = alloc.get("memory").and_then(quantity);
    let mut short = Vec::new();
    if alloc_cpu.is_some_and(|a| cpu > a) {
        short.push(("cpu", cpu, alloc_cpu.unwrap_or_default()));
    }
    if alloc_mem.is_some_and(|a| mem > a) {
        short.push(("memory", mem, alloc_mem.unwrap_or_default()));
    }
    let Some(first) = short.first() else {
        return Ok(());
    };
    let names: Vec<&str> = short.iter().map(|s| s.0).collect();
    let message = format!(
        "pods \"{name}\" is forbidden: node didn't have enough allocatable resources: {}, requested: {}, allocatable: {}",
        names.join(", "),
        first.1.round() as i64,
        first.2.round() as i64
    );
    Err(ApiError::new(
        403,
        "Forbidden",
        message,
        Some(json!({"name": name, "kind": "pods", "causes": [{"reason": "NodeCapacity"}]})),
    ))
}

/// The RBAC check of the requesting user (`Impersonate-User`, else the admin token's user).
fn authorize(ctx: &SimContext, req: &Req, t: &Target, name: &str) -> Result<(), ApiError> {
    let user = req.header("impersonate-user").unwrap_or(faults::ADMIN_USER);
    let verb = if req.method == http::Method::PUT {
        "update"
    } else {
        "patch"
    };
    let ns = t.namespace.as_deref().unwrap_or_default();
    ctx.state.resize.authorize(user, verb, ns, name)
}

/// The ResourceQuota admission of the pod's namespace.
fn admit_quota(ctx: &SimContext, name: &str, old: &Value, new: &Value) -> Result<(), ApiError> {
    let Some(ns) = old.pointer("/metadata/namespace").and_then(Value::as_str) else {
        return Ok(());
    };
    // The namespace's pods are read only where a quota applies: at 1,000 pods a namespace,
    // decoding them all made every resize cost tens of milliseconds.
    if !ctx.state.resize.has_quota(ns) {
        return Ok(());
    }
    let (pods, _) = ctx.store.list(&gvr::PODS, Some(ns));
    ctx.state.resize.admit_quota(ns, name, old, new, &pods)
}

/// Applies a resize: `patched` is the pod after the client's patch; only container
/// resources are taken from it, managedFields record what the request touched.
pub fn apply(
    ctx: &SimContext,
    req: &Req,
    t: &Target,
    current: &Value,
    patched: Value,
) -> Result<Value, ApiError> {
    if t.gvr != gvr::PODS || ctx.config.kubernetes_minor < 33 {
        return Err(super::path_not_found());
    }
    let name = current["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    authorize(ctx, req, t, &name)?;
    let mut new = take_resources(current, &patched);
    validate(&name, current, &new)?;
    admit(ctx, &name, &new)?;
    admit_quota(ctx, &name, current, &new)?;
    let managed = if patched.pointer("/metadata/managedFields")
        != current.pointer("/metadata/managedFields")
    {
        patched.pointer("/metadata/managedFields").cloned()
    } else {
        let mut probe = patched.clone();
        fields::record_update(
            Some(current),
            &mut probe,
            &req.manager(),
            Some("resize"),
            &format_time(ctx.store.now()),
        );
        probe.pointer("/metadata/managedFields").cloned()
    };
    if let Some(mf) = managed {
        new["metadata"]["managedFields"] = mf;
    }
    if req.q("dryRun").is_some() {
        return Ok(new);
    }
    ctx.store.write(&gvr::PODS, new, "", Some("resize"))
}

/// Serves PUT on pods/resize.
pub fn put(
    ctx: &SimContext,
    req: &Req,
    t: &Target,
    name: &str,
    obj: Value,
) -> Result<Value, ApiError> {
    if t.gvr == gvr::PODS {
        authorize(ctx, req, t, name)?;
    }
    let current = existing(ctx, t, name)?;
    if let Some(rv) = obj
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        && Some(rv)
            != current
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
    {
        return Err(ApiError::conflict(&t.gvr, name));
    }
    apply(ctx, req, t, &current, obj)
}
