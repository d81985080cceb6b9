//! Putting a workload back to its template values (annotation `kerf.getkerf.dev/revert`,
//! docs/decisions.md "Revert"): which change does it, and what a workload held by the
//! annotation reports once nothing differs any more.
//!
//! A revert is a change like any other (intent first, the executor, the write limit), with
//! the reason [`wk::REASON_REVERTED`]:
//! - in place, the running pods whose CPU or memory differ from the pod template's are
//!   resized to the template's values (the template of an in-place workload is the owner's:
//!   Kerf never wrote it);
//! - after a rollout change whose values the template still holds, the template gets the
//!   values from before that change back; the release that follows hands `kerf`'s fields
//!   over, so the owner's next apply (a GitOps sync) owns them again.
//!
//! While the annotation is set no recommendation is applied: the decision of every pass
//! is the skip [`wk::REASON_REVERT_REQUESTED`].

use kerf_api::rsr::{ChangeRecord, ChangeState, ContainerChange, RightsizingRecommendationStatus};
use kerf_api::{Resource, ResourceRequirements, Strategy, wellknown as wk};

use super::PassFacts;
use crate::facts::{ContainerFacts, Facts, Values};
use crate::pipeline::{ApplyPlan, Check, Decision, Outcome, PodRequest, Skip};
use crate::quantity;

/// The change that puts the workload back to its template values, if anything differs.
pub fn revert_plan(facts: &Facts, s: &RightsizingRecommendationStatus) -> Option<ApplyPlan> {
    let containers = match s.change.as_ref().filter(|c| template_changed_by(c)) {
        Some(change) => template_back(facts, change),
        None => pods_back(facts),
    };
    if containers.is_empty() {
        return None;
    }
    let resources: Vec<Resource> = Resource::ALL
        .into_iter()
        .filter(|r| containers.iter().any(|c| c.to.requests.get(*r).is_some()))
        .collect();
    let strategy = if s.change.as_deref().is_some_and(template_changed_by) {
        Strategy::Rollout
    } else {
        Strategy::InPlace
    };
    Some(ApplyPlan {
        strategy,
        containers,
        resources,
        hpa: None,
        reason: wk::REASON_REVERTED,
        approval: None,
        recommendation_id: facts.recommendation.recommendation_id.clone(),
        kept_limits: Vec::new(),
    })
}

/// Whether the pods are still taking the values of the last change, an in-place revert:
/// their spec holds its values and their status does not yet (a resize pending or in
/// progress). No revert starts meanwhile: the running values the status still reports are
/// the ones being replaced, and a second revert would move them again.
pub fn settling(f: &PassFacts<'_>) -> bool {
    let reverted_in_place = f
        .status
        .change
        .as_ref()
        .is_some_and(|c| c.revert && c.strategy == Strategy::InPlace);
    reverted_in_place && !f.workload.pods_settled
}

/// Whether `change` wrote the pod template (a rollout or a deferred change that is live or
/// was released) and is not itself a revert.
fn template_changed_by(change: &ChangeRecord) -> bool {
    change.strategy != Strategy::InPlace
        && !change.revert
        && matches!(change.state, ChangeState::Applied | ChangeState::Released)
}

/// Per container, the resources whose template value is still the rollout change's: back
/// to the value before it.
fn template_back(facts: &Facts, change: &ChangeRecord) -> Vec<ContainerChange> {
    let mut out = Vec::new();
    for c in &change.containers {
        let Some(t) = facts.workload.containers.iter().find(|t| t.name == c.name) else {
            continue;
        };
        let mut back = ContainerChange {
            name: c.name.clone(),
            from: ResourceRequirements::default(),
            to: ResourceRequirements::default(),
        };
        for r in change.resources.iter().copied() {
            let Some(to) = c.to.requests.get(r) else {
                continue;
            };
            let holds = quantity::parse(r, to).ok() == *t.requests.get(r);
            if let Some(from) = c.from.requests.get(r).filter(|_| holds) {
                back.from.requests.set(r, Some(to.clone()));
                back.to.requests.set(r, Some(from.clone()));
                back.from.limits.set(r, c.to.limits.get(r).cloned());
                back.to.limits.set(r, c.from.limits.get(r).cloned());
            }
        }
        if back.to.requests != Default::default() {
            out.push(back);
        }
    }
    out
}

/// Per changeable template container, the resources some running pod holds at values other
/// than the template's: back to the template's. A resource the template sets no request
/// for is left alone (a resize cannot remove a request).
fn pods_back(facts: &Facts) -> Vec<ContainerChange> {
    let mut out = Vec::new();
    for t in facts.workload.containers.iter().filter(|t| t.changeable()) {
        let mut back = ContainerChange {
            name: t.name.clone(),
            from: ResourceRequirements::default(),
            to: ResourceRequirements::default(),
        };
        for r in Resource::ALL {
            let Some(want) = *t.requests.get(r) else {
                continue;
            };
            let differing = facts.pods.iter().find_map(|p| {
                let pc = p.containers.iter().find(|pc| pc.name == t.name)?;
                let have = (*pc.requests.get(r), *pc.limits.get(r));
                (have != (Some(want), *t.limits.get(r))).then_some(have)
            });
            let Some((req, lim)) = differing else {
                continue;
            };
            set(&mut back.from, r, req, lim);
            set(&mut back.to, r, Some(want), *t.limits.get(r));
        }
        if back.to.requests != Default::default() {
            out.push(back);
        }
    }
    out
}

fn set(v: &mut ResourceRequirements, r: Resource, request: Option<i64>, limit: Option<i64>) {
    v.requests.set(r, request.map(|x| quantity::format(r, x)));
    v.limits.set(r, limit.map(|x| quantity::format(r, x)));
}

/// The decision of a pass that starts `plan`: the pipeline's decision `d` with the revert
/// as its outcome and the pod requests it moves (from the values the pods run).
pub fn revert_decision(mut d: Decision, facts: &Facts, plan: ApplyPlan) -> Decision {
    for r in Resource::ALL {
        let p = d.requests.get_mut(r);
        if plan.resources.contains(&r) {
            let after = template_request(&facts.workload.containers, r);
            let moved: i64 = plan.containers.iter().map(|c| moved_by(c, r)).sum();
            *p = PodRequest {
                before: after - moved,
                after,
            };
        } else {
            p.after = p.before;
        }
    }
    d.message = "the annotation kerf.getkerf.dev/revert puts the workload back to its \
                 template values"
        .to_owned();
    d.reports.clear();
    d.phase = kerf_api::rsr::Phase::Applying;
    d.outcome = Outcome::Apply(plan);
    d
}

/// The decision `d` of a workload the annotation holds at its template values: skipped
/// for both resources, no value moves.
pub fn hold(mut d: Decision) -> Decision {
    for r in Resource::ALL {
        let p = d.requests.get_mut(r);
        p.after = p.before;
    }
    d.message = "the annotation kerf.getkerf.dev/revert is \"true\": the workload keeps its \
                 template values and no recommendation is applied until it is removed"
        .to_owned();
    d.reports.clear();
    d.phase = kerf_api::rsr::Phase::Skipped;
    d.outcome = Outcome::Skip(Skip {
        reason: wk::REASON_REVERT_REQUESTED,
        check: Check::Mode,
        resources: &Resource::ALL,
        message: d.message.clone(),
    });
    d
}

/// The pod request of `r` the template gives (request, else limit), summed over the
/// changeable containers.
fn template_request(containers: &[ContainerFacts], r: Resource) -> i64 {
    containers
        .iter()
        .filter(|c| c.changeable())
        .map(|c| value_of(&c.requests, &c.limits, r))
        .sum()
}

/// How far `c` moves the request of `r` (0 where it does not set it).
fn moved_by(c: &ContainerChange, r: Resource) -> i64 {
    let parse = |v: &kerf_api::ResourceValues| {
        v.get(r)
            .and_then(|q| quantity::parse(r, q).ok())
            .unwrap_or(0)
    };
    match c.to.requests.get(r) {
        Some(_) => parse(&c.to.requests) - parse(&c.from.requests),
        None => 0,
    }
}

fn value_of(requests: &Values, limits: &Values, r: Resource) -> i64 {
    requests.get(r).or(*limits.get(r)).unwrap_or(0)
}
