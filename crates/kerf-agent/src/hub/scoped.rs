//! A recommendation list read with the agent's namespace list (`scope.namespaces`) in
//! hand: a recommendation for a namespace outside it is left out as it is read, and only
//! its workload and id are kept, for the one `OutOfScope` report each gets. The agent then
//! holds the recommendations it manages, not the whole cluster's: with a tenth of the
//! namespaces in scope, a tenth of the list (docs/benchmarks.md).

use std::fmt;

use chrono::{DateTime, Utc};
use kerf_api::WorkloadKind;
use kerf_api::hub::{Recommendation, RecommendationList};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::cache::WorkloadKey;

/// A recommendation the list holds for a workload outside the namespace list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutsideScope {
    /// The workload.
    pub workload: WorkloadKey,
    /// The recommendation's id.
    pub recommendation_id: String,
}

/// A list read with [`ScopedList`]: the recommendations in the namespaces kept, and the
/// others as [`OutsideScope`].
#[derive(Debug)]
pub struct Scoped {
    /// The list, with the recommendations in the namespaces kept only.
    pub list: RecommendationList,
    /// The recommendations left out, in the list's order.
    pub outside: Vec<OutsideScope>,
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
        let mut outside = Vec::new();
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
            outside,
        })
    }
}

/// The `recommendations` array, each element kept or left out as it is read.
struct Recommendations<'s, 'a> {
    scope: &'s ScopedList<'a>,
    kept: &'s mut Vec<Recommendation>,
    outside: &'s mut Vec<OutsideScope>,
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
                self.outside.push(OutsideScope {
                    workload: WorkloadKey::new(&rec.workload.namespace, kind, &rec.workload.name),
                    recommendation_id: rec.recommendation_id,
                });
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
            .map(|o| (o.workload.to_string(), o.recommendation_id.as_str()))
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
