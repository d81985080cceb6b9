//! Gathers the snapshot `decide()` reads from the caches and the hub state: the workload,
//! its pods, nodes, HPA and PDBs, the policies, the hub layers, pause, cluster freeze and
//! approvals. Pure over its inputs: no API call.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kerf_api::hub::{Approval, ClusterConfig, PolicyDefaults};
use kerf_api::rsr::{ChangeState, RightsizingRecommendationSpec, RightsizingRecommendationStatus};
use kerf_api::vecmap::VecMap;
use kerf_api::wellknown as wk;
use kerf_api::{Resource, ResourceValues, RightsizingPolicy};
use kerf_decide::effective::{EffectivePolicy, PerResource, PolicyInputs, effective_policy};
use kerf_decide::facts::{
    AgentSettings, ClusterFreeze, ContainerFacts, ContainerRole, Facts, HubFacts, NodeFacts,
    PodContainerFacts, PodFacts, PodPhase, ResizeCondition, ResizePolicy, RsrState, Values,
    WatchFacts, WorkloadFacts,
};
use kerf_decide::hpa::{HpaInput, HpaMetric};
use kerf_decide::quantity;
use kerf_decide::replicas::{PdbInput, ReplicaInput};
use kerf_decide::select::WorkloadMeta;

use crate::cache::{self, CacheSet, HpaInfo, PodInfo, WorkloadInfo, WorkloadKey};
use crate::hub::HubState;
use crate::settings::Settings;

/// Parses requests or limits into millicores and bytes; a bad value counts as unset.
pub fn values(v: &ResourceValues) -> Values {
    let one = |r: Resource| v.get(r).and_then(|q| quantity::parse(r, q).ok());
    PerResource {
        cpu: one(Resource::Cpu),
        memory: one(Resource::Memory),
    }
}

fn int_or_string(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// Whether a Kubernetes label selector selects `labels` (`None` selects nothing).
pub fn selects(sel: Option<&LabelSelector>, labels: &VecMap<String, String>) -> bool {
    let Some(sel) = sel else { return false };
    let exprs = sel.match_expressions.as_deref().unwrap_or_default();
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    labels_ok
        && exprs.iter().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let have = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => have.is_some_and(|v| values.contains(v)),
                "NotIn" => have.is_none_or(|v| !values.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
}

fn workload_facts(w: &WorkloadInfo, cache: &CacheSet) -> WorkloadFacts {
    let expected = i64::from(w.replicas.unwrap_or(1));
    let pdbs = cache
        .pdbs_in(&w.key.namespace)
        .iter()
        .filter(|p| selects(p.selector.as_ref(), &w.template_labels))
        .map(|p| PdbInput {
            name: p.name.to_string(),
            min_available: p.min_available.as_ref().map(int_or_string),
            max_unavailable: p.max_unavailable.as_ref().map(int_or_string),
            expected_pods: if p.expected_pods > 0 {
                i64::from(p.expected_pods)
            } else {
                expected
            },
        })
        .collect();
    let containers = w
        .containers
        .iter()
        .map(|c| ContainerFacts {
            name: c.name.to_string(),
            role: if c.sidecar {
                ContainerRole::RestartableInit
            } else {
                ContainerRole::Main
            },
            requests: values(&c.requests),
            limits: values(&c.limits),
            resize_policy: PerResource {
                cpu: restart(c.resize_policy.cpu_restart),
                memory: restart(c.resize_policy.memory_restart),
            },
            image: c.image.clone().unwrap_or_default(),
            command: c.command.clone(),
            args: c.args.clone(),
            env: c.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        })
        .collect();
    WorkloadFacts {
        namespace: w.key.namespace.to_string(),
        kind: w.key.kind,
        name: w.key.name.to_string(),
        uid: w.uid.clone(),
        labels: w.labels.clone().into(),
        annotations: w.annotations.clone().into(),
        replicas: ReplicaInput {
            kind: w.key.kind,
            replicas: w.replicas.map(i64::from),
            strategy_type: w.strategy.type_.clone(),
            max_surge: w.strategy.max_surge.as_ref().map(int_or_string),
            max_unavailable: w.strategy.max_unavailable.as_ref().map(int_or_string),
            desired_number_scheduled: i64::from(w.status.desired_number_scheduled.unwrap_or(0)),
            pdbs,
        },
        containers,
    }
}

fn restart(on: bool) -> ResizePolicy {
    if on {
        ResizePolicy::RestartContainer
    } else {
        ResizePolicy::NotRequired
    }
}

/// Pods the workload targets: not terminating, not finished.
pub fn live_pods(pods: &[std::sync::Arc<PodInfo>]) -> Vec<std::sync::Arc<PodInfo>> {
    pods.iter()
        .filter(|p| p.deletion_timestamp.is_none())
        .filter(|p| {
            !matches!(
                p.phase,
                cache::PodPhase::Succeeded | cache::PodPhase::Failed
            )
        })
        .cloned()
        .collect()
}

/// A cached pod as every decision reads it: `decide()`, the in-place state machine, its
/// canary and the OnDelete replacement plan. This is the one conversion from the cache's
/// record. Every pod counts as of the workload's current revision, and none carries a
/// recorded resize completion (the rsr status records none per pod).
pub fn pod_facts(p: &PodInfo) -> PodFacts {
    PodFacts {
        name: p.name.to_string(),
        uid: p.uid.to_string(),
        node: p.node_name.as_deref().map(str::to_owned),
        phase: match p.phase {
            cache::PodPhase::Pending => PodPhase::Pending,
            cache::PodPhase::Running => PodPhase::Running,
            cache::PodPhase::Succeeded => PodPhase::Succeeded,
            cache::PodPhase::Failed => PodPhase::Failed,
            cache::PodPhase::Unknown => PodPhase::Unknown,
        },
        ready: p.ready,
        ready_since: p.ready_since(),
        containers: current_containers(p),
        spec_resources: p.spec_resources(),
        status_resources: p
            .containers
            .iter()
            .filter_map(|c| Some((c.name.to_string(), c.status_resources()?.into_owned())))
            .collect(),
        resize_conditions: resize_conditions(p),
        terminating: p.deletion_timestamp.is_some(),
        current_revision: true,
        revision_hash: p.revision_hash.as_deref().map(str::to_owned),
        completed_at: None,
    }
}

/// The current values of each container: the status's, else the spec's.
fn current_containers(p: &PodInfo) -> Vec<PodContainerFacts> {
    p.containers
        .iter()
        .map(|c| {
            let actual = c.status_resources();
            let (req, lim) = match &actual {
                Some(s) => (&s.requests, &s.limits),
                None => (&c.requests, &c.limits),
            };
            PodContainerFacts {
                name: c.name.to_string(),
                requests: values(req),
                limits: values(lim),
            }
        })
        .collect()
}

/// The pod's resize conditions that are True: `PodResizePending`, then
/// `PodResizeInProgress`.
fn resize_conditions(p: &PodInfo) -> Vec<ResizeCondition> {
    let cond = |type_: &str, c: &cache::pods::ResizeCondition| ResizeCondition {
        type_: type_.to_owned(),
        reason: c.reason.clone(),
        message: c.message.clone(),
        since: c.since,
    };
    let pending = p.resize_pending.as_deref();
    let in_progress = p.resize_in_progress.as_deref();
    pending
        .map(|c| cond(wk::POD_CONDITION_RESIZE_PENDING, c))
        .into_iter()
        .chain(in_progress.map(|c| cond(wk::POD_CONDITION_RESIZE_IN_PROGRESS, c)))
        .collect()
}

fn hpa_input(h: &HpaInfo) -> HpaInput {
    let metrics = h
        .resource_metrics
        .iter()
        .map(|m| {
            let resource = match m.resource.as_str() {
                "cpu" => Resource::Cpu,
                "memory" => Resource::Memory,
                _ => return HpaMetric::Other,
            };
            let average_utilization = m
                .average_utilization
                .filter(|_| m.target_type == "Utilization");
            match &m.container {
                Some(c) => HpaMetric::ContainerResource {
                    container: c.clone(),
                    resource,
                    average_utilization,
                },
                None => HpaMetric::Resource {
                    resource,
                    average_utilization,
                },
            }
        })
        .collect();
    HpaInput {
        name: h.name.clone(),
        metrics,
    }
}

/// The policies that converted (a malformed one is skipped here and named on its own
/// status by the policy controller, design D3).
pub fn policies(cache: &CacheSet) -> Vec<RightsizingPolicy> {
    cache
        .policies()
        .iter()
        .filter_map(|p| p.policy.as_ref().ok().cloned())
        .collect()
}

/// The hub override of one workload.
fn hub_override<'a>(
    config: Option<&'a ClusterConfig>,
    w: &WorkloadInfo,
) -> Option<&'a PolicyDefaults> {
    config?.overrides.iter().find_map(|o| {
        (o.workload.namespace == *w.key.namespace
            && o.workload.kind == w.key.kind.as_str()
            && o.workload.name == *w.key.name)
            .then_some(&o.spec)
    })
}

/// What policy selection reads of a workload.
pub fn workload_meta(w: &WorkloadInfo, cache: &CacheSet) -> WorkloadMeta {
    WorkloadMeta {
        namespace: w.key.namespace.to_string(),
        namespace_labels: cache
            .namespace(&w.key.namespace)
            .map(|n| n.labels.clone())
            .unwrap_or_default(),
        kind: w.key.kind,
        name: w.key.name.to_string(),
        labels: w.labels.clone().into(),
        annotations: w.annotations.clone().into(),
    }
}

/// The effective policy of a workload.
pub fn policy_for(
    w: &WorkloadInfo,
    cache: &CacheSet,
    policies: &[RightsizingPolicy],
    hub: &HubState,
    settings: &Settings,
) -> EffectivePolicy {
    let meta = workload_meta(w, cache);
    let config = hub.last_good_config.as_ref().map(|c| c.value.as_ref());
    let cluster_defaults = settings.cluster_defaults.as_ref().map(PolicyDefaults::from);
    effective_policy(&PolicyInputs {
        workload: &meta,
        policies,
        hub_fleet: config.map(|c| &c.defaults.fleet),
        hub_cluster: config.map(|c| &c.defaults.cluster),
        cluster_defaults: cluster_defaults.as_ref(),
        hub_override: hub_override(config, w),
    })
}

/// What the rsr status records, as `decide()` reads it. A watch runs until its end, and
/// ends with the rollback of its change (RB-04): a rolled-back rollout, whose watch never got
/// an end, does not hold later changes (design D11).
pub fn rsr_state(status: &RightsizingRecommendationStatus, now: DateTime<Utc>) -> RsrState {
    let rolled_back = status
        .change
        .as_ref()
        .is_some_and(|c| matches!(c.state, ChangeState::RollingBack | ChangeState::RolledBack));
    RsrState {
        change: status.change.as_deref().cloned(),
        last_rollback: status.last_rollback.clone(),
        live: status.live.clone(),
        strategy: status.strategy.clone(),
        watch: status.watch.as_ref().map(|w| WatchFacts {
            running: !rolled_back && w.end.is_none_or(|end| now < end),
            end: w.end,
        }),
        consumed_approvals: status.consumed_approvals.clone(),
    }
}

/// Everything `gather` reads.
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    /// The caches.
    pub cache: &'a CacheSet,
    /// The hub state.
    pub hub: &'a HubState,
    /// Agent settings.
    pub settings: &'a Settings,
    /// Whether the API server serves `pods/resize`.
    pub resize_subresource: bool,
    /// Why the agent's webhook has no usable certificate, if it has none.
    pub webhook_certificate_problem: Option<&'a str>,
}

/// The workload's approval of the recommendation the rsr holds, if the config lists one:
/// a pending one of it first (not expired, not in `consumed`; a spent or lapsed one listed
/// before it must not hide it, design D27), else another of it (the decision then says why
/// it does not apply), else the workload's first (an approval of an earlier recommendation).
pub fn pick_approval(
    approvals: &[Approval],
    key: &WorkloadKey,
    recommendation_id: &str,
    consumed: &[String],
    now: DateTime<Utc>,
) -> Option<Approval> {
    let mine: Vec<&Approval> = approvals
        .iter()
        .filter(|a| {
            a.workload.namespace == *key.namespace
                && a.workload.kind == key.kind.as_str()
                && a.workload.name == *key.name
        })
        .collect();
    let current: Vec<&Approval> = mine
        .iter()
        .copied()
        .filter(|a| a.recommendation_id == recommendation_id)
        .collect();
    let pending = current
        .iter()
        .copied()
        .find(|a| a.expires_at > now && !consumed.contains(&a.approval_id));
    pending
        .or(current.first().copied())
        .or(mine.first().copied())
        .cloned()
}

/// The approval the workload's annotation `kerf.getkerf.dev/approve` gives, when it names
/// the rsr's recommendation: an approve-once as a hub approval is (design D27), in every
/// source. Its id is `annotation-` and 16 hex of the SHA-256 of the recommendation id, so
/// it is carried out once per recommendation; it does not expire.
pub fn annotation_approval(w: &WorkloadInfo, recommendation_id: &str) -> Option<Approval> {
    use sha2::{Digest, Sha256};
    let named = w.annotations.get(wk::ANNOTATION_APPROVE)?;
    if named.trim() != recommendation_id || recommendation_id.is_empty() {
        return None;
    }
    let digest = Sha256::digest(recommendation_id.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    Some(Approval {
        approval_id: format!("annotation-{hex}"),
        workload: kerf_api::hub::HubWorkload {
            namespace: w.key.namespace.to_string(),
            kind: w.key.kind.as_str().to_owned(),
            name: w.key.name.to_string(),
        },
        recommendation_id: recommendation_id.to_owned(),
        approved_by: format!("annotation {}", wk::ANNOTATION_APPROVE),
        expires_at: DateTime::<Utc>::MAX_UTC,
    })
}

/// What a pass read of a workload's pods and HPAs from the caches, once.
#[derive(Clone, Copy, Debug)]
pub struct Objects<'a> {
    /// Its running pods ([`live_pods`]).
    pub pods: &'a [std::sync::Arc<PodInfo>],
    /// The HPAs scaling it.
    pub hpas: &'a [std::sync::Arc<HpaInfo>],
}

/// What a decision reads of a node: its name, its labels and whether it has swap.
fn node_facts(n: &cache::NodeInfo) -> NodeFacts {
    NodeFacts {
        name: n.name.to_string(),
        labels: n
            .labels()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        swap: n.swap,
    }
}

/// The facts of one workload, its running pods and HPAs as `objects` holds them, and its
/// rsr at `now`.
pub fn gather(
    src: Sources<'_>,
    w: &WorkloadInfo,
    objects: Objects<'_>,
    spec: &RightsizingRecommendationSpec,
    status: &RightsizingRecommendationStatus,
    now: DateTime<Utc>,
) -> Facts {
    let pods = objects.pods;
    let mut node_names: Vec<String> = pods
        .iter()
        .filter_map(|p| p.node_name.as_deref().map(str::to_owned))
        .collect();
    node_names.sort();
    node_names.dedup();
    let nodes = node_names
        .iter()
        .filter_map(|n| src.cache.node(n))
        .map(|n| node_facts(&n))
        .collect();
    let config = src.hub.last_good_config.as_ref().map(|c| c.value.as_ref());
    let hub_approval = config.and_then(|c| {
        pick_approval(
            &c.approvals,
            &w.key,
            &spec.recommendation_id,
            &status.consumed_approvals,
            now,
        )
    });
    let approval = annotation_approval(w, &spec.recommendation_id)
        .filter(|a| !status.consumed_approvals.contains(&a.approval_id))
        .or(hub_approval);
    let last_success = src.hub.fresh_until.map(|until| {
        until - chrono::Duration::from_std(src.settings.hub.stale_after).unwrap_or_default()
    });
    Facts {
        workload: workload_facts(w, src.cache),
        pods: pods.iter().map(|p| pod_facts(p)).collect(),
        nodes,
        hpa: objects.hpas.first().map(|h| hpa_input(h)),
        recommendation: spec.clone(),
        hub: HubFacts {
            last_success,
            stale_after: chrono::Duration::from_std(src.settings.hub.stale_after)
                .unwrap_or(chrono::Duration::MAX),
            pause: config.filter(|c| c.flags.paused).map(|c| {
                c.flags
                    .pause_scope
                    .unwrap_or(kerf_api::hub::PauseScope::Cluster)
            }),
            source: src.hub.source,
            vpa_active: src.hub.holds.get(&w.key).cloned(),
        },
        cluster_freeze: ClusterFreeze {
            now: src.settings.freeze.now,
            windows: src.settings.freeze.windows.clone().into(),
        },
        approval,
        settings: AgentSettings {
            tolerance_milli_percent: src.settings.tolerance.percent_milli,
            unsupported_node_selectors: src
                .settings
                .unsupported_node_selectors
                .iter()
                .map(|s| s.0.clone())
                .collect(),
            resize_subresource: src.resize_subresource,
            webhook_certificate_problem: src.webhook_certificate_problem.map(str::to_owned),
        },
        state: rsr_state(status, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::WorkloadKind;

    fn approval(id: &str, name: &str, rec: &str, expires: &str) -> Approval {
        serde_json::from_value(serde_json::json!({
            "approvalId": id,
            "workload": {"namespace": "shop", "kind": "Deployment", "name": name},
            "recommendationID": rec,
            "approvedBy": "alice",
            "expiresAt": expires,
        }))
        .expect("approval")
    }

    fn picked(approvals: &[Approval], consumed: &[&str]) -> Option<String> {
        let now: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().expect("time");
        let key = WorkloadKey::new("shop", WorkloadKind::Deployment, "web");
        let consumed: Vec<String> = consumed.iter().map(|c| (*c).to_owned()).collect();
        pick_approval(approvals, &key, "rec-2", &consumed, now).map(|a| a.approval_id)
    }

    // rule: design D27
    #[test]
    fn a_pending_approval_is_not_hidden_by_a_spent_or_lapsed_one_listed_first() {
        let live = "2026-11-30T13:00:00Z";
        let gone = "2026-11-30T11:00:00Z";
        let spent = approval("a1", "web", "rec-2", live);
        let lapsed = approval("a2", "web", "rec-2", gone);
        let fresh = approval("a3", "web", "rec-2", live);
        let list = [spent.clone(), lapsed.clone(), fresh];
        assert_eq!(picked(&list, &["a1"]).as_deref(), Some("a3"));
        // None pending: one of this recommendation (the decision says why it is spent).
        assert_eq!(picked(&[spent, lapsed], &["a1"]).as_deref(), Some("a1"));
        // Another workload's approval is never taken; an earlier recommendation's is.
        let other = approval("b1", "api", "rec-2", live);
        let earlier = approval("c1", "web", "rec-1", live);
        assert_eq!(picked(std::slice::from_ref(&other), &[]), None);
        assert_eq!(picked(&[other, earlier], &[]).as_deref(), Some("c1"));
    }
}
