//! What the store fills in or keeps when an object is created or replaced: names from
//! generateName, uid, timestamps, generation, and the fields a write may not change.

use serde_json::{Value, json};

use super::{ApiError, Gvr};

pub(super) fn prepare_create(gvr: &Gvr, obj: &mut Value, now: &str) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not an object",
        ));
    }
    if obj.get("metadata").is_none_or(|m| !m.is_object()) {
        obj["metadata"] = json!({});
    }
    obj["apiVersion"] = json!(gvr.api_version());
    obj["kind"] = json!(gvr.kind);
    let meta = &mut obj["metadata"];
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        let Some(prefix) = meta.get("generateName").and_then(Value::as_str) else {
            let causes = [(
                "FieldValueRequired".to_string(),
                "metadata.name".to_string(),
                "Required value: name or generateName is required".to_string(),
            )];
            return Err(ApiError::invalid(gvr.kind, gvr.group, "", &causes));
        };
        meta["name"] = json!(format!("{prefix}{}", random_suffix()));
    }
    if !gvr.namespaced
        && let Some(m) = meta.as_object_mut()
    {
        m.remove("namespace");
    }
    meta["uid"] = json!(uuid::Uuid::new_v4().to_string());
    meta["creationTimestamp"] = json!(now);
    if let Some(m) = meta.as_object_mut() {
        m.remove("resourceVersion");
        m.remove("deletionTimestamp");
    }
    if gvr.has_generation() {
        meta["generation"] = json!(1);
    }
    Ok(())
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4().as_bytes()[..5]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// Fills the fields a write may not change from the stored object.
pub(super) fn merge_for_write(gvr: &Gvr, old: &Value, obj: &mut Value, subresource: Option<&str>) {
    if !obj.is_object() {
        return;
    }
    if subresource == Some("status") {
        let status = obj.get("status").cloned();
        *obj = old.clone();
        match status {
            Some(s) => obj["status"] = s,
            None => {
                if let Some(m) = obj.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        return;
    }
    obj["apiVersion"] = json!(gvr.api_version());
    obj["kind"] = json!(gvr.kind);
    if obj.get("metadata").is_none_or(|m| !m.is_object()) {
        obj["metadata"] = json!({});
    }
    for f in [
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "managedFields",
        "namespace",
    ] {
        match old["metadata"].get(f) {
            Some(v) => obj["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = obj["metadata"].as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
    if subresource.is_none() && !is_statusless(gvr) {
        match old.get("status") {
            Some(s) => obj["status"] = s.clone(),
            None => {
                if let Some(m) = obj.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    // A binding (the scheduler setting spec.nodeName) does not bump the generation.
    if gvr.has_generation() && subresource != Some("binding") && spec_changed(old, obj) {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        obj["metadata"]["generation"] = json!(g + 1);
    }
}

fn is_statusless(gvr: &Gvr) -> bool {
    matches!(
        gvr.resource,
        "configmaps" | "secrets" | "events" | "leases" | "mutatingwebhookconfigurations"
    )
}

fn strip_meta(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    v
}

fn spec_changed(old: &Value, new: &Value) -> bool {
    strip_meta(old) != strip_meta(new)
}

pub(super) fn same_content(old: &Value, new: &Value) -> bool {
    let norm = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            if let Some(Value::Array(mf)) = m.get_mut("managedFields") {
                for e in mf.iter_mut() {
                    if let Some(e) = e.as_object_mut() {
                        e.remove("time");
                    }
                }
            }
        }
        v
    };
    norm(old) == norm(new)
}
