//! De-duplication of skipped, blocked and failed reports (events contract; design D15,
//! D25; rule readings 3 and 4).
//!
//! A report is keyed by (type, reason, resource): the workload is implicit, since the
//! `reported` list lives in the workload's rsr status. A report is emitted when its key
//! has not been reported, when any recommended value (requests, limits and removed
//! limits) moved by more than the tolerance relative to the values last reported (EV-15),
//! or once when the hash of the effective
//! policy's values changed (EV-17). A new recommendation id alone changes nothing
//! (EV-16): only values are compared. After a change is applied, rolled back or
//! released, [`reset`] empties the list (EV-18). Throttled, OOMKilled and
//! RestartPolicyRequired carry their resource in the key (EV-19).
//!
//! A report counts as reported only once the hub acknowledged it (design D25), so the
//! API has two steps: [`should_emit`] decides, [`mark_reported`] records after the
//! acknowledgement. [`retain_current`] drops keys the current decision no longer reports,
//! so a reason that goes away and comes back is reported again ("until the reason
//! changes").

use std::collections::BTreeMap;

use kerf_api::event::EventType;
use kerf_api::rsr::{ReportedKey, RightsizingRecommendationSpec};
use kerf_api::wellknown::{REASON_OOM_KILLED, REASON_RESTART_POLICY_REQUIRED, REASON_THROTTLED};
use kerf_api::{Resource, VecMap};
use sha2::{Digest, Sha256};

/// Why a report cannot be de-duplicated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DedupError {
    /// Only skipped, blocked and failed reports are de-duplicated.
    #[error("event type {0} is not de-duplicated")]
    NotDeduplicated(&'static str),
}

/// The hub's recommended values (millicores, bytes): requests per `container/resource`
/// ([`value_key`]), limits per `container/limits.resource` ([`limit_key`]) and removed
/// limits per `container/removeLimits.resource` ([`remove_limit_key`], value 1).
pub type RecommendedValues = BTreeMap<String, i64>;

/// The key of `container`'s `resource` request in [`RecommendedValues`].
pub fn value_key(container: &str, resource: Resource) -> String {
    format!("{container}/{}", resource.as_str())
}

/// The key of `container`'s `resource` limit in [`RecommendedValues`].
pub fn limit_key(container: &str, resource: Resource) -> String {
    format!("{container}/{LIMITS}{}", resource.as_str())
}

/// The key of a removed limit (`removeLimits`) of `container` in [`RecommendedValues`];
/// its value is 1.
pub fn remove_limit_key(container: &str, resource: Resource) -> String {
    format!("{container}/{REMOVE_LIMITS}{}", resource.as_str())
}

/// The hub's recommended requests, limits and removed limits per container and resource:
/// what de-duplication compares. The recommendation id is not among them (EV-16); a value
/// that does not parse is left out.
pub fn recommended_values(spec: &RightsizingRecommendationSpec) -> RecommendedValues {
    let mut out = BTreeMap::new();
    for c in &spec.containers {
        for r in Resource::ALL {
            let parse =
                |q: Option<&kerf_api::Quantity>| q.and_then(|q| crate::quantity::parse(r, q).ok());
            if let Some(v) = parse(c.requests.get(r)) {
                out.insert(value_key(&c.name, r), v);
            }
            if let Some(v) = parse(c.limits.get(r)) {
                out.insert(limit_key(&c.name, r), v);
            }
            if c.remove_limits.contains(&r) {
                out.insert(remove_limit_key(&c.name, r), 1);
            }
        }
    }
    out
}

const LIMITS: &str = "limits.";
const REMOVE_LIMITS: &str = "removeLimits.";

/// A report the current decision would emit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// skipped, blocked or failed.
    pub type_: EventType,
    /// The reason.
    pub reason: String,
    /// The resource, for per-resource reports (see [`is_per_resource`]).
    pub resource: Option<Resource>,
}

impl Candidate {
    /// A report; the resource is kept only for the reasons de-duplicated per resource
    /// (EV-19), and dropped otherwise.
    pub fn new(
        type_: EventType,
        reason: &str,
        resource: Option<Resource>,
    ) -> Result<Candidate, DedupError> {
        match type_ {
            EventType::Skipped | EventType::Blocked | EventType::Failed => {}
            other => return Err(DedupError::NotDeduplicated(other.as_str())),
        }
        let resource = resource.filter(|_| is_per_resource(reason));
        Ok(Candidate {
            type_,
            reason: reason.to_owned(),
            resource,
        })
    }

    fn matches(&self, key: &ReportedKey) -> bool {
        key.type_ == self.type_.as_str()
            && key.reason == self.reason
            && key.resource == self.resource
    }
}

/// Whether reports with `reason` are de-duplicated per resource (EV-19).
pub fn is_per_resource(reason: &str) -> bool {
    [
        REASON_THROTTLED,
        REASON_OOM_KILLED,
        REASON_RESTART_POLICY_REQUIRED,
    ]
    .contains(&reason)
}

/// What a report is compared against.
#[derive(Clone, Copy, Debug)]
pub struct DedupContext<'a> {
    /// The hub's recommended values now.
    pub values: &'a RecommendedValues,
    /// `EffectivePolicy::values_hash()` now.
    pub policy_hash: &'a str,
    /// The agent's tolerance in thousandths of a percent (5 % = 5000).
    pub tolerance_milli_percent: u32,
}

/// Sha256 (hex) of recommended values.
pub fn values_hash(values: &RecommendedValues) -> String {
    let mut h = Sha256::new();
    for (k, v) in values {
        h.update(k.as_bytes());
        h.update(b"=");
        h.update(v.to_string().as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// Whether the current decision must emit `candidate`, given what was reported.
pub fn should_emit(
    reported: &[ReportedKey],
    candidate: &Candidate,
    ctx: &DedupContext<'_>,
) -> bool {
    let Some(key) = reported.iter().find(|k| candidate.matches(k)) else {
        return true;
    };
    if key.policy_hash != ctx.policy_hash {
        return true;
    }
    values_moved(&key.values, ctx.values, ctx.tolerance_milli_percent)
}

/// Whether any value moved by more than the tolerance relative to the values last reported.
/// A value that appeared or disappeared counts as moved; so does a last reported value
/// that does not parse.
pub fn values_moved(
    last: &VecMap<String, String>,
    now: &RecommendedValues,
    tolerance_milli_percent: u32,
) -> bool {
    if last.len() != now.len() || last.keys().any(|k| !now.contains_key(k)) {
        return true;
    }
    now.iter().any(|(k, &v)| {
        let old = last.get(k).and_then(|s| parse_reported(k, s));
        old.is_none_or(|old| moved(old, v, tolerance_milli_percent))
    })
}

/// The resource a request (`container/cpu`) or limit (`container/limits.cpu`) key names;
/// none for a removed limit.
fn key_resource(key: &str) -> Option<Resource> {
    let name = key.rsplit_once('/')?.1;
    match name.strip_prefix(LIMITS).unwrap_or(name) {
        "cpu" => Some(Resource::Cpu),
        "memory" => Some(Resource::Memory),
        _ => None,
    }
}

/// A reported value as `status.reported` shows it: a Kubernetes quantity (`250m`,
/// `1536Mi`), never a raw number of bytes; a removed limit reads `true`.
fn format_reported(key: &str, value: i64) -> String {
    match key_resource(key) {
        Some(r) => crate::quantity::format(r, value).0,
        None if value == 1 => "true".to_owned(),
        None => value.to_string(),
    }
}

fn parse_reported(key: &str, text: &str) -> Option<i64> {
    match key_resource(key) {
        Some(r) => crate::quantity::parse_quantity(r, text).ok(),
        None if text == "true" => Some(1),
        None => text.parse().ok(),
    }
}

/// `new` differs from `old` by more than the tolerance (EV-15; from 0, any other value
/// moved).
fn moved(old: i64, new: i64, tolerance_milli_percent: u32) -> bool {
    if old == new {
        return false;
    }
    let diff = (i128::from(new) - i128::from(old)).abs();
    diff * 100_000 > i128::from(tolerance_milli_percent) * i128::from(old).abs()
}

/// The reported list after the hub acknowledged `candidate`: its key now holds the current
/// values and policy hash.
pub fn mark_reported(
    reported: &[ReportedKey],
    candidate: &Candidate,
    ctx: &DedupContext<'_>,
) -> Vec<ReportedKey> {
    let mut out: Vec<ReportedKey> = reported
        .iter()
        .filter(|k| !candidate.matches(k))
        .cloned()
        .collect();
    out.push(ReportedKey {
        type_: candidate.type_.as_str().to_owned(),
        reason: candidate.reason.clone(),
        resource: candidate.resource,
        values_hash: values_hash(ctx.values),
        policy_hash: ctx.policy_hash.to_owned(),
        values: ctx
            .values
            .iter()
            .map(|(k, v)| (k.clone(), format_reported(k, *v)))
            .collect(),
    });
    out
}

/// The reported list with only the keys the current decision still reports, so a
/// reason that stops and later returns is reported again.
pub fn retain_current(reported: &[ReportedKey], current: &[Candidate]) -> Vec<ReportedKey> {
    reported
        .iter()
        .filter(|k| current.iter().any(|c| c.matches(k)))
        .cloned()
        .collect()
}

/// The reported list after a change was applied, rolled back or released (EV-18): empty,
/// so the next skip or block is reported again.
pub fn reset() -> Vec<ReportedKey> {
    Vec::new()
}
