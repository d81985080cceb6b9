//! Kerf custom resources, well-known names, event payload and hub wire types.
//!
//! No I/O lives here: these are the types every other crate shares.

pub mod condition;
pub mod duration;
pub mod event;
pub mod event_type;
pub mod hub;
pub mod policy;
pub mod quantity;
pub mod rsr;
pub mod validate;
pub mod vecmap;
pub mod wellknown;

pub use condition::{Condition, ConditionStatus};
pub use duration::{GoDuration, UnitDecimal};
pub use event::{Event, EventError, EventType, EventWorkload};
pub use policy::{
    ApplySettings, Canary, CanaryPods, Guardrails, HpaSettings, Mode, RecommendationSettings,
    RightsizingPolicy, RightsizingPolicySpec, RollbackSettings, Strategy, Window, WorkloadKind,
};
pub use quantity::{Quantity, Resource, ResourceRequirements, ResourceValues};
pub use rsr::{
    RightsizingRecommendation, RightsizingRecommendationSpec, RightsizingRecommendationStatus,
};
pub use vecmap::VecMap;

/// The CRDs of Kerf's custom resources as YAML documents, in a stable order: what
/// `kerf-agent crds` prints and `config/crds/` holds.
pub fn crds_yaml() -> Result<String, serde_json::Error> {
    use kube::CustomResourceExt;
    let mut out = String::new();
    for crd in [RightsizingPolicy::crd(), RightsizingRecommendation::crd()] {
        out.push_str("---\n");
        out.push_str(&yaml::to_yaml(&serde_json::to_value(&crd)?));
    }
    Ok(out)
}

mod yaml;
