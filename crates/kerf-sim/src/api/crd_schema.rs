//! CustomResourceDefinitions: serving the kinds they define (registration, established
//! status) and validating custom resources against the OpenAPI v3 schema and its
//! `x-kubernetes-validations` CEL rules, with the real server's 422 wording.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use kube_cel::CompiledSchema;
use serde_json::{Value, json};

pub use super::crd_view::{CrdView, schema_of};

use crate::context::SimContext;
use crate::store::{ApiError, Cause, Gvr, format_time, gvr};

/// Whether a kind is defined by a CRD.
pub fn is_custom(_ctx: &SimContext, g: &Gvr) -> bool {
    !gvr::ALL.iter().any(|b| b == g)
}

/// The CRD defining a kind, as its stored version reads.
pub fn crd_for(ctx: &SimContext, g: &Gvr) -> Option<Arc<CrdView>> {
    if !is_custom(ctx, g) {
        return None;
    }
    let name = format!("{}.{}", g.resource, g.group);
    let stored = ctx.store.get_stored(&gvr::CRDS, None, &name)?;
    Some(ctx.state.crds.view(name, &stored))
}

/// The kinds a CRD defines (one per served version).
pub fn kinds_of(crd: &Value) -> Vec<Gvr> {
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
    let namespaced = crd["spec"]["scope"] != "Cluster";
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"] != false)
        .filter_map(|v| v["name"].as_str())
        .map(|v| Gvr::dynamic(group, v, plural, kind, namespaced))
        .collect()
}

/// After a CRD write: registers its kinds and marks it Established.
pub fn on_write(ctx: &SimContext, g: &Gvr, obj: &Value) {
    if *g != gvr::CRDS {
        return;
    }
    for k in kinds_of(obj) {
        ctx.store.register_kind(k);
    }
    let now = format_time(ctx.store.now());
    let cond = |t: &str, reason: &str, msg: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg});
    let mut o = obj.clone();
    o["status"] = json!({
        "conditions": [cond("NamesAccepted", "NoConflicts", "no conflicts found"), cond("Established", "InitialNamesAccepted", "the initial names have been accepted")],
        "acceptedNames": obj["spec"]["names"],
        "storedVersions": obj["spec"]["versions"].as_array().into_iter().flatten().filter(|v| v["storage"] == true).map(|v| v["name"].clone()).collect::<Vec<_>>(),
    });
    if o["status"] != obj["status"] {
        let _ = ctx.store.update_status(&gvr::CRDS, o, "kube-apiserver");
    }
}

/// After a CRD delete: unregisters its kinds and deletes their objects.
pub fn on_delete(ctx: &SimContext, crd: &Value) {
    if let Some(name) = crd["metadata"]["name"].as_str() {
        ctx.state.crds.forget(name);
    }
    for k in kinds_of(crd) {
        let (items, _) = ctx.store.list(&k, None);
        for o in items {
            let _ = ctx.store.delete(
                &k,
                o["metadata"]["namespace"].as_str(),
                o["metadata"]["name"].as_str().unwrap_or_default(),
            );
        }
        ctx.store.unregister_kind(&k);
    }
}

fn quote(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{s}\""),
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

fn type_ok(ty: &str, v: &Value, schema: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string() || (schema["x-kubernetes-int-or-string"] == true && v.is_i64()),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => true,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

/// Validates a value against a structural schema, collecting causes.
pub fn check(schema: &Value, v: &Value, path: &str, out: &mut Vec<Cause>) {
    if v.is_null() {
        if schema["nullable"] != true && path.contains('.') {
            out.push((
                "FieldValueTypeInvalid".into(),
                path.into(),
                format!(
                    "Invalid value: \"null\": {path} in body must be of type {}: \"null\"",
                    schema["type"].as_str().unwrap_or("object")
                ),
            ));
        }
        return;
    }
    if let Some(ty) = schema["type"].as_str()
        && !type_ok(ty, v, schema)
    {
        out.push((
            "FieldValueTypeInvalid".into(),
            path.into(),
            format!(
                "Invalid value: {}: {path} in body must be of type {ty}: \"{}\"",
                quote(v),
                type_name(v)
            ),
        ));
        return;
    }
    if let Some(options) = schema["enum"].as_array()
        && !options.contains(v)
    {
        let list: Vec<String> = options.iter().map(quote).collect();
        out.push((
            "FieldValueNotSupported".into(),
            path.into(),
            format!(
                "Unsupported value: {}: supported values: {}",
                quote(v),
                list.join(", ")
            ),
        ));
    }
    out.extend(super::crd_formats::integer_format_cause(schema, v, path));
    scalar_bounds(schema, v, path, out);
    match v {
        Value::Object(m) => {
            out.extend(missing_required(schema, m, &format!("{path}.")));
            let props = schema["properties"].as_object();
            for (k, child) in m {
                let sub = props
                    .and_then(|p| p.get(k))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                if let Some(sub) = sub {
                    check(sub, child, &format!("{path}.{k}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check(&schema["items"], item, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// A `FieldValueRequired` cause for each property `schema` requires that `m` lacks, its
/// field path `prefix` and the property's name.
fn missing_required<'a>(
    schema: &'a Value,
    m: &'a serde_json::Map<String, Value>,
    prefix: &'a str,
) -> impl Iterator<Item = Cause> + 'a {
    schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|r| !m.contains_key(*r))
        .map(move |r| {
            (
                "FieldValueRequired".into(),
                format!("{prefix}{r}"),
                "Required value".into(),
            )
        })
}

fn scalar_bounds(schema: &Value, v: &Value, path: &str, out: &mut Vec<Cause>) {
    let bad = |out: &mut Vec<Cause>, msg: String| {
        out.push((
            "FieldValueInvalid".into(),
            path.into(),
            format!("Invalid value: {}: {path} in body {msg}", quote(v)),
        ))
    };
    if let (Some(n), Some(min)) = (v.as_f64(), schema["minimum"].as_f64())
        && n < min
    {
        bad(
            out,
            format!("should be greater than or equal to {}", schema["minimum"]),
        );
    }
    if let (Some(n), Some(max)) = (v.as_f64(), schema["maximum"].as_f64())
        && n > max
    {
        bad(
            out,
            format!("should be less than or equal to {}", schema["maximum"]),
        );
    }
    if let Some(s) = v.as_str() {
        if let Some(max) = schema["maxLength"].as_u64()
            && s.chars().count() as u64 > max
        {
            out.push((
                "FieldValueTooLong".into(),
                path.into(),
                format!("Too long: may not be more than {max} bytes"),
            ));
        }
        if let Some(min) = schema["minLength"].as_u64()
            && (s.chars().count() as u64) < min
        {
            bad(out, format!("should be at least {min} chars long"));
        }
        if let Some(p) = schema["pattern"].as_str()
            && pattern(p).is_some_and(|re| !re.is_match(s))
        {
            bad(out, format!("should match '{p}'"));
        }
    }
    if let Some(items) = v.as_array() {
        if let Some(max) = schema["maxItems"].as_u64()
            && items.len() as u64 > max
        {
            out.push((
                "FieldValueTooMany".into(),
                path.into(),
                format!("Too many: {}: must have at most {max} items", items.len()),
            ));
        }
        if let Some(min) = schema["minItems"].as_u64()
            && (items.len() as u64) < min
        {
            bad(out, format!("should have at least {min} items"));
        }
    }
}

/// The compiled regular expression of a schema's `pattern` (None when it does not compile),
/// compiled once.
fn pattern(p: &str) -> Option<regex::Regex> {
    static PATTERNS: LazyLock<Mutex<HashMap<String, Option<regex::Regex>>>> =
        LazyLock::new(Default::default);
    let mut patterns = PATTERNS.lock().unwrap_or_else(|e| e.into_inner());
    patterns
        .entry(p.to_owned())
        .or_insert_with(|| regex::Regex::new(p).ok())
        .clone()
}

/// Validates a custom resource on create (`old` None) or update.
pub fn validate(
    ctx: &SimContext,
    g: &Gvr,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let Some(crd) = crd_for(ctx, g) else {
        return Ok(());
    };
    let (Some(schema), Some(compiled)) = (crd.schema(g.version), crd.compiled(g.version)) else {
        return Ok(());
    };
    let mut causes = Vec::new();
    let mut body = obj.clone();
    if let Some(m) = body.as_object_mut() {
        m.remove("metadata");
        m.remove("apiVersion");
        m.remove("kind");
    }
    if let (Some(props), Some(m)) = (schema["properties"].as_object(), body.as_object()) {
        causes.extend(missing_required(schema, m, ""));
        for (k, v) in m {
            if let Some(s) = props.get(k) {
                check(s, v, k, &mut causes);
            }
        }
    }
    ratchet(&mut causes, obj, old);
    if causes.is_empty() {
        causes.extend(cel_causes(compiled, obj, old));
        ratchet(&mut causes, obj, old);
    }
    if causes.is_empty() {
        return Ok(());
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::invalid(g.kind, g.group, name, &causes))
}

/// Validation ratcheting (CRDValidationRatcheting, on by default since Kubernetes 1.30 and
/// GA in 1.33): on an update, an error at a field whose value is the same as in the stored
/// object is dropped, so an object stored before a stricter schema (or past it) can still
/// be updated, its status included, as long as the update leaves the invalid value alone.
fn ratchet(causes: &mut Vec<Cause>, obj: &Value, old: Option<&Value>) {
    let Some(old) = old else {
        return;
    };
    causes.retain(|(_, path, _)| {
        let (Some(was), Some(is)) = (value_at_path(old, path), value_at_path(obj, path)) else {
            return true;
        };
        was != is
    });
}

/// The value at a field path as causes name it (`spec.apply.windows[0].end`).
fn value_at_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut v = obj;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            v = v.get(name)?;
        }
        for index in indexes.split(['[', ']']).filter(|i| !i.is_empty()) {
            v = v.get(index.parse::<usize>().ok()?)?;
        }
    }
    Some(v)
}

/// Whether a schema has an `x-kubernetes-validations` rule anywhere in it.
fn has_rules(c: &CompiledSchema) -> bool {
    !c.validations.is_empty()
        || c.properties.values().any(has_rules)
        || [&c.items, &c.additional_properties]
            .into_iter()
            .any(|s| s.as_deref().is_some_and(has_rules))
        || [&c.all_of, &c.one_of, &c.any_of]
            .into_iter()
            .any(|v| v.iter().any(has_rules))
}

fn cel_causes(compiled: &CompiledSchema, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    // Without a rule there is nothing to evaluate, and kube-cel would still convert every
    // subtree of the object to CEL values at every node (the rsr CRD has no rule, and its
    // status updates are most of the writes a pass over many workloads makes).
    if !has_rules(compiled) {
        return Vec::new();
    }
    match kube_cel::validate_compiled(compiled, obj, old) {
        Ok(()) => Vec::new(),
        Err(errs) => errs
            .into_vec()
            .into_iter()
            .map(|e| {
                let path = e.field_path.trim_start_matches('.').to_string();
                let value = crate::store::fields::value_at(
                    obj,
                    &path
                        .split('.')
                        .filter(|s| !s.is_empty())
                        .map(|s| format!("f:{s}"))
                        .collect::<Vec<_>>(),
                )
                .cloned()
                .unwrap_or(json!({}));
                (
                    "FieldValueInvalid".into(),
                    path,
                    format!("Invalid value: {}: {}", quote(&value), e.message),
                )
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled_of(kind: &str) -> CompiledSchema {
        let crds = kerf_api::crds_yaml().unwrap();
        let crd = serde_yaml::Deserializer::from_str(&crds)
            .map(|d| <serde_json::Value as serde::Deserialize>::deserialize(d).unwrap())
            .find(|c| c["spec"]["names"]["kind"] == kind)
            .unwrap();
        kube_cel::compile_schema(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    }

    #[test]
    fn only_a_schema_with_a_rule_is_evaluated_with_cel() {
        assert!(has_rules(&compiled_of("RightsizingPolicy")));
        assert!(!has_rules(&compiled_of("RightsizingRecommendation")));
    }

    #[test]
    fn a_policy_rule_still_rejects_what_it_names() {
        let compiled = compiled_of("RightsizingPolicy");
        let bad = json!({"apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingPolicy",
            "metadata": {"name": "p"},
            "spec": {"apply": {"canary": {"pods": "0%", "duration": "5m"}}}});
        assert!(!cel_causes(&compiled, &bad, None).is_empty());
    }

    fn cause(path: &str) -> Cause {
        ("FieldValueNotSupported".into(), path.into(), "bad".into())
    }

    #[test]
    fn an_update_keeping_an_invalid_value_is_ratcheted_one_changing_it_is_not() {
        let old = json!({"spec": {"mode": "auto", "apply": {"windows": [{"end": "x"}]}},
            "status": {}});
        let mut status_update = old.clone();
        status_update["status"] = json!({"conditions": []});
        let mut causes = vec![cause("spec.mode"), cause("spec.apply.windows[0].end")];
        ratchet(&mut causes, &status_update, Some(&old));
        assert!(causes.is_empty(), "{causes:?}");

        let mut changed = old.clone();
        changed["spec"]["mode"] = json!("sometimes");
        let mut causes = vec![cause("spec.mode"), cause("spec.apply.windows[0].end")];
        ratchet(&mut causes, &changed, Some(&old));
        assert_eq!(causes, vec![cause("spec.mode")]);

        // A create has nothing to ratchet against; a missing field is never ratcheted.
        let mut causes = vec![cause("spec.mode"), cause("spec.selector")];
        ratchet(&mut causes, &changed, None);
        assert_eq!(causes.len(), 2);
        ratchet(&mut causes, &changed, Some(&old));
        assert_eq!(causes, vec![cause("spec.mode"), cause("spec.selector")]);
    }
}
