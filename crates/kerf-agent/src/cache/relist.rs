//! Relists into the indexes of namespaced objects: a watch over the cluster replaces a
//! whole index, a watch of one namespace (a scoped install) replaces that namespace's
//! part and leaves the others' entries alone.

use super::by_workload::ByWorkload;
use super::cluster::{HpaInfo, PdbIndex, PdbInfo};
use super::kerf::RsrEntry;
use super::pods::{PodIndex, PodInfo};
use super::types::ChangeSet;
use super::workloads::{ReplicaSetIndex, ReplicaSetInfo};

/// An index of namespaced objects that a watch relists into: whole, or one namespace's
/// part.
pub(super) trait Relist<T> {
    /// Replaces every entry.
    fn replace_all(&mut self, items: Vec<T>, changes: &mut ChangeSet);
    /// Replaces the entries of `namespace`.
    fn replace_namespace(&mut self, namespace: &str, items: Vec<T>, changes: &mut ChangeSet);
}

/// Implements [`Relist`] with the index's own `replace` and `replace_in`.
macro_rules! relist_with_replace_in {
    ($index:ty, $item:ty) => {
        impl Relist<$item> for $index {
            fn replace_all(&mut self, items: Vec<$item>, changes: &mut ChangeSet) {
                self.replace(items, changes)
            }
            fn replace_namespace(
                &mut self,
                namespace: &str,
                items: Vec<$item>,
                changes: &mut ChangeSet,
            ) {
                self.replace_in(namespace, items, changes)
            }
        }
    };
}

relist_with_replace_in!(PodIndex, PodInfo);
relist_with_replace_in!(ReplicaSetIndex, ReplicaSetInfo);
relist_with_replace_in!(ByWorkload<HpaInfo>, HpaInfo);
relist_with_replace_in!(PdbIndex, PdbInfo);
relist_with_replace_in!(ByWorkload<RsrEntry>, RsrEntry);

/// Stores what one watch listed into `index`: everything for a watch over the cluster
/// (`ns` is `None`), namespace `ns`'s part for a watch of that namespace.
pub(super) fn relist<T>(
    index: &mut impl Relist<T>,
    ns: Option<&str>,
    items: Vec<T>,
    changes: &mut ChangeSet,
) {
    match ns {
        Some(ns) => index.replace_namespace(ns, items, changes),
        None => index.replace_all(items, changes),
    }
}

#[cfg(test)]
mod tests;
