//! The executor: the Kubernetes writes that put a change onto a workload.
//!
//! Each write has a pure part that plans it (the request body, the state of a resize, the
//! pods to replace) and a thin I/O part that sends it and classifies the answer:
//!
//! - [`resize`]: the `pods/resize` subresource (in-place, design D16, D17, D19);
//! - [`inplace`]: the in-place state machine (design D16, D18, D24);
//! - [`rollout`]: server-side apply of the pod template, the release hand-over and the
//!   rollout completion check (design section 13, D21, D23);
//! - [`hpa`]: the coordinated HPA target (design D22);
//! - [`template`]: the apply body of a pod template change, shared by the rollout and the
//!   release hand-over;
//! - [`ondelete`]: replacing outdated pods of an OnDelete StatefulSet through evictions.
//!
//! Nothing here decides whether a change may go in: the reconciler calls these after the
//! decision pipeline and the lease check.

pub mod error;
pub mod hpa;
pub mod inplace;
pub mod metrics;
pub mod ondelete;
pub mod release;
pub mod resize;
pub mod rollout;
pub mod rollout_status;
pub mod template;

use kerf_api::{Resource, ResourceRequirements, ResourceValues, WorkloadKind};

pub use error::ErrorClass;

/// The workload a write is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkloadId {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID the change was decided for; a live object with another UID is not written.
    pub uid: String,
    /// Kind.
    pub kind: WorkloadKind,
}

/// A pod a write is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodId {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

/// The CPU and memory values of one container, by container name.
pub type ContainerResources = (String, ResourceRequirements);

/// Whether two quantities have the same value (`0.5` equals `500m`). A quantity that does
/// not parse compares by its text.
pub fn same_quantity(resource: Resource, a: &kerf_api::Quantity, b: &kerf_api::Quantity) -> bool {
    match (
        kerf_decide::quantity::parse(resource, a),
        kerf_decide::quantity::parse(resource, b),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// Whether `actual` holds every value `wanted` sets (values `wanted` leaves out are not
/// compared: an absent target value is never sent, design D9).
pub fn values_cover(wanted: &ResourceValues, actual: &ResourceValues) -> bool {
    Resource::ALL.into_iter().all(|r| match wanted.get(r) {
        None => true,
        Some(w) => actual.get(r).is_some_and(|a| same_quantity(r, w, a)),
    })
}

/// Whether `actual` holds every request and limit `wanted` sets.
pub fn requirements_cover(wanted: &ResourceRequirements, actual: &ResourceRequirements) -> bool {
    values_cover(&wanted.requests, &actual.requests) && values_cover(&wanted.limits, &actual.limits)
}

/// The values of container `name` in a list, if it is there.
pub fn container<'a>(
    list: &'a [ContainerResources],
    name: &str,
) -> Option<&'a ResourceRequirements> {
    list.iter().find(|(n, _)| n == name).map(|(_, r)| r)
}

/// Reads the CPU and memory values of a Kubernetes container's `resources`.
pub fn from_k8s(
    res: Option<&k8s_openapi::api::core::v1::ResourceRequirements>,
) -> ResourceRequirements {
    let pick = |map: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >| {
        let mut v = ResourceValues::default();
        for r in Resource::ALL {
            if let Some(q) = map.and_then(|m| m.get(r.as_str())) {
                v.set(r, Some(kerf_api::Quantity(q.0.clone())));
            }
        }
        v
    };
    ResourceRequirements {
        requests: pick(res.and_then(|r| r.requests.as_ref())),
        limits: pick(res.and_then(|r| r.limits.as_ref())),
    }
}

/// A Kubernetes timestamp as a chrono time.
pub fn to_chrono(t: &k8s_openapi::jiff::Timestamp) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(
        t.as_second(),
        u32::try_from(t.subsec_nanosecond()).unwrap_or(0),
    )
}
