//! A recommendation list read with the agent's namespace list (`scope.namespaces`) in
//! hand: a recommendation for a namespace outside it is left out as it is read, and only
//! its workload and id are kept, packed ([`OutsideScopeList`]), for the one `OutOfScope`
//! report each gets. The agent then holds the recommendations it manages, not the whole
//! cluster's: with a tenth of the namespaces in scope, a tenth of the list
//! (docs/benchmarks.md).

use std::fmt;

use chrono::{DateTime, Utc};
use kerf_api::WorkloadKind;
use kerf_api::hub::{Recommendation, RecommendationList};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::cache::WorkloadKey;

/// A recommendation the list holds for a workload outside the namespace list, as
/// [`OutsideScopeList`] gives it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutsideScope<'a> {
    /// The workload's namespace.
    pub namespace: &'a str,
    /// The workload's kind.
    pub kind: WorkloadKind,
    /// The workload's name.
    pub name: &'a str,
    /// The recommendation's id.
    pub recommendation_id: &'a str,
}

impl OutsideScope<'_> {
    /// The workload's key.
    pub fn workload(&self) -> WorkloadKey {
        WorkloadKey::new(self.namespace, self.kind, self.name)
    }
}

/// The recommendations a list holds outside the namespace list, in the list's order,
/// packed: their names and ids back to back in one string, their namespaces once each in a
/// table, and for each where its parts end, its namespace and its kind (12 bytes). With
/// most of a large cluster outside the scope these are most of the list; packed, 9,000 of
/// them are three allocations instead of 27,000, and about a quarter of the memory
/// (docs/benchmarks.md, "Packed records").
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OutsideScopeList {
    text: String,
    namespaces: Vec<Box<str>>,
    entries: Vec<Packed>,
}

/// Where the parts of one [`OutsideScope`] end in [`OutsideScopeList::text`] (its name
/// begins where the one before ends), the index of its namespace, and its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Packed {
    name_end: u32,
    end: u32,
    namespace: u16,
    kind: WorkloadKind,
}

/// Builds an [`OutsideScopeList`], finding each namespace's index in the table as it goes.
#[derive(Debug, Default)]
pub struct OutsideScopeBuilder {
    list: OutsideScopeList,
    namespaces: std::collections::HashMap<Box<str>, u16>,
}

impl OutsideScopeBuilder {
    /// Adds one at the end; refused when the text would pass 4 GiB or the namespaces
    /// 65,536 (a hub answer is far smaller: `hub.maxResponseBytes`).
    pub fn push(&mut self, o: OutsideScope<'_>) -> Result<(), String> {
        let namespace = match self.namespaces.get(o.namespace) {
            Some(&i) => i,
            None => {
                let i = u16::try_from(self.list.namespaces.len()).map_err(
                    |_| "the recommendations outside the scope name over 65,536 namespaces",
                )?;
                self.list.namespaces.push(o.namespace.into());
                self.namespaces.insert(o.namespace.into(), i);
                i
            }
        };
        self.list.push_at(namespace, o)
    }

    /// The list, with no room beyond what it holds.
    pub fn finish(mut self) -> OutsideScopeList {
        self.list.text.shrink_to_fit();
        self.list.namespaces.shrink_to_fit();
        self.list.entries.shrink_to_fit();
        self.list
    }
}

impl OutsideScopeList {
    /// Adds `o` at the end, its namespace at index `namespace` of the table.
    fn push_at(&mut self, namespace: u16, o: OutsideScope<'_>) -> Result<(), String> {
        let mut end = |part: &str| {
            self.text.push_str(part);
            u32::try_from(self.text.len())
                .map_err(|_| "the recommendations outside the scope pass 4 GiB".to_owned())
        };
        let name_end = end(o.name)?;
        let end = end(o.recommendation_id)?;
        self.entries.push(Packed {
            name_end,
            end,
            namespace,
            kind: o.kind,
        });
        Ok(())
    }

    /// How many it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The one at `index`.
    pub fn get(&self, index: usize) -> Option<OutsideScope<'_>> {
        let p = self.entries.get(index)?;
        let start = match index {
            0 => 0,
            i => self.entries[i - 1].end,
        };
        let part = |from: u32, to: u32| self.text.get(from as usize..to as usize);
        Some(OutsideScope {
            namespace: self.namespaces.get(usize::from(p.namespace))?,
            kind: p.kind,
            name: part(start, p.name_end)?,
            recommendation_id: part(p.name_end, p.end)?,
        })
    }

    /// Every one, in the list's order.
    pub fn iter(&self) -> impl Iterator<Item = OutsideScope<'_>> {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

/// The recommendations outside the namespace list from the hub's latest answer, for the
/// reconciler to take once ([`OutsideScopeHandoff::take`]). Beside it the hub state keeps
/// only a hash of the list, which tells an answer that changed it from one that did not:
/// once the reconciler has reported what the list holds and drops it, nothing holds the
/// list. With a tenth of a cluster in scope it is most of the hub's answer
/// (docs/benchmarks.md, "The cluster around the scope").
#[derive(Debug, Default)]
pub struct OutsideScopeHandoff {
    digest: u64,
    list: std::sync::Mutex<Option<std::sync::Arc<OutsideScopeList>>>,
}

impl OutsideScopeHandoff {
    /// `list`, to be taken once.
    pub fn new(list: OutsideScopeList) -> OutsideScopeHandoff {
        OutsideScopeHandoff {
            digest: digest(&list),
            list: std::sync::Mutex::new(Some(std::sync::Arc::new(list))),
        }
    }

    /// The list, the first time; `None` after.
    pub fn take(&self) -> Option<std::sync::Arc<OutsideScopeList>> {
        self.list
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Whether `list` is the one handed over here (by its hash: two lists that differ
    /// share it with a chance of one in 2^64).
    pub fn holds_same(&self, list: &OutsideScopeList) -> bool {
        self.digest == digest(list)
    }
}

impl PartialEq for OutsideScopeHandoff {
    fn eq(&self, other: &OutsideScopeHandoff) -> bool {
        self.digest == other.digest
    }
}

/// A hash of the whole of `list`.
fn digest(list: &OutsideScopeList) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    list.hash(&mut h);
    h.finish()
}

/// A list read with [`ScopedList`]: the recommendations in the namespaces kept, and the
/// others as [`OutsideScope`].
#[derive(Debug)]
pub struct Scoped {
    /// The list, with the recommendations in the namespaces kept only.
    pub list: RecommendationList,
    /// The recommendations left out, in the list's order.
    pub outside: OutsideScopeList,
}

/// Reads a [`RecommendationList`] keeping the recommendations for `namespaces` only (all
/// when `namespaces` is empty). The list's other fields and its errors are as the plain
/// decode gives them; a recommendation left out is still decoded whole, so a malformed one
/// fails the list wherever it is.
pub struct ScopedList<'a> {
    /// The namespaces kept.
    pub namespaces: &'a [String],
}

/// Reads `body` with [`ScopedList`] for `namespaces`; the error names the path of the bad
/// field, as the plain decode's does.
pub fn decode(body: &[u8], namespaces: &[String]) -> Result<Scoped, String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(&mut de, &mut track);
    ScopedList { namespaces }
        .deserialize(tracked)
        .map_err(|e| format!("{}: {e}", track.path()))
}

impl ScopedList<'_> {
    fn keeps(&self, namespace: &str) -> bool {
        self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace)
    }
}

impl<'de> DeserializeSeed<'de> for ScopedList<'_> {
    type Value = Scoped;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Scoped, D::Error> {
        d.deserialize_map(ListVisitor(self))
    }
}

struct ListVisitor<'a>(ScopedList<'a>);

impl<'de> Visitor<'de> for ListVisitor<'_> {
    type Value = Scoped;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a recommendation list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scoped, A::Error> {
        let mut kept = Vec::new();
        let mut outside = OutsideScopeBuilder::default();
        let mut generated_at: Option<DateTime<Utc>> = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "recommendations" => {
                    let seed = Recommendations {
                        scope: &self.0,
                        kept: &mut kept,
                        outside: &mut outside,
                    };
                    map.next_value_seed(seed)?;
                }
                "generatedAt" => generated_at = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let generated_at =
            generated_at.ok_or_else(|| serde::de::Error::missing_field("generatedAt"))?;
        Ok(Scoped {
            list: RecommendationList {
                recommendations: kept,
                generated_at,
            },
            outside: outside.finish(),
        })
    }
}

/// The `recommendations` array, each element kept or left out as it is read.
struct Recommendations<'s, 'a> {
    scope: &'s ScopedList<'a>,
    kept: &'s mut Vec<Recommendation>,
    outside: &'s mut OutsideScopeBuilder,
}

impl<'de> DeserializeSeed<'de> for Recommendations<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Recommendations<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of recommendations")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(rec) = seq.next_element::<Recommendation>()? {
            if self.scope.keeps(&rec.workload.namespace) {
                self.kept.push(rec);
            } else if let Some(kind) = WorkloadKind::parse(&rec.workload.kind) {
                // A kind the agent does not manage is skipped by the mirroring too.
                self.outside
                    .push(OutsideScope {
                        namespace: &rec.workload.namespace,
                        kind,
                        name: &rec.workload.name,
                        recommendation_id: &rec.recommendation_id,
                    })
                    .map_err(serde::de::Error::custom)?;
            }
        }
        Ok(())
    }

    /// `"recommendations": null` is an empty list, as `#[serde(default)]` reads a missing
    /// one.
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(namespaces: &[&str]) -> String {
        let recommendations = namespaces
            .iter()
            .enumerate()
            .map(|(i, ns)| {
                let (name, id) = (format!("w{i}"), format!("r{i}"));
                kerf_testkit::hub_recommendation(
                    [ns, "Deployment", &name],
                    &id,
                    ["100m", "128Mi"],
                    "0.9",
                )
                .expect("a recommendation")
            })
            .collect();
        let generated_at = "2026-12-05T00:00:00Z".parse().expect("time");
        let list = RecommendationList {
            recommendations,
            generated_at,
        };
        serde_json::to_string(&list).expect("encodes")
    }

    fn read(body: &str, namespaces: &[String]) -> Result<Scoped, String> {
        decode(body.as_bytes(), namespaces)
    }

    #[test]
    fn recommendations_outside_the_namespaces_are_left_out_and_listed_by_workload_and_id() {
        let text = body(&["a", "b", "a", "c"]);
        let s = read(&text, &["a".to_owned()]).expect("reads");
        let list = s.list;
        let kept: Vec<&str> = list
            .recommendations
            .iter()
            .map(|r| r.recommendation_id.as_str())
            .collect();
        assert_eq!(kept, ["r0", "r2"]);
        let out: Vec<(String, &str)> = s
            .outside
            .iter()
            .map(|o| (o.workload().to_string(), o.recommendation_id))
            .collect();
        assert_eq!(
            out,
            [
                (
                    WorkloadKey::new("b", WorkloadKind::Deployment, "w1").to_string(),
                    "r1"
                ),
                (
                    WorkloadKey::new("c", WorkloadKind::Deployment, "w3").to_string(),
                    "r3"
                ),
            ]
        );
    }

    #[test]
    fn the_packed_list_gives_back_each_part_as_it_was_pushed() {
        let given = [
            ("b", WorkloadKind::Deployment, "web", "r-1"),
            ("", WorkloadKind::StatefulSet, "", ""),
            ("équipe", WorkloadKind::DaemonSet, "agent-ü", "rec/é"),
            ("b", WorkloadKind::Deployment, "web", "r-1"),
        ];
        let mut list = OutsideScopeBuilder::default();
        for (namespace, kind, name, recommendation_id) in given {
            list.push(OutsideScope {
                namespace,
                kind,
                name,
                recommendation_id,
            })
            .expect("fits");
        }
        let list = list.finish();
        let back: Vec<_> = list
            .iter()
            .map(|o| (o.namespace, o.kind, o.name, o.recommendation_id))
            .collect();
        assert_eq!(back, given);
        assert_eq!(list.len(), 4);
        assert!(list.get(4).is_none());
        assert_eq!(
            list.get(2).expect("third").workload(),
            WorkloadKey::new("équipe", WorkloadKind::DaemonSet, "agent-ü")
        );
        assert!(OutsideScopeList::default().is_empty());
        // Each namespace is held once.
        assert_eq!(list.namespaces.len(), 3);
        assert_eq!(std::mem::size_of::<Packed>(), 12);
    }

    #[test]
    fn without_a_namespace_list_the_list_is_the_plain_decode() {
        let text = body(&["a", "b"]);
        let s = read(&text, &[]).expect("reads");
        let plain: RecommendationList = serde_json::from_str(&text).expect("decodes");
        assert_eq!(s.list, plain);
        assert!(s.outside.is_empty());
    }

    #[test]
    fn a_malformed_recommendation_outside_the_scope_still_fails_the_list_naming_its_path() {
        let mut v: serde_json::Value = serde_json::from_str(&body(&["a", "b"])).expect("json");
        v["recommendations"][1]["containers"] = serde_json::json!("none");
        let e = read(&v.to_string(), &["a".to_owned()]).expect_err("refused");
        assert!(e.starts_with("recommendations[1].containers"), "{e}");
        let mut v: serde_json::Value = serde_json::from_str(&body(&["a"])).expect("json");
        v.as_object_mut().expect("object").remove("generatedAt");
        let e = read(&v.to_string(), &["a".to_owned()]).expect_err("refused");
        assert!(e.contains("generatedAt"), "{e}");
    }
}
