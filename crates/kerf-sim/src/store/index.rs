//! Indexes kept beside the objects: which object has a uid, and which objects name a uid
//! among their ownerReferences. The controllers find a workload's dependents and a
//! dependent's owners through them instead of listing a whole kind.

use std::collections::{BTreeSet, HashMap};

use super::StoredObject;

/// Where an object lives: its resource key and its `namespace/name` store key.
pub(super) type Slot = (String, String);

/// The uid and owner indexes of the store.
#[derive(Debug, Default)]
pub(super) struct Indexes {
    by_uid: HashMap<Box<str>, Slot>,
    owned: HashMap<Box<str>, BTreeSet<Slot>>,
}

fn owners(obj: &StoredObject) -> impl Iterator<Item = &str> {
    obj.owner_uids().into_iter().flatten().flatten()
}

impl Indexes {
    /// Moves the entries of one object from its `old` version to its `new` one (None: it
    /// did not exist / it is gone).
    pub(super) fn replace(
        &mut self,
        kind: &str,
        key: &str,
        old: Option<&StoredObject>,
        new: Option<&StoredObject>,
    ) {
        let slot = || (kind.to_string(), key.to_string());
        if let Some(old) = old {
            if !old.uid().is_empty() {
                self.by_uid.remove(old.uid());
            }
            for owner in owners(old) {
                if let Some(set) = self.owned.get_mut(owner) {
                    set.remove(&slot());
                    if set.is_empty() {
                        self.owned.remove(owner);
                    }
                }
            }
        }
        if let Some(new) = new {
            if !new.uid().is_empty() {
                self.by_uid.insert(new.uid().into(), slot());
            }
            for owner in owners(new) {
                self.owned.entry(owner.into()).or_default().insert(slot());
            }
        }
    }

    /// The slot of the object with `uid`.
    pub(super) fn by_uid(&self, uid: &str) -> Option<&Slot> {
        self.by_uid.get(uid)
    }

    /// The slots of the objects of `kind` that name `owner` in their ownerReferences.
    pub(super) fn owned<'a>(&'a self, owner: &str, kind: &'a str) -> impl Iterator<Item = &'a str> {
        self.owned
            .get(owner)
            .into_iter()
            .flatten()
            .filter(move |(k, _)| k == kind)
            .map(|(_, key)| key.as_str())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::store::{Store, gvr};

    fn store() -> Store {
        let store = Store::new();
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}});
        assert!(store.create(&gvr::NAMESPACES, ns, "t").is_ok());
        store
    }

    fn pod(name: &str, owner: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns",
                "ownerReferences": [{"uid": owner, "controller": true}]}})
    }

    fn names(objs: &[Value]) -> Vec<&str> {
        objs.iter()
            .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
            .collect()
    }

    /// Creates a ReplicaSet and returns its uid.
    fn owner(s: &Store, name: &str) -> String {
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "ns"}});
        s.create(&gvr::REPLICASETS, rs, "t")
            .ok()
            .and_then(|o| o.pointer("/metadata/uid")?.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    #[test]
    fn owned_objects_follow_creation_owner_changes_and_deletion() {
        let s = store();
        let (rs1, rs2) = (owner(&s, "rs1"), owner(&s, "rs2"));
        for (name, owner) in [("a", &rs1), ("b", &rs1), ("c", &rs2)] {
            assert!(s.create(&gvr::PODS, pod(name, owner), "t").is_ok());
        }
        assert_eq!(names(&s.owned(&gvr::PODS, &rs1)), ["a", "b"]);
        assert!(s.owned(&gvr::REPLICASETS, &rs1).is_empty());
        let moved = s.update(&gvr::PODS, pod("b", &rs2), "t");
        assert!(moved.is_ok());
        assert_eq!(names(&s.owned(&gvr::PODS, &rs1)), ["a"]);
        assert_eq!(names(&s.owned(&gvr::PODS, &rs2)), ["b", "c"]);
        assert!(s.delete(&gvr::PODS, Some("ns"), "c").is_ok());
        assert_eq!(names(&s.owned(&gvr::PODS, &rs2)), ["b"]);
    }

    #[test]
    fn objects_are_found_by_uid_until_deleted() {
        let s = store();
        let rs1 = owner(&s, "rs1");
        let created = s.create(&gvr::PODS, pod("a", &rs1), "t");
        let uid = created
            .ok()
            .and_then(|p| p.pointer("/metadata/uid")?.as_str().map(str::to_string))
            .unwrap_or_default();
        let found = s.by_uid(&uid).map(|(kind, o)| (kind, o.name().to_string()));
        assert_eq!(found, Some(("pods".to_string(), "a".to_string())));
        assert!(s.delete(&gvr::PODS, Some("ns"), "a").is_ok());
        assert!(s.by_uid(&uid).is_none());
    }
}
