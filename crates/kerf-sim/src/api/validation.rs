//! Field validation of the built-in kinds (the subset the simulation needs) and the hook
//! into CRD schema validation for custom resources. Errors are 422 Invalid as the real
//! server words them.

use serde_json::Value;

use crate::context::SimContext;
use crate::store::{ApiError, Gvr, gvr};

use crate::quantity::quantity;

pub use crate::store::Cause;

/// The standard RFC 1123 subdomain check of `metadata.name`.
fn name_causes(name: &str) -> Vec<Cause> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    let ends_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if name.len() <= 253 && ok_chars && ends_ok {
        return Vec::new();
    }
    vec![(
        "FieldValueInvalid".into(),
        "metadata.name".into(),
        format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ),
    )]
}

fn fmt_q(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Checks the containers of a pod spec at `path` (requests <= limits, names present).
pub fn pod_spec_causes(spec: &Value, path: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    let containers = spec.get("containers").and_then(Value::as_array);
    if containers.is_none_or(|c| c.is_empty()) {
        out.push((
            "FieldValueRequired".into(),
            format!("{path}.containers"),
            "Required value".into(),
        ));
    }
    for (i, c) in containers.into_iter().flatten().enumerate() {
        let cpath = format!("{path}.containers[{i}]");
        for field in ["name", "image"] {
            if c.get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                out.push((
                    "FieldValueRequired".into(),
                    format!("{cpath}.{field}"),
                    "Required value".into(),
                ));
            }
        }
        let res = c.get("resources").cloned().unwrap_or(Value::Null);
        for r in ["cpu", "memory"] {
            let req = res.pointer(&format!("/requests/{r}"));
            let lim = res.pointer(&format!("/limits/{r}"));
            for (which, v) in [("requests", req), ("limits", lim)] {
                if let Some(v) = v
                    && quantity(v).is_none()
                {
                    out.push((
                        "FieldValueInvalid".into(),
                        format!("{cpath}.resources.{which}[{r}]"),
                        format!("Invalid value: \"{}\": must match the regex ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$", fmt_q(v)),
                    ));
                }
            }
            if let (Some(rq), Some(lm)) = (req.and_then(quantity), lim.and_then(quantity))
                && rq > lm
            {
                out.push((
                    "FieldValueInvalid".into(),
                    format!("{cpath}.resources.requests"),
                    format!(
                        "Invalid value: \"{}\": must be less than or equal to {r} limit of {}",
                        fmt_q(req.unwrap_or(&Value::Null)),
                        fmt_q(lim.unwrap_or(&Value::Null))
                    ),
                ));
            }
        }
    }
    out
}

fn invalid(g: &Gvr, obj: &Value, causes: &[Cause]) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Err(ApiError::invalid(g.kind, g.group, name, causes))
}

fn kind_causes(g: &Gvr, obj: &Value) -> Vec<Cause> {
    if *g == gvr::PODS {
        return pod_spec_causes(obj.get("spec").unwrap_or(&Value::Null), "spec");
    }
    if g.group == "apps" && obj.pointer("/spec/template/spec").is_some() {
        let mut out = Vec::new();
        if obj.pointer("/spec/selector").is_none() {
            out.push((
                "FieldValueRequired".into(),
                "spec.selector".into(),
                "Required value".into(),
            ));
        }
        out.extend(pod_spec_causes(
            &obj["spec"]["template"]["spec"],
            "spec.template.spec",
        ));
        return out;
    }
    Vec::new()
}

/// Validates an object about to be created, after pruning the fields a custom resource's
/// schema does not declare (see [`super::crd_prune`]).
pub fn validate_create(ctx: &SimContext, g: &Gvr, obj: &mut Value) -> Result<(), ApiError> {
    super::crd_prune::prune(ctx, g, obj)?;
    let obj = &*obj;
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut causes = if name.is_empty() {
        Vec::new()
    } else {
        name_causes(name)
    };
    causes.extend(kind_causes(g, obj));
    invalid(g, obj, &causes)?;
    super::crd_schema::validate(ctx, g, obj, None)
}

/// The fields of a pod spec a main-resource update may change.
fn pod_mutable_stripped(spec: &Value) -> Value {
    let mut s = spec.clone();
    if let Some(m) = s.as_object_mut() {
        for k in [
            "activeDeadlineSeconds",
            "tolerations",
            "terminationGracePeriodSeconds",
            "schedulingGates",
        ] {
            m.remove(k);
        }
        for key in ["containers", "initContainers"] {
            if let Some(cs) = m.get_mut(key).and_then(Value::as_array_mut) {
                for c in cs {
                    if let Some(c) = c.as_object_mut() {
                        c.remove("image");
                    }
                }
            }
        }
    }
    s
}

/// The 422 of a pod update that changes an immutable spec field.
pub fn pod_update_forbidden(name: &str, old: &Value, new: &Value) -> ApiError {
    let msg = "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";
    let diff = spec_diff(&old["spec"], &new["spec"]);
    let cause = (
        "FieldValueForbidden".to_string(),
        "spec".to_string(),
        format!("{msg}\n{diff}"),
    );
    ApiError::invalid("Pod", "", name, &[cause])
}

fn spec_diff(old: &Value, new: &Value) -> String {
    let a = serde_json::to_string_pretty(old).unwrap_or_default();
    let b = serde_json::to_string_pretty(new).unwrap_or_default();
    let mut out = String::from("@@ spec @@\n");
    for (x, y) in a.lines().zip(b.lines()) {
        if x != y {
            out.push_str(&format!("-{x}\n+{y}\n"));
        }
    }
    out
}

/// Validates an update (PUT or the result of a PATCH) against the stored object, after
/// pruning the fields a custom resource's schema does not declare.
pub fn validate_update(
    ctx: &SimContext,
    g: &Gvr,
    old: &Value,
    new: &mut Value,
    sub: Option<&str>,
) -> Result<(), ApiError> {
    super::crd_prune::prune(ctx, g, new)?;
    let new = &*new;
    if *g == gvr::PODS
        && sub.is_none()
        && pod_mutable_stripped(&old["spec"]) != pod_mutable_stripped(&new["spec"])
    {
        let name = old
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(pod_update_forbidden(name, old, new));
    }
    if sub.is_none() {
        invalid(g, new, &kind_causes(g, new))?;
    }
    super::crd_schema::validate(ctx, g, new, Some(old))
}
