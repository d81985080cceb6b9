//! Mirrors the hub's recommendations into RightsizingRecommendations (design section 3, D4).
//!
//! One rsr per workload, next to it. Its name is the workload's name if free, else
//! `<name>-<lowercase kind>`, else that plus `-<8 hex of sha256(kind/name)>` (at most 253
//! characters, the hash kept), and never changes once made: the rsr of a workload is
//! found through the labels `kerf.getkerf.dev/workload-kind` and `-name`, never by name.
//! The spec is written with server-side apply under the field manager `kerf`, with an
//! ownerReference to the workload (not controller, no blockOwnerDeletion) and no finalizer.
//!
//! Lifecycle (docs/lifecycle.md): an rsr whose `workloadRef.uid` differs from the live
//! workload's is reset (its status is cleared); a recommendation that disappears from the
//! hub's list leaves its rsr and the applied values in place, marks the rsr with
//! [`ANNOTATION_WITHDRAWN`] and the reconciler stops acting on it; a deleted workload's rsr
//! goes with the workload through the ownerReference.
//!
//! A recommendation the rsr's schema refuses (a quantity such as `12Q`, a list too long)
//! is checked before it is written and never sent to the API server: the rsr keeps its
//! last valid spec (a new one gets the recommendation id and no containers), is marked
//! withdrawn so the agent acts on nothing, and [`ANNOTATION_INVALID`] names every refused
//! field. That is written once per recommendation id; the hub's next recommendation
//! replaces it. An rsr whose stored spec the schema refuses (written by hand, or under an
//! older CRD) is treated the same way when the hub lists nothing for its workload.
//!
//! A recommendation for a workload outside the agent's scope ([`crate::scope`]) makes no
//! rsr and no write: it is listed in [`SyncReport::out_of_scope`] for the reconciler to
//! report. An rsr of a workload outside the scope is left as it is, withdrawn or not.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use kerf_api::hub::{Approval, Recommendation, RecommendationList};
use kerf_api::rsr::{
    ApprovalRef, RecommendationSource, RightsizingRecommendationSpec, WorkloadRef,
};
use kerf_api::validate::validate_recommendation_spec;
use kerf_api::wellknown::{
    API_GROUP_VERSION, FIELD_MANAGER, LABEL_WORKLOAD_KIND, LABEL_WORKLOAD_NAME,
};
use kerf_api::{RightsizingRecommendationStatus, WorkloadKind};
use kerf_decide::duration::Rfc3339;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::cache::{CacheSet, RsrEntry, WorkloadInfo, WorkloadKey};
use crate::scope::{Scope, Verdict, in_cache};

mod refused;

pub use refused::invalid_text;
use refused::{refuse_stored, sync_invalid};

/// rsr annotation: the hub no longer lists a recommendation for this workload (value: when
/// the agent noticed, RFC 3339). The rsr and the applied values stay; the agent stops
/// acting on it until the hub recommends again.
pub const ANNOTATION_WITHDRAWN: &str = "kerf.getkerf.dev/recommendation-withdrawn";

/// rsr annotation: the recommendation for this workload was refused because the rsr's
/// schema refuses it (value: the recommendation id and every refused field with what is
/// wrong with it).
pub const ANNOTATION_INVALID: &str = "kerf.getkerf.dev/recommendation-invalid";

/// Longest name of a Kubernetes object (a DNS subdomain).
pub const MAX_NAME_LEN: usize = 253;

/// Errors of the rsr sync.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The API server refused or failed a write.
    #[error("rsr {namespace}/{name}: {source}")]
    Kube {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The body could not be serialized.
    #[error("rsr {name}: cannot serialize: {source}")]
    Encode {
        /// Name.
        name: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

impl SyncError {
    /// A short, bounded name for metric labels and logs.
    pub fn category(&self) -> &'static str {
        match self {
            SyncError::Kube { .. } => "kube",
            SyncError::Encode { .. } => "encode",
        }
    }
}

/// The `ApiResource` of RightsizingRecommendations, for dynamic access (design D3).
pub fn rsr_resource() -> ApiResource {
    ApiResource {
        group: kerf_api::wellknown::API_GROUP.to_owned(),
        version: kerf_api::wellknown::API_VERSION.to_owned(),
        api_version: API_GROUP_VERSION.to_owned(),
        kind: "RightsizingRecommendation".to_owned(),
        plural: "rightsizingrecommendations".to_owned(),
    }
}

/// The rsr API of one namespace, as dynamic objects (a malformed rsr still reads).
pub fn rsr_api(client: kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client, namespace, &rsr_resource())
}

/// The name of a new rsr for workload `kind/name` (design D4). `is_free` tells whether an
/// rsr name is still unused in the namespace.
pub fn rsr_name(kind: WorkloadKind, name: &str, is_free: impl Fn(&str) -> bool) -> String {
    if name.len() <= MAX_NAME_LEN && is_free(name) {
        return name.to_owned();
    }
    let with_kind = format!("{name}-{}", kind.as_str().to_lowercase());
    if with_kind.len() <= MAX_NAME_LEN && is_free(&with_kind) {
        return with_kind;
    }
    let digest = Sha256::digest(format!("{}/{name}", kind.as_str()).as_bytes());
    let hash = &hex::encode(digest)[..8];
    let room = MAX_NAME_LEN - hash.len() - 1;
    let mut base: &str = &with_kind;
    if base.len() > room {
        let mut end = room;
        while !base.is_char_boundary(end) {
            end -= 1;
        }
        base = base[..end].trim_end_matches(['-', '.']);
    }
    format!("{base}-{hash}")
}

/// The rsr spec mirroring `rec` for the live workload `uid`; the hub's approval of the
/// same recommendation is mirrored too (design D27: a mirror, never an input) while it has
/// not expired at `now`. Of several, one not yet carried out (not in `consumed`, the rsr's
/// `status.consumedApprovals`) is shown first; a carried-out one stays shown while the hub
/// lists it, next to `status.change.approvalId` that records it.
pub fn spec_for(
    rec: &Recommendation,
    kind: WorkloadKind,
    uid: &str,
    approvals: &[Approval],
    consumed: &[String],
    now: DateTime<Utc>,
) -> RightsizingRecommendationSpec {
    let live: Vec<&Approval> = approvals
        .iter()
        .filter(|a| {
            a.workload == rec.workload
                && a.recommendation_id == rec.recommendation_id
                && a.expires_at > now
        })
        .collect();
    let approval = live
        .iter()
        .find(|a| !consumed.contains(&a.approval_id))
        .or(live.first())
        .map(|a| ApprovalRef {
            approval_id: a.approval_id.clone(),
            approved_by: a.approved_by.clone(),
        });
    RightsizingRecommendationSpec {
        workload_ref: WorkloadRef {
            kind,
            name: rec.workload.name.clone(),
            uid: Some(uid.to_owned()),
        },
        recommendation_id: rec.recommendation_id.clone(),
        generated_at: Some(rec.generated_at),
        confidence: Some(rec.confidence.clone()),
        data_coverage: Some(rec.data_coverage.clone()),
        settings: Some(rec.settings.clone()),
        containers: rec.containers.clone(),
        approval,
        source: None,
    }
}

/// The server-side apply body of an rsr: labels, ownerReference, spec, and the withdrawn
/// mark when set.
pub fn apply_body(
    name: &str,
    workload: &WorkloadInfo,
    spec: &RightsizingRecommendationSpec,
    withdrawn_at: Option<DateTime<Utc>>,
) -> Result<Value, serde_json::Error> {
    let key = &workload.key;
    let mut metadata = json!({
        "name": name,
        "namespace": &*key.namespace,
        "labels": {
            LABEL_WORKLOAD_KIND: key.kind.as_str(),
            LABEL_WORKLOAD_NAME: &*key.name,
        },
        "ownerReferences": [{
            "apiVersion": "apps/v1",
            "kind": key.kind.as_str(),
            "name": &*key.name,
            "uid": workload.uid,
            "controller": false,
            "blockOwnerDeletion": false,
        }],
    });
    if let Some(at) = withdrawn_at {
        metadata["annotations"] = json!({
            ANNOTATION_WITHDRAWN: Rfc3339(at).to_string(),
        });
    }
    Ok(json!({
        "apiVersion": API_GROUP_VERSION,
        "kind": "RightsizingRecommendation",
        "metadata": metadata,
        "spec": serde_json::to_value(spec)?,
    }))
}

/// What the sync does for one recommendation.
#[derive(Clone, Debug, PartialEq)]
pub enum SyncPlan {
    /// The rsr is as it should be.
    Unchanged,
    /// Create or update the rsr `name`; `reset` clears its status first (the workload was
    /// replaced: another uid).
    Apply {
        /// The rsr's name.
        name: String,
        /// Clear the status.
        reset: bool,
    },
}

/// Plans the sync of `rec` for `workload`, given the rsrs its labels index finds and
/// whether a name is free in the namespace.
pub fn plan(
    desired: &RightsizingRecommendationSpec,
    workload: &WorkloadInfo,
    existing: &[Arc<RsrEntry>],
    is_free: impl Fn(&str) -> bool,
) -> SyncPlan {
    let Some(entry) = existing.first() else {
        let name = rsr_name(workload.key.kind, &workload.key.name, is_free);
        return SyncPlan::Apply { name, reset: false };
    };
    let Ok(rsr) = &entry.rsr else {
        return SyncPlan::Apply {
            name: entry.name.clone(),
            reset: false,
        };
    };
    let old_uid = rsr.spec.workload_ref.uid.as_deref();
    let reset = old_uid.is_some_and(|u| u != workload.uid);
    let owned = rsr
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|o| o.uid == workload.uid);
    let withdrawn = annotation(entry, ANNOTATION_WITHDRAWN).is_some();
    if !reset && owned && !withdrawn && rsr.spec == *desired {
        return SyncPlan::Unchanged;
    }
    SyncPlan::Apply {
        name: entry.name.clone(),
        reset,
    }
}

pub(crate) fn annotation<'a>(entry: &'a RsrEntry, key: &str) -> Option<&'a String> {
    let rsr = entry.rsr.as_ref().ok()?;
    rsr.metadata.annotations.as_ref()?.get(key)
}

/// Whether the rsr is marked withdrawn.
pub fn is_withdrawn(entry: &RsrEntry) -> bool {
    annotation(entry, ANNOTATION_WITHDRAWN).is_some()
}

/// Where the recommendations being mirrored come from: the hub's approvals of them (none
/// without a hub) and the agent's source, written into each rsr's `spec.source`; and the
/// scope they are mirrored within.
#[derive(Clone, Copy, Debug)]
pub struct Origin<'a> {
    /// The hub's approvals.
    pub approvals: &'a [Approval],
    /// The agent's recommendation source.
    pub source: RecommendationSource,
    /// The agent's scope: only its workloads get an rsr.
    pub scope: &'a Scope,
}

/// A recommendation for a workload outside the agent's scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfScope {
    /// The workload.
    pub workload: WorkloadKey,
    /// The recommendation's id.
    pub recommendation_id: String,
    /// Why the workload is outside the scope.
    pub why: String,
}

/// What one sync pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// rsrs created or updated.
    pub applied: Vec<String>,
    /// rsrs reset (workload replaced).
    pub reset: Vec<String>,
    /// rsrs newly marked withdrawn.
    pub withdrawn: Vec<String>,
    /// Recommendations for workloads the caches do not hold (yet), or whose scope the
    /// caches cannot tell yet.
    pub no_workload: usize,
    /// Recommendations for workloads outside the agent's scope: nothing was written for
    /// them.
    pub out_of_scope: Vec<OutOfScope>,
}

/// Syncs every recommendation of `list` into rsrs, and marks rsrs the list no longer
/// covers. Writes only what differs; one failing rsr does not stop the others. Up to
/// `concurrency` rsrs are written at once; workloads of one namespace that share a name
/// (and so may compete for one rsr name) are synced one after the other. `handled` is
/// called with the workloads of each recommendation once it is synced (written, found
/// unchanged or failed); the withdrawals come after every recommendation.
pub async fn sync(
    client: &kube::Client,
    cache: &CacheSet,
    list: &RecommendationList,
    origin: Origin<'_>,
    now: DateTime<Utc>,
    concurrency: usize,
    handled: impl Fn(Vec<WorkloadKey>) + Send + Sync,
) -> (SyncReport, Vec<SyncError>) {
    let mut report = SyncReport::default();
    let mut errors = Vec::new();
    let (listed, groups) = group_in_scope(cache, list, origin.scope, &mut report);
    let handled: &(dyn Fn(Vec<WorkloadKey>) + Send + Sync) = &handled;
    // Made lazily, `concurrency` at a time: 10,000 request futures made up front held
    // 35 MB at once.
    let jobs = groups
        .into_values()
        .map(|group| sync_reported(client, cache, list, group, origin, now, handled));
    let results: Vec<_> = futures::stream::iter(jobs)
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    for res in results.into_iter().flatten() {
        match res {
            Ok(Some((name, reset))) => {
                if reset {
                    report.reset.push(name.clone());
                }
                report.applied.push(name);
            }
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    withdraw_unlisted(
        client,
        cache,
        &listed,
        origin.scope,
        now,
        &mut report,
        &mut errors,
    )
    .await;
    (report, errors)
}

/// Workloads by namespace and name, each with the index of its recommendation.
type Groups = BTreeMap<(String, String), Vec<(usize, Arc<WorkloadInfo>)>>;

/// The workloads `list` recommends for (all of them), and those in the scope grouped by
/// namespace and name, each with the index of its recommendation; a recommendation out of
/// the scope goes to `report.out_of_scope`, one for a workload not in the cache counts as
/// `no_workload`.
fn group_in_scope(
    cache: &CacheSet,
    list: &RecommendationList,
    scope: &Scope,
    report: &mut SyncReport,
) -> (BTreeSet<WorkloadKey>, Groups) {
    let mut listed = BTreeSet::new();
    let mut groups = Groups::new();
    for (i, rec) in list.recommendations.iter().enumerate() {
        let Some(kind) = WorkloadKind::parse(&rec.workload.kind) else {
            continue;
        };
        let key = WorkloadKey::new(&rec.workload.namespace, kind, &rec.workload.name);
        listed.insert(key.clone());
        match in_cache(scope, cache, &key) {
            Verdict::In => {}
            Verdict::Out(why) => {
                report.out_of_scope.push(OutOfScope {
                    workload: key,
                    recommendation_id: rec.recommendation_id.clone(),
                    why,
                });
                continue;
            }
            Verdict::Unknown => {
                report.no_workload += 1;
                continue;
            }
        }
        let Some(workload) = cache.workload(&key) else {
            report.no_workload += 1;
            continue;
        };
        let group = (rec.workload.namespace.clone(), rec.workload.name.clone());
        groups.entry(group).or_default().push((i, workload));
    }
    (listed, groups)
}

/// Marks withdrawn the rsrs of workloads in the scope that `listed` no longer covers (an
/// rsr whose stored spec is refused is withdrawn through [`refuse_stored`]).
async fn withdraw_unlisted(
    client: &kube::Client,
    cache: &CacheSet,
    listed: &BTreeSet<WorkloadKey>,
    scope: &Scope,
    now: DateTime<Utc>,
    report: &mut SyncReport,
    errors: &mut Vec<SyncError>,
) {
    for entry in cache.rsrs() {
        let Some(key) = entry.workload.as_ref() else {
            continue;
        };
        if listed.contains(key) || in_cache(scope, cache, key) != Verdict::In {
            continue;
        }
        if let Some(res) = refuse_stored(client, cache, &entry, now).await {
            match res {
                Ok(Some((name, _))) => report.withdrawn.push(name),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
            continue;
        }
        if is_withdrawn(&entry) {
            continue;
        }
        match mark_withdrawn(client, cache, &entry, now).await {
            Ok(true) => report.withdrawn.push(entry.name.clone()),
            Ok(false) => {}
            Err(e) => errors.push(e),
        }
    }
}

/// [`sync_group`], then reports the group's workloads handled.
/// `group` holds indexes into `list.recommendations`.
async fn sync_reported(
    client: &kube::Client,
    cache: &CacheSet,
    list: &RecommendationList,
    group: Vec<(usize, Arc<WorkloadInfo>)>,
    origin: Origin<'_>,
    now: DateTime<Utc>,
    handled: &(dyn Fn(Vec<WorkloadKey>) + Send + Sync),
) -> Vec<Result<Option<(String, bool)>, SyncError>> {
    let keys = group.iter().map(|(_, w)| w.key.clone()).collect();
    let group = group
        .into_iter()
        .filter_map(|(i, w)| Some((list.recommendations.get(i)?, w)))
        .collect();
    let out = sync_group(client, cache, group, origin, now).await;
    handled(keys);
    out
}

/// Syncs the recommendations of `group` one after the other.
async fn sync_group(
    client: &kube::Client,
    cache: &CacheSet,
    group: Vec<(&Recommendation, Arc<WorkloadInfo>)>,
    origin: Origin<'_>,
    now: DateTime<Utc>,
) -> Vec<Result<Option<(String, bool)>, SyncError>> {
    let mut out = Vec::with_capacity(group.len());
    for (rec, workload) in group {
        out.push(sync_one(client, cache, rec, &workload, origin, now).await);
    }
    out
}

/// Whether the name `name` is free for a new rsr in `namespace` (no rsr in the cache has
/// it). A lookup by name: the mirroring asks it for every recommendation it writes, so
/// it must not walk every rsr (10,000 rsrs made a sync with nothing to write take 6 s).
pub(crate) fn name_is_free(cache: &CacheSet, namespace: &str, name: &str) -> bool {
    cache.rsr(namespace, name).is_none()
}

async fn sync_one(
    client: &kube::Client,
    cache: &CacheSet,
    rec: &Recommendation,
    workload: &WorkloadInfo,
    origin: Origin<'_>,
    now: DateTime<Utc>,
) -> Result<Option<(String, bool)>, SyncError> {
    let key = &workload.key;
    let existing = cache.rsrs_for(key);
    let consumed: Vec<String> = existing
        .iter()
        .filter_map(|r| r.rsr.as_ref().ok()?.status.as_ref())
        .flat_map(|s| s.consumed_approvals.iter().cloned())
        .collect();
    let mut desired = spec_for(
        rec,
        key.kind,
        &workload.uid,
        origin.approvals,
        &consumed,
        now,
    );
    desired.source = Some(origin.source);
    let refused = validate_recommendation_spec(&desired);
    if !refused.is_empty() {
        return sync_invalid(client, cache, &desired, workload, &refused, now).await;
    }
    let SyncPlan::Apply { name, reset } = plan(&desired, workload, &existing, |n| {
        name_is_free(cache, &key.namespace, n)
    }) else {
        return Ok(None);
    };
    let body = apply_body(&name, workload, &desired, None).map_err(|source| SyncError::Encode {
        name: name.clone(),
        source,
    })?;
    let api = rsr_api(client.clone(), &key.namespace);
    let kube_err = |source| SyncError::Kube {
        namespace: key.namespace.to_string(),
        name: name.clone(),
        source,
    };
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let applied = api
        .patch(&name, &pp, &Patch::Apply(&body))
        .await
        .map_err(kube_err)?;
    if reset {
        tracing::info!(rsr = %name, namespace = %key.namespace, "workload replaced (new uid): rsr status reset");
        let mut obj = applied;
        obj.data["status"] = serde_json::to_value(RightsizingRecommendationStatus::default())
            .map_err(|source| SyncError::Encode {
                name: name.clone(),
                source,
            })?;
        let bytes = serde_json::to_value(&obj).map_err(|source| SyncError::Encode {
            name: name.clone(),
            source,
        })?;
        api.replace_subresource::<Value>("status", &name, &PostParams::default(), &bytes)
            .await
            .map_err(kube_err)?;
    }
    Ok(Some((name, reset)))
}

/// Marks an rsr withdrawn, keeping its spec as it is. Returns whether it wrote.
async fn mark_withdrawn(
    client: &kube::Client,
    cache: &CacheSet,
    entry: &RsrEntry,
    now: DateTime<Utc>,
) -> Result<bool, SyncError> {
    let (Ok(rsr), Some(key)) = (&entry.rsr, &entry.workload) else {
        return Ok(false);
    };
    let Some(workload) = cache.workload(key) else {
        return Ok(false);
    };
    let body = apply_body(&entry.name, &workload, &rsr.spec, Some(now)).map_err(|source| {
        SyncError::Encode {
            name: entry.name.clone(),
            source,
        }
    })?;
    let api = rsr_api(client.clone(), &entry.namespace);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&entry.name, &pp, &Patch::Apply(&body))
        .await
        .map_err(|source| SyncError::Kube {
            namespace: entry.namespace.to_string(),
            name: entry.name.clone(),
            source,
        })?;
    tracing::info!(rsr = %entry.name, namespace = %entry.namespace, "the hub no longer recommends for this workload: rsr kept, agent stops acting on it");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    // rule: design D4
    #[test]
    fn name_is_the_workload_name_when_free() {
        assert_eq!(
            rsr_name(WorkloadKind::Deployment, "checkout", |_| true),
            "checkout"
        );
    }

    #[test]
    fn name_adds_the_kind_then_a_hash_on_clashes() {
        let n = rsr_name(WorkloadKind::StatefulSet, "db", |n| n != "db");
        assert_eq!(n, "db-statefulset");
        let n = rsr_name(WorkloadKind::StatefulSet, "db", |_| false);
        let digest = hex::encode(Sha256::digest(b"StatefulSet/db"));
        assert_eq!(n, format!("db-statefulset-{}", &digest[..8]));
    }

    #[test]
    fn long_names_keep_the_hash_within_253() {
        let long = "a".repeat(250);
        let n = rsr_name(WorkloadKind::DaemonSet, &long, |n| n != long);
        assert!(n.len() <= MAX_NAME_LEN, "{}", n.len());
        let digest = hex::encode(Sha256::digest(format!("DaemonSet/{long}").as_bytes()));
        assert!(n.ends_with(&digest[..8]));
    }

    fn rec() -> Recommendation {
        serde_json::from_value(serde_json::json!({
            "workload": {"namespace": "shop", "kind": "Deployment", "name": "web"},
            "recommendationID": "rec-1",
            "generatedAt": "2026-11-30T10:00:00Z",
            "confidence": "0.9",
            "dataCoverage": {"covered": "336h", "window": "336h"},
            "settings": {"window": "336h", "cpuPercentile": 90, "memoryPercentile": 99,
                "headroomPercent": 15, "limits": "Keep"},
            "containers": [{"name": "app", "requests": {"cpu": "100m", "memory": "64Mi"},
                "confidence": "0.9"}],
        }))
        .expect("recommendation")
    }

    fn approval(id: &str, rec_id: &str, expires: &str) -> Approval {
        serde_json::from_value(serde_json::json!({
            "approvalId": id,
            "workload": {"namespace": "shop", "kind": "Deployment", "name": "web"},
            "recommendationID": rec_id,
            "approvedBy": "alice",
            "expiresAt": expires,
        }))
        .expect("approval")
    }

    fn mirrored(approvals: &[Approval], consumed: &[&str]) -> Option<String> {
        let now: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().expect("time");
        let consumed: Vec<String> = consumed.iter().map(|c| (*c).to_owned()).collect();
        spec_for(
            &rec(),
            WorkloadKind::Deployment,
            "u1",
            approvals,
            &consumed,
            now,
        )
        .approval
        .map(|a| a.approval_id)
    }

    // rule: design D27
    #[test]
    fn the_mirror_shows_a_live_approval_of_this_recommendation() {
        let live = "2026-11-30T13:00:00Z";
        let gone = "2026-11-30T11:00:00Z";
        assert_eq!(
            mirrored(&[approval("a1", "rec-1", live)], &[]).as_deref(),
            Some("a1")
        );
        // Another recommendation's approval is not this one's.
        assert_eq!(mirrored(&[approval("a1", "rec-0", live)], &[]), None);
        // Expired: it lapsed, the mirror drops it.
        assert_eq!(mirrored(&[approval("a1", "rec-1", gone)], &[]), None);
        // Carried out: still listed by the hub, still mirrored.
        assert_eq!(
            mirrored(&[approval("a1", "rec-1", live)], &["a1"]).as_deref(),
            Some("a1")
        );
        // A spent one listed first does not hide a fresh one after it.
        let both = [approval("a1", "rec-1", live), approval("a2", "rec-1", live)];
        assert_eq!(mirrored(&both, &["a1"]).as_deref(), Some("a2"));
    }
}
