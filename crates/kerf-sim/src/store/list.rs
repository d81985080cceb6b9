//! Reading many objects at once: whole kinds (copied or shared) and key-ordered pages.
//!
//! Objects of a kind are kept by `namespace/name`, so a namespace is a contiguous key range
//! and a page starting at a key costs a seek plus its own items, however far into the kind
//! it starts.

use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

use super::{Gvr, Store, StoredObject};

/// Which objects of a kind a page covers.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageQuery<'a> {
    /// Only this namespace (ignored for cluster-scoped kinds); all when None.
    pub namespace: Option<&'a str>,
    /// The first key of the page, relative to the listed scope (see
    /// [`Page::next_start`]); from the start when None.
    pub start: Option<&'a str>,
    /// At most this many objects; all when None.
    pub limit: Option<usize>,
}

/// One page of a list.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The selected objects in key order, shared with the store.
    pub items: Vec<Arc<StoredObject>>,
    /// The store's resourceVersion when the page was read.
    pub resource_version: u64,
    /// When more selected objects follow the page: the [`PageQuery::start`] of the next
    /// page, relative to the listed scope (`name\0` in one namespace or for a
    /// cluster-scoped kind, `namespace/name\0` across namespaces, after the page's last
    /// object `name`), as the real API server writes it into continue tokens.
    pub next_start: Option<String>,
    /// How many selected objects follow the page.
    pub remaining: usize,
}

/// What an unfiltered page left to count: how many objects of a scope there are from key
/// `from` on, at store resourceVersion `rv`. The next page of the same walk reads its
/// remaining count from here instead of walking every key after it.
#[derive(Debug)]
pub(super) struct CountHint {
    kind: String,
    prefix: String,
    from: String,
    rv: u64,
    count: usize,
}

/// The key prefix of the listed scope: `ns/` for one namespace, `/` for a cluster-scoped
/// kind, nothing across namespaces.
fn scope_prefix(gvr: &Gvr, namespace: Option<&str>) -> String {
    match (gvr.namespaced, namespace) {
        (false, _) => "/".to_string(),
        (true, Some(ns)) => format!("{ns}/"),
        (true, None) => String::new(),
    }
}

impl Store {
    /// All objects of a kind (in one namespace, or all when None), sorted by namespace and
    /// name, with the store's current RV. The objects are copies the caller may change.
    pub fn list(&self, gvr: &Gvr, namespace: Option<&str>) -> (Vec<Value>, u64) {
        let (items, rv) = self.list_shared(gvr, namespace);
        (items.iter().map(|o| o.value()).collect(), rv)
    }

    /// Like [`Store::list`], but the objects as stored (shared, not copied).
    pub fn list_shared(&self, gvr: &Gvr, namespace: Option<&str>) -> (Vec<Arc<StoredObject>>, u64) {
        let query = PageQuery {
            namespace,
            ..PageQuery::default()
        };
        let page = self.list_page(gvr, &query, None);
        (page.items, page.resource_version)
    }

    /// One page of the objects of a kind that `keep` selects (all when None), in key
    /// order, read under one lock. The seek to `query.start` is logarithmic and the page
    /// costs its own items; counting what follows walks the keys after the page, except
    /// for the next unfiltered page of a walk while nothing was written in between.
    pub fn list_page(
        &self,
        gvr: &Gvr,
        query: &PageQuery<'_>,
        keep: Option<&dyn Fn(&StoredObject) -> bool>,
    ) -> Page {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let rv = inner.rv;
        let mut page = Page {
            resource_version: rv,
            ..Page::default()
        };
        let kind = gvr.key();
        let Some(map) = inner.objects.get(&kind) else {
            return page;
        };
        let prefix = scope_prefix(gvr, query.namespace);
        let from = format!("{prefix}{}", query.start.unwrap_or_default());
        let mut selected = map
            .range::<str, _>((Bound::Included(from.as_str()), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(_, o)| keep.is_none_or(|keep| keep(o)));
        let mut last = None;
        for (k, o) in selected.by_ref().take(query.limit.unwrap_or(usize::MAX)) {
            page.items.push(Arc::clone(o));
            last = Some(k);
        }
        let hinted = inner.count_hint.as_ref().filter(|h| {
            keep.is_none() && h.rv == rv && h.kind == kind && h.prefix == prefix && h.from == from
        });
        page.remaining = match hinted {
            Some(h) => h.count.saturating_sub(page.items.len()),
            None => selected.count(),
        };
        if page.remaining == 0 {
            return page;
        }
        page.next_start = last.map(|k| format!("{}\u{0}", &k[prefix.len()..]));
        if let Some(next) = page.next_start.as_ref().filter(|_| keep.is_none()) {
            inner.count_hint = Some(CountHint {
                from: format!("{prefix}{next}"),
                kind,
                prefix,
                rv,
                count: page.remaining,
            });
        }
        page
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::gvr;

    fn store_with(keys: &[(&str, &str)]) -> Store {
        let store = Store::new();
        for (ns, name) in keys {
            if store.get(&gvr::NAMESPACES, None, ns).is_none() {
                let obj = json!({"metadata": {"name": ns}});
                store.create(&gvr::NAMESPACES, obj, "").unwrap();
            }
            let obj = json!({"metadata": {"name": name, "namespace": ns}});
            store.create(&gvr::CONFIGMAPS, obj, "").unwrap();
        }
        store
    }

    fn walk(store: &Store, namespace: Option<&str>, limit: usize) -> Vec<(Vec<String>, usize)> {
        let mut start: Option<String> = None;
        let mut pages = Vec::new();
        loop {
            let query = PageQuery {
                namespace,
                start: start.as_deref(),
                limit: Some(limit),
            };
            let page = store.list_page(&gvr::CONFIGMAPS, &query, None);
            let names = page.items.iter().map(|o| o.name().to_string()).collect();
            pages.push((names, page.remaining));
            match page.next_start {
                Some(next) => start = Some(next),
                None => return pages,
            }
        }
    }

    #[test]
    fn pages_cover_a_scope_in_key_order_with_exact_remaining_counts() {
        let store = store_with(&[("b", "2"), ("a", "3"), ("a-x", "9"), ("a", "1"), ("b", "1")]);
        let all = walk(&store, None, 2);
        let expected = [(vec!["9", "1"], 3), (vec!["3", "1"], 1), (vec!["2"], 0)];
        let expected: Vec<(Vec<String>, usize)> = expected
            .iter()
            .map(|(n, r)| (n.iter().map(|s| s.to_string()).collect(), *r))
            .collect();
        assert_eq!(all, expected);
        let in_a = walk(&store, Some("a"), 1);
        assert_eq!(in_a.len(), 2);
        assert_eq!(in_a[0], (vec!["1".to_string()], 1));
        assert_eq!(in_a[1], (vec!["3".to_string()], 0));
    }

    #[test]
    fn a_write_between_pages_is_counted_in_the_next_page() {
        let store = store_with(&[("a", "1"), ("a", "2"), ("a", "3"), ("a", "4")]);
        let query = PageQuery {
            namespace: Some("a"),
            start: None,
            limit: Some(2),
        };
        let first = store.list_page(&gvr::CONFIGMAPS, &query, None);
        assert_eq!(first.remaining, 2);
        let obj = json!({"metadata": {"name": "5", "namespace": "a"}});
        store.create(&gvr::CONFIGMAPS, obj, "").unwrap();
        let next = PageQuery {
            start: first.next_start.as_deref(),
            ..query
        };
        let second = store.list_page(&gvr::CONFIGMAPS, &next, None);
        let names: Vec<&str> = second.items.iter().map(|o| o.name()).collect();
        assert_eq!((names, second.remaining), (vec!["3", "4"], 1));
    }

    #[test]
    fn a_filter_counts_only_what_it_keeps() {
        let store = store_with(&[("a", "1"), ("a", "2"), ("a", "3"), ("a", "4"), ("a", "5")]);
        let odd = |o: &StoredObject| o.name() != "2" && o.name() != "4";
        let query = PageQuery {
            namespace: None,
            start: None,
            limit: Some(1),
        };
        let page = store.list_page(&gvr::CONFIGMAPS, &query, Some(&odd));
        assert_eq!((page.items.len(), page.remaining), (1, 2));
        assert_eq!(page.next_start.as_deref(), Some("a/1\u{0}"));
    }
}
