//! Discovery (`/api`, `/api/v1`, `/apis`, `/apis/{group}[/{version}]`) and `/version`,
//! in the legacy (unaggregated) form, which every client falls back to.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::context::SimContext;
use crate::store::{Gvr, gvr};

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const SUB_VERBS: &[&str] = &["get", "patch", "update"];

fn short_names(resource: &str) -> &'static [&'static str] {
    match resource {
        "pods" => &["po"],
        "nodes" => &["no"],
        "namespaces" => &["ns"],
        "events" => &["ev"],
        "configmaps" => &["cm"],
        "deployments" => &["deploy"],
        "replicasets" => &["rs"],
        "statefulsets" => &["sts"],
        "daemonsets" => &["ds"],
        "horizontalpodautoscalers" => &["hpa"],
        "poddisruptionbudgets" => &["pdb"],
        "customresourcedefinitions" => &["crd", "crds"],
        _ => &[],
    }
}

fn has_status(g: &Gvr) -> bool {
    !matches!(
        g.resource,
        "configmaps" | "secrets" | "events" | "leases" | "mutatingwebhookconfigurations"
    )
}

fn singular(kind: &str) -> String {
    kind.to_lowercase()
}

fn resources_of(ctx: &SimContext, group: &str, version: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let crds: BTreeMap<String, Value> = ctx
        .store
        .list(&gvr::CRDS, None)
        .0
        .into_iter()
        .map(|c| {
            (
                c["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                c,
            )
        })
        .collect();
    let mut kinds: Vec<Gvr> = ctx
        .store
        .kinds()
        .into_iter()
        .filter(|g| g.group == group && g.version == version)
        .collect();
    kinds.sort_by_key(|g| g.resource);
    for g in kinds {
        let crd = crds.get(&format!("{}.{}", g.resource, g.group));
        let shorts: Vec<Value> = match crd {
            Some(c) => c["spec"]["names"]["shortNames"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            None => short_names(g.resource).iter().map(|s| json!(s)).collect(),
        };
        let mut r = json!({"name": g.resource, "singularName": singular(g.kind), "namespaced": g.namespaced, "kind": g.kind, "verbs": VERBS});
        if let Some(c) = crd {
            r["singularName"] = c["spec"]["names"]["singular"].clone();
            if let Some(cats) = c["spec"]["names"]["categories"].as_array() {
                r["categories"] = json!(cats);
            }
        }
        if !shorts.is_empty() {
            r["shortNames"] = json!(shorts);
        }
        if g == gvr::PODS || g.group == "apps" && g.resource != "controllerrevisions" {
            r["categories"] = json!(["all"]);
        }
        out.push(r);
        if g == gvr::PODS {
            out.push(json!({"name": "pods/eviction", "singularName": "", "namespaced": true, "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]}));
            if ctx.config.kubernetes_minor >= 33 {
                out.push(json!({"name": "pods/resize", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": SUB_VERBS}));
            }
        }
        if g == gvr::NODES {
            out.push(json!({"name": "nodes/proxy", "singularName": "", "namespaced": false, "kind": "NodeProxyOptions", "verbs": ["create", "delete", "get", "patch", "update"]}));
        }
        let crd_status = crd.is_none_or(|c| {
            c["spec"]["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v["name"] == g.version && v["subresources"]["status"].is_object())
        });
        if has_status(&g) && crd_status {
            out.push(json!({"name": format!("{}/status", g.resource), "singularName": "", "namespaced": g.namespaced, "kind": g.kind, "verbs": SUB_VERBS}));
        }
        if matches!(g.resource, "deployments" | "replicasets" | "statefulsets") {
            out.push(json!({"name": format!("{}/scale", g.resource), "singularName": "", "namespaced": true, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": SUB_VERBS}));
        }
    }
    out
}

/// `/api/v1` or `/apis/{group}/{version}`; None when the group version is unknown.
pub fn resource_list(ctx: &SimContext, group: &str, version: &str) -> Option<Value> {
    let resources = resources_of(ctx, group, version);
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// `/api`.
pub fn api_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]})
}

fn groups(ctx: &SimContext) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for g in ctx.store.kinds() {
        if g.group.is_empty() {
            continue;
        }
        let vs = out.entry(g.group.to_string()).or_default();
        if !vs.iter().any(|v| v == g.version) {
            vs.push(g.version.to_string());
        }
    }
    out
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `/apis`.
pub fn group_list(ctx: &SimContext) -> Value {
    let gs: Vec<Value> = groups(ctx).iter().map(|(n, v)| group_json(n, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/{group}`.
pub fn group(ctx: &SimContext, name: &str) -> Option<Value> {
    let gs = groups(ctx);
    let vs = gs.get(name)?;
    let mut g = group_json(name, vs);
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

/// `/version`.
pub fn version(ctx: &SimContext) -> Value {
    let minor = ctx.config.kubernetes_minor;
    json!({
        "major": "1", "minor": minor.to_string(),
        "emulationMajor": "1", "emulationMinor": minor.to_string(),
        "minCompatibilityMajor": "1", "minCompatibilityMinor": (minor - 1).to_string(),
        "gitVersion": format!("v1.{minor}.0"), "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.26.0",
        "compiler": "gc", "platform": "linux/amd64",
    })
}
