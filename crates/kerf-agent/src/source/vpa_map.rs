//! The `vpa` source's pure part (docs/sources.md): a VerticalPodAutoscaler, as read, into
//! the recommendation the rsr holds, or into a hold of its workload.
//!
//! - Only a VPA whose `spec.targetRef` names a Deployment, StatefulSet or DaemonSet counts.
//! - `updateMode` `Off` or `Initial`: `status.recommendation.containerRecommendations[]
//!   .target` are the recommended requests. Any other mode (`Recreate`, `Auto`,
//!   `InPlaceOrRecreate`, `InPlace`, unset, which VPA reads as `Recreate`, or unknown) means
//!   the VPA updates the pods itself: the workload is held `VPAActive`.
//! - Confidence of a container: `1 / (1 + spread)`, where the spread is the widest of CPU
//!   and memory of `(upperBound - lowerBound) / target`; a missing or unreadable bound
//!   gives 0. The workload's confidence is its lowest container's.
//! - Data coverage: the VPA's age (now - `metadata.creationTimestamp`), at most
//!   [`VPA_WINDOW`], the history VPA's recommender keeps by default.
//! - `generatedAt`: the `RecommendationProvided` condition's `lastTransitionTime`, else
//!   the VPA's creation.
//! - The id: `vpa-` and 16 hex of the SHA-256 of the VPA's uid and the requests, so it
//!   stays while the numbers stay.
//! - Limits follow the effective policy's `recommendation.limits`: `Keep` leaves them,
//!   `Ratio` scales the current limit with the request, `Remove` removes both.
//!
//! A quantity that does not parse is passed on as written: the rsr's schema check refuses
//! it and names it on the rsr (`kerf.getkerf.dev/recommendation-invalid`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use kerf_api::hub::{HubWorkload, Recommendation};
use kerf_api::policy::{LimitsHandling, RecommendationSettings, WorkloadKind};
use kerf_api::quantity::{Quantity, Resource, ResourceValues};
use kerf_api::rsr::{ContainerRecommendation, DataCoverage};
use kerf_api::{GoDuration, UnitDecimal};
use kerf_decide::quantity::{format, parse};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// How much history VPA's recommender keeps by default (8 days): the coverage's window.
pub const VPA_WINDOW: &str = "192h";
const VPA_WINDOW_HOURS: i64 = 192;

/// A VerticalPodAutoscaler (`autoscaling.k8s.io/v1`), only the fields the source reads.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Vpa {
    /// Metadata.
    #[serde(default)]
    pub metadata: VpaMeta,
    /// Spec.
    #[serde(default)]
    pub spec: VpaSpec,
    /// Status.
    #[serde(default)]
    pub status: Option<VpaStatus>,
}

/// The metadata read.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VpaMeta {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
    /// UID.
    #[serde(default)]
    pub uid: String,
    /// Creation time.
    pub creation_timestamp: Option<DateTime<Utc>>,
}

/// The spec read.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VpaSpec {
    /// The workload.
    pub target_ref: Option<TargetRef>,
    /// How the VPA updates pods.
    pub update_policy: Option<UpdatePolicy>,
}

/// `spec.targetRef`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TargetRef {
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// `spec.updatePolicy`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePolicy {
    /// `Off`, `Initial`, `Recreate`, `Auto`, `InPlaceOrRecreate` or `InPlace`.
    pub update_mode: Option<String>,
}

/// The status read.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VpaStatus {
    /// The recommendation.
    pub recommendation: Option<VpaRecommendation>,
    /// Conditions.
    #[serde(default)]
    pub conditions: Vec<VpaCondition>,
}

/// `status.recommendation`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VpaRecommendation {
    /// Per container.
    #[serde(default)]
    pub container_recommendations: Vec<VpaContainer>,
}

/// One container's recommendation: resource name to quantity.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VpaContainer {
    /// The container.
    #[serde(default)]
    pub container_name: String,
    /// The recommended requests.
    #[serde(default)]
    pub target: BTreeMap<String, String>,
    /// Lower bound.
    #[serde(default)]
    pub lower_bound: BTreeMap<String, String>,
    /// Upper bound.
    #[serde(default)]
    pub upper_bound: BTreeMap<String, String>,
}

/// A status condition.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VpaCondition {
    /// Type.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// When it last changed.
    pub last_transition_time: Option<DateTime<Utc>>,
}

/// The modes in which VPA does not change pods after they start.
const READ_ONLY_MODES: [&str; 2] = ["Off", "Initial"];

impl Vpa {
    /// The workload kind and name the VPA targets, when Kerf manages that kind.
    pub fn target(&self) -> Option<(WorkloadKind, &str)> {
        let t = self.spec.target_ref.as_ref()?;
        Some((WorkloadKind::parse(&t.kind)?, t.name.as_str()))
    }

    /// The update mode as written, if it is.
    pub fn update_mode(&self) -> Option<&str> {
        let mode = self.spec.update_policy.as_ref();
        mode.and_then(|p| p.update_mode.as_deref())
    }

    /// Why the VPA holds its workload (it updates the pods itself), if it does. An unset
    /// mode is VPA's default, which updates pods (`Recreate`, `Auto` in older versions).
    pub fn hold(&self) -> Option<String> {
        let mode = self
            .update_mode()
            .unwrap_or("unset, VPA's default Recreate");
        (!READ_ONLY_MODES.contains(&mode)).then(|| {
            format!(
                "VerticalPodAutoscaler {}/{} updates the pods itself (updateMode {mode}); set it \
                 to Off or Initial, or delete it, for Kerf to apply",
                self.metadata.namespace, self.metadata.name
            )
        })
    }
}

/// The current values of one template container (for the `Ratio` limits rule).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CurrentValues {
    /// Requests.
    pub requests: ResourceValues,
    /// Limits.
    pub limits: ResourceValues,
}

/// The recommendation of `vpa` for its workload `kind`, `current` the template's values by
/// container, under the limits rule `limits`, at `now`.
pub fn recommendation(
    vpa: &Vpa,
    kind: WorkloadKind,
    current: &BTreeMap<String, CurrentValues>,
    limits: LimitsHandling,
    now: DateTime<Utc>,
) -> Recommendation {
    let rec = vpa.status.as_ref().and_then(|s| s.recommendation.as_ref());
    let listed = rec.map(|r| r.container_recommendations.as_slice());
    let containers: Vec<ContainerRecommendation> = listed
        .unwrap_or_default()
        .iter()
        .filter(|c| !c.target.is_empty())
        .map(|c| container(c, current.get(&c.container_name), limits))
        .collect();
    let confidence = listed
        .unwrap_or_default()
        .iter()
        .filter(|c| !c.target.is_empty())
        .map(spread_confidence)
        .fold(None, |low: Option<f64>, c| {
            Some(low.map_or(c, |l| l.min(c)))
        })
        .unwrap_or(0.0);
    let name = vpa.target().map(|(_, n)| n).unwrap_or_default();
    Recommendation {
        workload: HubWorkload {
            namespace: vpa.metadata.namespace.clone(),
            kind: kind.as_str().to_owned(),
            name: name.to_owned(),
        },
        recommendation_id: recommendation_id(&vpa.metadata.uid, &containers),
        generated_at: generated_at(vpa, now),
        confidence: unit_decimal(confidence),
        data_coverage: coverage(vpa.metadata.creation_timestamp, now),
        settings: RecommendationSettings {
            limits: Some(limits),
            ..RecommendationSettings::default()
        },
        containers,
    }
}

fn container(
    c: &VpaContainer,
    current: Option<&CurrentValues>,
    limits: LimitsHandling,
) -> ContainerRecommendation {
    let requests = values(&c.target);
    let mut out = ContainerRecommendation {
        name: c.container_name.clone(),
        confidence: Some(unit_decimal(spread_confidence(c))),
        requests: requests.clone(),
        limits: ResourceValues::default(),
        remove_limits: Vec::new(),
        flags: Vec::new(),
    };
    let current = current.cloned().unwrap_or_default();
    match limits {
        LimitsHandling::Keep => {}
        LimitsHandling::Remove => {
            out.remove_limits = Resource::ALL
                .into_iter()
                .filter(|r| current.limits.get(*r).is_some())
                .collect();
        }
        LimitsHandling::Ratio => {
            for r in Resource::ALL {
                out.limits.set(r, ratio_limit(r, &current, &requests));
            }
        }
    }
    out
}

/// The current limit scaled by new request / current request; none when any of the three
/// is missing or does not parse (the current limit then stays).
fn ratio_limit(r: Resource, current: &CurrentValues, new: &ResourceValues) -> Option<Quantity> {
    let limit = i128::from(parse(r, current.limits.get(r)?).ok()?);
    let request = i128::from(parse(r, current.requests.get(r)?).ok()?);
    let target = i128::from(parse(r, new.get(r)?).ok()?);
    if request <= 0 {
        return None;
    }
    let scaled = i64::try_from(limit * target / request).ok()?;
    Some(format(r, scaled))
}

fn values(map: &BTreeMap<String, String>) -> ResourceValues {
    ResourceValues {
        cpu: map.get("cpu").map(|q| Quantity(q.clone())),
        memory: map.get("memory").map(|q| Quantity(q.clone())),
    }
}

/// `1 / (1 + spread)`, the spread the widest `(upper - lower) / target` of the resources
/// recommended; 0 when a bound is missing or a value does not parse.
pub fn spread_confidence(c: &VpaContainer) -> f64 {
    let mut widest: f64 = 0.0;
    for r in Resource::ALL {
        let Some(target) = c.target.get(r.as_str()) else {
            continue;
        };
        let read = |q: Option<&String>| -> Option<f64> {
            parse(r, &Quantity(q?.clone())).ok().map(|v| v as f64)
        };
        let target = read(Some(target));
        let lower = read(c.lower_bound.get(r.as_str()));
        let upper = read(c.upper_bound.get(r.as_str()));
        let (Some(t), Some(l), Some(u)) = (target, lower, upper) else {
            return 0.0;
        };
        if t <= 0.0 || u < l {
            return 0.0;
        }
        widest = widest.max((u - l) / t);
    }
    1.0 / (1.0 + widest)
}

fn unit_decimal(v: f64) -> UnitDecimal {
    UnitDecimal::from(format!("{:.2}", v.clamp(0.0, 1.0)).as_str())
}

fn coverage(created: Option<DateTime<Utc>>, now: DateTime<Utc>) -> DataCoverage {
    let hours = created
        .map(|c| (now - c).num_hours())
        .unwrap_or(0)
        .clamp(0, VPA_WINDOW_HOURS);
    DataCoverage {
        covered: GoDuration::from(format!("{hours}h").as_str()),
        window: GoDuration::from(VPA_WINDOW),
    }
}

fn generated_at(vpa: &Vpa, now: DateTime<Utc>) -> DateTime<Utc> {
    let provided = vpa.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "RecommendationProvided" && c.status == "True")
            .and_then(|c| c.last_transition_time)
    });
    provided.or(vpa.metadata.creation_timestamp).unwrap_or(now)
}

/// `vpa-` and 16 hex of the SHA-256 of the VPA's uid and the recommended values.
fn recommendation_id(uid: &str, containers: &[ContainerRecommendation]) -> String {
    let mut h = Sha256::new();
    h.update(uid.as_bytes());
    for c in containers {
        for part in [
            c.name.as_str(),
            c.requests.cpu.as_ref().map_or("", |q| q.as_str()),
            c.requests.memory.as_ref().map_or("", |q| q.as_str()),
            c.limits.cpu.as_ref().map_or("", |q| q.as_str()),
            c.limits.memory.as_ref().map_or("", |q| q.as_str()),
        ] {
            h.update([0]);
            h.update(part.as_bytes());
        }
        h.update([c.remove_limits.len() as u8]);
    }
    let digest = h.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("vpa-{hex}")
}

#[cfg(test)]
#[path = "vpa_map_tests.rs"]
mod tests;
