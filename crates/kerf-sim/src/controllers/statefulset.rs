//! The StatefulSet controller: pods `<name>-<ordinal>`, OrderedReady or Parallel creation,
//! RollingUpdate (highest ordinal first, one pod at a time, waiting for Ready, honouring
//! `partition`) and OnDelete (template changes reach a pod only when it is deleted).

use serde_json::{Value, json};

use super::Ctx;
use super::common::{
    controlled_by, int_at, name, namespace, pod_from_template, pod_ready, pod_terminal,
    template_hash, terminating, uid,
};
use crate::store::gvr;

/// The label naming a pod's revision.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// Reconciles every StatefulSet once.
pub async fn reconcile_all(ctx: &Ctx) {
    let sets = ctx.store.list(&gvr::STATEFULSETS, None).0;
    if sets.is_empty() {
        return;
    }
    let pods = ctx.store.list(&gvr::PODS, None).0;
    for sts in sets {
        let owned: Vec<&Value> = pods
            .iter()
            .filter(|p| namespace(p) == namespace(&sts) && controlled_by(p, uid(&sts)))
            .collect();
        reconcile(ctx, &sts, &owned).await;
    }
}

/// Reconciles the StatefulSet `ns/name` over the pods it controls, found through the
/// store's owner index.
pub async fn reconcile_key(ctx: &Ctx, ns: &str, set: &str) {
    let Some(sts) = ctx.store.get(&gvr::STATEFULSETS, Some(ns), set) else {
        return;
    };
    let pods = ctx.store.owned(&gvr::PODS, uid(&sts));
    let owned: Vec<&Value> = pods
        .iter()
        .filter(|p| namespace(p) == ns && controlled_by(p, uid(&sts)))
        .collect();
    reconcile(ctx, &sts, &owned).await;
}

/// The ordinal of a pod named `<set>-<n>`.
pub fn ordinal(set: &str, pod: &str) -> Option<i64> {
    pod.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

fn revision_of(pod: &Value) -> &str {
    pod.pointer(&format!("/metadata/labels/{REVISION_LABEL}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// What one reconcile does to the pods.
#[derive(Debug, PartialEq, Eq)]
pub enum StsAction {
    /// Create the pod with this ordinal.
    Create(i64),
    /// Delete the pod with this ordinal.
    Delete(i64),
    /// Nothing to do now.
    Wait,
}

/// One pod of the set as the planner sees it.
#[derive(Clone, Debug)]
pub struct StsPod {
    /// Ordinal.
    pub ordinal: i64,
    /// Running and Ready.
    pub ready: bool,
    /// Carries the update revision.
    pub updated: bool,
}

/// Plans the next step: create missing ordinals (in order, each after the previous is Ready,
/// unless `parallel`), delete ordinals beyond `replicas` (highest first), then, for
/// RollingUpdate, replace the highest outdated ordinal at or above `partition` once every pod
/// is Ready.
pub fn plan(
    replicas: i64,
    parallel: bool,
    rolling: Option<i64>,
    pods: &[StsPod],
) -> Vec<StsAction> {
    let actions = plan_steps(replicas, parallel, rolling, pods);
    if actions.is_empty() {
        vec![StsAction::Wait]
    } else {
        actions
    }
}

fn plan_steps(
    replicas: i64,
    parallel: bool,
    rolling: Option<i64>,
    pods: &[StsPod],
) -> Vec<StsAction> {
    let mut actions = Vec::new();
    let find = |o: i64| pods.iter().find(|p| p.ordinal == o);
    for o in 0..replicas {
        match find(o) {
            None => {
                actions.push(StsAction::Create(o));
                if !parallel {
                    return actions;
                }
            }
            Some(p) if !p.ready && !parallel => return actions,
            Some(_) => {}
        }
    }
    let mut surplus: Vec<i64> = pods
        .iter()
        .map(|p| p.ordinal)
        .filter(|o| *o >= replicas)
        .collect();
    surplus.sort_unstable_by(|a, b| b.cmp(a));
    if let Some(first) = surplus.first() {
        if parallel {
            actions.extend(surplus.iter().map(|o| StsAction::Delete(*o)));
        } else if pods.iter().all(|p| p.ready) {
            actions.push(StsAction::Delete(*first));
        }
        return actions;
    }
    if let Some(partition) = rolling
        && actions.is_empty()
        && pods.iter().all(|p| p.ready)
        && let Some(p) = pods
            .iter()
            .filter(|p| p.ordinal >= partition && !p.updated)
            .max_by_key(|p| p.ordinal)
    {
        actions.push(StsAction::Delete(p.ordinal));
    }
    actions
}

async fn reconcile(ctx: &Ctx, sts: &Value, owned: &[&Value]) {
    let set = name(sts);
    let template = sts.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let update_revision = format!("{set}-{}", template_hash(&template));
    let live: Vec<&Value> = owned
        .iter()
        .copied()
        .filter(|p| !pod_terminal(p) && !terminating(p))
        .collect();
    let pods: Vec<StsPod> = live
        .iter()
        .filter_map(|p| {
            Some(StsPod {
                ordinal: ordinal(set, name(p))?,
                ready: pod_ready(p),
                updated: revision_of(p) == update_revision,
            })
        })
        .collect();
    let parallel = sts
        .pointer("/spec/podManagementPolicy")
        .and_then(Value::as_str)
        == Some("Parallel");
    let strategy = sts
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str);
    let rolling = (strategy != Some("OnDelete"))
        .then(|| int_at(sts, "/spec/updateStrategy/rollingUpdate/partition", 0));
    let replicas = int_at(sts, "/spec/replicas", 1);
    for action in plan(replicas, parallel, rolling, &pods) {
        match action {
            StsAction::Create(o) => create(ctx, sts, &template, &update_revision, o).await,
            StsAction::Delete(o) => {
                let _ = ctx
                    .store
                    .delete(&gvr::PODS, Some(namespace(sts)), &format!("{set}-{o}"));
            }
            StsAction::Wait => {}
        }
    }
    write_status(ctx, sts, &live, &update_revision);
}

async fn create(ctx: &Ctx, sts: &Value, template: &Value, revision: &str, o: i64) {
    let pod_name = format!("{}-{o}", name(sts));
    let labels = [
        (REVISION_LABEL, revision.to_string()),
        ("statefulset.kubernetes.io/pod-name", pod_name.clone()),
        ("apps.kubernetes.io/pod-index", o.to_string()),
    ];
    let mut pod = pod_from_template(template, sts, &pod_name, &labels);
    pod["spec"]["hostname"] = json!(pod_name);
    if let Some(svc) = sts.pointer("/spec/serviceName").and_then(Value::as_str) {
        pod["spec"]["subdomain"] = json!(svc);
    }
    super::create_pod(ctx, pod).await;
}

fn write_status(ctx: &Ctx, sts: &Value, live: &[&Value], update_revision: &str) {
    let updated = live
        .iter()
        .filter(|p| revision_of(p) == update_revision)
        .count();
    let replicas = live.len();
    let old_current = sts
        .pointer("/status/currentRevision")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let desired = usize::try_from(int_at(sts, "/spec/replicas", 1)).unwrap_or(0);
    let all_ready = live.iter().all(|p| pod_ready(p));
    let current_revision = match old_current {
        Some(_) if updated == desired && replicas == desired && all_ready => update_revision,
        Some(c) => c,
        None => update_revision,
    };
    let current = live
        .iter()
        .filter(|p| revision_of(p) == current_revision)
        .count();
    let min_ready = int_at(sts, "/spec/minReadySeconds", 0);
    let now = ctx.clock.now();
    let status = json!({
        "observedGeneration": int_at(sts, "/metadata/generation", 1),
        "replicas": replicas,
        "readyReplicas": live.iter().filter(|p| pod_ready(p)).count(),
        "availableReplicas": live.iter().filter(|p| super::pod_available(p, min_ready, now)).count(),
        "currentReplicas": current,
        "updatedReplicas": updated,
        "currentRevision": current_revision,
        "updateRevision": update_revision,
        "collisionCount": 0,
    });
    super::write_status_if_changed(ctx, &gvr::STATEFULSETS, sts, status);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ordinal: i64, ready: bool, updated: bool) -> StsPod {
        StsPod {
            ordinal,
            ready,
            updated,
        }
    }

    #[test]
    fn ordered_ready_creates_one_at_a_time() {
        assert_eq!(plan(3, false, Some(0), &[]), vec![StsAction::Create(0)]);
        assert_eq!(
            plan(3, false, Some(0), &[pod(0, false, true)]),
            vec![StsAction::Wait]
        );
        assert_eq!(
            plan(3, false, Some(0), &[pod(0, true, true)]),
            vec![StsAction::Create(1)]
        );
        assert_eq!(
            plan(3, true, Some(0), &[]),
            vec![
                StsAction::Create(0),
                StsAction::Create(1),
                StsAction::Create(2)
            ]
        );
    }

    #[test]
    fn rolling_update_replaces_highest_outdated_ordinal_when_all_ready() {
        let pods = [
            pod(0, true, false),
            pod(1, true, false),
            pod(2, true, false),
        ];
        assert_eq!(plan(3, false, Some(0), &pods), vec![StsAction::Delete(2)]);
        let pods = [
            pod(0, true, false),
            pod(1, true, false),
            pod(2, false, true),
        ];
        assert_eq!(plan(3, false, Some(0), &pods), vec![StsAction::Wait]);
        let pods = [pod(0, true, false), pod(1, true, false), pod(2, true, true)];
        assert_eq!(plan(3, false, Some(2), &pods), vec![StsAction::Wait]);
    }

    #[test]
    fn on_delete_never_deletes_for_an_update() {
        let pods = [pod(0, true, false), pod(1, true, false)];
        assert_eq!(plan(2, false, None, &pods), vec![StsAction::Wait]);
        // A deleted pod is recreated (by the caller, with the update revision).
        assert_eq!(plan(2, false, None, &pods[..1]), vec![StsAction::Create(1)]);
    }

    #[test]
    fn scale_down_removes_highest_ordinal_first() {
        let pods = [pod(0, true, true), pod(1, true, true), pod(2, true, true)];
        assert_eq!(plan(1, false, Some(0), &pods), vec![StsAction::Delete(2)]);
        assert_eq!(ordinal("web", "web-12"), Some(12));
        assert_eq!(ordinal("web", "webx-1"), None);
    }
}
