//! The per-resource blocks of check 9 (GR-22, GR-27..GR-29, EV-34..EV-36, AP-14..AP-16,
//! RB-32..RB-34, design D19): what takes one container's resource out of the change. A
//! block names why; its message is worded only when reported.

use chrono::{DateTime, Utc};
use kerf_api::Resource;
use kerf_api::policy::Strategy;
use kerf_api::rsr::ContainerFlag;
use kerf_api::wellknown as wk;

use super::{ResourcePlan, Targets};
use crate::duration::Rfc3339;
use crate::effective::EffectivePolicy;
use crate::facts::{ContainerFacts, Facts, ResizePolicy};
use crate::jvm::{self, Runtime};

/// A per-resource refusal inside check 9.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceBlock<'a> {
    /// The contract's reason (Throttled, OOMKilled, ...).
    pub reason: &'static str,
    /// The container.
    pub container: &'a str,
    /// The resource taken out of the change.
    pub resource: Resource,
    /// What holds it back: [`ResourceBlock::message`] words it.
    pub refusal: Refusal<'a>,
}

/// What holds one container's resource back (check 9).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal<'a> {
    /// EV-35, EV-36: a JVM with a fixed maximum heap.
    FixedHeap,
    /// GR-27: no CPU decrease while throttled.
    Throttled,
    /// GR-28: no memory decrease after OOM kills.
    OomKilled,
    /// GR-22: the resource was rolled back; no decrease before this time.
    RolledBack(DateTime<Utc>),
    /// EV-34: a JVM or Python needs `resizePolicy: RestartContainer` for memory.
    RestartPolicy,
    /// Design D19: the API server serves no `pods/resize`.
    NoResizeSubresource,
    /// AP-14: a pod runs on a node that matches `unsupportedNodeSelectors`.
    UnsupportedNode {
        /// The pod.
        pod: &'a str,
        /// Its node.
        node: &'a str,
    },
    /// AP-15: a pod runs on a node with swap (memory only).
    Swap {
        /// The pod.
        pod: &'a str,
        /// Its node.
        node: &'a str,
    },
    /// The agent's mutating webhook has no usable certificate (the problem): pods created
    /// after an in-place change would start with the template's values.
    WebhookCertificate(&'a str),
}

impl ResourceBlock<'_> {
    /// What holds the resource back, for people.
    pub fn message(&self) -> String {
        let name = self.container;
        match &self.refusal {
            Refusal::FixedHeap => format!(
                "container {name} runs a JVM with a fixed maximum heap: memory is only audited"
            ),
            Refusal::Throttled => format!("container {name} is throttled: no CPU decrease"),
            Refusal::OomKilled => format!("container {name} was OOM-killed: no memory decrease"),
            Refusal::RolledBack(until) => format!(
                "{} of container {name} was rolled back: no decrease before {}",
                self.resource,
                Rfc3339(*until)
            ),
            Refusal::RestartPolicy => format!(
                "container {name} (JVM or Python) needs resizePolicy RestartContainer for memory, or a rollout"
            ),
            Refusal::NoResizeSubresource => "cluster has no pods/resize".to_owned(),
            Refusal::UnsupportedNode { pod, node } => format!(
                "pod {pod} runs on node {node}, which matches unsupportedNodeSelectors: no in-place change"
            ),
            Refusal::Swap { pod, node } => {
                format!("pod {pod} runs on node {node}, which has swap: no in-place memory change")
            }
            Refusal::WebhookCertificate(problem) => format!(
                "the agent's webhook has no usable certificate ({problem}): in-place changes wait, \
                 or new pods would start with the template's values"
            ),
        }
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
pub fn resource_blocks<'a>(targets: &mut Targets<'a>, ctx: &BlockCtx<'a>) {
    let unsupported = if ctx.strategy == Strategy::InPlace {
        unsupported_nodes(ctx.facts)
    } else {
        UnsupportedNodes::default()
    };
    // A container's plans follow one another and share its name: look it up once.
    let mut seen: Option<(&str, Option<&ContainerFacts>, &[ContainerFlag])> = None;
    for plan in targets.plans.iter_mut().filter(|p| p.moves()) {
        let (container, flags) = match seen {
            Some((name, c, f)) if std::ptr::eq(name, plan.container) => (c, f),
            _ => {
                let c = ctx.facts.container(plan.container);
                let recommended = &ctx.facts.recommendation.containers;
                let f = recommended
                    .iter()
                    .find(|r| r.name == plan.container)
                    .map(|r| r.flags.as_slice())
                    .unwrap_or_default();
                seen = Some((plan.container, c, f));
                (c, f)
            }
        };
        let Some(container) = container else {
            continue;
        };
        plan.block =
            first_block(plan, container, flags, ctx, &unsupported).map(|(reason, refusal)| {
                ResourceBlock {
                    reason,
                    container: plan.container,
                    resource: plan.resource,
                    refusal,
                }
            });
    }
}

type Verdict<'a> = (&'static str, Refusal<'a>);

fn first_block<'a>(
    plan: &ResourcePlan<'a>,
    container: &ContainerFacts,
    flags: &[ContainerFlag],
    ctx: &BlockCtx<'a>,
    unsupported: &UnsupportedNodes<'a>,
) -> Option<Verdict<'a>> {
    // What the container runs matters to memory only.
    let runtime = if plan.resource == Resource::Memory {
        jvm::detect(flags, container)
    } else {
        Runtime::default()
    };
    fixed_heap_block(plan, runtime)
        .or_else(|| flag_block(plan, flags))
        .or_else(|| {
            rollback_hold(plan, ctx).map(|until| (wk::REASON_COOLDOWN, Refusal::RolledBack(until)))
        })
        .or_else(|| in_place_block(plan, container, runtime, ctx.strategy, unsupported))
}

/// EV-35, EV-36: memory of a JVM with a fixed heap is only audited.
fn fixed_heap_block<'a>(plan: &ResourcePlan<'_>, runtime: Runtime) -> Option<Verdict<'a>> {
    (plan.resource == Resource::Memory && runtime.fixed_heap)
        .then_some((wk::REASON_JVM_FIXED_HEAP, Refusal::FixedHeap))
}

/// GR-27, GR-28: no CPU decrease while throttled, no memory decrease after OOM kills.
fn flag_block<'a>(plan: &ResourcePlan<'_>, flags: &[ContainerFlag]) -> Option<Verdict<'a>> {
    if !plan.decreases() {
        return None;
    }
    match plan.resource {
        Resource::Cpu if flags.contains(&ContainerFlag::Throttled) => {
            Some((wk::REASON_THROTTLED, Refusal::Throttled))
        }
        Resource::Memory if flags.contains(&ContainerFlag::OomKilled) => {
            Some((wk::REASON_OOM_KILLED, Refusal::OomKilled))
        }
        _ => None,
    }
}

/// EV-34, AP-14..AP-16, design D19: what in-place cannot carry.
fn in_place_block<'a>(
    plan: &ResourcePlan<'_>,
    container: &ContainerFacts,
    runtime: Runtime,
    strategy: Strategy,
    unsupported: &UnsupportedNodes<'a>,
) -> Option<Verdict<'a>> {
    if strategy != Strategy::InPlace {
        return None;
    }
    let restart = container.resize_policy.memory == ResizePolicy::RestartContainer;
    if plan.resource == Resource::Memory && runtime.needs_restart_for_memory() && !restart {
        return Some((wk::REASON_RESTART_POLICY_REQUIRED, Refusal::RestartPolicy));
    }
    if let Some(why) = unsupported.reason(plan.resource) {
        return Some((wk::REASON_UNSUPPORTED_NODE, why));
    }
    unsupported.webhook.map(|problem| {
        (
            wk::REASON_WEBHOOK_CERTIFICATE_UNUSABLE,
            Refusal::WebhookCertificate(problem),
        )
    })
}

/// GR-22, RB-32..RB-34: the end of the decrease hold of a rolled-back resource.
fn rollback_hold(plan: &ResourcePlan<'_>, ctx: &BlockCtx<'_>) -> Option<DateTime<Utc>> {
    let rb = ctx.facts.state.last_rollback.as_ref()?;
    let until = rb.time + ctx.policy.cooldown.value;
    (plan.decreases() && rb.resources.contains(&plan.resource) && ctx.now < until).then_some(until)
}

/// Why in-place changes cannot work on the workload's nodes (AP-14, AP-15, design D19), or
/// must wait for the webhook's certificate.
#[derive(Default)]
struct UnsupportedNodes<'a> {
    all: Option<Refusal<'a>>,
    memory: Option<Refusal<'a>>,
    webhook: Option<&'a str>,
}

impl<'a> UnsupportedNodes<'a> {
    fn reason(&self, r: Resource) -> Option<Refusal<'a>> {
        match r {
            Resource::Cpu => self.all.clone(),
            Resource::Memory => self.all.clone().or_else(|| self.memory.clone()),
        }
    }
}

fn unsupported_nodes(facts: &Facts) -> UnsupportedNodes<'_> {
    let webhook = facts.settings.webhook_certificate_problem.as_deref();
    if !facts.settings.resize_subresource {
        let all = Some(Refusal::NoResizeSubresource);
        return UnsupportedNodes {
            all,
            memory: None,
            webhook,
        };
    }
    let mut out = UnsupportedNodes {
        webhook,
        ..UnsupportedNodes::default()
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
        let at = (pod.name.as_str(), node.name.as_str());
        if matched && out.all.is_none() {
            out.all = Some(Refusal::UnsupportedNode {
                pod: at.0,
                node: at.1,
            });
        }
        if node.swap && out.memory.is_none() {
            out.memory = Some(Refusal::Swap {
                pod: at.0,
                node: at.1,
            });
        }
    }
    out
}
