//! The per-resource step (design D8, D9, D14): target values per container and resource,
//! then the per-resource blocks of check 9.
//!
//! [`targets`] computes what each value would become (decrease cap, minimums, limits and
//! QoS, tolerance, no re-apply of rolled-back values). [`resource_blocks`] then marks the
//! moves that may not go in (JVMFixedHeap, Throttled, OOMKilled, Cooldown after a rollback,
//! RestartPolicyRequired, UnsupportedNode); a block takes only that container's resource
//! out of the change.

use chrono::{DateTime, Utc};
use kerf_api::policy::Strategy;
use kerf_api::rsr::{ContainerFlag, ContainerRecommendation};
use kerf_api::wellknown as wk;
use kerf_api::{Quantity, Resource, ResourceValues};

use crate::effective::{EffectivePolicy, PerResource};
use crate::facts::{ContainerFacts, Facts, ResizePolicy, Values};
use crate::hpa::ContainerRequests;
use crate::jvm::{self, Runtime};
use crate::quantity::{self, QuantityError};

/// A request and a limit of one resource: millicores or bytes, `None` = not set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pair {
    /// The request.
    pub request: Option<i64>,
    /// The limit.
    pub limit: Option<i64>,
}

/// A per-resource refusal inside check 9.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceBlock {
    /// The contract's reason (Throttled, OOMKilled, ...).
    pub reason: &'static str,
    /// The container.
    pub container: String,
    /// The resource taken out of the change.
    pub resource: Resource,
    /// What holds it back, for people.
    pub message: String,
}

/// What one container's resource would become.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourcePlan {
    /// The container.
    pub container: String,
    /// The resource.
    pub resource: Resource,
    /// The current values.
    pub from: Pair,
    /// The values for the template and for new pods.
    pub to: Pair,
    /// True when `to` removes a limit that an in-place resize must keep on running pods.
    pub limit_removal_left_to_new_pods: bool,
    /// The block that takes this resource out of the change, if any.
    pub block: Option<ResourceBlock>,
}

impl ResourcePlan {
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
pub struct Targets {
    /// One plan per container and active resource that has something to decide.
    pub plans: Vec<ResourcePlan>,
    /// Recommended containers the template lacks (design D8).
    pub dropped: Vec<String>,
    /// Values left out, for the message (bad quantities, BestEffort containers, ...).
    pub notes: Vec<String>,
}

impl Targets {
    /// Whether any plan moves by the tolerance or more.
    pub fn any_moves(&self) -> bool {
        self.plans.iter().any(ResourcePlan::moves)
    }

    /// Whether a change is left after the per-resource blocks.
    pub fn any_goes_in(&self) -> bool {
        self.plans.iter().any(ResourcePlan::goes_in)
    }

    /// Resources with at least one moving plan, CPU first.
    pub fn moving_resources(&self) -> Vec<Resource> {
        Resource::ALL
            .into_iter()
            .filter(|r| self.plans.iter().any(|p| p.resource == *r && p.moves()))
            .collect()
    }

    /// Resources the change carries after the blocks, CPU first.
    pub fn applied_resources(&self) -> Vec<Resource> {
        Resource::ALL
            .into_iter()
            .filter(|r| self.plans.iter().any(|p| p.resource == *r && p.goes_in()))
            .collect()
    }

    /// The per-resource blocks of moving plans, in container and resource order.
    pub fn blocks(&self) -> impl Iterator<Item = &ResourceBlock> {
        self.plans
            .iter()
            .filter(|p| p.moves())
            .filter_map(|p| p.block.as_ref())
    }

    /// Requests per changeable container, before (`after = false`) or after the change
    /// (only plans that go in count): what an HPA divides usage by.
    pub fn container_requests(&self, facts: &Facts, after: bool) -> ContainerRequests {
        let mut out = ContainerRequests::new();
        for c in facts.workload.containers.iter().filter(|c| c.changeable()) {
            let (mut requests, limits) = current(facts, c);
            for r in Resource::ALL {
                let current = requests.get(r).or(*limits.get(r));
                let plan = self
                    .plans
                    .iter()
                    .find(|p| p.container == c.name && p.resource == r);
                *requests.get_mut(r) = match plan {
                    Some(p) if after && p.goes_in() => p.to.request,
                    Some(p) => p.from.request,
                    None => current,
                };
            }
            out.insert(c.name.clone(), requests);
        }
        out
    }

    /// One resource's requests summed over the changeable containers (the pod request).
    pub fn pod_request(&self, facts: &Facts, resource: Resource, after: bool) -> i64 {
        self.container_requests(facts, after)
            .values()
            .map(|v| v.get(resource).unwrap_or(0))
            .sum()
    }
}

/// Computes the targets for the `active` resources (design D8, D9, D14, GR-14..GR-20,
/// GR-23, RB-31).
pub fn targets(facts: &Facts, policy: &EffectivePolicy, active: &[Resource]) -> Targets {
    let mut out = Targets::default();
    for rec in &facts.recommendation.containers {
        let Some(container) = facts.container(&rec.name).filter(|c| c.changeable()) else {
            out.dropped.push(rec.name.clone());
            continue;
        };
        let (requests, limits) = current(facts, container);
        if is_best_effort(&requests, &limits) {
            out.notes.push(format!(
                "container {} has no requests or limits (BestEffort) and keeps none",
                rec.name
            ));
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
            match ctx.plan(rec, from) {
                Ok(plan) => out.plans.push(plan),
                Err(e) => out.notes.push(format!("container {}: {e}", rec.name)),
            }
        }
    }
    out
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
    fn plan(
        &self,
        rec: &ContainerRecommendation,
        from: Pair,
    ) -> Result<ResourcePlan, QuantityError> {
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
            container: rec.name.clone(),
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

    /// RB-31: the last change was rolled back for this resource and the target equals
    /// the values that change had set.
    fn repeats_rolled_back(&self, plan: &ResourcePlan) -> bool {
        let state = &self.facts.state;
        let (Some(rb), Some(change)) = (&state.last_rollback, &state.change) else {
            return false;
        };
        if rb.change_id != change.id || !rb.resources.contains(&self.resource) {
            return false;
        }
        let Some(c) = change.containers.iter().find(|c| c.name == plan.container) else {
            return false;
        };
        let parse = |q: Option<&Quantity>| q.and_then(|q| quantity::parse(self.resource, q).ok());
        let removed = Pair {
            request: parse(c.to.requests.get(self.resource)),
            limit: parse(c.to.limits.get(self.resource)),
        };
        plan.moves() && plan.to == removed
    }
}

/// Marks the limit removals an in-place resize cannot send (design D9, AP-17): running
/// pods keep the limit, new pods get the removal through the webhook.
pub fn mark_carrier(targets: &mut Targets, carrier: Strategy) {
    for p in &mut targets.plans {
        p.limit_removal_left_to_new_pods =
            carrier == Strategy::InPlace && p.from.limit.is_some() && p.to.limit.is_none();
    }
}

/// Inputs of the per-resource blocks besides the plans.
pub struct BlockCtx<'a> {
    /// The snapshot.
    pub facts: &'a Facts,
    /// The effective policy.
    pub policy: &'a EffectivePolicy,
    /// The strategy the change would use: in-place or rollout (deferred counts as rollout).
    pub strategy: Strategy,
    /// Now.
    pub now: DateTime<Utc>,
}

/// Marks the per-resource blocks of check 9 on every moving plan (GR-22, GR-27..GR-29,
/// EV-34..EV-36, AP-14..AP-16, RB-32..RB-34, design D19).
pub fn resource_blocks(targets: &mut Targets, ctx: &BlockCtx<'_>) {
    let unsupported = unsupported_nodes(ctx);
    for plan in targets.plans.iter_mut().filter(|p| p.moves()) {
        let Some(container) = ctx.facts.container(&plan.container) else {
            continue;
        };
        let rec = ctx
            .facts
            .recommendation
            .containers
            .iter()
            .find(|c| c.name == plan.container);
        let flags = rec.map(|r| r.flags.as_slice()).unwrap_or_default();
        plan.block = first_block(plan, container, flags, ctx, &unsupported);
    }
}

fn first_block(
    plan: &ResourcePlan,
    container: &ContainerFacts,
    flags: &[ContainerFlag],
    ctx: &BlockCtx<'_>,
    unsupported: &UnsupportedNodes,
) -> Option<ResourceBlock> {
    let runtime = jvm::detect(flags, container);
    let (reason, message) = fixed_heap_block(plan, runtime)
        .or_else(|| flag_block(plan, flags))
        .or_else(|| rollback_hold(plan, ctx).map(|until| rollback_block(plan, until)))
        .or_else(|| in_place_block(plan, container, runtime, ctx.strategy, unsupported))?;
    Some(ResourceBlock {
        reason,
        container: plan.container.clone(),
        resource: plan.resource,
        message,
    })
}

type Refusal = (&'static str, String);

/// EV-35, EV-36: memory of a JVM with a fixed heap is only audited.
fn fixed_heap_block(plan: &ResourcePlan, runtime: Runtime) -> Option<Refusal> {
    (plan.resource == Resource::Memory && runtime.fixed_heap).then(|| {
        let name = &plan.container;
        let message = format!(
            "container {name} runs a JVM with a fixed maximum heap: memory is only audited"
        );
        (wk::REASON_JVM_FIXED_HEAP, message)
    })
}

/// GR-27, GR-28: no CPU decrease while throttled, no memory decrease after OOM kills.
fn flag_block(plan: &ResourcePlan, flags: &[ContainerFlag]) -> Option<Refusal> {
    if !plan.decreases() {
        return None;
    }
    let name = &plan.container;
    match plan.resource {
        Resource::Cpu if flags.contains(&ContainerFlag::Throttled) => Some((
            wk::REASON_THROTTLED,
            format!("container {name} is throttled: no CPU decrease"),
        )),
        Resource::Memory if flags.contains(&ContainerFlag::OomKilled) => Some((
            wk::REASON_OOM_KILLED,
            format!("container {name} was OOM-killed: no memory decrease"),
        )),
        _ => None,
    }
}

fn rollback_block(plan: &ResourcePlan, until: DateTime<Utc>) -> Refusal {
    let message = format!(
        "{} of container {} was rolled back: no decrease before {}",
        plan.resource,
        plan.container,
        until.to_rfc3339()
    );
    (wk::REASON_COOLDOWN, message)
}

/// EV-34, AP-14..AP-16, design D19: what in-place cannot carry.
fn in_place_block(
    plan: &ResourcePlan,
    container: &ContainerFacts,
    runtime: Runtime,
    strategy: Strategy,
    unsupported: &UnsupportedNodes,
) -> Option<Refusal> {
    if strategy != Strategy::InPlace {
        return None;
    }
    let restart = container.resize_policy.memory == ResizePolicy::RestartContainer;
    if plan.resource == Resource::Memory && runtime.needs_restart_for_memory() && !restart {
        let message = format!(
            "container {} (JVM or Python) needs resizePolicy RestartContainer for memory, or a rollout",
            plan.container
        );
        return Some((wk::REASON_RESTART_POLICY_REQUIRED, message));
    }
    unsupported
        .reason(plan.resource)
        .map(|why| (wk::REASON_UNSUPPORTED_NODE, why))
}

/// GR-22, RB-32..RB-34: the end of the decrease hold of a rolled-back resource.
fn rollback_hold(plan: &ResourcePlan, ctx: &BlockCtx<'_>) -> Option<DateTime<Utc>> {
    let rb = ctx.facts.state.last_rollback.as_ref()?;
    let until = rb.time + ctx.policy.cooldown.value;
    (plan.decreases() && rb.resources.contains(&plan.resource) && ctx.now < until).then_some(until)
}

/// Why in-place changes cannot work on the workload's nodes (AP-14, AP-15, design D19).
struct UnsupportedNodes {
    all: Option<String>,
    memory: Option<String>,
}

impl UnsupportedNodes {
    fn reason(&self, r: Resource) -> Option<String> {
        match r {
            Resource::Cpu => self.all.clone(),
            Resource::Memory => self.all.clone().or_else(|| self.memory.clone()),
        }
    }
}

fn unsupported_nodes(ctx: &BlockCtx<'_>) -> UnsupportedNodes {
    let facts = ctx.facts;
    if !facts.settings.resize_subresource {
        let all = Some("cluster has no pods/resize".to_owned());
        return UnsupportedNodes { all, memory: None };
    }
    let mut out = UnsupportedNodes {
        all: None,
        memory: None,
    };
    for pod in &facts.pods {
        let Some(node) = pod.node.as_deref().and_then(|n| facts.node(n)) else {
            continue;
        };
        let matched = facts
            .settings
            .unsupported_node_selectors
            .iter()
            .any(|sel| sel.iter().all(|(k, v)| node.labels.get(k) == Some(v)));
        if matched && out.all.is_none() {
            out.all = Some(format!(
                "pod {} runs on node {}, which matches unsupportedNodeSelectors: no in-place change",
                pod.name, node.name
            ));
        }
        if node.swap && out.memory.is_none() {
            out.memory = Some(format!(
                "pod {} runs on node {}, which has swap: no in-place memory change",
                pod.name, node.name
            ));
        }
    }
    out
}
