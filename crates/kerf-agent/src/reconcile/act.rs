//! Carrying a recorded change onto the workload: the facts the planner reads
//! ([`kerf_decide::plan::advance`]: the in-place state machine of design D16 with its canary
//! and its fallback to rollout, AP-10, AP-11, and the rollout), handed to the effect
//! interpreter ([`super::interpret`]); what an applied change records is
//! [`super::applied`]. The release when a workload leaves auto-patch is
//! [`super::release_step`]. Every step starts from the intent in status and the live
//! state, so a resumed change sends nothing twice.

use kerf_api::rsr::RightsizingRecommendationStatus;
use kerf_decide::plan::{self, ChangeFacts, StatusEdit};

use super::interpret;
use super::pass::Pass;
use super::step::{ActError, StepResult, template_covers};

/// Moves a change in state Intent or Applying one step on: the planner's effects, carried
/// out by the interpreter; `may_start` is false while a freeze or a pause holds new resizes
/// back.
pub async fn advance(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    may_start: bool,
) -> Result<StepResult, ActError> {
    let mut out = StepResult::default();
    let Some(change) = s.change.clone() else {
        return Ok(out);
    };
    let facts = ChangeFacts {
        facts: &c.facts,
        policy: &c.policy,
        pods: &c.facts.pods,
        template_covers: template_covers(&change, &c.workload),
        may_start,
        now: c.now,
    };
    let effects = plan::advance(&change, &facts);
    interpret::run(effects, s, c, &mut out).await?;
    Ok(out)
}

/// Records the canary the planner chooses for a change about to start, in the intent
/// written before any resize (design D25).
pub fn choose_canary(s: &mut RightsizingRecommendationStatus, c: &Pass<'_>) {
    let Some(ch) = s.change.as_ref() else { return };
    let policy = c.policy.canary.value;
    if let Some(pods) = plan::canary_choice(ch, policy, &c.facts.pods, c.now) {
        interpret::edit(s, c, StatusEdit::CanaryChosen(pods));
    }
}
