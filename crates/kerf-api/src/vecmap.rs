//! [`VecMap`]: a map kept as a vector sorted by key, for the small maps of rsr status that
//! the agent keeps in its cache for every rsr.
//!
//! A `BTreeMap` with one to three entries allocates a whole node of eleven slots: for
//! `status.watch.baselines` (a map per pod of a map per container) that was about 360
//! bytes per pod of every watched workload. A `VecMap` holds only its entries. On the wire
//! and in the CRD schema it is the same JSON object as the `BTreeMap` it replaces.

use std::borrow::{Borrow, Cow};
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// A map as a vector of entries sorted by key, each key once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VecMap<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        VecMap {
            entries: Vec::new(),
        }
    }
}

impl<K: Ord, V> VecMap<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        VecMap::default()
    }

    fn find<Q: Ord + ?Sized>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        self.entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    /// The value of `key`.
    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    /// The value of `key`, to change.
    pub fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    /// Whether `key` has a value.
    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find(key).is_ok()
    }

    /// Sets the value of `key`, giving back the value it replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// Removes `key`, giving back its value.
    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &K> {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The values in key order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for VecMap<K, V> {
    /// Sorted by key; of equal keys the last wins, as it would in a `BTreeMap`.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut entries: Vec<(K, V)> = iter.into_iter().collect();
        // A stable sort keeps equal keys in their order; the dedup keeps the last of them.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.reverse();
        entries.dedup_by(|a, b| a.0 == b.0);
        entries.reverse();
        entries.shrink_to_fit();
        VecMap { entries }
    }
}

impl<K: Ord, V> From<BTreeMap<K, V>> for VecMap<K, V> {
    fn from(m: BTreeMap<K, V>) -> Self {
        let mut entries: Vec<(K, V)> = m.into_iter().collect();
        entries.shrink_to_fit();
        VecMap { entries }
    }
}

impl<K: Ord, V> From<VecMap<K, V>> for BTreeMap<K, V> {
    fn from(m: VecMap<K, V>) -> Self {
        m.entries.into_iter().collect()
    }
}

impl<K, V> IntoIterator for VecMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<K: Serialize, V: Serialize> Serialize for VecMap<K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.entries.len()))?;
        for (k, v) in &self.entries {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, K: Ord + Deserialize<'de>, V: Deserialize<'de>> Deserialize<'de> for VecMap<K, V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V_<K, V>(PhantomData<(K, V)>);
        impl<'de, K: Ord + Deserialize<'de>, V: Deserialize<'de>> Visitor<'de> for V_<K, V> {
            type Value = VecMap<K, V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(a.size_hint().unwrap_or(0).min(1024));
                while let Some(entry) = a.next_entry()? {
                    entries.push(entry);
                }
                Ok(entries.into_iter().collect())
            }
        }
        d.deserialize_map(V_(PhantomData))
    }
}

impl<K: JsonSchema, V: JsonSchema> JsonSchema for VecMap<K, V> {
    fn schema_name() -> Cow<'static, str> {
        <BTreeMap<K, V> as JsonSchema>::schema_name()
    }

    fn inline_schema() -> bool {
        <BTreeMap<K, V> as JsonSchema>::inline_schema()
    }

    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        <BTreeMap<K, V> as JsonSchema>::json_schema(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_the_same_json_object_as_a_btreemap() {
        let json = r#"{"b":{"app":1},"a":{"app":2,"side":3}}"#;
        let v: VecMap<String, VecMap<String, i32>> = serde_json::from_str(json).unwrap();
        let b: BTreeMap<String, BTreeMap<String, i32>> = serde_json::from_str(json).unwrap();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        assert_eq!(v.get("a").and_then(|a| a.get("side")), Some(&3));
        assert_eq!(v.keys().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value_as_a_btreemap_does() {
        let json = r#"{"k":"first","j":"x","k":"last"}"#;
        let v: VecMap<String, String> = serde_json::from_str(json).unwrap();
        let b: BTreeMap<String, String> = serde_json::from_str(json).unwrap();
        assert_eq!(BTreeMap::from(v), b);
    }

    #[test]
    fn inserts_keep_the_keys_sorted_and_unique() {
        let mut m = VecMap::new();
        assert_eq!(m.insert("c".to_owned(), 1), None);
        assert_eq!(m.insert("a".to_owned(), 2), None);
        assert_eq!(m.insert("c".to_owned(), 3), Some(1));
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            [(&"a".to_owned(), &2), (&"c".to_owned(), &3)]
        );
        assert_eq!(m.remove("a"), Some(2));
        assert!(!m.contains_key("a") && m.get("c") == Some(&3) && m.len() == 1);
    }

    #[test]
    fn its_schema_is_the_btreemaps() {
        let mut g = SchemaGenerator::default();
        let ours = VecMap::<String, String>::json_schema(&mut g);
        let theirs = BTreeMap::<String, String>::json_schema(&mut g);
        assert_eq!(ours, theirs);
    }
}
