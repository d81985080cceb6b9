//! The pure core's fixture (feature `decide`): a workload that passes every check, and
//! small edits that make one check fail; [`health`] has the health watch's, [`status`] the
//! rsr status built from a decision.
//!
//! The base: Deployment `payments/checkout`, 3 replicas, container `app` with requests
//! cpu 500m / memory 256Mi and a memory limit of 512Mi; the hub recommends cpu 250m and
//! memory 256Mi (only CPU moves) with confidence 0.9 over 240h; mode auto-patch.
//!
//! kerf-decide's integration tests use it as well (a dev-dependency cycle cargo allows:
//! they and this crate link the one kerf-decide library); its unit tests cannot, since
//! their kerf-decide is a copy of its own.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, TimeZone, Utc};
use kerf_api::hub::{Approval, HubWorkload, PauseScope};
use kerf_api::policy::{Mode, Strategy, WorkloadKind};
use kerf_api::rsr::{
    ChangeRecord, ChangeState, ContainerChange, ContainerFlag, ContainerRecommendation,
    DataCoverage, EventIds, RightsizingRecommendationSpec, RollbackRecord, WorkloadRef,
};
use kerf_api::wellknown as wk;
use kerf_api::{GoDuration, Quantity, Resource, ResourceRequirements, ResourceValues, UnitDecimal};
use kerf_decide::effective::{EffectivePolicy, Layer, PerResource, Sourced};
use kerf_decide::facts::{
    AgentSettings, ClusterFreeze, ContainerFacts, ContainerRole, Facts, HubFacts, NodeFacts,
    PodContainerFacts, PodFacts, PodPhase, ResizePolicy, RsrState, WorkloadFacts,
};
use kerf_decide::hpa::{HpaInput, HpaMetric};
use kerf_decide::pipeline::{Block, Decision, Outcome, Skip};
use kerf_decide::replicas::ReplicaInput;
use kerf_decide::select::WorkloadMeta;

pub mod health;
pub mod status;

pub const MI: i64 = 1 << 20;

/// The instant every test decides at.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 3, 12, 0, 0)
        .single()
        .unwrap_or_default()
}

pub fn q(s: &str) -> Option<Quantity> {
    Some(Quantity::from(s))
}

pub fn values(cpu: Option<i64>, memory: Option<i64>) -> PerResource<Option<i64>> {
    PerResource { cpu, memory }
}

pub fn app_container() -> ContainerFacts {
    ContainerFacts {
        name: "app".into(),
        role: ContainerRole::Main,
        requests: values(Some(500), Some(256 * MI)),
        limits: values(None, Some(512 * MI)),
        resize_policy: PerResource::default(),
        image: "ghcr.io/example/checkout:1.4".into(),
        command: vec!["/app/checkout".into()],
        args: Vec::new(),
        env: Vec::new(),
    }
}

pub fn recommendation(cpu: &str, memory: &str) -> ContainerRecommendation {
    ContainerRecommendation {
        name: "app".into(),
        requests: ResourceValues {
            cpu: q(cpu),
            memory: q(memory),
        },
        limits: ResourceValues::default(),
        remove_limits: Vec::new(),
        confidence: Some(UnitDecimal::from("0.9")),
        flags: Vec::new(),
    }
}

fn pod(i: usize) -> PodFacts {
    PodFacts {
        name: format!("checkout-abc-{i}"),
        uid: format!("uid-{i}"),
        node: Some("node-a".into()),
        phase: PodPhase::Running,
        ready: true,
        containers: vec![PodContainerFacts {
            name: "app".into(),
            requests: values(Some(500), Some(256 * MI)),
            limits: values(None, Some(512 * MI)),
        }],
        current_revision: true,
        ..PodFacts::default()
    }
}

pub fn facts() -> Facts {
    Facts {
        workload: WorkloadFacts {
            namespace: "payments".into(),
            kind: WorkloadKind::Deployment,
            name: "checkout".into(),
            uid: "w-uid".into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            replicas: ReplicaInput {
                replicas: Some(3),
                ..ReplicaInput::default()
            },
            containers: vec![app_container()],
        },
        pods: (0..3).map(pod).collect(),
        nodes: vec![NodeFacts {
            name: "node-a".into(),
            labels: BTreeMap::new(),
            swap: false,
        }],
        hpa: None,
        recommendation: RightsizingRecommendationSpec {
            workload_ref: WorkloadRef {
                kind: WorkloadKind::Deployment,
                name: "checkout".into(),
                uid: Some("w-uid".into()),
            },
            recommendation_id: "rec-1".into(),
            generated_at: None,
            confidence: Some(UnitDecimal::from("0.9")),
            data_coverage: Some(DataCoverage {
                covered: GoDuration::from("240h"),
                window: GoDuration::from("336h"),
            }),
            settings: None,
            containers: vec![recommendation("250m", "256Mi")],
            approval: None,
            source: None,
        },
        hub: HubFacts {
            last_success: Some(now() - Duration::minutes(1)),
            stale_after: Duration::minutes(30),
            pause: None,
            source: Default::default(),
            vpa_active: None,
        },
        cluster_freeze: ClusterFreeze::default(),
        approval: None,
        settings: AgentSettings::default(),
        state: RsrState::default(),
    }
}

/// The built-in policy in auto-patch.
pub fn policy() -> EffectivePolicy {
    let mut p = EffectivePolicy::builtin();
    p.mode = PerResource {
        cpu: Sourced::new(Mode::AutoPatch, Layer::Policy),
        memory: Sourced::new(Mode::AutoPatch, Layer::Policy),
    };
    p
}

pub fn set_mode(p: &mut EffectivePolicy, cpu: Mode, memory: Mode) {
    p.mode = PerResource {
        cpu: Sourced::new(cpu, Layer::Policy),
        memory: Sourced::new(memory, Layer::Policy),
    };
}

pub fn set_strategy(p: &mut EffectivePolicy, s: Strategy) {
    p.strategy = Sourced::new(s, Layer::Policy);
}

/// An approve-once of the current recommendation.
pub fn approve(f: &mut Facts) {
    f.approval = Some(Approval {
        approval_id: "appr-7".into(),
        workload: HubWorkload {
            namespace: "payments".into(),
            kind: "Deployment".into(),
            name: "checkout".into(),
        },
        recommendation_id: "rec-1".into(),
        approved_by: "ops@example.com".into(),
        expires_at: now() + Duration::hours(1),
    });
}

/// The last change, applied `ago` before now.
pub fn applied_change(ago: Duration, state: ChangeState) -> ChangeRecord {
    ChangeRecord {
        id: "chg-1".into(),
        state,
        recommendation_id: "rec-0".into(),
        approval_id: None,
        strategy: Strategy::InPlace,
        resources: vec![Resource::Cpu],
        started_at: now() - ago,
        first_resize_at: None,
        applied_at: Some(now() - ago),
        containers: vec![ContainerChange {
            name: "app".into(),
            from: ResourceRequirements {
                requests: ResourceValues {
                    cpu: q("1"),
                    memory: None,
                },
                limits: ResourceValues::default(),
            },
            to: ResourceRequirements {
                requests: ResourceValues {
                    cpu: q("500m"),
                    memory: None,
                },
                limits: ResourceValues::default(),
            },
        }],
        hpa: None,
        event_ids: EventIds::default(),
        pending_events: Vec::new(),
        progress: None,
        canary: None,
        revert: false,
    }
}

/// A rollback of `resources` `ago` before now, of a change that had set `to`.
pub fn rolled_back(
    f: &mut Facts,
    ago: Duration,
    reason: &str,
    resources: &[Resource],
    to: ResourceValues,
) {
    let mut change = applied_change(ago + Duration::minutes(10), ChangeState::RolledBack);
    change.resources = resources.to_vec();
    change.containers[0].to.requests = to;
    f.state.change = Some(change);
    f.state.last_rollback = Some(RollbackRecord {
        time: now() - ago,
        reason: reason.into(),
        resources: resources.to_vec(),
        change_id: "chg-1".into(),
    });
}

/// As [`rolled_back`] after an OOM-kill rollback of memory only, `ago`, to `memory`.
pub fn oom_rolled_back(f: &mut Facts, ago: Duration, memory: &str) {
    let to = ResourceValues {
        cpu: None,
        memory: q(memory),
    };
    rolled_back(f, ago, wk::REASON_OOM_KILLS, &[Resource::Memory], to);
}

/// A CPU-utilization HPA with a 60 % target.
pub fn cpu_hpa(target: i32) -> HpaInput {
    HpaInput {
        name: "checkout".into(),
        metrics: vec![HpaMetric::Resource {
            resource: Resource::Cpu,
            average_utilization: Some(target),
        }],
    }
}

/// A single-replica Deployment whose rollout cannot keep a Ready pod.
pub fn single_replica_recreate(f: &mut Facts) {
    f.workload.replicas = ReplicaInput {
        replicas: Some(1),
        strategy_type: Some("Recreate".into()),
        ..ReplicaInput::default()
    };
}

pub fn flag(f: &mut Facts, flag: ContainerFlag) {
    f.recommendation.containers[0].flags.push(flag);
}

pub fn pause(f: &mut Facts, scope: PauseScope) {
    f.hub.pause = Some(scope);
}

#[allow(clippy::panic)]
pub fn block(d: &Decision) -> &Block {
    match &d.outcome {
        Outcome::Block(b) => b,
        other => panic!("expected a block, got {other:?}"),
    }
}

#[allow(clippy::panic)]
pub fn skip(d: &Decision) -> &Skip {
    match &d.outcome {
        Outcome::Skip(s) => s,
        other => panic!("expected a skip, got {other:?}"),
    }
}

#[allow(clippy::panic)]
pub fn apply(d: &Decision) -> &kerf_decide::pipeline::ApplyPlan {
    match &d.outcome {
        Outcome::Apply(a) => a,
        other => panic!("expected a change, got {other:?}"),
    }
}

/// The `to` request of one container and resource of an applied change, as text.
pub fn to_request(d: &Decision, container: &str, r: Resource) -> Option<String> {
    let a = apply(d);
    let c = a.containers.iter().find(|c| c.name == container)?;
    c.to.requests.get(r).map(|q| q.to_string())
}

pub fn to_limit(d: &Decision, container: &str, r: Resource) -> Option<String> {
    let a = apply(d);
    let c = a.containers.iter().find(|c| c.name == container)?;
    c.to.limits.get(r).map(|q| q.to_string())
}

pub fn resize(f: &mut Facts, r: Resource, p: ResizePolicy) {
    *f.workload.containers[0].resize_policy.get_mut(r) = p;
}

/// Deployment `namespace/checkout` with `annotations`, no labels, as policy selection
/// sees it.
pub fn workload_meta(namespace: &str, annotations: &[(&str, &str)]) -> WorkloadMeta {
    WorkloadMeta {
        namespace: namespace.into(),
        namespace_labels: BTreeMap::new(),
        kind: WorkloadKind::Deployment,
        name: "checkout".into(),
        labels: BTreeMap::new(),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

/// The fixture's facts with the template at `cpu` millicores / `memory` MiB (no limits),
/// the hub recommending `rec_cpu` / `rec_memory`.
pub fn template(cpu: i64, memory: i64, rec_cpu: &str, rec_memory: &str) -> Facts {
    let mut f = facts();
    f.workload.containers[0].requests = values(Some(cpu), Some(memory * MI));
    f.workload.containers[0].limits = values(None, None);
    f.recommendation.containers = vec![recommendation(rec_cpu, rec_memory)];
    f
}

/// The effective policy of `namespace/checkout` with `annotations`, under one policy in
/// `mode` that selects the namespace.
#[allow(clippy::unwrap_used)]
pub fn effective_with(
    namespace: &str,
    mode: &str,
    annotations: &[(&str, &str)],
) -> EffectivePolicy {
    let spec = serde_json::json!({"selector": {"namespaces": [namespace]}, "mode": mode});
    let policies = vec![kerf_api::policy::RightsizingPolicy::new(
        namespace,
        serde_json::from_value(spec).unwrap(),
    )];
    effective_under(&workload_meta(namespace, annotations), &policies)
}

/// The effective policy of `workload` under `policies`, with no other layer set.
pub fn effective_under(
    workload: &WorkloadMeta,
    policies: &[kerf_api::policy::RightsizingPolicy],
) -> EffectivePolicy {
    kerf_decide::effective::effective_policy(&kerf_decide::effective::PolicyInputs {
        workload,
        policies,
        hub_fleet: None,
        hub_cluster: None,
        cluster_defaults: None,
        hub_override: None,
    })
}
