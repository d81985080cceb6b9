//! The in-place state machine (design D16): from the change, the targeted pods and the
//! time, where each pod's resize stands and what the workload does next.
//!
//! The agent reads the pods into [`PodFacts`], calls [`plan`], resizes
//! [`InPlacePlan::resize_now`] and acts on [`InPlacePlan::outcome`]. A resize the API
//! answers with `Infeasible` goes through [`refusal_or_fallback`].

use chrono::{DateTime, Duration, Utc};
use kerf_api::WorkloadKind;
use kerf_api::wellknown::{
    POD_CONDITION_RESIZE_IN_PROGRESS, POD_CONDITION_RESIZE_PENDING, POD_RESIZE_REASON_DEFERRED,
    POD_RESIZE_REASON_ERROR, POD_RESIZE_REASON_INFEASIBLE, REASON_RESIZE_DEFERRED_TIMEOUT,
    REASON_RESIZE_INFEASIBLE, REASON_SINGLE_REPLICA_UNSAFE,
};

use crate::facts::{PodFacts, ResizeCondition};
use crate::values::{ContainerResources, container, requirements_cover};

/// Where one pod's resize stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodResize {
    /// The pod's spec does not hold the target yet: send a resize.
    NeedsResize,
    /// The spec holds the target; the kubelet has not reported on it yet.
    Sent,
    /// The kubelet accepted the resize (`PodResizeInProgress` without `Error`, or the
    /// status already holds the target while a condition remains).
    Accepted,
    /// The status holds the target and no resize condition remains.
    Complete,
    /// `PodResizePending` with reason `Deferred`: the node cannot fit it now.
    Deferred {
        /// When the condition appeared.
        since: Option<DateTime<Utc>>,
        /// The kubelet's message.
        message: String,
    },
    /// `PodResizeInProgress` with reason `Error`: counts like `Deferred` for the timeout.
    Error {
        /// The kubelet's message.
        message: String,
    },
    /// `PodResizePending` with reason `Infeasible`: the node can never fit it.
    Infeasible {
        /// The kubelet's message.
        message: String,
    },
}

impl PodResize {
    /// Accepted or complete.
    pub fn is_accepted(&self) -> bool {
        matches!(self, PodResize::Accepted | PodResize::Complete)
    }
}

/// One pod's place in the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodPlan {
    /// Pod name.
    pub name: String,
    /// Where its resize stands.
    pub state: PodResize,
    /// When its resize completed: the pod's restart baseline is taken then (design D24).
    /// Set to `now` the first time the pod is seen complete.
    pub completed_at: Option<DateTime<Utc>>,
}

/// Why an in-place change falls back to a rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FallbackReason {
    /// The resize is infeasible (rules AP-08, EV-44).
    ResizeInfeasible,
    /// The resize stayed deferred past `fallbackAfter` (rules AP-09, EV-45).
    ResizeDeferredTimeout,
}

impl FallbackReason {
    /// The event reason, as the contract spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackReason::ResizeInfeasible => REASON_RESIZE_INFEASIBLE,
            FallbackReason::ResizeDeferredTimeout => REASON_RESIZE_DEFERRED_TIMEOUT,
        }
    }
}

/// What the workload does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InPlaceOutcome {
    /// Resizes are under way.
    Progress {
        /// Pods accepted or complete.
        accepted: usize,
        /// Pods targeted.
        total: usize,
    },
    /// Every targeted pod accepted (or there are none): record `applied` and start the
    /// health watch (rule EV-10).
    AllAccepted,
    /// Fall back to a rollout: record `fallback`, switch the rsr strategy to rollout.
    FallBack {
        /// Why.
        reason: FallbackReason,
        /// The kubelet's or the server's message.
        message: String,
    },
    /// The fallback would be unsafe (a DaemonSet, design D18, or a single-replica
    /// workload, rule EV-41): resize the listed pods back and record
    /// `blocked SingleReplicaUnsafe` with `details.fallbackReason`.
    Refused {
        /// Always `SingleReplicaUnsafe`.
        reason: &'static str,
        /// The fallback that was refused.
        fallback_reason: FallbackReason,
        /// The node of the pod that stalled, named in the message.
        node: Option<String>,
        /// The event message.
        message: String,
        /// Pods whose spec already holds the change: resize them back (design D16).
        resize_back: Vec<String>,
    },
}

/// The inputs of [`plan`].
#[derive(Clone, Debug)]
pub struct InPlaceInput<'a> {
    /// The workload's kind (DaemonSets never fall back, design D18).
    pub kind: WorkloadKind,
    /// Whether a rollout of the workload would be safe (false for a single-replica workload
    /// that does not qualify, rule EV-41). Ignored for DaemonSets.
    pub rollout_safe: bool,
    /// The target values per container.
    pub target: &'a [ContainerResources],
    /// The workload's pods; terminating pods and pods of older revisions are not targeted
    /// ([`PodFacts::targeted`]).
    pub pods: &'a [PodFacts],
    /// When the first resize of this change was sent; `fallbackAfter` runs from it.
    pub first_resize_at: Option<DateTime<Utc>>,
    /// `apply.fallbackAfter`.
    pub fallback_after: Duration,
    /// False while a freeze or pause is open: no new resize starts (rule AP-37), the
    /// submitted ones are still followed (rule AP-36).
    pub may_start: bool,
    /// Now.
    pub now: DateTime<Utc>,
}

/// The plan of one pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InPlacePlan {
    /// Every targeted pod.
    pub pods: Vec<PodPlan>,
    /// Pods to resize in this pass.
    pub resize_now: Vec<String>,
    /// What the workload does next.
    pub outcome: InPlaceOutcome,
}

impl InPlacePlan {
    /// Pods whose resize completed in this pass (take their restart baseline now).
    pub fn newly_completed<'a>(
        &'a self,
        before: &'a [PodFacts],
    ) -> impl Iterator<Item = &'a PodPlan> {
        self.pods.iter().filter(|p| {
            p.completed_at.is_some()
                && before
                    .iter()
                    .any(|b| b.name == p.name && b.completed_at.is_none())
        })
    }
}

/// Where one pod's resize stands (design D16).
pub fn pod_state(pod: &PodFacts, target: &[ContainerResources]) -> PodResize {
    let present = || {
        target
            .iter()
            .filter(|(n, _)| container(&pod.spec_resources, n).is_some())
    };
    let covers = |list: &[ContainerResources]| {
        present()
            .all(|(n, want)| container(list, n).is_some_and(|have| requirements_cover(want, have)))
    };
    if !covers(&pod.spec_resources) {
        return PodResize::NeedsResize;
    }
    if covers(&pod.status_resources) {
        return if pod.resize_conditions.is_empty() {
            PodResize::Complete
        } else {
            PodResize::Accepted
        };
    }
    let msg = |c: &ResizeCondition| c.message.clone().unwrap_or_default();
    for c in &pod.resize_conditions {
        let reason = c.reason.as_deref();
        match (c.type_.as_str(), reason) {
            (POD_CONDITION_RESIZE_PENDING, Some(POD_RESIZE_REASON_INFEASIBLE)) => {
                return PodResize::Infeasible { message: msg(c) };
            }
            (POD_CONDITION_RESIZE_PENDING, Some(POD_RESIZE_REASON_DEFERRED)) => {
                return PodResize::Deferred {
                    since: c.since,
                    message: msg(c),
                };
            }
            (POD_CONDITION_RESIZE_IN_PROGRESS, Some(POD_RESIZE_REASON_ERROR)) => {
                return PodResize::Error { message: msg(c) };
            }
            (POD_CONDITION_RESIZE_IN_PROGRESS, _) => return PodResize::Accepted,
            _ => {}
        }
    }
    PodResize::Sent
}

/// `firstResizeAt` of a change whose resizes an earlier agent sent without recording it
/// (stopped between the resize and the status write, design D25): `apply.fallbackAfter` runs
/// from `now`, so a resize that stays Deferred still falls back instead of waiting forever.
/// `None` while no targeted pod holds a sent, unfinished resize.
pub fn resumed_first_resize(
    pods: &[PodFacts],
    target: &[ContainerResources],
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let sent = pods
        .iter()
        .filter(|p| p.targeted())
        .map(|p| pod_state(p, target))
        .any(|st| !matches!(st, PodResize::NeedsResize | PodResize::Complete));
    sent.then_some(now)
}

/// One pass of the in-place state machine.
pub fn plan(input: &InPlaceInput<'_>) -> InPlacePlan {
    let targeted: Vec<&PodFacts> = input.pods.iter().filter(|p| p.targeted()).collect();
    let pods: Vec<PodPlan> = targeted
        .iter()
        .map(|p| {
            let state = pod_state(p, input.target);
            let completed_at = match state {
                PodResize::Complete => p.completed_at.or(Some(input.now)),
                _ => None,
            };
            PodPlan {
                name: p.name.clone(),
                state,
                completed_at,
            }
        })
        .collect();
    let outcome = outcome(input, &targeted, &pods);
    let resize_now = if input.may_start && matches!(outcome, InPlaceOutcome::Progress { .. }) {
        pods.iter()
            .filter(|p| p.state == PodResize::NeedsResize)
            .map(|p| p.name.clone())
            .collect()
    } else {
        Vec::new()
    };
    InPlacePlan {
        pods,
        resize_now,
        outcome,
    }
}

fn outcome(input: &InPlaceInput<'_>, views: &[&PodFacts], pods: &[PodPlan]) -> InPlaceOutcome {
    let node_of = |name: &str| {
        views
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.node.clone())
    };
    let resized: Vec<String> = pods
        .iter()
        .filter(|p| p.state != PodResize::NeedsResize)
        .map(|p| p.name.clone())
        .collect();
    let infeasible = pods.iter().find_map(|p| match &p.state {
        PodResize::Infeasible { message } => Some((p, message)),
        _ => None,
    });
    if let Some((p, message)) = infeasible {
        let message = format!("pod {}: resize Infeasible: {message}", p.name);
        return refusal_or_fallback(
            input,
            FallbackReason::ResizeInfeasible,
            message,
            node_of(&p.name),
            resized,
        );
    }
    let timed_out = input
        .first_resize_at
        .is_some_and(|first| input.now - first >= input.fallback_after);
    let stalled = pods.iter().find_map(|p| match &p.state {
        PodResize::Deferred { message, .. } => Some((p, "Deferred", message)),
        PodResize::Error { message } => Some((p, "InProgress with Error", message)),
        _ => None,
    });
    if let (true, Some((p, what, msg))) = (timed_out, stalled) {
        let message = format!(
            "pod {}: resize {what} for longer than fallbackAfter ({}s): {msg}",
            p.name,
            input.fallback_after.num_seconds()
        );
        return refusal_or_fallback(
            input,
            FallbackReason::ResizeDeferredTimeout,
            message,
            node_of(&p.name),
            resized,
        );
    }
    let accepted = pods.iter().filter(|p| p.state.is_accepted()).count();
    if accepted == pods.len() {
        InPlaceOutcome::AllAccepted
    } else {
        InPlaceOutcome::Progress {
            accepted,
            total: pods.len(),
        }
    }
}

/// A fallback, or its refusal where a rollout is unsafe: always for a DaemonSet (design
/// D18), and for a workload whose rollout is unsafe (rule EV-41).
pub fn refusal_or_fallback(
    input: &InPlaceInput<'_>,
    reason: FallbackReason,
    message: String,
    node: Option<String>,
    resize_back: Vec<String>,
) -> InPlaceOutcome {
    let mut outcome = fallback_or_refusal(input.kind, input.rollout_safe, reason, message, node);
    if let InPlaceOutcome::Refused {
        resize_back: back, ..
    } = &mut outcome
    {
        *back = resize_back;
    }
    outcome
}

/// [`refusal_or_fallback`] for a workload of `kind` whose rollout is `rollout_safe` or
/// not, with no pod to resize back.
pub fn fallback_or_refusal(
    kind: WorkloadKind,
    rollout_safe: bool,
    reason: FallbackReason,
    message: String,
    node: Option<String>,
) -> InPlaceOutcome {
    let daemonset = kind == WorkloadKind::DaemonSet;
    if !daemonset && rollout_safe {
        return InPlaceOutcome::FallBack { reason, message };
    }
    let why = if daemonset {
        "a DaemonSet never falls back to a rollout"
    } else {
        "a rollout would leave the single-replica workload without a Ready pod"
    };
    let on = node
        .as_deref()
        .map(|n| format!(" on node {n}"))
        .unwrap_or_default();
    InPlaceOutcome::Refused {
        reason: REASON_SINGLE_REPLICA_UNSAFE,
        fallback_reason: reason,
        message: format!("{message}{on}; fallback {} refused: {why}", reason.as_str()),
        node,
        resize_back: Vec::new(),
    }
}
