//! HPA coordination (design section 5 and D22).
//!
//! A utilization HPA scales when usage divided by the requests reaches its target. When a
//! change moves the requests, the target is scaled so that the absolute usage at which the
//! HPA scales stays the same: `new = old * oldRequest / newRequest`, rounded to the nearest
//! integer percent (half up). `oldRequest` and `newRequest` are pod sums for a `Resource`
//! metric and the container's request for a `ContainerResource` metric.
//!
//! The HPA is coupled only when it scales on the utilization of a resource the change
//! touches; value targets (`AverageValue`, `Value`) and other metrics do not depend on
//! requests. A coupled HPA is coordinated when coordination is on, every request involved
//! is set and positive, a single metric is touched, and the new target lies in
//! `[min, max]` after rounding; otherwise the change is blocked `HPACoupled`. A rounded
//! target equal to the old one needs no write and counts as not coupled.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;

use kerf_api::Resource;
use kerf_api::rsr::{HpaChange, HpaOrder};

use crate::effective::{EffectivePolicy, PerResource};

/// One metric of an HPA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HpaMetric {
    /// `type: Resource`: the pod's summed usage of `resource`.
    Resource {
        /// cpu or memory.
        resource: Resource,
        /// `target.averageUtilization` in percent; `None` for value targets.
        average_utilization: Option<i32>,
    },
    /// `type: ContainerResource`: one container's usage of `resource`.
    ContainerResource {
        /// The container.
        container: String,
        /// cpu or memory.
        resource: Resource,
        /// `target.averageUtilization` in percent; `None` for value targets.
        average_utilization: Option<i32>,
    },
    /// Any other metric (Pods, Object, External).
    Other,
}

/// The HPA that scales a workload.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HpaInput {
    /// Its name.
    pub name: String,
    /// Its metrics, in order.
    pub metrics: Vec<HpaMetric>,
}

/// Requests per container (millicores, bytes; `None` = not set), keyed by container name
/// (`String`, or `&str` borrowed from the facts).
pub type ContainerRequests<K = String> = BTreeMap<K, PerResource<Option<i64>>>;

/// The coordination settings of the effective policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HpaBounds {
    /// Coordination on or off.
    pub coordination: bool,
    /// Lowest target, percent.
    pub min: i32,
    /// Highest target, percent.
    pub max: i32,
}

impl HpaBounds {
    /// The settings of `policy`.
    pub fn from_policy(policy: &EffectivePolicy) -> HpaBounds {
        HpaBounds {
            coordination: policy.hpa_coordination.value,
            min: policy.hpa_min_target.value,
            max: policy.hpa_max_target.value,
        }
    }
}

/// What a change means for the HPA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HpaOutcome {
    /// The HPA does not scale on the utilization of a resource the change touches (or its
    /// target would not move).
    NotCoupled,
    /// The target moves with the requests (`written` is false).
    Coordinated(HpaChange),
    /// The change is blocked `HPACoupled`.
    Coupled {
        /// The resource the HPA scales on.
        resource: Resource,
        /// Why it cannot be coordinated.
        message: String,
    },
}

/// A utilization metric the change touches, with the old and new request it divides by.
struct Touched<'a> {
    resource: Resource,
    target: i32,
    old: Option<i64>,
    new: Option<i64>,
    /// The container of a `ContainerResource` metric.
    container: Option<&'a str>,
}

impl fmt::Display for Touched<'_> {
    /// What the metric measures, for messages: `cpu utilization of container app`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} utilization", self.resource)?;
        match self.container {
            Some(c) => write!(f, " of container {c}"),
            None => Ok(()),
        }
    }
}

/// Coordinates `hpa` with a change from `old` to `new` requests.
pub fn coordinate<K: Borrow<str> + Ord>(
    hpa: &HpaInput,
    old: &ContainerRequests<K>,
    new: &ContainerRequests<K>,
    bounds: HpaBounds,
) -> HpaOutcome {
    let mut touched = hpa
        .metrics
        .iter()
        .filter_map(|m| touched_metric(m, old, new));
    let Some(first) = touched.next() else {
        return HpaOutcome::NotCoupled;
    };
    let more = touched.next().is_some();
    let coupled = |message: String| HpaOutcome::Coupled {
        resource: first.resource,
        message,
    };
    if !bounds.coordination {
        return coupled(format!(
            "HPA {} scales on {first} and HPA coordination is off",
            hpa.name
        ));
    }
    if more {
        return coupled(format!(
            "HPA {} scales on more than one resource the change touches; one target change cannot keep them all",
            hpa.name
        ));
    }
    let (Some(old_req), Some(new_req)) =
        (first.old.filter(|v| *v > 0), first.new.filter(|v| *v > 0))
    else {
        return coupled(format!(
            "HPA {} scales on {first}, which has no request to scale the target by",
            hpa.name
        ));
    };
    let to = scaled_target(first.target, old_req, new_req);
    if to == i64::from(first.target) {
        return HpaOutcome::NotCoupled;
    }
    match i32::try_from(to) {
        Ok(to) if (bounds.min..=bounds.max).contains(&to) => HpaOutcome::Coordinated(HpaChange {
            name: hpa.name.clone(),
            resource: first.resource,
            from: first.target,
            to,
            order: if to < first.target {
                HpaOrder::Before
            } else {
                HpaOrder::After
            },
            written: false,
        }),
        _ => coupled(format!(
            "HPA {} target for {first} would move from {}% to {to}%, outside {}% to {}%",
            hpa.name, first.target, bounds.min, bounds.max
        )),
    }
}

/// `old * old_req / new_req`, rounded half up; both requests positive.
pub fn scaled_target(old: i32, old_req: i64, new_req: i64) -> i64 {
    let num = 2 * i128::from(old) * i128::from(old_req) + i128::from(new_req);
    let q = num.div_euclid(2 * i128::from(new_req));
    i64::try_from(q).unwrap_or(i64::MAX)
}

fn touched_metric<'a, K: Borrow<str> + Ord>(
    m: &'a HpaMetric,
    old: &ContainerRequests<K>,
    new: &ContainerRequests<K>,
) -> Option<Touched<'a>> {
    match m {
        HpaMetric::Resource {
            resource,
            average_utilization: Some(target),
        } => changes_any(old, new, *resource).then(|| Touched {
            resource: *resource,
            target: *target,
            old: pod_sum(old, *resource),
            new: pod_sum(new, *resource),
            container: None,
        }),
        HpaMetric::ContainerResource {
            container,
            resource,
            average_utilization: Some(target),
        } => {
            let get = |m: &ContainerRequests<K>| {
                m.get(container.as_str()).and_then(|r| *r.get(*resource))
            };
            let (o, n) = (get(old), get(new));
            (o != n).then(|| Touched {
                resource: *resource,
                target: *target,
                old: o,
                new: n,
                container: Some(container),
            })
        }
        _ => None,
    }
}

/// Whether any container's request of `r` differs between `old` and `new`.
fn changes_any<K: Borrow<str> + Ord>(
    old: &ContainerRequests<K>,
    new: &ContainerRequests<K>,
    r: Resource,
) -> bool {
    let get =
        |m: &ContainerRequests<K>, c: &K| m.get(Borrow::<str>::borrow(c)).and_then(|v| *v.get(r));
    old.keys()
        .chain(new.keys())
        .any(|c| get(old, c) != get(new, c))
}

/// The pod's summed request of `r`; `None` when any container lacks it (the HPA cannot
/// compute utilization then).
fn pod_sum<K>(requests: &ContainerRequests<K>, r: Resource) -> Option<i64> {
    requests
        .values()
        .map(|v| *v.get(r))
        .try_fold(0i64, |acc, v| v.map(|v| acc.saturating_add(v)))
}
