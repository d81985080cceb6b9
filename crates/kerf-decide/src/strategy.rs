//! Which strategy carries a change, and whether a single-replica workload may take it.
//!
//! The configured strategy comes from the effective policy (an annotation beats the
//! policy, in-place by default: AP-01..AP-03). A fallback to rollout sticks until the
//! configured strategy changes (AP-12, AP-13); a change that coordinates an HPA always uses
//! a rollout (AP-22). Single-replica safety follows AP-44..AP-51.

use std::collections::BTreeMap;

use kerf_api::Resource;
use kerf_api::policy::{Strategy, WorkloadKind};
use kerf_api::wellknown as wk;

use crate::effective::EffectivePolicy;
use crate::facts::{Facts, ResizePolicy, RsrState};
use crate::replicas;
use crate::resources::Targets;

/// The strategy decided for a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrategyChoice {
    /// What the effective policy configures.
    pub configured: Strategy,
    /// What is used: the configured strategy, or rollout after a fallback or for an HPA.
    pub effective: Strategy,
    /// Why `effective` is a sticky rollout (ResizeInfeasible, ResizeDeferredTimeout).
    pub fallback_reason: Option<String>,
    /// Whether HPA coordination forced a rollout.
    pub forced_by_hpa: bool,
}

impl StrategyChoice {
    /// What actually writes the change: deferred goes in as a rollout (AP-27).
    pub fn carrier(&self) -> Strategy {
        match self.effective {
            Strategy::InPlace => Strategy::InPlace,
            Strategy::Rollout | Strategy::Deferred => Strategy::Rollout,
        }
    }
}

/// Chooses the strategy (AP-01..AP-03, AP-12, AP-13, AP-22).
pub fn choose(policy: &EffectivePolicy, state: &RsrState, hpa_coordinated: bool) -> StrategyChoice {
    let configured = policy.strategy.value;
    let sticky = state.strategy.as_ref().filter(|s| {
        configured == Strategy::InPlace
            && s.configured == configured
            && s.effective == Strategy::Rollout
    });
    let mut choice = StrategyChoice {
        configured,
        effective: configured,
        fallback_reason: None,
        forced_by_hpa: false,
    };
    if let Some(s) = sticky {
        choice.effective = Strategy::Rollout;
        choice.fallback_reason = s.fallback_reason.clone();
    }
    if hpa_coordinated && choice.effective == Strategy::InPlace {
        choice.effective = Strategy::Rollout;
        choice.forced_by_hpa = true;
    }
    choice
}

/// Why a change would leave a single-replica workload without a Ready pod (AP-44..AP-51),
/// or `None` when it is safe or `allow-disruption` lifts the block.
pub fn single_replica_unsafe(
    facts: &Facts,
    policy: &EffectivePolicy,
    targets: &Targets<'_>,
    carrier: Strategy,
) -> Option<String> {
    if policy.allow_disruption || !replicas::is_single_replica(&facts.workload.replicas) {
        return None;
    }
    match carrier {
        Strategy::InPlace => restarting_resize(facts, targets).map(|(c, r)| {
            format!(
                "single-replica workload: the in-place resize of {r} restarts container {c} (resizePolicy RestartContainer)"
            )
        }),
        Strategy::Rollout | Strategy::Deferred => unsafe_rollout(facts),
    }
}

fn unsafe_rollout(facts: &Facts) -> Option<String> {
    if replicas::rollout_keeps_a_ready_pod(&facts.workload.replicas) {
        return None;
    }
    Some(format!(
        "single-replica workload: a rollout of this {} would leave no Ready pod (needs maxSurge >= 1 and maxUnavailable 0)",
        facts.workload.kind.as_str()
    ))
}

/// The first container and resource whose in-place resize restarts the container.
fn restarting_resize<'a>(facts: &Facts, targets: &Targets<'a>) -> Option<(&'a str, Resource)> {
    targets.plans.iter().filter(|p| p.goes_in()).find_map(|p| {
        let c = facts.container(p.container)?;
        (*c.resize_policy.get(p.resource) == ResizePolicy::RestartContainer)
            .then_some((p.container, p.resource))
    })
}

/// A refused fallback (EV-41, design D18).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FallbackRefusal {
    /// Always SingleReplicaUnsafe.
    pub reason: &'static str,
    /// For people.
    pub message: String,
    /// `fallbackReason` and the like.
    pub details: BTreeMap<String, String>,
}

/// Whether the executor may fall back from in-place to a rollout for `fallback_reason`
/// (ResizeInfeasible or ResizeDeferredTimeout). A DaemonSet never falls back (design D18);
/// a rollout that would leave a single-replica workload without a Ready pod is refused
/// unless `allow-disruption` is set (EV-41).
pub fn fallback_allowed(
    facts: &Facts,
    policy: &EffectivePolicy,
    fallback_reason: &str,
) -> Result<(), FallbackRefusal> {
    let refuse = |message: String| {
        let details = BTreeMap::from([(
            wk::DETAIL_FALLBACK_REASON.to_owned(),
            fallback_reason.to_owned(),
        )]);
        Err(FallbackRefusal {
            reason: wk::REASON_SINGLE_REPLICA_UNSAFE,
            message,
            details,
        })
    };
    if facts.workload.kind == WorkloadKind::DaemonSet {
        return refuse(format!(
            "a DaemonSet never falls back to a rollout: it would delete the node's pod before a replacement that cannot fit ({fallback_reason})"
        ));
    }
    if policy.allow_disruption || !replicas::is_single_replica(&facts.workload.replicas) {
        return Ok(());
    }
    match unsafe_rollout(facts) {
        Some(why) => refuse(format!(
            "fallback to rollout refused ({fallback_reason}): {why}"
        )),
        None => Ok(()),
    }
}
