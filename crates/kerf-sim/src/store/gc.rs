//! Garbage collection: background propagation of deletes to dependents whose owners are
//! all gone, and removal of objects whose namespace is gone.

use std::collections::HashSet;

use super::{Gvr, Inner, Store, gvr, obj_key};

impl Store {
    /// Deletes every object whose ownerReferences all point to objects that no longer exist,
    /// and every object in a namespace that no longer exists.
    pub fn collect_garbage(&self) {
        let mut tried = HashSet::new();
        loop {
            let victims: Vec<_> = {
                let inner = self.lock();
                orphans(&inner)
                    .into_iter()
                    .filter(|v| !tried.contains(v))
                    .collect()
            };
            if victims.is_empty() {
                return;
            }
            for v in victims {
                let (g, ns, name) = &v;
                let _ = self.delete_one(g, ns.as_deref(), name);
                tried.insert(v);
            }
        }
    }
}

type Victim = (Gvr, Option<String>, String);

fn orphans(inner: &Inner) -> Vec<Victim> {
    let ns_map = inner.objects.get(&gvr::NAMESPACES.key());
    let uids: HashSet<&str> = inner
        .objects
        .values()
        .flat_map(|m| m.values().map(|o| o.uid()))
        .filter(|u| !u.is_empty())
        .collect();
    let mut out = Vec::new();
    for (key, m) in &inner.objects {
        let Some(g) = inner.kinds.get(key) else {
            continue;
        };
        for o in m.values() {
            let ns = o.namespace().filter(|_| g.namespaced);
            let ns_gone =
                ns.is_some_and(|ns| !ns_map.is_some_and(|n| n.contains_key(&obj_key(None, ns))));
            let owner_gone = o.owner_uids().is_some_and(|mut refs| {
                let mut any = false;
                let all_gone = refs.all(|u| {
                    any = true;
                    u.is_none_or(|u| !uids.contains(u))
                });
                any && all_gone
            });
            if ns_gone || owner_gone {
                out.push((*g, ns.map(str::to_string), o.name().to_string()));
            }
        }
    }
    out
}
