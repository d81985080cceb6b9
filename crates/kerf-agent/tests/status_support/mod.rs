//! The status the agent builds from a real decision, for the rsr view tests.

use kerf_agent::status::{self, StatusInput};
use kerf_api::rsr::RightsizingRecommendationStatus;
use kerf_decide::effective::EffectivePolicy;
use kerf_decide::facts::Facts;

use super::pipeline_fixture::now;

/// Decides on `f` (its state taken from `prev`) and builds the status as the agent does.
pub fn build(
    f: &mut Facts,
    p: &EffectivePolicy,
    prev: &RightsizingRecommendationStatus,
) -> RightsizingRecommendationStatus {
    f.state.change = prev.change.clone();
    f.state.last_rollback = prev.last_rollback.clone();
    f.state.live = prev.live.clone();
    let d = kerf_decide::decide(f, p, now());
    let invalid = status::invalid_inputs(p, Some(&d));
    status::build_status(&StatusInput {
        previous: prev,
        decision: Some(&d),
        facts: Some(f),
        policy_name: Some("shop-default"),
        generation: Some(1),
        invalid: &invalid,
        rollout_in_progress: false,
        withdrawn: false,
        now: now(),
    })
}
