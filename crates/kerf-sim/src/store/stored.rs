//! An object as the store keeps it: its JSON text (about a tenth of the memory of a
//! `serde_json::Value` tree, and what LIST and watch answers copy out as is) plus the
//! metadata that scans, selectors and garbage collection read without parsing.

use serde_json::{Map, Value};

/// One stored object version, shared (behind an `Arc`) by the store, the watch history and
/// every subscriber.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredObject {
    json: Box<str>,
    namespace: Option<Box<str>>,
    name: Box<str>,
    uid: Box<str>,
    resource_version: u64,
    labels: Option<Box<Map<String, Value>>>,
    /// The uid of each ownerReference (None where a reference has none); None without an
    /// `ownerReferences` array.
    owner_uids: Option<Box<[Option<Box<str>>]>>,
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

impl StoredObject {
    /// Renders an object for storage.
    pub fn new(obj: &Value) -> StoredObject {
        let owner_uids = obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .map(|r| r.get("uid").and_then(Value::as_str).map(Box::from))
                    .collect()
            });
        StoredObject {
            // `serde_json::to_string` writes bytes straight into the buffer; `Display` goes
            // through `fmt::Write` a token at a time (9 % of kerf-sim's CPU in a pass).
            json: serde_json::to_string(obj)
                .unwrap_or_default()
                .into_boxed_str(),
            namespace: meta_str(obj, "namespace").map(Box::from),
            name: meta_str(obj, "name").unwrap_or_default().into(),
            uid: meta_str(obj, "uid").unwrap_or_default().into(),
            resource_version: meta_str(obj, "resourceVersion")
                .and_then(|rv| rv.parse().ok())
                .unwrap_or(0),
            labels: obj
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|l| Box::new(l.clone())),
            owner_uids,
        }
    }

    /// The object as a value (parsed from its JSON text: a copy the caller may change).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or_else(|e| {
            tracing::error!(error = %e, "stored object is not valid JSON");
            Value::Null
        })
    }

    /// The object's JSON text, exactly as serializing [`StoredObject::value`] writes it.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// `metadata.resourceVersion` as a number (0 when absent).
    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    /// `metadata.labels`, if the object has a labels map.
    pub fn labels(&self) -> Option<&Map<String, Value>> {
        self.labels.as_deref()
    }

    /// The uids of the object's ownerReferences (None where a reference has none); None
    /// without an `ownerReferences` array.
    pub fn owner_uids(&self) -> Option<impl Iterator<Item = Option<&str>>> {
        self.owner_uids
            .as_deref()
            .map(|refs| refs.iter().map(|u| u.as_deref()))
    }

    /// `{"metadata":{"name":..,"namespace":..}}`: enough for field selectors on the name
    /// and namespace.
    pub fn metadata_stub(&self) -> Value {
        let mut meta = Map::new();
        meta.insert("name".into(), Value::from(self.name()));
        if let Some(ns) = self.namespace() {
            meta.insert("namespace".into(), Value::from(ns));
        }
        let mut obj = Map::new();
        obj.insert("metadata".into(), Value::Object(meta));
        Value::Object(obj)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn stored_objects_keep_their_json_text_and_metadata() {
        let obj = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "labels": {"app": "web"},
                "ownerReferences": [{"uid": "o1"}, {"name": "no-uid"}]},
            "spec": {"x": 1.5, "big": 18446744073709551615u64, "neg": -3}});
        let s = StoredObject::new(&obj);
        assert_eq!(s.value(), obj);
        assert_eq!(s.json(), serde_json::to_string(&obj).unwrap());
        assert_eq!((s.namespace(), s.name(), s.uid()), (Some("ns"), "p", "u1"));
        assert_eq!(s.resource_version(), 7);
        assert_eq!(s.labels(), obj["metadata"]["labels"].as_object());
        let owners: Vec<_> = s.owner_uids().unwrap().collect();
        assert_eq!(owners, vec![Some("o1"), None]);
        assert_eq!(
            s.metadata_stub(),
            json!({"metadata": {"name": "p", "namespace": "ns"}})
        );
    }
}
