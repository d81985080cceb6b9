//! The rsr status built from a real decision, as the agent builds it, for the tests of
//! what `kubectl get rsr` and `kubectl describe rsr` show.

use chrono::Duration;
use kerf_api::policy::Mode;
use kerf_api::rsr::{ChangeProgress, ChangeRecord, ChangeState, RightsizingRecommendationStatus};
use kerf_api::{Resource, ResourceValues};
use kerf_decide::effective::EffectivePolicy;
use kerf_decide::facts::Facts;
use kerf_decide::status::{self, StatusInput};

use super::{MI, applied_change, facts, now, policy, q, recommendation, set_mode, values};

/// The status of an rsr that decides nothing because of `invalid` (a spec that does not
/// convert, a refused recommendation), its recommendation `withdrawn` or not.
pub fn invalid_only(
    invalid: &[status::Invalid],
    withdrawn: bool,
) -> RightsizingRecommendationStatus {
    status::build_status(&StatusInput {
        previous: &RightsizingRecommendationStatus::default(),
        decision: None,
        facts: None,
        policy_name: None,
        generation: Some(1),
        invalid,
        rollout_in_progress: false,
        withdrawn,
        now: now(),
    })
}

/// Decides on `f` (its state taken from `prev`) and builds the status as the agent does.
pub fn build(
    f: &mut Facts,
    p: &EffectivePolicy,
    prev: &RightsizingRecommendationStatus,
) -> RightsizingRecommendationStatus {
    f.state.change = prev.change.as_deref().cloned();
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

/// As [`build`] under the fixture's policy, after a pass that recorded `change`.
pub fn build_after(f: &mut Facts, change: ChangeRecord) -> RightsizingRecommendationStatus {
    let prev = RightsizingRecommendationStatus {
        change: Some(Box::new(change)),
        ..Default::default()
    };
    build(f, &policy(), &prev)
}

/// An in-place change of `app` from 500m/512Mi to 300m/384Mi in `state`, live 2h ago.
pub fn in_place_change(state: ChangeState) -> ChangeRecord {
    let mut c = applied_change(Duration::hours(2), state);
    c.resources = Resource::ALL.to_vec();
    c.containers[0].from.requests = ResourceValues {
        cpu: q("500m"),
        memory: q("512Mi"),
    };
    c.containers[0].to.requests = ResourceValues {
        cpu: q("300m"),
        memory: q("384Mi"),
    };
    c.progress = Some(ChangeProgress {
        pods_accepted: 3,
        pods_total: 3,
    });
    c
}

/// The status of a workload in audit that requests 800m / 2Gi without limits, recommended
/// 400m / 1536Mi.
pub fn audit_status() -> RightsizingRecommendationStatus {
    let mut f = facts();
    f.workload.containers[0].requests = values(Some(800), Some(2048 * MI));
    f.workload.containers[0].limits = values(None, None);
    f.recommendation.containers = vec![recommendation("400m", "1536Mi")];
    let mut p = policy();
    set_mode(&mut p, Mode::Audit, Mode::Audit);
    build(&mut f, &p, &RightsizingRecommendationStatus::default())
}
