//! CPU and memory values of containers, compared by value: `0.5` equals `500m`.

use kerf_api::{Quantity, Resource, ResourceRequirements, ResourceValues};

/// The CPU and memory values of one container, by container name.
pub type ContainerResources = (String, ResourceRequirements);

/// Whether two quantities have the same value (`0.5` equals `500m`). A quantity that does
/// not parse compares by its text.
pub fn same_quantity(resource: Resource, a: &Quantity, b: &Quantity) -> bool {
    match (
        crate::quantity::parse(resource, a),
        crate::quantity::parse(resource, b),
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

/// The values of `r` restricted to `resources`.
pub fn only(r: &ResourceRequirements, resources: &[Resource]) -> ResourceRequirements {
    let mut out = ResourceRequirements::default();
    for &res in resources {
        out.requests.set(res, r.requests.get(res).cloned());
        out.limits.set(res, r.limits.get(res).cloned());
    }
    out
}
