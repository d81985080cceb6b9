//! Leaving auto-patch, per resource (design D21, AP-21, AP-35, EV-39, EV-46).
//!
//! When a resource the last applied change touched leaves auto-patch (an approved change:
//! when its mode becomes `off`, design D27), that resource alone is released: a rollout
//! hands its fields over (design section 13) while `kerf` keeps the others; in-place takes
//! it out of `live` and leaves the running pods alone. A partial release keeps the change
//! `Applied` for the resources still held and drops the released one from the record; the
//! last release marks it `Released`. Each release records `released ModeChanged` naming
//! its resources.
//!
//! Nothing is released while a freeze window, the cluster-wide freeze or a pause is open:
//! the release waits, and the workload reports that block for the resources it would
//! release instead of their mode skip (the one exception to the mode deciding first).

use chrono::{DateTime, Utc};
use kerf_api::Resource;
use kerf_api::policy::Mode;
use kerf_api::rsr::{ChangeState, LiveValues, RightsizingRecommendationStatus};
use kerf_api::wellknown as wk;
use kerf_decide::effective::{EffectivePolicy, PerResource};
use kerf_decide::facts::Facts;
use kerf_decide::pipeline::{
    Block, Check, Decision, Outcome, ReportKind, ResourceReport, resource_list,
};
use kerf_decide::window::{WindowKind, evaluate_windows};
use uuid::Uuid;

use super::act::{ActError, StepCtx, StepResult, event_workload, workload_id};
use crate::executor::rollout;
use crate::intent;

/// A release that is due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    /// The resources that left: released now.
    pub resources: Vec<Resource>,
    /// The mode they had (auto-patch, or audit for an approved change).
    pub previous: Mode,
    /// The mode of the first of them now.
    pub new: Mode,
}

/// The resources of the last applied change that left auto-patch (an approved change
/// keeps its fields until the mode is `off`, design D27), if any.
pub fn due(s: &RightsizingRecommendationStatus, policy: &EffectivePolicy) -> Option<Release> {
    let change = s
        .change
        .as_ref()
        .filter(|c| c.state == ChangeState::Applied)?;
    let approved = change.approval_id.is_some();
    let left = |r: &Resource| {
        let mode = policy.mode_of(*r);
        if approved {
            mode == Mode::Off
        } else {
            mode != Mode::AutoPatch
        }
    };
    let resources: Vec<Resource> = change.resources.iter().copied().filter(left).collect();
    let first = *resources.first()?;
    Some(Release {
        resources,
        previous: if approved {
            Mode::Audit
        } else {
            Mode::AutoPatch
        },
        new: policy.mode_of(first),
    })
}

/// Releases `rel` (D21, AP-21, EV-46). The caller checks the freeze and the pause first.
pub async fn run(
    s: &mut RightsizingRecommendationStatus,
    c: &StepCtx<'_>,
    rel: &Release,
) -> Result<StepResult, ActError> {
    let mut out = StepResult::default();
    let Some(change) = s.change.clone() else {
        return Ok(out);
    };
    if !(c.may_write)() {
        return Err(ActError::NotLeader);
    }
    if change
        .hpa
        .as_ref()
        .is_some_and(|h| rel.resources.contains(&h.resource))
    {
        super::hpa_step::restore(s, c).await?;
    }
    if change.strategy != kerf_api::Strategy::InPlace {
        let res =
            rollout::release(c.client.clone(), &workload_id(c.workload), &rel.resources).await;
        c.metrics.observe("release", &res);
        res?;
    }
    s.live = s.live.take().and_then(|l| without(l, &rel.resources));
    let whole = change.resources.iter().all(|r| rel.resources.contains(r));
    // A whole release records its id in the change, with the status write before the
    // event (D25); a partial release's event carries an id of its own.
    let id = match s.change.as_mut() {
        Some(ch) if whole => intent::allocate(&mut ch.event_ids.released),
        _ => Uuid::new_v4(),
    };
    let e = intent::released_event(
        &change,
        event_workload(c.workload),
        &rel.resources,
        id,
        (rel.previous.as_str(), rel.new.as_str()),
        c.now,
    );
    if let Some(ch) = s.change.as_mut() {
        if whole {
            ch.state = ChangeState::Released;
        } else {
            intent::drop_resources(ch, &rel.resources);
        }
    }
    intent::add_pending(s, &e);
    out.events.push(e);
    out.finished = true;
    Ok(out)
}

/// `live` without `resources`: each goes back to the container's `base`; `None` when
/// nothing differs from `base` any more (design D20, D21).
pub fn without(mut live: LiveValues, resources: &[Resource]) -> Option<LiveValues> {
    for c in &mut live.containers {
        for r in resources {
            c.requests.set(*r, c.base.requests.get(*r).cloned());
            c.limits.set(*r, c.base.limits.get(*r).cloned());
        }
    }
    live.containers
        .retain(|c| c.requests != c.base.requests || c.limits != c.base.limits);
    (!live.containers.is_empty()).then_some(live)
}

/// The pause or freeze that holds a release at `now`, as the block the workload reports
/// for the resources it would release (D21, reading 11).
pub fn holding_block(
    facts: &Facts,
    policy: &EffectivePolicy,
    resources: &[Resource],
    now: DateTime<Utc>,
) -> Option<Block> {
    let names: Vec<&str> = resources.iter().map(|r| r.as_str()).collect();
    let waits = format!("the release of {} waits", names.join(", "));
    let mut block = if let Some(scope) = facts.hub.pause {
        let mut b = blank(wk::REASON_PAUSED, Check::Pause);
        b.message = format!(
            "automation is paused for the {} in the hub: {waits}",
            scope.as_str()
        );
        b.details
            .insert(wk::DETAIL_PAUSE_SCOPE.to_owned(), scope.as_str().to_owned());
        b
    } else {
        let chart = evaluate_windows(WindowKind::Freeze, &facts.cluster_freeze.windows, now);
        let own = evaluate_windows(WindowKind::Freeze, &policy.freeze_windows.value, now);
        let (what, until) = if facts.cluster_freeze.now {
            ("the cluster-wide freeze (freeze.now) is on", None)
        } else if chart.open {
            ("a cluster-wide freeze window is open", chart.open_until)
        } else if own.open {
            ("a freeze window of the policy is open", own.open_until)
        } else {
            return None;
        };
        let mut b = blank(wk::REASON_FREEZE_WINDOW, Check::FreezeWindow);
        b.message = format!("{what}: {waits}");
        b.until = until;
        b
    };
    block.resources = resource_list(PerResource {
        cpu: resources.contains(&Resource::Cpu),
        memory: resources.contains(&Resource::Memory),
    });
    Some(block)
}

fn blank(reason: &'static str, check: Check) -> Block {
    Block {
        reason,
        check,
        resources: &[],
        message: String::new(),
        details: Default::default(),
        next_window: None,
        until: None,
    }
}

/// Reports `held` for the resources a waiting release would release (D21): their mode
/// skips give way to it. A skip outcome becomes the block; a block with the same reason
/// already covers the whole workload; behind another block it is reported per resource.
pub fn report_hold(decision: &mut Decision, held: Block) {
    decision
        .reports
        .retain(|r| !(r.kind == ReportKind::Skipped && held.resources.contains(&r.resource)));
    match &decision.outcome {
        Outcome::Block(b) if b.reason == held.reason => {}
        Outcome::Skip(_) => {
            decision.message = held.message.clone();
            decision.outcome = Outcome::Block(held);
        }
        _ => {
            for r in held.resources {
                decision.reports.push(ResourceReport {
                    kind: ReportKind::Blocked,
                    reason: held.reason,
                    resource: *r,
                    container: None,
                    message: held.message.clone(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::rsr::LiveContainer;
    use kerf_api::{Quantity, ResourceRequirements, ResourceValues};

    fn values(cpu: &str, memory: &str) -> ResourceValues {
        ResourceValues {
            cpu: Some(Quantity(cpu.into())),
            memory: Some(Quantity(memory.into())),
        }
    }

    fn live() -> LiveValues {
        LiveValues {
            containers: vec![LiveContainer {
                name: "app".into(),
                requests: values("150m", "200Mi"),
                limits: ResourceValues::default(),
                base: ResourceRequirements {
                    requests: values("200m", "256Mi"),
                    limits: ResourceValues::default(),
                },
            }],
        }
    }

    // rule: design D21
    #[test]
    fn releasing_one_resource_puts_it_back_at_base_in_live() {
        let l = without(live(), &[Resource::Cpu]).unwrap();
        assert_eq!(l.containers[0].requests, values("200m", "200Mi"));
        assert!(without(l, &[Resource::Memory]).is_none());
        assert!(without(live(), &Resource::ALL).is_none());
    }
}
