//! URL resolution and the CRUD verbs: get, list, create, update, delete, deletecollection.

use axum::body::Body;
use http::{Method, Response};
use serde_json::{Value, json};

use super::{Req, error_response, json_response, method_not_allowed, path_not_found};
use crate::sim::SimContext;
use crate::store::{ApiError, Gvr, gvr};

/// A resolved resource URL.
#[derive(Debug, Clone)]
pub struct Target {
    /// The kind.
    pub gvr: Gvr,
    /// Namespace from the URL.
    pub namespace: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Subresource (`status`, `resize`, `eviction`, `scale`).
    pub sub: Option<String>,
}

/// Resolves `/api/v1/...` and `/apis/{group}/{version}/...` resource paths.
pub fn resolve(ctx: &SimContext, path: &str) -> Result<Option<Target>, ApiError> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return Ok(None),
    };
    let rest: Vec<&str> = if rest.first() == Some(&"watch") {
        rest[1..].to_vec()
    } else {
        rest.to_vec()
    };
    let lookup = |r: &str| {
        ctx.store
            .lookup(group, version, r)
            .ok_or_else(path_not_found)
    };
    let (g, ns, name, sub) = match rest.as_slice() {
        ["namespaces", ns, res, tail @ ..] => {
            let g = lookup(res)?;
            if !g.namespaced {
                // `/api/v1/namespaces/{name}/status` and `/finalize`
                if group.is_empty() && (*res == "status" || *res == "finalize") && tail.is_empty() {
                    (gvr::NAMESPACES, None, Some(*ns), Some(*res))
                } else {
                    return Err(path_not_found());
                }
            } else {
                (g, Some(*ns), tail.first().copied(), tail.get(1).copied())
            }
        }
        [res, tail @ ..] => (
            lookup(res)?,
            None,
            tail.first().copied(),
            tail.get(1).copied(),
        ),
        [] => return Ok(None),
    };
    if g.namespaced && name.is_some() && ns.is_none() {
        return Err(path_not_found());
    }
    Ok(Some(Target {
        gvr: g,
        namespace: ns.map(str::to_string),
        name: name.map(str::to_string),
        sub: sub.map(str::to_string),
    }))
}

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

/// Whether the kind has a `scale` subresource.
pub fn has_scale(g: &Gvr) -> bool {
    g.group == "apps" && matches!(g.resource, "deployments" | "replicasets" | "statefulsets")
}

/// The object a request names, or 404.
pub fn existing(ctx: &SimContext, t: &Target, name: &str) -> Result<Value, ApiError> {
    ctx.store
        .get(&t.gvr, t.namespace.as_deref(), name)
        .ok_or_else(|| ApiError::not_found(&t.gvr, name))
}

fn get(ctx: &SimContext, _req: &Req, t: &Target, name: &str) -> Result<(u16, Value), ApiError> {
    let obj = existing(ctx, t, name)?;
    match t.sub.as_deref() {
        None | Some("status") | Some("resize") => Ok((200, obj)),
        Some("scale") if has_scale(&t.gvr) => Ok((200, scale_of(t, &obj))),
        Some(_) => Err(path_not_found()),
    }
}

/// The autoscaling/v1 Scale of a Deployment, ReplicaSet or StatefulSet.
pub fn scale_of(t: &Target, obj: &Value) -> Value {
    let selector: Vec<String> = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": obj["metadata"]["name"], "namespace": t.namespace, "uid": obj["metadata"]["uid"],
            "resourceVersion": obj["metadata"]["resourceVersion"], "creationTimestamp": obj["metadata"]["creationTimestamp"]},
        "spec": {"replicas": obj["spec"]["replicas"]},
        "status": {"replicas": obj["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector.join(",")},
    })
}

/// Sets the replicas of the scaled object from a (patched or PUT) Scale and answers the
/// new Scale.
pub fn write_scale(
    ctx: &SimContext,
    req: &Req,
    t: &Target,
    mut current: Value,
    scale: &Value,
) -> Result<Value, ApiError> {
    if let Some(rv) = scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|rv| !rv.is_empty())
        && Some(rv) != current["metadata"]["resourceVersion"].as_str()
    {
        let name = current["metadata"]["name"].as_str().unwrap_or_default();
        return Err(ApiError::conflict(&t.gvr, name));
    }
    if let Some(r) = scale.pointer("/spec/replicas") {
        current["spec"]["replicas"] = r.clone();
    }
    if let Some(m) = current["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    let out = ctx.store.write(&t.gvr, current, &req.manager(), None)?;
    Ok(scale_of(t, &out))
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

/// Parses a JSON, YAML or (for the built-in kinds) protobuf request body for the object
/// a create or update of `t` takes, with the server's error for malformed input.
pub fn decode_body(req: &Req, t: &Target) -> Result<Value, ApiError> {
    let kind = t.gvr.kind;
    let ct = req.content_type();
    if ct == super::protobuf::MEDIA_TYPE
        && let Some((api_version, body_kind)) = protobuf_kind(t)
    {
        return super::protobuf::decode(&req.body, &api_version, body_kind);
    }
    let parsed: Result<Value, String> = match ct {
        "application/json" | "" | "*/*" => serde_json::from_slice(&req.body).map_err(|e| {
            if e.is_eof() {
                "unexpected end of JSON input".to_string()
            } else {
                format!("invalid character: {e}")
            }
        }),
        "application/yaml" => serde_yaml::from_slice(&req.body).map_err(|e| e.to_string()),
        _ => return Err(unknown_body_format(&accepted_media_types(t))),
    };
    parsed.map_err(|e| {
        let text = String::from_utf8_lossy(&req.body);
        let head: String = text.chars().take(30).collect();
        let more = if text.chars().count() > 30 { " ..." } else { "" };
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {e} ({head}{more})"
        ))
    })
}

/// The `apiVersion`/`kind` of a protobuf body for `t` (an autoscaling/v1 Scale on the
/// `scale` subresource), when that kind has a protobuf encoding: the built-in kinds do,
/// custom resources do not.
fn protobuf_kind(t: &Target) -> Option<(String, &'static str)> {
    let (api_version, kind) = if t.sub.as_deref() == Some("scale") && has_scale(&t.gvr) {
        ("autoscaling/v1".to_string(), "Scale")
    } else {
        (t.gvr.api_version(), t.gvr.kind)
    };
    super::protobuf::has_encoding(&api_version, kind).then_some((api_version, kind))
}

/// The body media types the server decodes for `t`.
fn accepted_media_types(t: &Target) -> Vec<&'static str> {
    let mut accepted = vec!["application/json", "application/yaml"];
    if protobuf_kind(t).is_some() {
        accepted.push(super::protobuf::MEDIA_TYPE);
    }
    accepted
}

/// 415 for a request body in a format the server does not decode for this resource, listing
/// what it accepts: e.g. protobuf (`application/vnd.kubernetes.protobuf`) for a custom
/// resource, which has no protobuf encoding.
pub fn unknown_body_format(accepted: &[&str]) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        ),
        None,
    )
}

/// 415 of a PATCH with a content type that is no patch type.
pub fn unsupported_media_type() -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        "415: Unsupported Media Type",
        Some(json!({})),
    )
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

async fn create(ctx: &SimContext, req: &Req, t: &Target) -> Result<Value, ApiError> {
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
    obj["apiVersion"] = json!(t.gvr.api_version());
    obj["kind"] = json!(t.gvr.kind);
    super::defaults::apply(&t.gvr, &mut obj);
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

use super::fields;

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
    super::defaults::apply(&t.gvr, &mut old);
    if sub == Some("status") {
        obj = status_update(&old, obj);
    } else {
        super::defaults::apply(&t.gvr, &mut obj);
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
