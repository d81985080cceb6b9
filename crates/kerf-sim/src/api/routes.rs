//! URL resolution and the CRUD verbs: get, list, create, update, delete, deletecollection.

use axum::body::Body;
use http::{Method, Response};
use serde_json::{Value, json};

use super::target::{Target, decode_body, existing, has_scale, scale_of, write_scale};
use super::{Req, error_response, json_response, method_not_allowed, path_not_found};
use crate::context::SimContext;
use crate::store::{ApiError, gvr};

/// Serves one request on a resource URL.
pub async fn serve(ctx: &SimContext, req: &Req, t: &Target) -> Response<Body> {
    let result = match (&req.method, &t.name, t.sub.as_deref()) {
        (&Method::GET, None, _) if req.flag("watch") || req.path.contains("/watch/") => {
            return super::watch::serve(ctx, req, t).await;
        }
        (&Method::GET, None, _) => return super::list::serve(ctx, req, t),
        (&Method::GET, Some(name), _) => get(ctx, req, t, name),
        (&Method::POST, None, None) => create(ctx, req, t).await.map(|v| (201, v)),
        (&Method::POST, Some(_), Some("eviction")) => super::eviction::evict(ctx, req, t),
        (&Method::PUT, Some(name), sub) => update(ctx, req, t, name, sub).map(|v| (200, v)),
        (&Method::PATCH, Some(_), _) => super::patch::patch(ctx, req, t).await,
        (&Method::DELETE, Some(name), None) => delete(ctx, req, t, name),
        (&Method::DELETE, None, None) => delete_collection(ctx, req, t),
        (m, _, _) => Err(method_not_allowed(m)),
    };
    match result {
        Ok((code, body)) => {
            if req.wants_table() && req.method == Method::GET {
                return json_response(code, &super::table::to_table(ctx, &t.gvr, &body, req));
            }
            json_response(code, &body)
        }
        Err(e) => error_response(&e),
    }
}

fn get(ctx: &SimContext, _req: &Req, t: &Target, name: &str) -> Result<(u16, Value), ApiError> {
    let obj = existing(ctx, t, name)?;
    match t.sub.as_deref() {
        None | Some("status") | Some("resize") => Ok((200, obj)),
        Some("scale") if has_scale(&t.gvr) => Ok((200, scale_of(t, &obj))),
        Some(_) => Err(path_not_found()),
    }
}

/// The objects of a list request after namespace, label and field selection, and the RV.
pub fn filtered_list(
    ctx: &SimContext,
    req: &Req,
    t: &Target,
) -> Result<(Vec<Value>, u64), ApiError> {
    let labels =
        super::selectors::LabelSelector::parse(req.q("labelSelector").unwrap_or_default())?;
    let fields =
        super::selectors::FieldSelector::parse(req.q("fieldSelector").unwrap_or_default())?;
    let (items, rv) = ctx.store.list(&t.gvr, t.namespace.as_deref());
    let items = items
        .into_iter()
        .filter(|o| labels.matches_object(o) && fields.matches(o))
        .collect();
    Ok((items, rv))
}

fn check_namespace(t: &Target, obj: &mut Value) -> Result<(), ApiError> {
    if !t.gvr.namespaced {
        return Ok(());
    }
    let Some(ns) = &t.namespace else {
        return Err(method_not_allowed(&Method::POST));
    };
    match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(n) if !n.is_empty() && n != ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            obj["metadata"]["namespace"] = json!(ns);
            Ok(())
        }
    }
}

/// The body of a create or an update: a JSON object with metadata, in the target's
/// namespace.
fn decode_object(req: &Req, t: &Target) -> Result<Value, ApiError> {
    let mut obj = decode_body(req, t)?;
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    }
    if obj.get("metadata").is_none_or(|m| !m.is_object()) {
        obj["metadata"] = json!({});
    }
    check_namespace(t, &mut obj)?;
    Ok(obj)
}

async fn create(ctx: &SimContext, req: &Req, t: &Target) -> Result<Value, ApiError> {
    let mut obj = decode_object(req, t)?;
    obj["apiVersion"] = json!(t.gvr.api_version());
    obj["kind"] = json!(t.gvr.kind);
    crate::store::defaults::apply(&t.gvr, &mut obj);
    super::validation::validate_create(ctx, &t.gvr, &mut obj)?;
    if req.q("dryRun").is_some() {
        return Ok(obj);
    }
    let manager = req.manager();
    fields::record_create(
        &mut obj,
        &manager,
        &crate::store::format_time(ctx.store.now()),
    );
    if t.gvr == gvr::PODS {
        obj = admit_pod(ctx, obj).await?;
    }
    let created = ctx.store.create(&t.gvr, obj, "")?;
    super::crd_schema::on_write(ctx, &t.gvr, &created);
    Ok(created)
}

use crate::store::fields;

/// The single call site of mutating admission for pods created over HTTP.
async fn admit_pod(ctx: &SimContext, pod: Value) -> Result<Value, ApiError> {
    crate::admission::admit_pod_create(ctx, pod).await
}

fn update(
    ctx: &SimContext,
    req: &Req,
    t: &Target,
    name: &str,
    sub: Option<&str>,
) -> Result<Value, ApiError> {
    let mut obj = decode_object(req, t)?;
    match obj.pointer("/metadata/name").and_then(Value::as_str) {
        Some(n) if n != name => {
            return Err(ApiError::bad_request(
                "the name of the object (does not match the name on the URL)",
            ));
        }
        _ => obj["metadata"]["name"] = json!(name),
    }
    let mut old = existing(ctx, t, name)?;
    if sub == Some("scale") && has_scale(&t.gvr) {
        return write_scale(ctx, req, t, old, &obj);
    }
    crate::store::defaults::apply(&t.gvr, &mut old);
    if sub == Some("status") {
        obj = status_update(&old, obj);
    } else {
        crate::store::defaults::apply(&t.gvr, &mut obj);
    }
    super::validation::validate_update(ctx, &t.gvr, &old, &mut obj, sub)?;
    match sub {
        None | Some("status") => {}
        Some("resize") => return super::resize::put(ctx, req, t, name, obj),
        Some(_) => return Err(path_not_found()),
    }
    if req.q("dryRun").is_some() {
        return Ok(obj);
    }
    let updated = ctx.store.write(&t.gvr, obj, &req.manager(), sub)?;
    super::crd_schema::on_write(ctx, &t.gvr, &updated);
    Ok(updated)
}

/// The object a PUT to `/status` writes, as the API server's status strategies build it:
/// the stored object with the body's `status`, and the body's resourceVersion as the
/// precondition. Everything else in the body is ignored, so it is never validated either.
fn status_update(old: &Value, body: Value) -> Value {
    let mut obj = old.clone();
    match body.get("status") {
        Some(status) => obj["status"] = status.clone(),
        None => {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
    }
    match body.pointer("/metadata/resourceVersion") {
        Some(rv) => obj["metadata"]["resourceVersion"] = rv.clone(),
        None => {
            if let Some(m) = obj["metadata"].as_object_mut() {
                m.remove("resourceVersion");
            }
        }
    }
    obj
}

fn delete(ctx: &SimContext, req: &Req, t: &Target, name: &str) -> Result<(u16, Value), ApiError> {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let orphan =
        body["propagationPolicy"] == "Orphan" || req.q("propagationPolicy") == Some("Orphan");
    let deleted = if orphan {
        orphan_dependents(ctx, t, name)?;
        ctx.store.delete(&t.gvr, t.namespace.as_deref(), name)?
    } else {
        ctx.store.delete(&t.gvr, t.namespace.as_deref(), name)?
    };
    if t.gvr == gvr::CRDS {
        super::crd_schema::on_delete(ctx, &deleted);
    }
    Ok((200, deleted))
}

fn orphan_dependents(ctx: &SimContext, t: &Target, name: &str) -> Result<(), ApiError> {
    let owner = existing(ctx, t, name)?;
    let uid = owner["metadata"]["uid"].clone();
    for g in ctx.store.kinds() {
        let (items, _) = ctx.store.list(&g, t.namespace.as_deref());
        for mut o in items {
            let Some(refs) = o
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            else {
                continue;
            };
            let before = refs.len();
            refs.retain(|r| r["uid"] != uid);
            if refs.len() != before {
                ctx.store.update(&g, o, "kube-controller-manager")?;
            }
        }
    }
    Ok(())
}

fn delete_collection(ctx: &SimContext, req: &Req, t: &Target) -> Result<(u16, Value), ApiError> {
    let (items, rv) = filtered_list(ctx, req, t)?;
    let mut deleted = Vec::new();
    for o in items {
        let name = o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let ns = o["metadata"]["namespace"].as_str().map(str::to_string);
        if let Ok(d) = ctx.store.delete(&t.gvr, ns.as_deref(), &name) {
            deleted.push(d);
        }
    }
    Ok((
        200,
        json!({"kind": format!("{}List", t.gvr.kind), "apiVersion": t.gvr.api_version(), "metadata": {"resourceVersion": rv.to_string()}, "items": deleted}),
    ))
}
