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
