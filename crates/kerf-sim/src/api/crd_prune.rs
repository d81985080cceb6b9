//! Pruning of custom resources: as the real server does for structural schemas, fields
//! the schema does not declare are dropped before validation and storage, unless the node
//! says `x-kubernetes-preserve-unknown-fields: true`. With `fieldValidation` `Warn` (the
//! default) each dropped field is named in a `Warning: 299 - "unknown field \"spec.x\""`
//! header; with `Ignore` silently; with `Strict` the write is refused with the real
//! server's strict decoding error (400).

use serde_json::{Map, Value};

use super::warnings::{self, FieldValidation};
use crate::context::SimContext;
use crate::store::{ApiError, Gvr};

/// Drops the fields of custom resource `obj` its CRD's schema does not declare (a
/// built-in kind is left alone) and reports them as the request's `fieldValidation` asks.
pub fn prune(ctx: &SimContext, g: &Gvr, obj: &mut Value) -> Result<(), ApiError> {
    let Some(crd) = super::crd_schema::crd_for(ctx, g) else {
        return Ok(());
    };
    let Some(schema) = crd.schema(g.version) else {
        return Ok(());
    };
    let mut unknown = prune_object(schema, obj);
    if unknown.is_empty() {
        return Ok(());
    }
    unknown.sort();
    let named: Vec<String> = unknown
        .iter()
        .map(|p| format!("unknown field \"{p}\""))
        .collect();
    match warnings::field_validation() {
        FieldValidation::Ignore => Ok(()),
        FieldValidation::Warn => {
            named.into_iter().for_each(warnings::add);
            Ok(())
        }
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
            named.join(", "),
            kind = g.kind,
            v = g.version,
        ))),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Prunes the value at `path` against `schema`, collecting the paths it dropped.
/// Drops the fields of object `obj` that `schema` does not declare, below its
/// `apiVersion`, `kind` and `metadata`; returns their paths.
fn prune_object(schema: &Value, obj: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Some(m) = obj.as_object_mut() {
        let keep = ["apiVersion", "kind", "metadata"];
        prune_map(schema, m, "", &keep, &mut unknown);
    }
    unknown
}

fn prune_value(schema: &Value, v: &mut Value, path: &str, unknown: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let keep: &[&str] = if schema["x-kubernetes-embedded-resource"] == true {
                &["apiVersion", "kind", "metadata"]
            } else {
                &[]
            };
            prune_map(schema, m, path, keep, unknown);
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                prune_value(&schema["items"], item, &format!("{path}[{i}]"), unknown);
            }
        }
        _ => {}
    }
}

/// Prunes the fields of an object: declared `properties` are kept and pruned in turn,
/// `additionalProperties` schemas apply to every field, and anything else goes unless the
/// node preserves unknown fields (or the field is one of `keep`).
fn prune_map(
    schema: &Value,
    m: &mut Map<String, Value>,
    path: &str,
    keep: &[&str],
    unknown: &mut Vec<String>,
) {
    let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true
        || schema["additionalProperties"] == true;
    let props = schema["properties"].as_object();
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    m.retain(|k, _| {
        let declared = keep.contains(&k.as_str())
            || props.is_some_and(|p| p.contains_key(k))
            || additional.is_some();
        if !declared && !preserve {
            unknown.push(join(path, k));
        }
        declared || preserve
    });
    for (k, child) in m.iter_mut() {
        // The object's own apiVersion, kind and metadata are never pruned, whatever the
        // schema says of them (a generated CRD declares `metadata: {type: object}`).
        if keep.contains(&k.as_str()) {
            continue;
        }
        let sub = props.and_then(|p| p.get(k)).or(additional);
        if let Some(sub) = sub {
            prune_value(sub, child, &join(path, k), unknown);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn undeclared_fields_go_declared_and_preserved_ones_stay() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }},
        }});
        let mut obj = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n"},
            "spec": {"x": 1, "items": [{"a": "1", "b": 2}], "labels": {"any": "v"}, "free": {"z": 1}},
            "extra": true});
        let mut unknown = prune_object(&schema, &mut obj);
        unknown.sort();
        assert_eq!(unknown, ["extra", "spec.items[0].b", "spec.x"]);
        assert_eq!(
            obj,
            json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n"},
                "spec": {"items": [{"a": "1"}], "labels": {"any": "v"}, "free": {"z": 1}}})
        );
    }

    #[test]
    fn the_metadata_of_the_object_is_kept_when_the_schema_declares_it_as_an_object() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object"},
        }});
        let mut obj = json!({"apiVersion": "g/v1", "kind": "K",
            "metadata": {"name": "n", "namespace": "ns", "labels": {"a": "b"}}, "spec": {}});
        let before = obj.clone();
        assert!(prune_object(&schema, &mut obj).is_empty());
        assert_eq!(obj, before);
    }
}
