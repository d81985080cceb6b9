//! Rollout: server-side apply of the container resources in the pod template under the
//! field manager `kerf`, the release hand-over, and the rollout completion check.
//!
//! The apply body names `apiVersion`, `kind`, `metadata.name`/`namespace` and
//! `spec.template.spec.containers[{name, resources}]` (and `initContainers` for restartable
//! init containers) with only the CPU and memory values of the resources in the change, so
//! `kerf` owns those fields and nothing else (rules AP-19, AP-20). It is sent with
//! `force=true`: after a plain `kubectl apply`, `kubectl-client-side-apply` owns these
//! fields and a polite apply gets 409 (conformance 08).
//!
//! The rollback of a rollout (rule RB-23) is [`apply_template`] with the old values.

use kerf_api::wellknown::{FIELD_MANAGER, FIELD_MANAGER_RELEASED};
use kerf_api::{Resource, ResourceRequirements, WorkloadKind};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::Value;

use super::error::{ErrorClass, message_of};
use super::template::{TemplateContainers, apply_body, only};
use super::{ContainerResources, WorkloadId};

pub use super::rollout_status::{RolloutState, rollout_state};

/// How often the release hand-over is re-read and retried after a 409.
pub const CONFLICT_RETRIES: usize = 3;

/// A template apply the API server accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// `metadata.generation` after the apply; the rollout has started when the controller
    /// observes it (rule EV-11).
    pub generation: Option<i64>,
    /// Containers whose values were applied.
    pub containers: Vec<String>,
    /// Containers of the change that the template lacks (dropped, design D8, D21).
    pub dropped: Vec<String>,
    /// The workload's resourceVersion in the answer: a pass waits until its cache shows it.
    pub resource_version: Option<String>,
}

/// A release the API server accepted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Released {
    /// The fields handed over to `kerf-released` (`container/requests.cpu`).
    pub released: Vec<String>,
    /// The fields `kerf` still owns.
    pub kept: Vec<String>,
    /// The workload's resourceVersion in the answer of the last write, if one was made.
    pub resource_version: Option<String>,
}

/// Why a template apply or a release failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The workload does not exist.
    #[error("{kind} {namespace}/{name} not found")]
    NotFound {
        /// Kind.
        kind: WorkloadKind,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The live workload has another UID: it was deleted and made again (design D4).
    #[error("workload was replaced: uid {found}, expected {expected}")]
    Replaced {
        /// The UID the change was decided for.
        expected: String,
        /// The live UID.
        found: String,
    },
    /// No container of the change is in the template, or no value of the resources.
    #[error("nothing to apply: no container of the change is in the template")]
    NothingToApply,
    /// 409 (a release hand-over whose value moved, after every retry).
    #[error("apply conflict: {message}")]
    Conflict {
        /// The server's message.
        message: String,
    },
    /// 422 or 400: the object is invalid.
    #[error("apply invalid: {message}")]
    Invalid {
        /// The server's message.
        message: String,
    },
    /// 403.
    #[error("apply forbidden: {message}")]
    Forbidden {
        /// The server's message.
        message: String,
    },
    /// Anything else: retried with backoff.
    #[error("apply failed: {source}")]
    Transient {
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

super::metrics::action_error!(ApplyError {
    NotFound => "not_found",
    Replaced => "replaced",
    NothingToApply => "nothing_to_apply",
    Conflict => "conflict",
    Invalid => "invalid",
    Forbidden => "forbidden",
    Transient => "transient",
});

impl ApplyError {
    /// Whether the same call may succeed later.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ApplyError::Conflict { .. }
                | ApplyError::Forbidden { .. }
                | ApplyError::Transient { .. }
        )
    }

    fn from_kube(err: kube::Error) -> ApplyError {
        let message = message_of(&err);
        match ErrorClass::of(&err) {
            ErrorClass::Conflict => ApplyError::Conflict { message },
            ErrorClass::Invalid => ApplyError::Invalid { message },
            ErrorClass::Forbidden | ErrorClass::Infeasible => ApplyError::Forbidden { message },
            _ => ApplyError::Transient { source: err },
        }
    }
}

/// The `Api` of a workload's kind in its namespace.
pub fn workload_api(client: kube::Client, workload: &WorkloadId) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apps", "v1", workload.kind.as_str());
    let plural = match workload.kind {
        WorkloadKind::Deployment => "deployments",
        WorkloadKind::StatefulSet => "statefulsets",
        WorkloadKind::DaemonSet => "daemonsets",
    };
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::namespaced_with(client, &workload.namespace, &ar)
}

/// Reads the live workload and checks its UID.
pub async fn get_live(
    api: &Api<DynamicObject>,
    workload: &WorkloadId,
) -> Result<DynamicObject, ApplyError> {
    let live = api
        .get_opt(&workload.name)
        .await
        .map_err(ApplyError::from_kube)?;
    let live = live.ok_or_else(|| ApplyError::NotFound {
        kind: workload.kind,
        namespace: workload.namespace.clone(),
        name: workload.name.clone(),
    })?;
    let found = live.metadata.uid.clone().unwrap_or_default();
    if !workload.uid.is_empty() && found != workload.uid {
        return Err(ApplyError::Replaced {
            expected: workload.uid.clone(),
            found,
        });
    }
    Ok(live)
}

async fn send(
    api: &Api<DynamicObject>,
    name: &str,
    manager: &str,
    force: bool,
    body: &Value,
) -> Result<DynamicObject, ApplyError> {
    let mut params = PatchParams::apply(manager);
    params.force = force;
    api.patch(name, &params, &Patch::Apply(body))
        .await
        .map_err(ApplyError::from_kube)
}

/// Applies the change to the pod template: server-side apply as `kerf` with force, of only
/// the CPU and memory values of `resources` for the containers the template has. The
/// rollback of a rollout calls this with the old values (rule RB-23).
pub async fn apply_template(
    client: kube::Client,
    workload: &WorkloadId,
    containers: &[ContainerResources],
    resources: &[Resource],
) -> Result<Applied, ApplyError> {
    let api = workload_api(client, workload);
    let live = get_live(&api, workload).await?;
    let template = TemplateContainers::of_pod_spec(&live.data["spec"]["template"]["spec"]);
    let plan = apply_body(workload, containers, resources, &template);
    if plan.containers.is_empty() {
        return Err(ApplyError::NothingToApply);
    }
    let merged = with_kept_fields(&live, containers, resources);
    let body = apply_body(workload, &merged, &Resource::ALL, &template).body;
    let out = send(&api, &workload.name, FIELD_MANAGER, true, &body).await?;
    Ok(Applied {
        generation: out.metadata.generation,
        containers: plan.containers,
        dropped: plan.dropped,
        resource_version: out.metadata.resource_version,
    })
}

/// The values of `resources` from `containers`, plus the live values of the fields `kerf`
/// owns for the other resources. An apply as `kerf` that left those out would delete them
/// where `kerf` is their only owner (conformance 10): a change or a rollback of one
/// resource keeps the other as it is (RB-35); only a release gives fields up.
fn with_kept_fields(
    live: &DynamicObject,
    containers: &[ContainerResources],
    resources: &[Resource],
) -> Vec<ContainerResources> {
    let mut out: Vec<ContainerResources> = containers
        .iter()
        .map(|(name, r)| (name.clone(), only(r, resources)))
        .collect();
    let owned = super::release::fields_of(live, FIELD_MANAGER);
    for f in owned.iter().filter(|f| !resources.contains(&f.resource)) {
        let Some(value) = super::release::live_value(live, f) else {
            continue;
        };
        if !out.iter().any(|(name, _)| *name == f.container) {
            out.push((f.container.clone(), ResourceRequirements::default()));
        }
        let Some((_, r)) = out.iter_mut().find(|(name, _)| *name == f.container) else {
            continue;
        };
        let side = match f.side {
            super::release::Side::Requests => &mut r.requests,
            super::release::Side::Limits => &mut r.limits,
        };
        side.set(f.resource, Some(value));
    }
    out
}

/// Gives up `kerf`'s ownership of the CPU and memory fields of `resources` without
/// deleting their values (design section 13, D21; rules AP-21, EV-46):
/// 1. apply the live values of those fields as `kerf-released` (equal values: shared
///    ownership, no conflict; a 409 means the value moved, so re-read and retry);
/// 2. apply as `kerf` with only the fields it keeps, so it no longer owns the released ones
///    and the values stay.
///
/// The values come from the live template, the fields from `kerf`'s managedFields entry.
pub async fn release(
    client: kube::Client,
    workload: &WorkloadId,
    resources: &[Resource],
) -> Result<Released, ApplyError> {
    let api = workload_api(client, workload);
    let mut attempt = 0;
    let mut out = loop {
        let live = get_live(&api, workload).await?;
        let plan = super::release::plan_release(workload, &live, resources);
        if plan.released.is_empty() {
            break Released {
                kept: plan.kept,
                ..Released::default()
            };
        }
        match send(
            &api,
            &workload.name,
            FIELD_MANAGER_RELEASED,
            false,
            &plan.handover,
        )
        .await
        {
            Ok(_) => {}
            Err(ApplyError::Conflict { .. }) if attempt < CONFLICT_RETRIES => {
                attempt += 1;
                continue;
            }
            Err(e) => return Err(e),
        }
        let kept = send(&api, &workload.name, FIELD_MANAGER, true, &plan.keep).await?;
        break Released {
            released: plan.released,
            kept: plan.kept,
            resource_version: kept.metadata.resource_version,
        };
    };
    if let Some(rv) = drop_ghosts(&api, workload).await? {
        out.resource_version = Some(rv);
    }
    Ok(out)
}

/// Step 3 of the release: removes the `managedFields` entries of `kerf-released` (and of
/// `kerf` once it owns no CPU or memory field) with a JSON patch that tests the
/// resourceVersion read first. A 409 or 422 (the object moved) is re-read and retried; when
/// the retries run out the error goes back to the caller and the next pass tries again
/// (a release with nothing left to hand over still runs this step). Returns the
/// resourceVersion of the patch's answer, if it patched.
async fn drop_ghosts(
    api: &Api<DynamicObject>,
    workload: &WorkloadId,
) -> Result<Option<String>, ApplyError> {
    let mut attempt = 0;
    loop {
        let live = get_live(api, workload).await?;
        let Some(ops) = super::release::ghost_removal(&live) else {
            return Ok(None);
        };
        let ops: json_patch::Patch =
            serde_json::from_value(ops).map_err(|e| ApplyError::Invalid {
                message: format!("managedFields patch: {e}"),
            })?;
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let res = api
            .patch(&workload.name, &params, &Patch::Json::<()>(ops))
            .await
            .map_err(ApplyError::from_kube);
        match res {
            Ok(patched) => return Ok(patched.metadata.resource_version),
            Err(ApplyError::Conflict { .. } | ApplyError::Invalid { .. })
                if attempt < CONFLICT_RETRIES =>
            {
                attempt += 1;
            }
            // The test op failed each time: the object keeps moving; the next pass retries.
            Err(ApplyError::Invalid { message }) => return Err(ApplyError::Conflict { message }),
            Err(e) => return Err(e),
        }
    }
}
