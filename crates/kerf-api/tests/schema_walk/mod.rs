//! A walk over every node of an OpenAPI schema (shared by `crd_schema` and `crd_cel`).

use serde_json::Value;

/// Visits every schema node under `node` (properties, items, additionalProperties and the
/// branches of anyOf/allOf/oneOf) with its path.
pub fn walk<'a>(node: &'a Value, path: &str, f: &mut dyn FnMut(&str, &'a Value)) {
    f(path, node);
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            walk(v, &format!("{path}.{k}"), f);
        }
    }
    if let Some(items) = node.get("items") {
        walk(items, &format!("{path}[]"), f);
    }
    if let Some(add) = node.get("additionalProperties").filter(|a| a.is_object()) {
        walk(add, &format!("{path}{{}}"), f);
    }
    for junctor in ["anyOf", "allOf", "oneOf"] {
        for (i, b) in node
            .get(junctor)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            walk(b, &format!("{path}.{junctor}[{i}]"), f);
        }
    }
}
