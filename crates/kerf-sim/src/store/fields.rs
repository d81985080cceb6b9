//! Field sets in the `FieldsV1` form of `metadata.managedFields`: computing them from objects
//! (whole objects for Apply, differences for Update) and the set algebra server-side apply needs.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// One path element in the `FieldsV1` key syntax: `f:name`, `k:{"name":"app"}` or `v:"x"`.
pub type PathElem = String;
/// A field path from the object root.
pub type FieldPath = Vec<PathElem>;
/// A set of owned field paths. A path whose extension is also in the set is a node that
/// is itself owned (`.` in `FieldsV1`).
pub type FieldSet = BTreeSet<FieldPath>;

/// Field names whose object values are atomic (owned as a whole).
const ATOMIC_MAPS: &[&str] = &["nodeSelector", "selector"];

/// The key fields of associative lists, by list field name.
fn list_keys(field: &str) -> Option<&'static [&'static str]> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "containerStatuses"
        | "initContainerStatuses"
        | "versions"
        | "webhooks" => &["name"],
        "ports" => &["containerPort", "protocol"],
        "volumeMounts" => &["mountPath"],
        "volumeDevices" => &["devicePath"],
        "conditions" => &["type"],
        "podIPs" | "hostIPs" => &["ip"],
        "ownerReferences" => &["uid"],
        "tolerations" | "topologySpreadConstraints" => return None,
        "addresses" => &["type"],
        "metrics" => return None,
        _ => return None,
    })
}

/// Fields whose lists are sets of scalars (`v:` keys).
const SET_LISTS: &[&str] = &["finalizers"];

/// The `k:{...}` key of a list item, or None when the item lacks a key field.
pub fn item_key(field: &str, item: &Value) -> Option<PathElem> {
    let keys = list_keys(field)?;
    let obj = item.as_object()?;
    let mut m = Map::new();
    for k in keys {
        match obj.get(*k) {
            Some(v) => {
                m.insert((*k).to_string(), v.clone());
            }
            None if *k == "protocol" => {
                m.insert("protocol".into(), Value::String("TCP".into()));
            }
            None => return None,
        }
    }
    Some(format!("k:{}", Value::Object(m)))
}

fn is_metadata_skipped(path: &[PathElem], key: &str) -> bool {
    if path.is_empty() {
        return matches!(key, "apiVersion" | "kind");
    }
    path.len() == 1
        && path[0] == "f:metadata"
        && matches!(
            key,
            "name"
                | "namespace"
                | "uid"
                | "resourceVersion"
                | "generation"
                | "creationTimestamp"
                | "managedFields"
                | "deletionTimestamp"
                | "deletionGracePeriodSeconds"
                | "generateName"
                | "selfLink"
        )
}

/// The field set of an applied configuration: its leaves, its list items and empty objects.
pub fn apply_set(obj: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    walk_apply(obj, &mut Vec::new(), "", &mut out);
    out
}

fn walk_apply(v: &Value, path: &mut FieldPath, field: &str, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !ATOMIC_MAPS.contains(&field) && !m.is_empty() => {
            for (k, child) in m {
                if is_metadata_skipped(path, k) {
                    continue;
                }
                path.push(format!("f:{k}"));
                walk_apply(child, path, k, out);
                path.pop();
            }
        }
        Value::Array(items) if list_keys(field).is_some() || SET_LISTS.contains(&field) => {
            for item in items {
                let key = if SET_LISTS.contains(&field) {
                    Some(format!("v:{item}"))
                } else {
                    item_key(field, item)
                };
                let Some(key) = key else { continue };
                path.push(key);
                out.insert(path.clone());
                if item.is_object() {
                    walk_apply(item, path, "", out);
                }
                path.pop();
            }
        }
        _ => {
            if !path.is_empty() {
                out.insert(path.clone());
            }
        }
    }
}

/// The nodes that exist in every stored object of a kind even when empty (Go non-pointer
/// structs and non-omitempty lists), so that an Update never claims them as added.
fn skeleton(kind: &str) -> Value {
    let pod_spec = serde_json::json!({"containers": null});
    let template = serde_json::json!({"metadata": {}, "spec": pod_spec});
    match kind {
        "Deployment" => {
            serde_json::json!({"metadata": {}, "spec": {"template": template, "strategy": {}}, "status": {}})
        }
        "ReplicaSet" | "DaemonSet" | "StatefulSet" => {
            serde_json::json!({"metadata": {}, "spec": {"template": template}, "status": {}})
        }
        "Pod" => serde_json::json!({"metadata": {}, "spec": pod_spec, "status": {}}),
        _ => serde_json::json!({"metadata": {}, "spec": {}, "status": {}}),
    }
}

/// `base` with the skeleton's nodes added where absent.
fn with_skeleton(base: &Value, skel: &Value) -> Value {
    let mut out = base.clone();
    if let (Some(o), Some(s)) = (out.as_object_mut(), skel.as_object()) {
        for (k, v) in s {
            match o.get(k) {
                None => {
                    o.insert(k.clone(), v.clone());
                }
                Some(existing) if existing.is_object() => {
                    let merged = with_skeleton(existing, v);
                    o.insert(k.clone(), merged);
                }
                Some(_) => {}
            }
        }
    }
    out
}

/// The field set an Update by one manager takes: the nodes added and the leaves changed
/// going from `old` (None on create) to `new`.
pub fn update_set(old: Option<&Value>, new: &Value) -> FieldSet {
    let kind = new.get("kind").and_then(Value::as_str).unwrap_or_default();
    let skel = skeleton(kind);
    let old = with_skeleton(old.unwrap_or(&Value::Null), &skel);
    let old = if old.is_null() { skel } else { old };
    let mut out = FieldSet::new();
    walk_update(Some(&old), new, &mut Vec::new(), "", &mut out);
    out
}

fn walk_update(
    old: Option<&Value>,
    new: &Value,
    path: &mut FieldPath,
    field: &str,
    out: &mut FieldSet,
) {
    match new {
        Value::Object(m) if !ATOMIC_MAPS.contains(&field) && !m.is_empty() => {
            let old_map = old.and_then(Value::as_object);
            if old_map.is_none() && !path.is_empty() {
                out.insert(path.clone());
            }
            for (k, child) in m {
                if is_metadata_skipped(path, k) {
                    continue;
                }
                path.push(format!("f:{k}"));
                walk_update(old_map.and_then(|o| o.get(k)), child, path, k, out);
                path.pop();
            }
        }
        Value::Array(items) if list_keys(field).is_some() || SET_LISTS.contains(&field) => {
            let old_items = old.and_then(Value::as_array);
            let set_list = SET_LISTS.contains(&field);
            if old.is_none() && !path.is_empty() {
                out.insert(path.clone());
            }
            for item in items {
                let key = if set_list {
                    Some(format!("v:{item}"))
                } else {
                    item_key(field, item)
                };
                let Some(key) = key else { continue };
                let old_item = old_items.and_then(|o| {
                    o.iter().find(|x| {
                        if set_list {
                            *x == item
                        } else {
                            item_key(field, x).as_deref() == Some(key.as_str())
                        }
                    })
                });
                path.push(key);
                match old_item {
                    Some(o) if item.is_object() => walk_update(Some(o), item, path, "", out),
                    Some(_) => {}
                    None => {
                        out.insert(path.clone());
                        if item.is_object() {
                            walk_update(None, item, path, "", out);
                        }
                    }
                }
                path.pop();
            }
        }
        _ => {
            if !path.is_empty() && old != Some(new) {
                out.insert(path.clone());
            }
        }
    }
}

/// Renders a field set as a `FieldsV1` object.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for elem in path {
            let entry = node
                .entry(elem.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(next) = entry else { break };
            node = next;
        }
    }
    mark_owned(&mut root, set, &mut Vec::new());
    Value::Object(root)
}

fn mark_owned(node: &mut Map<String, Value>, set: &FieldSet, path: &mut FieldPath) {
    for (k, v) in node.iter_mut() {
        if k == "." {
            continue;
        }
        path.push(k.clone());
        if let Value::Object(child) = v
            && !child.is_empty()
        {
            mark_owned(child, set, path);
            if set.contains(path) {
                child.insert(".".into(), Value::Object(Map::new()));
            }
        }
        path.pop();
    }
}

/// Parses a `FieldsV1` object into a field set.
pub fn from_fields_v1(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    parse_node(v, &mut Vec::new(), &mut out);
    out
}

fn parse_node(v: &Value, path: &mut FieldPath, out: &mut FieldSet) {
    let Some(m) = v.as_object() else { return };
    if (m.is_empty() || m.contains_key(".")) && !path.is_empty() {
        out.insert(path.clone());
    }
    for (k, child) in m {
        if k == "." {
            continue;
        }
        path.push(k.clone());
        parse_node(child, path, out);
        path.pop();
    }
}

/// Formats a path the way conflict messages name it: `.spec.containers[name="app"].image`.
pub fn path_string(path: &[PathElem]) -> String {
    let mut s = String::new();
    for e in path {
        if let Some(f) = e.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = e.strip_prefix("k:") {
            let parts: Vec<String> = serde_json::from_str::<Map<String, Value>>(k)
                .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                .unwrap_or_default();
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = e.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

/// Records the managedFields entry of a create by `manager`.
pub fn record_create(obj: &mut Value, manager: &str, time: &str) {
    record_update(None, obj, manager, None, time);
}

/// Computes the new managedFields after an Update-operation write by `manager`: the
/// manager takes the changed fields from every other manager; fields gone from the object
/// are dropped from every entry.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    time: &str,
) {
    let changed = update_set(old, new);
    let mut entries = old
        .and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let present = apply_set(new);
    let mut mine = FieldSet::new();
    let mut keep = Vec::new();
    for e in entries.drain(..) {
        let mut set = e.get("fieldsV1").map(from_fields_v1).unwrap_or_default();
        let same = e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some("Update")
            && e.get("subresource").and_then(Value::as_str) == subresource;
        if same {
            mine.extend(set);
            continue;
        }
        set.retain(|p| !changed.contains(p) && still_present(p, &present));
        if !set.is_empty() {
            keep.push(with_fields(e, &set));
        }
    }
    mine.extend(changed);
    mine.retain(|p| still_present(p, &present));
    if !mine.is_empty() {
        keep.push(entry(manager, "Update", new, subresource, time, &mine));
    }
    set_managed(new, keep);
}

/// The object whose managedFields an Update-operation write starts from, as the API server
/// decides it: on the main resource, managedFields the request sets replace the stored ones
/// (one empty entry `[{}]` resets them to none); an absent or empty list keeps the stored
/// ones (a client that does not know the field must not wipe it); on a subresource the
/// stored ones are always kept.
pub fn rewritten_base(old: &Value, given: Option<&Value>, subresource: Option<&str>) -> Value {
    let mut base = old.clone();
    let Some(Value::Array(given)) = given else {
        return base;
    };
    if subresource.is_some() || given.is_empty() {
        return base;
    }
    let reset = given.len() == 1 && given[0].as_object().is_some_and(Map::is_empty);
    let entries = if reset { Vec::new() } else { given.clone() };
    if let Some(meta) = base.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
    base
}

/// True when the path (or a node below it) still exists in the object.
pub fn still_present(p: &FieldPath, present: &FieldSet) -> bool {
    present
        .range(p.clone()..)
        .next()
        .is_some_and(|q| q.starts_with(p))
}

/// Replaces the fieldsV1 of an entry.
pub fn with_fields(mut e: Value, set: &FieldSet) -> Value {
    if let Some(m) = e.as_object_mut() {
        m.insert("fieldsV1".into(), to_fields_v1(set));
    }
    e
}

/// Builds one managedFields entry.
pub fn entry(
    manager: &str,
    op: &str,
    obj: &Value,
    subresource: Option<&str>,
    time: &str,
    set: &FieldSet,
) -> Value {
    let api_version = obj.get("apiVersion").cloned().unwrap_or(Value::Null);
    let mut m = Map::new();
    m.insert("manager".into(), manager.into());
    m.insert("operation".into(), op.into());
    m.insert("apiVersion".into(), api_version);
    if !time.is_empty() {
        m.insert("time".into(), time.into());
    }
    m.insert("fieldsType".into(), "FieldsV1".into());
    m.insert("fieldsV1".into(), to_fields_v1(set));
    if let Some(s) = subresource {
        m.insert("subresource".into(), s.into());
    }
    Value::Object(m)
}

/// Writes the entries into `metadata.managedFields`, sorted as the server sorts them:
/// by operation (Apply first), time, manager, subresource.
pub fn set_managed(obj: &mut Value, mut entries: Vec<Value>) {
    let text = |e: &Value, k: &str| {
        e.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    entries.sort_by_key(|e| {
        (
            text(e, "operation"),
            text(e, "time"),
            text(e, "manager"),
            text(e, "subresource"),
        )
    });
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
}
/// The value at a field path, if present.
pub fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for e in path {
        if let Some(f) = e.strip_prefix("f:") {
            cur = cur.get(f)?;
        } else if let Some(k) = e.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).ok()?;
            cur = cur.as_array()?.iter().find(|item| {
                key.iter()
                    .all(|(kk, kv)| item_field(item, kk) == Some(kv.clone()))
            })?;
        } else if let Some(v) = e.strip_prefix("v:") {
            let v: Value = serde_json::from_str(v).ok()?;
            cur = cur.as_array()?.iter().find(|x| **x == v)?;
        } else {
            return None;
        }
    }
    Some(cur)
}

fn item_field(item: &Value, k: &str) -> Option<Value> {
    match item.get(k) {
        Some(v) => Some(v.clone()),
        None if k == "protocol" => Some(json!("TCP")),
        None => None,
    }
}
