//! The resource a request names and what every verb needs of it: the resolved URL
//! ([`Target`]), the object it names, its `scale` subresource, and the decoding of request
//! bodies with the server's errors for malformed or unsupported input.

use serde_json::{Value, json};

use super::{Req, path_not_found};
use crate::context::SimContext;
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
