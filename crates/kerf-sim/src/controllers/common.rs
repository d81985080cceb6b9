//! Helpers shared by the controllers, the kubelet and admission: label selectors, owner
//! references, int-or-percent values, pod readiness and template hashes.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Whether a `LabelSelector` (`matchLabels` and `matchExpressions`) matches `labels`. A null
/// or empty selector matches everything.
pub fn selector_matches(selector: Option<&Value>, labels: Option<&Value>) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return true;
    };
    let empty = serde_json::Map::new();
    let labels = labels.and_then(Value::as_object).unwrap_or(&empty);
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let match_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let exprs = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    match_labels
        && exprs.iter().all(|e| {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                "In" => label(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        })
}

/// Whether a plain `key: value` map (a nodeSelector) is contained in `labels`.
pub fn map_selector_matches(selector: Option<&Value>, labels: Option<&Value>) -> bool {
    let Some(sel) = selector.and_then(Value::as_object) else {
        return true;
    };
    sel.iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// Resolves an int-or-percent value against `total`, rounding a percentage up or down.
/// Malformed values resolve to `default`.
pub fn scaled_value(v: Option<&Value>, total: i64, round_up: bool, default: i64) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(p) if round_up => (p * total + 99) / 100,
            Some(p) => p * total / 100,
            None => s.parse().unwrap_or(default),
        },
        _ => default,
    }
}

/// An object's `metadata.name`.
pub fn name(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// An object's `metadata.namespace`.
pub fn namespace(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// An object's `metadata.uid`.
pub fn uid(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// An integer at a JSON pointer, or `default`.
pub fn int_at(obj: &Value, pointer: &str, default: i64) -> i64 {
    obj.pointer(pointer)
        .and_then(Value::as_i64)
        .unwrap_or(default)
}

/// Whether the object is being deleted.
pub fn terminating(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// Whether `obj` has a controller owner reference to the owner with `owner_uid`.
pub fn controlled_by(obj: &Value, owner_uid: &str) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("uid").and_then(Value::as_str) == Some(owner_uid)
                    && r.get("controller").and_then(Value::as_bool) == Some(true)
            })
        })
}

/// The uid of the object's controller (the owner reference with `controller: true`).
pub fn controller_uid(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| r.get("uid").and_then(Value::as_str))
}

/// A controller owner reference to `owner`.
pub fn owner_ref(owner: &Value) -> Value {
    json!({
        "apiVersion": owner.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": owner.get("kind").cloned().unwrap_or(Value::Null),
        "name": name(owner),
        "uid": uid(owner),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// Whether a pod is Running with its Ready condition True.
pub fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
        && condition_status(pod, "Ready") == Some("True")
}

/// Whether a pod has finished (Succeeded or Failed).
pub fn pod_terminal(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

/// The status of the condition `kind` in `obj.status.conditions`.
pub fn condition_status<'a>(obj: &'a Value, kind: &str) -> Option<&'a str> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))?
        .get("status")?
        .as_str()
}

/// A copy of `obj.status.conditions` (empty when there are none), to update with
/// [`set_condition`].
pub fn conditions_of(obj: &Value) -> Vec<Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Sets a condition in a list, keeping `lastTransitionTime` when the status did not change
/// and `lastUpdateTime` (where the condition has one) when nothing changed.
pub fn set_condition(conditions: &mut Vec<Value>, mut cond: Value, now: &str) {
    let kind = cond.get("type").cloned();
    let Some(i) = conditions
        .iter()
        .position(|c| c.get("type") == kind.as_ref())
    else {
        cond["lastTransitionTime"] = json!(now);
        if cond.get("lastUpdateTime").is_some() {
            cond["lastUpdateTime"] = json!(now);
        }
        conditions.push(cond);
        return;
    };
    let prev = &conditions[i];
    let keep = |key: &str, keep: bool| {
        prev.get(key)
            .filter(|_| keep)
            .cloned()
            .unwrap_or_else(|| json!(now))
    };
    let same_status = prev.get("status") == cond.get("status");
    let ltt = keep("lastTransitionTime", same_status);
    if cond.get("lastUpdateTime").is_some() {
        let unchanged = strip_times(prev) == strip_times(&cond);
        cond["lastUpdateTime"] = keep("lastUpdateTime", unchanged);
    }
    cond["lastTransitionTime"] = ltt;
    conditions[i] = cond;
}

fn strip_times(cond: &Value) -> Value {
    let mut c = cond.clone();
    if let Some(m) = c.as_object_mut() {
        m.remove("lastTransitionTime");
        m.remove("lastUpdateTime");
    }
    c
}

/// RFC 3339 with second precision, as Kubernetes writes timestamps.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A stable, name-safe hash of a JSON value (10 characters from the alphabet Kubernetes uses
/// for `pod-template-hash`).
pub fn template_hash(template: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let canonical = serde_json::to_string(&canonicalize(template)).unwrap_or_default();
    let digest = Sha256::digest(canonical.as_bytes());
    digest
        .iter()
        .take(10)
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect()
}

fn canonicalize(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), canonicalize(v)))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(canonicalize).collect()),
        other => other.clone(),
    }
}

/// A random 5-character suffix for generated names.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let seed = format!(
        "{:?}{:?}",
        std::time::SystemTime::now(),
        std::thread::current().id()
    );
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let digest = Sha256::digest(format!("{seed}{n}").as_bytes());
    digest
        .iter()
        .take(5)
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect()
}

static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Builds a pod from a template: labels and annotations from the template metadata (plus
/// `extra_labels`), the template spec, a controller owner reference and a Pending status.
pub fn pod_from_template(
    template: &Value,
    owner: &Value,
    pod_name: &str,
    extra_labels: &[(&str, String)],
) -> Value {
    let mut labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    for (k, v) in extra_labels {
        labels[*k] = json!(v);
    }
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": namespace(owner),
            "labels": labels,
            "ownerReferences": [owner_ref(owner)],
        },
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    });
    if let Some(a) = template.pointer("/metadata/annotations") {
        pod["metadata"]["annotations"] = a.clone();
    }
    let qos = crate::kubelet::resources::qos_class(&pod);
    pod["status"] = json!({"phase": "Pending", "qosClass": qos});
    pod
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_labels_and_expressions() {
        let labels = json!({"app": "web", "tier": "front"});
        let sel = json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "x"]},
                                 {"key": "gone", "operator": "DoesNotExist"}]});
        assert!(selector_matches(Some(&sel), Some(&labels)));
        let sel = json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]});
        assert!(!selector_matches(Some(&sel), Some(&labels)));
        assert!(selector_matches(Some(&json!({})), None));
    }

    #[test]
    fn int_or_percent_rounding() {
        assert_eq!(scaled_value(Some(&json!("25%")), 3, true, 0), 1);
        assert_eq!(scaled_value(Some(&json!("25%")), 3, false, 0), 0);
        assert_eq!(scaled_value(Some(&json!(2)), 3, false, 0), 2);
        assert_eq!(scaled_value(None, 3, false, 7), 7);
    }

    #[test]
    fn template_hash_is_stable_and_key_order_free() {
        let a = json!({"spec": {"a": 1, "b": 2}});
        let b = json!({"spec": {"b": 2, "a": 1}});
        assert_eq!(template_hash(&a), template_hash(&b));
        assert_ne!(template_hash(&a), template_hash(&json!({"spec": {"a": 2}})));
        assert_eq!(template_hash(&a).len(), 10);
    }
}
