//! One index shape for the cached objects that point at a workload (an HPA at its
//! target, an rsr at its workload): items by namespace and name, and their names by
//! workload, each change reported for the workload it touches.

use std::collections::HashMap;
use std::sync::Arc;

use super::types::{Change, ChangeSet, WorkloadKey};

/// A cached object that may point at a workload.
pub trait WorkloadItem {
    /// Namespace and name.
    fn key(&self) -> (&Arc<str>, &str);
    /// The workload it points at, if any.
    fn workload(&self) -> Option<&WorkloadKey>;
}

/// Implements [`WorkloadItem`] for a struct with `namespace: Arc<str>` and `name: String`
/// whose `$workload: Option<WorkloadKey>` field names the workload it points at.
macro_rules! workload_item {
    ($item:ty, $workload:ident) => {
        impl $crate::cache::by_workload::WorkloadItem for $item {
            fn key(&self) -> (&std::sync::Arc<str>, &str) {
                (&self.namespace, &self.name)
            }
            fn workload(&self) -> Option<&$crate::cache::types::WorkloadKey> {
                self.$workload.as_ref()
            }
        }
    };
}

pub(crate) use workload_item;

/// Items by namespace and name, and their names by workload (sorted: a workload has one
/// or a few, and a one-entry B-tree set would take a whole node of eleven slots).
#[derive(Debug)]
pub struct ByWorkload<T> {
    items: HashMap<(Arc<str>, String), Arc<T>>,
    by_workload: HashMap<WorkloadKey, Vec<String>>,
}

impl<T> Default for ByWorkload<T> {
    fn default() -> Self {
        ByWorkload {
            items: HashMap::new(),
            by_workload: HashMap::new(),
        }
    }
}

impl<T: WorkloadItem> ByWorkload<T> {
    /// Adds or replaces an item.
    pub fn upsert(&mut self, item: T, changes: &mut ChangeSet) {
        let (namespace, name) = item.key();
        let key = (namespace.clone(), name.to_owned());
        self.remove(&key.0, &key.1, changes);
        if let Some(w) = item.workload() {
            changes.insert(Change::Workload(w.clone()));
            let names = self.by_workload.entry(w.clone()).or_default();
            if let Err(i) = names.binary_search(&key.1) {
                names.insert(i, key.1.clone());
            }
        }
        self.items.insert(key, Arc::new(item));
    }

    /// Removes an item.
    pub fn remove(&mut self, namespace: &Arc<str>, name: &str, changes: &mut ChangeSet) {
        let Some(old) = self.items.remove(&(namespace.clone(), name.to_owned())) else {
            return;
        };
        if let Some(w) = old.workload() {
            changes.insert(Change::Workload(w.clone()));
            if let Some(set) = self.by_workload.get_mut(w) {
                set.retain(|n| n != name);
                if set.is_empty() {
                    self.by_workload.remove(w);
                }
            }
        }
    }

    /// Replaces every item (after a relist).
    pub fn replace(&mut self, items: Vec<T>, changes: &mut ChangeSet) {
        let old: Vec<_> = self.items.keys().cloned().collect();
        for (ns, name) in old {
            self.remove(&ns, &name, changes);
        }
        for item in items {
            self.upsert(item, changes);
        }
    }

    /// Replaces the items of `namespace` (after a relist of that namespace alone); the
    /// items of other namespaces stay.
    pub fn replace_in(&mut self, namespace: &str, items: Vec<T>, changes: &mut ChangeSet) {
        let old: Vec<_> = self
            .items
            .keys()
            .filter(|(ns, _)| **ns == *namespace)
            .cloned()
            .collect();
        for (ns, name) in old {
            self.remove(&ns, &name, changes);
        }
        for item in items {
            self.upsert(item, changes);
        }
    }

    /// The items that point at `key`, by name.
    pub fn for_workload(&self, key: &WorkloadKey) -> Vec<Arc<T>> {
        self.by_workload
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|n| self.items.get(&(key.namespace.clone(), n.clone())).cloned())
            .collect()
    }

    /// One item by namespace and name.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<T>> {
        self.items
            .get(&(Arc::from(namespace), name.to_owned()))
            .cloned()
    }

    /// Every item.
    pub fn all(&self) -> Vec<Arc<T>> {
        self.items.values().cloned().collect()
    }
}
