//! The per-resource step (design D8, D9, D14): target values per container and resource,
//! then the per-resource blocks of check 9.
//!
//! [`targets`] computes what each value would become (decrease cap, minimums, limits and
//! QoS, tolerance, no re-apply of rolled-back values). [`resource_blocks`] then marks the
//! moves that may not go in (JVMFixedHeap, Throttled, OOMKilled, Cooldown after a rollback,
//! RestartPolicyRequired, UnsupportedNode); a block takes only that container's resource
//! out of the change.

use std::ops::ControlFlow;

use kerf_api::policy::Strategy;
use kerf_api::rsr::ContainerRecommendation;
use kerf_api::{Quantity, Resource, ResourceValues};

use crate::effective::{EffectivePolicy, PerResource};
use crate::facts::{ContainerFacts, Facts, Values};
use crate::hpa::ContainerRequests;
use crate::quantity::{self, QuantityError};

mod blocks;

pub use self::blocks::{BlockCtx, Refusal, ResourceBlock, resource_blocks};

/// A request and a limit of one resource: millicores or bytes, `None` = not set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pair {
    /// The request.
    pub request: Option<i64>,
    /// The limit.
    pub limit: Option<i64>,
}

/// What one container's resource would become.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourcePlan<'a> {
    /// The container.
    pub container: &'a str,
    /// The resource.
    pub resource: Resource,
    /// The current values.
    pub from: Pair,
    /// The values for the template and for new pods.
    pub to: Pair,
    /// True when `to` removes a limit that an in-place resize must keep on running pods.
    pub limit_removal_left_to_new_pods: bool,
    /// The block that takes this resource out of the change, if any.
    pub block: Option<ResourceBlock<'a>>,
}

impl ResourcePlan<'_> {
    /// Whether any value changes.
    pub fn moves(&self) -> bool {
        self.from != self.to
    }

    /// Whether the request or the limit would go down.
    pub fn decreases(&self) -> bool {
        lower(self.to.request, self.from.request) || lower(self.to.limit, self.from.limit)
    }

    /// Whether the plan goes into the change: it moves and nothing blocks it.
    pub fn goes_in(&self) -> bool {
        self.moves() && self.block.is_none()
    }
}

fn lower(to: Option<i64>, from: Option<i64>) -> bool {
    matches!((to, from), (Some(t), Some(f)) if t < f)
}

/// The targets of every changeable container the recommendation names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targets<'a> {
    /// One plan per container and active resource that has something to decide.
    pub plans: Vec<ResourcePlan<'a>>,
    /// Recommended containers the template lacks (design D8).
    pub dropped: Vec<&'a str>,
    /// Values left out, for the message (bad quantities, BestEffort containers, ...).
    pub notes: Vec<String>,
}

impl<'a> Targets<'a> {
    /// Whether any plan moves by the tolerance or more.
    pub fn any_moves(&self) -> bool {
        self.plans.iter().any(ResourcePlan::moves)
    }

    /// Whether a change is left after the per-resource blocks.
    pub fn any_goes_in(&self) -> bool {
        self.plans.iter().any(ResourcePlan::goes_in)
    }

    /// Whether some plan of `r` moves.
    pub fn moves(&self, r: Resource) -> bool {
        self.plans.iter().any(|p| p.resource == r && p.moves())
    }

    /// Whether some plan of `r` goes in.
    pub fn goes_in(&self, r: Resource) -> bool {
        self.plans.iter().any(|p| p.resource == r && p.goes_in())
    }

    /// Resources with at least one moving plan, CPU first.
    pub fn moving_resources(&self) -> Vec<Resource> {
        Resource::ALL
            .into_iter()
            .filter(|r| self.moves(*r))
            .collect()
    }

    /// Resources the change carries after the blocks, CPU first.
    pub fn applied_resources(&self) -> Vec<Resource> {
        Resource::ALL
            .into_iter()
            .filter(|r| self.goes_in(*r))
            .collect()
    }

    /// The per-resource blocks of moving plans, in container and resource order.
    pub fn blocks(&self) -> impl Iterator<Item = &ResourceBlock<'a>> {
        self.plans
            .iter()
            .filter(|p| p.moves())
            .filter_map(|p| p.block.as_ref())
    }

    /// Requests per changeable container before and after the change (only plans that go
    /// in count): what an HPA divides usage by.
    pub fn container_requests(
        &self,
        facts: &'a Facts,
    ) -> (ContainerRequests<&'a str>, ContainerRequests<&'a str>) {
        let (mut before, mut after) = (ContainerRequests::new(), ContainerRequests::new());
        for c in facts.workload.containers.iter().filter(|c| c.changeable()) {
            let (requests, limits) = current(facts, c);
            let (mut old, mut new) = (requests.clone(), requests);
            for r in Resource::ALL {
                let current = requests_or_limit(&old, &limits, r);
                let plan = self
                    .plans
                    .iter()
                    .find(|p| p.resource == r && p.container == c.name);
                let (o, n) = match plan {
                    Some(p) if p.goes_in() => (p.from.request, p.to.request),
                    Some(p) => (p.from.request, p.from.request),
                    None => (current, current),
                };
                (*old.get_mut(r), *new.get_mut(r)) = (o, n);
            }
            before.insert(c.name.as_str(), old);
            after.insert(c.name.as_str(), new);
        }
        (before, after)
    }

    /// One resource's request summed over the changeable containers (the pod request),
    /// before and after every plan of it (blocked ones included). Container names are
    /// unique in a pod template, so a plan's `from` is its container's current value.
    pub fn pod_request(&self, facts: &Facts, resource: Resource) -> (i64, i64) {
        let before = facts
            .workload
            .containers
            .iter()
            .filter(|c| c.changeable())
            .map(|c| {
                let (requests, limits) = current(facts, c);
                requests
                    .get(resource)
                    .or(*limits.get(resource))
                    .unwrap_or(0)
            })
            .sum();
        let after = self
            .plans
            .iter()
            .filter(|p| p.resource == resource)
            .fold(before, |acc, p| {
                acc - p.from.request.unwrap_or(0) + p.to.request.unwrap_or(0)
            });
        (before, after)
    }
}

/// What the per-resource step finds for one recommended container (and, for a plan, one
/// active resource).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found<'a> {
    /// What the resource would become (no block marked yet).
    Plan(ResourcePlan<'a>),
    /// A recommended container the template lacks, or one Kerf may not change (design D8).
    Dropped(&'a str),
    /// A container with no requests or limits (BestEffort) keeps none (design D9).
    BestEffort(&'a str),
    /// A recommended value that does not parse.
    Invalid(&'a str, QuantityError),
}

impl Found<'_> {
    /// The note for the message, for what is left out.
    pub fn note(&self) -> Option<String> {
        match self {
            Found::BestEffort(name) => Some(format!(
                "container {name} has no requests or limits (BestEffort) and keeps none"
            )),
            Found::Invalid(name, e) => Some(format!("container {name}: {e}")),
            Found::Plan(_) | Found::Dropped(_) => None,
        }
    }
}

/// The targets for the `active` resources (design D8, D9, D14, GR-14..GR-20, GR-23, RB-31).
pub fn targets<'a>(facts: &'a Facts, policy: &EffectivePolicy, active: &[Resource]) -> Targets<'a> {
    let mut out = Targets {
        plans: Vec::with_capacity(facts.recommendation.containers.len() * active.len()),
        ..Targets::default()
    };
    for_each_target(facts, policy, active, |found| {
        match found {
            Found::Plan(plan) => out.plans.push(plan),
            Found::Dropped(name) => out.dropped.push(name),
            other => out.notes.extend(other.note()),
        }
        ControlFlow::Continue(())
    });
    out
}

/// Computes the targets for the `active` resources, one [`Found`] at a time in
/// recommendation order, without allocating (what [`targets`] collects), until `each`
/// breaks.
pub fn for_each_target<'a>(
    facts: &'a Facts,
    policy: &EffectivePolicy,
    active: &[Resource],
    mut each: impl FnMut(Found<'a>) -> ControlFlow<()>,
) {
    for rec in &facts.recommendation.containers {
        let Some(container) = facts.container(&rec.name).filter(|c| c.changeable()) else {
            if each(Found::Dropped(&rec.name)).is_break() {
                return;
            }
            continue;
        };
        let (requests, limits) = current(facts, container);
        if is_best_effort(&requests, &limits) {
            if each(Found::BestEffort(&rec.name)).is_break() {
                return;
            }
            continue;
        }
        let guaranteed = is_guaranteed(&requests, &limits);
        for &resource in active {
            let from = Pair {
                request: requests.get(resource).or(*limits.get(resource)),
                limit: *limits.get(resource),
            };
            let ctx = ValueCtx {
                facts,
                policy,
                resource,
                guaranteed,
            };
            let found = match ctx.plan(rec, from) {
                Ok(plan) => Found::Plan(plan),
                Err(e) => Found::Invalid(&rec.name, e),
            };
            if each(found).is_break() {
                return;
            }
        }
    }
}

/// The current requests and limits of a template container: the live values of an applied
/// in-place change where they exist (what the webhook gives new pods), else the template.
pub fn current(facts: &Facts, container: &ContainerFacts) -> (Values, Values) {
    let live = facts
        .state
        .live
        .as_ref()
        .and_then(|l| l.containers.iter().find(|c| c.name == container.name));
    match live {
        Some(l) => (
            parse_values(&l.requests).unwrap_or_else(|_| container.requests.clone()),
            parse_values(&l.limits).unwrap_or_else(|_| container.limits.clone()),
        ),
        None => (container.requests.clone(), container.limits.clone()),
    }
}

/// The request of `r`, or the limit where no request is set (what Kubernetes defaults the
/// request to).
fn requests_or_limit(requests: &Values, limits: &Values, r: Resource) -> Option<i64> {
    requests.get(r).or(*limits.get(r))
}

fn parse_values(v: &ResourceValues) -> Result<Values, QuantityError> {
    let one = |r: Resource| v.get(r).map(|q| quantity::parse(r, q)).transpose();
    Ok(PerResource {
        cpu: one(Resource::Cpu)?,
        memory: one(Resource::Memory)?,
    })
}

fn is_best_effort(requests: &Values, limits: &Values) -> bool {
    Resource::ALL
        .iter()
        .all(|r| requests.get(*r).is_none() && limits.get(*r).is_none())
}

fn is_guaranteed(requests: &Values, limits: &Values) -> bool {
    Resource::ALL
        .iter()
        .all(|r| match (requests.get(*r), limits.get(*r)) {
            (Some(q), Some(l)) => q == l,
            (None, Some(_)) => true,
            _ => false,
        })
}

struct ValueCtx<'a> {
    facts: &'a Facts,
    policy: &'a EffectivePolicy,
    resource: Resource,
    guaranteed: bool,
}

impl ValueCtx<'_> {
    fn plan<'a>(
        &self,
        rec: &'a ContainerRecommendation,
        from: Pair,
    ) -> Result<ResourcePlan<'a>, QuantityError> {
        let r = self.resource;
        let parse = |v: &ResourceValues| v.get(r).map(|q| quantity::parse(r, q)).transpose();
        let (rec_request, rec_limit) = (parse(&rec.requests)?, parse(&rec.limits)?);
        let request = match rec_request {
            Some(t) => Some(self.request_target(from.request, t)),
            None => from.request,
        };
        let removes = rec.remove_limits.contains(&r);
        let limit = self.limit(from.limit, rec_limit, removes, request);
        let mut plan = ResourcePlan {
            container: &rec.name,
            resource: r,
            from,
            to: Pair { request, limit },
            limit_removal_left_to_new_pods: false,
            block: None,
        };
        if self.repeats_rolled_back(&plan) {
            plan.to = plan.from; // RB-31: never the values a rollback removed
        }
        Ok(plan)
    }

    /// Design D9: Guaranteed keeps limit = request; `removeLimits` removes (not for a
    /// Guaranteed container); a recommended limit is capped; an absent one is kept; a
    /// limit below the request is raised to it (GR-20).
    fn limit(
        &self,
        current: Option<i64>,
        recommended: Option<i64>,
        removes: bool,
        request: Option<i64>,
    ) -> Option<i64> {
        let limit = if self.guaranteed {
            request
        } else if removes {
            None
        } else {
            recommended.map_or(current, |t| Some(self.limit_target(current, t)))
        };
        match (limit, request) {
            (Some(l), Some(q)) if l < q => Some(q),
            _ => limit,
        }
    }

    fn minimum(&self) -> i64 {
        match self.resource {
            Resource::Cpu => self.policy.min_cpu.value,
            Resource::Memory => self.policy.min_memory.value,
        }
    }

    /// GR-14..GR-19, GR-23: cap the decrease, raise to the minimum, then keep the current
    /// value if the move is smaller than the tolerance.
    fn request_target(&self, current: Option<i64>, recommended: i64) -> i64 {
        let cur = current.unwrap_or(0);
        let pct = self.policy.max_change_percent.value;
        let target =
            quantity::cap_decrease(self.resource, cur, recommended, pct).max(self.minimum());
        self.tolerate(current, target)
    }

    fn limit_target(&self, current: Option<i64>, recommended: i64) -> i64 {
        let Some(cur) = current else {
            return recommended;
        };
        let pct = self.policy.max_change_percent.value;
        let target = quantity::cap_decrease(self.resource, cur, recommended, pct);
        self.tolerate(current, target)
    }

    fn tolerate(&self, current: Option<i64>, target: i64) -> i64 {
        let tol = self.facts.settings.tolerance_milli_percent;
        match current {
            Some(cur) if quantity::within_tolerance(cur, target, tol) => cur,
            _ => target,
        }
    }

    /// RB-31: the last change was rolled back and the target equals the values that change
    /// had set for this resource. That holds for every resource the change touched, not
    /// only the restored ones: a resource a partial rollback kept (RB-35) is not applied
    /// again with the same values either, even after the cooldown (docs/health.md).
    ///
    /// The recommendation of a rolled-back change does not go in again at all, whatever
    /// resource it moves: it may have gone in as several changes (a resource held back by
    /// a cooldown went in later), and a value an earlier change of it set must not come back
    /// as a change of its own, nor open the way for the rolled-back values once it has
    /// replaced the rolled-back change in status.
    fn repeats_rolled_back(&self, plan: &ResourcePlan<'_>) -> bool {
        let state = &self.facts.state;
        let (Some(rb), Some(change)) = (&state.last_rollback, &state.change) else {
            return false;
        };
        if rb.change_id != change.id {
            return false;
        }
        if change.recommendation_id == self.facts.recommendation.recommendation_id {
            return plan.moves();
        }
        let Some(c) = change.containers.iter().find(|c| c.name == plan.container) else {
            return false;
        };
        let r = self.resource;
        let parse = |q: &Quantity| quantity::parse(r, q).ok();
        // `to` lists only what the change set: a value it left out stayed as it was, a limit
        // in `from` but not in `to` was removed.
        let request = c.to.requests.get(r).map_or(plan.from.request, parse);
        let limit = match (c.to.limits.get(r), c.from.limits.get(r)) {
            (Some(q), _) => parse(q),
            (None, Some(_)) => None,
            (None, None) => plan.from.limit,
        };
        plan.moves() && plan.to == Pair { request, limit }
    }
}

/// Marks the limit removals an in-place resize cannot send (design D9, AP-17): running
/// pods keep the limit, new pods get the removal through the webhook.
pub fn mark_carrier(targets: &mut Targets<'_>, carrier: Strategy) {
    for p in &mut targets.plans {
        p.limit_removal_left_to_new_pods =
            carrier == Strategy::InPlace && p.from.limit.is_some() && p.to.limit.is_none();
    }
}
