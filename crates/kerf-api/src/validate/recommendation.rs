//! Checks of a hub recommendation as the rsr's schema checks it, before the agent writes
//! it: a value the API server would refuse is named by its field instead of being sent.

use super::{Checker, FieldError};
use crate::rsr::{ContainerRecommendation, RightsizingRecommendationSpec};

/// Longest `spec.recommendationID`.
pub const RECOMMENDATION_ID_MAX_LENGTH: usize = 128;

/// Every field of an rsr spec the CRD schema refuses, in field order; empty when the
/// schema accepts it. Paths start with `spec.`.
pub fn validate_recommendation_spec(spec: &RightsizingRecommendationSpec) -> Vec<FieldError> {
    let mut c = Checker::default();
    c.max_len(
        "spec.recommendationID",
        &spec.recommendation_id,
        RECOMMENDATION_ID_MAX_LENGTH,
    );
    c.max_len("spec.workloadRef.name", &spec.workload_ref.name, 253);
    if let Some(uid) = &spec.workload_ref.uid {
        c.max_len("spec.workloadRef.uid", uid, 64);
    }
    c.unit_decimal("spec.confidence", spec.confidence.as_ref());
    if let Some(d) = &spec.data_coverage {
        c.duration("spec.dataCoverage.covered", Some(&d.covered));
        c.duration("spec.dataCoverage.window", Some(&d.window));
    }
    if let Some(s) = &spec.settings {
        c.recommendation("spec.settings", s);
    }
    c.max_items("spec.containers", spec.containers.len(), 64);
    for (i, container) in spec.containers.iter().enumerate() {
        c.container(&format!("spec.containers[{i}]"), container);
    }
    c.errors
}

impl Checker {
    fn container(&mut self, path: &str, r: &ContainerRecommendation) {
        self.max_len(&format!("{path}.name"), &r.name, 63);
        for res in crate::Resource::ALL {
            let name = res.as_str();
            self.quantity(&format!("{path}.requests.{name}"), r.requests.get(res));
            self.quantity(&format!("{path}.limits.{name}"), r.limits.get(res));
        }
        self.max_items(&format!("{path}.removeLimits"), r.remove_limits.len(), 2);
        self.unit_decimal(&format!("{path}.confidence"), r.confidence.as_ref());
        self.max_items(&format!("{path}.flags"), r.flags.len(), 5);
    }
}
