//! PATCH: JSON merge patch, strategic merge patch, JSON patch and (through [`super::ssa`])
//! server-side apply, on the main resource and the status and resize subresources.

use serde_json::{Map, Value};

use super::Req;
use super::target::{Target, existing, unsupported_media_type};
use crate::context::SimContext;
use crate::store::ApiError;

/// The merge key of a strategic-merge list, by field name.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "containerStatuses"
        | "initContainerStatuses"
        | "resourceClaims" => "name",
        "ports" => "containerPort",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "conditions" | "addresses" => "type",
        "hostAliases" => "ip",
        "ownerReferences" => "uid",
        _ => return None,
    })
}

/// Applies an RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(t) = target.as_object_mut() else {
        return;
    };
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// Applies a strategic merge patch (lists of known kinds merged by key, `$patch`
/// directives, `$setElementOrder`/`$retainKeys` ignored).
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut p = p.clone();
            p.remove("$patch");
            *target = Value::Object(p);
            return;
        }
        Some("delete") => {
            *target = Value::Null;
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(t) = target.as_object_mut() else {
        return;
    };
    for (k, v) in p {
        if k.starts_with('$') {
            if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/")
                && let (Some(Value::Array(items)), Some(del)) = (t.get_mut(field), v.as_array())
            {
                items.retain(|x| !del.contains(x));
            }
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match (merge_key(k), v) {
            (Some(key), Value::Array(items)) => {
                let cur = t.entry(k.clone()).or_insert(Value::Array(Vec::new()));
                merge_list(cur, items, key);
            }
            (None, Value::Array(items)) if k == "finalizers" => {
                let cur = t.entry(k.clone()).or_insert(Value::Array(Vec::new()));
                if let Value::Array(c) = cur {
                    for i in items {
                        if !c.contains(i) {
                            c.push(i.clone());
                        }
                    }
                }
            }
            (_, Value::Object(_)) => {
                let cur = t.entry(k.clone()).or_insert(Value::Null);
                strategic_merge(cur, v);
                if cur.is_null() {
                    t.remove(k);
                }
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
}

fn merge_list(cur: &mut Value, items: &[Value], key: &str) {
    if !cur.is_array() {
        *cur = Value::Array(Vec::new());
    }
    let Value::Array(list) = cur else { return };
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *list = items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .cloned()
            .collect();
        return;
    }
    for item in items {
        let Some(kv) = item.get(key) else {
            list.push(item.clone());
            continue;
        };
        let pos = list.iter().position(|x| x.get(key) == Some(kv));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                list.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic_merge(&mut list[i], item),
            (None, false) => {
                let mut fresh = Value::Object(Map::new());
                strategic_merge(&mut fresh, item);
                list.push(fresh);
            }
        }
    }
}

fn parse_patch(req: &Req) -> Result<Value, ApiError> {
    serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// Applies the request's patch (of its content type) to `current`.
pub fn apply_patch(req: &Req, current: &Value, custom: bool) -> Result<Value, ApiError> {
    let mut obj = current.clone();
    match req.content_type() {
        "application/merge-patch+json" => merge_patch(&mut obj, &parse_patch(req)?),
        "application/strategic-merge-patch+json" if !custom => {
            strategic_merge(&mut obj, &parse_patch(req)?)
        }
        "application/json-patch+json" => {
            let ops: json_patch::Patch = serde_json::from_slice(&req.body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(&mut obj, &ops).map_err(|e| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                    None,
                )
            })?;
        }
        _ => return Err(unsupported_media_type()),
    }
    Ok(obj)
}

/// How often a PATCH is tried when the object changed between reading it and writing it
/// back (the real server retries until its write wins; a bound keeps a livelock visible).
const CONFLICT_ATTEMPTS: usize = 64;

/// Serves PATCH on an object URL. As the API server's `GuaranteedUpdate`, a patch whose body
/// names no resourceVersion is applied again to the newer object when another write got in
/// between its read and its write; one that names a resourceVersion gets the 409.
pub async fn patch(ctx: &SimContext, req: &Req, t: &Target) -> Result<(u16, Value), ApiError> {
    let mut attempt = 1;
    loop {
        match patch_once(ctx, req, t).await {
            Err(e) if attempt < CONFLICT_ATTEMPTS && is_write_race(&e) && !names_version(req) => {
                attempt += 1;
            }
            out => return out,
        }
    }
}

/// A 409 of the store's resourceVersion check (not an apply's field manager conflict).
fn is_write_race(e: &ApiError) -> bool {
    e.code == 409 && e.message.contains("the object has been modified")
}

/// Whether the patch body sets `metadata.resourceVersion` (a precondition of the client).
fn names_version(req: &Req) -> bool {
    let body: Value = serde_json::from_slice(&req.body)
        .or_else(|_| serde_yaml::from_slice(&req.body))
        .unwrap_or(Value::Null);
    match &body {
        Value::Array(ops) => ops
            .iter()
            .any(|op| op["path"] == "/metadata/resourceVersion" && op["op"] != "test"),
        _ => body
            .pointer("/metadata/resourceVersion")
            .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty())),
    }
}

async fn patch_once(ctx: &SimContext, req: &Req, t: &Target) -> Result<(u16, Value), ApiError> {
    let name = t.name.clone().unwrap_or_default();
    let custom = super::crd_schema::is_custom(ctx, &t.gvr);
    let ct = req.content_type();
    let known = matches!(
        ct,
        "application/merge-patch+json"
            | "application/strategic-merge-patch+json"
            | "application/json-patch+json"
            | "application/apply-patch+yaml"
    );
    if !known {
        return Err(unsupported_media_type());
    }
    if custom && ct == "application/strategic-merge-patch+json" {
        return Err(super::target::unknown_body_format(&[
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ]));
    }
    if ct == "application/apply-patch+yaml" {
        return super::ssa::apply(ctx, req, t);
    }
    // The stored object is read back with its defaults, as the real server decodes it, so
    // defaults never count as a change of the patched object.
    let mut current = existing(ctx, t, &name)?;
    crate::store::defaults::apply(&t.gvr, &mut current);
    let sub = t.sub.as_deref();
    if sub == Some("scale") && super::target::has_scale(&t.gvr) {
        let scale = apply_patch(req, &super::target::scale_of(t, &current), custom)?;
        return super::target::write_scale(ctx, req, t, current, &scale).map(|v| (200, v));
    }
    let mut obj = apply_patch(req, &current, custom)?;
    match sub {
        Some("resize") => {
            return super::resize::apply(ctx, req, t, &current, obj).map(|v| (200, v));
        }
        None | Some("status") => {}
        Some(_) => return Err(super::path_not_found()),
    }
    if sub.is_none() {
        crate::store::defaults::apply(&t.gvr, &mut obj);
    }
    super::validation::validate_update(ctx, &t.gvr, &current, &mut obj, sub)?;
    if req.q("dryRun").is_some() {
        return Ok((200, obj));
    }
    let out = ctx.store.write(&t.gvr, obj, &req.manager(), sub)?;
    Ok((200, out))
}
