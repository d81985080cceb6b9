//! Garbage collection: background propagation of deletes to dependents whose owners are
//! all gone, and removal of objects whose namespace is gone.

use std::collections::HashSet;

use serde_json::Value;

use super::{Gvr, Inner, Store, gvr, meta_str, obj_key};

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
    let mut uids = HashSet::new();
    let ns_map = inner.objects.get(&gvr::NAMESPACES.key());
    for m in inner.objects.values() {
        for o in m.values() {
            if let Some(u) = meta_str(o, "uid") {
                uids.insert(u.to_string());
            }
        }
    }
    let mut out = Vec::new();
    for (key, m) in &inner.objects {
        let Some(g) = inner.kinds.get(key) else {
            continue;
        };
        for o in m.values() {
            let ns = meta_str(o, "namespace").filter(|_| g.namespaced);
            let ns_gone =
                ns.is_some_and(|ns| !ns_map.is_some_and(|n| n.contains_key(&obj_key(None, ns))));
            let owners = o
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array);
            let owner_gone = owners.is_some_and(|refs| {
                !refs.is_empty()
                    && refs.iter().all(|r| {
                        r.get("uid")
                            .and_then(Value::as_str)
                            .is_none_or(|u| !uids.contains(u))
                    })
            });
            if ns_gone || owner_gone {
                out.push((
                    *g,
                    ns.map(str::to_string),
                    meta_str(o, "name").unwrap_or_default().to_string(),
                ));
            }
        }
    }
    out
}
