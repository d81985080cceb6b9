//! Server-side apply (`application/apply-patch+yaml`): field ownership per manager,
//! conflicts (409 FieldManagerConflict), force, and removal of the fields an applier stops
//! applying where it was their only owner.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::Req;
use super::target::Target;
use crate::context::SimContext;
use crate::store::fields::{self, FieldPath, FieldSet, value_at};
use crate::store::{ApiError, format_time};

/// Removes the node at a field path.
pub fn remove_at(obj: &mut Value, path: &[String]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let Some(parent) = value_at_mut(obj, parent_path) else {
        return;
    };
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = parent.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(list) = parent.as_array_mut() {
        let probe = list.clone();
        if let Some(pos) = probe.iter().position(|item| {
            value_at(
                &Value::Array(vec![item.clone()]),
                std::slice::from_ref(last),
            )
            .is_some()
        }) {
            list.remove(pos);
        }
    }
}

fn value_at_mut<'a>(obj: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = obj;
    for e in path {
        if let Some(f) = e.strip_prefix("f:") {
            cur = cur.get_mut(f)?;
        } else {
            let probe = cur.as_array()?.clone();
            let pos = probe.iter().position(|item| {
                value_at(&Value::Array(vec![item.clone()]), std::slice::from_ref(e)).is_some()
            })?;
            cur = cur.as_array_mut()?.get_mut(pos)?;
        }
    }
    Some(cur)
}

/// Merges an applied configuration into an object: maps recursively, associative lists
/// by key, everything else replaced.
pub fn merge_config(target: &mut Value, config: &Value, field: &str) {
    match config {
        Value::Object(c) if !matches!(field, "nodeSelector" | "selector") => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let Some(t) = target.as_object_mut() else {
                return;
            };
            for (k, v) in c {
                merge_config(t.entry(k.clone()).or_insert(Value::Null), v, k);
            }
        }
        Value::Array(items)
            if items.iter().all(|i| fields::item_key(field, i).is_some()) && !items.is_empty() =>
        {
            if !target.is_array() {
                *target = Value::Array(Vec::new());
            }
            let Some(list) = target.as_array_mut() else {
                return;
            };
            for item in items {
                let key = fields::item_key(field, item);
                match list.iter_mut().find(|x| fields::item_key(field, x) == key) {
                    Some(existing) => merge_config(existing, item, ""),
                    None => list.push(item.clone()),
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn parse_config(req: &Req) -> Result<Value, ApiError> {
    let v: Value = serde_yaml::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the body of the apply patch was not an object",
        ));
    }
    Ok(v)
}

struct Entry {
    raw: Value,
    set: FieldSet,
    manager: String,
    apply: bool,
    subresource: Option<String>,
}

fn entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| Entry {
            raw: e.clone(),
            set: e
                .get("fieldsV1")
                .map(fields::from_fields_v1)
                .unwrap_or_default(),
            manager: e["manager"].as_str().unwrap_or_default().to_string(),
            apply: e["operation"] == "Apply",
            subresource: e["subresource"].as_str().map(str::to_string),
        })
        .collect()
}

fn conflict_error(
    conflicts: &BTreeMap<String, Vec<FieldPath>>,
    api_versions: &BTreeMap<String, String>,
) -> ApiError {
    let total: usize = conflicts.values().map(Vec::len).sum();
    let mut causes = Vec::new();
    let mut parts = Vec::new();
    for (m, paths) in conflicts {
        let using = format!(
            "conflict with \"{m}\" using {}",
            api_versions.get(m).cloned().unwrap_or_default()
        );
        for p in paths {
            causes.push(json!({"reason": "FieldManagerConflict", "message": using, "field": fields::path_string(p)}));
        }
        if paths.len() == 1 {
            parts.push(format!("{using}: {}", fields::path_string(&paths[0])));
        } else {
            let list: Vec<String> = paths
                .iter()
                .map(|p| format!("- {}", fields::path_string(p)))
                .collect();
            parts.push(format!(
                "{}:\n{}",
                using.replacen("conflict", "conflicts", 1),
                list.join("\n")
            ));
        }
    }
    let plural = if total == 1 { "conflict" } else { "conflicts" };
    let message = format!("Apply failed with {total} {plural}: {}", parts.join("\n"));
    ApiError::new(409, "Conflict", message, Some(json!({"causes": causes})))
}

/// What an apply records in its managedFields entry: the manager, the fields it applies
/// and the time of the entry.
struct Owner<'a> {
    manager: &'a str,
    fields: &'a FieldSet,
    time: &'a str,
}

/// The fields other managers own with a different value, by manager, and the apiVersion of
/// each such manager's entry.
type Conflicts = (BTreeMap<String, Vec<FieldPath>>, BTreeMap<String, String>);

/// Serves an apply patch.
pub fn apply(ctx: &SimContext, req: &Req, t: &Target) -> Result<(u16, Value), ApiError> {
    let Some(manager) = req
        .q("fieldManager")
        .filter(|m| !m.is_empty())
        .map(str::to_string)
    else {
        return Err(ApiError::bad_request(
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    };
    let config = parse_config(req)?;
    let name = t.name.clone().unwrap_or_default();
    let now = format_time(ctx.store.now());
    let applied = fields::apply_set(&config);
    let sub = t.sub.as_deref();
    let Some(current) = ctx.store.get(&t.gvr, t.namespace.as_deref(), &name) else {
        let owner = Owner {
            manager: &manager,
            fields: &applied,
            time: &now,
        };
        return create(ctx, t, config, &owner);
    };
    let mut all = entries(&current);
    let mine = |e: &Entry| e.apply && e.manager == manager && e.subresource.as_deref() == sub;
    let (conflicts, api_versions) = find_conflicts(&all, &mine, &applied, &config, &current);
    if !conflicts.is_empty() && !req.flag("force") {
        return Err(conflict_error(&conflicts, &api_versions));
    }
    let prev_time = all
        .iter()
        .find(|e| mine(e))
        .and_then(|e| e.raw["time"].as_str().map(str::to_string))
        .unwrap_or_default();
    let previous: FieldSet = all
        .iter()
        .filter(|e| mine(e))
        .flat_map(|e| e.set.iter().cloned())
        .collect();
    all.retain(|e| !mine(e));
    for e in all.iter_mut() {
        if let Some(paths) = conflicts.get(&e.manager) {
            for p in paths {
                e.set.remove(p);
            }
        }
    }
    let mut obj = current.clone();
    release_unapplied(&mut obj, &previous, &applied, &all);
    merge_config(&mut obj, &config, "");
    let changed = strip_volatile(&obj) != strip_volatile(&current);
    let time = if changed { now } else { prev_time };
    let owner = Owner {
        manager: &manager,
        fields: &applied,
        time: &time,
    };
    finish(ctx, req, t, &current, obj, all, &owner)
}

/// The applied leaf fields that other entries (not `mine`) own with a different value.
fn find_conflicts(
    all: &[Entry],
    mine: &dyn Fn(&Entry) -> bool,
    applied: &FieldSet,
    config: &Value,
    current: &Value,
) -> Conflicts {
    let mut conflicts: BTreeMap<String, Vec<FieldPath>> = BTreeMap::new();
    let mut api_versions = BTreeMap::new();
    for e in all.iter().filter(|e| !mine(e)) {
        for p in e.set.intersection(applied) {
            let mine = value_at(config, p);
            let theirs = value_at(current, p);
            let leaf = mine.is_some_and(|v| !v.is_object() && !v.is_array());
            if leaf && mine != theirs {
                conflicts
                    .entry(e.manager.clone())
                    .or_default()
                    .push(p.clone());
                api_versions.insert(
                    e.manager.clone(),
                    e.raw["apiVersion"].as_str().unwrap_or_default().to_string(),
                );
            }
        }
    }
    (conflicts, api_versions)
}

/// Fields the manager applied before and no longer applies, owned by nobody else, are
/// removed (deepest first).
fn release_unapplied(obj: &mut Value, previous: &FieldSet, applied: &FieldSet, others: &[Entry]) {
    let mut released: Vec<&FieldPath> = previous.iter().filter(|p| !applied.contains(*p)).collect();
    released.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in released {
        let others_own = others
            .iter()
            .any(|e| e.set.iter().any(|q| q.starts_with(p)));
        let applied_below = applied.iter().any(|q| q.starts_with(p));
        if !others_own && !applied_below {
            remove_at(obj, p);
            prune_empty_parents(obj, p, others, applied);
        }
    }
}

/// After a removal, the named fields above it that are left empty and under which nobody
/// owns or applies anything go too, as structured-merge-diff owns a struct along with its
/// named fields (`EnsureNamedFieldsAreMembers`): an object field is not left behind as `{}`.
fn prune_empty_parents(obj: &mut Value, path: &[String], others: &[Entry], applied: &FieldSet) {
    let mut end = path.len().saturating_sub(1);
    while end > 0 {
        let parent = &path[..end];
        if !parent.last().is_some_and(|e| e.starts_with("f:")) {
            return;
        }
        let empty = value_at(obj, parent).is_some_and(|v| v.as_object().is_some_and(Map::is_empty));
        let owned = others
            .iter()
            .any(|e| e.set.iter().any(|q| q.starts_with(parent)))
            || applied.iter().any(|q| q.starts_with(parent));
        if !empty || owned {
            return;
        }
        remove_at(obj, parent);
        end -= 1;
    }
}

fn strip_volatile(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
        m.remove("resourceVersion");
    }
    v
}

/// Writes the merged object with its managedFields: the entries of the others that still
/// name present fields, and the applier's.
fn finish(
    ctx: &SimContext,
    req: &Req,
    t: &Target,
    current: &Value,
    mut obj: Value,
    others: Vec<Entry>,
    owner: &Owner,
) -> Result<(u16, Value), ApiError> {
    let sub = t.sub.as_deref();
    if sub.is_none() {
        crate::store::defaults::apply(&t.gvr, &mut obj);
        // status is not applied through the main resource
        obj["status"] = current.get("status").cloned().unwrap_or(Value::Null);
        if obj["status"].is_null()
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
    }
    let present = fields::apply_set(&obj);
    let mut out_entries: Vec<Value> = others
        .into_iter()
        .filter_map(|mut e| {
            e.set.retain(|p| fields::still_present(p, &present));
            (!e.set.is_empty()).then(|| fields::with_fields(e.raw, &e.set))
        })
        .collect();
    if !owner.fields.is_empty() {
        let entry = fields::entry(owner.manager, "Apply", &obj, sub, owner.time, owner.fields);
        out_entries.push(entry);
    }
    fields::set_managed(&mut obj, out_entries);
    if sub == Some("resize") {
        return super::resize::apply(ctx, req, t, current, obj).map(|v| (200, v));
    }
    super::validation::validate_update(ctx, &t.gvr, current, &mut obj, sub)?;
    if req.q("dryRun").is_some() {
        return Ok((200, obj));
    }
    let written = ctx.store.write(&t.gvr, obj, "", sub)?;
    Ok((200, written))
}

fn create(
    ctx: &SimContext,
    t: &Target,
    mut config: Value,
    owner: &Owner,
) -> Result<(u16, Value), ApiError> {
    if t.gvr.namespaced {
        config["metadata"]["namespace"] = json!(t.namespace);
    }
    config["metadata"]["name"] = json!(t.name);
    crate::store::defaults::apply(&t.gvr, &mut config);
    super::validation::validate_create(ctx, &t.gvr, &mut config)?;
    let entry = fields::entry(
        owner.manager,
        "Apply",
        &config,
        None,
        owner.time,
        owner.fields,
    );
    fields::set_managed(&mut config, vec![entry]);
    let created = ctx.store.create(&t.gvr, config, "")?;
    Ok((201, created))
}
