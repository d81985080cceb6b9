//! A recommendation the rsr's schema refuses: shown on the rsr with every refused field
//! named (see [`ANNOTATION_INVALID`]) instead of being written, once per refusal.

use chrono::{DateTime, Utc};
use kerf_api::rsr::{RightsizingRecommendationSpec, WorkloadRef};
use kerf_api::validate::{FieldError, RECOMMENDATION_ID_MAX_LENGTH, validate_recommendation_spec};
use kerf_api::wellknown::FIELD_MANAGER;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{
    ANNOTATION_INVALID, ANNOTATION_WITHDRAWN, SyncError, annotation, apply_body, name_is_free,
    rsr_api, rsr_name,
};
use crate::cache::{CacheSet, RsrEntry, WorkloadInfo};

/// The text of [`ANNOTATION_INVALID`] for recommendation `id` with the fields `refused`.
/// An id longer than the schema allows is cut to its first 128 characters.
pub fn invalid_text(id: &str, refused: &[FieldError]) -> String {
    let id: String = id.chars().take(RECOMMENDATION_ID_MAX_LENGTH).collect();
    let fields: Vec<String> = refused.iter().map(ToString::to_string).collect();
    format!("recommendation {id:?} refused: {}", fields.join("; "))
}

/// The spec an rsr shows while its recommendation is refused: its last valid spec, or the
/// live workload and the recommendation id alone (no containers).
fn held_spec(
    desired: &RightsizingRecommendationSpec,
    workload: &WorkloadInfo,
    existing: Option<&RsrEntry>,
) -> RightsizingRecommendationSpec {
    if let Some(Ok(rsr)) = existing.map(|e| &e.rsr)
        && validate_recommendation_spec(&rsr.spec).is_empty()
    {
        return rsr.spec.clone();
    }
    let key = &workload.key;
    RightsizingRecommendationSpec {
        workload_ref: WorkloadRef {
            kind: key.kind,
            name: key.name.to_string(),
            uid: Some(workload.uid.clone()),
        },
        recommendation_id: desired
            .recommendation_id
            .chars()
            .take(RECOMMENDATION_ID_MAX_LENGTH)
            .collect(),
        generated_at: desired.generated_at,
        confidence: None,
        data_coverage: None,
        settings: None,
        containers: Vec::new(),
        approval: None,
        source: desired.source,
    }
}

/// Shows a refused recommendation on the workload's rsr (see [`ANNOTATION_INVALID`]) and
/// marks it withdrawn, once per recommendation: an rsr that already names the same
/// refusal is not written again.
pub(super) async fn sync_invalid(
    client: &kube::Client,
    cache: &CacheSet,
    desired: &RightsizingRecommendationSpec,
    workload: &WorkloadInfo,
    refused: &[FieldError],
    now: DateTime<Utc>,
) -> Result<Option<(String, bool)>, SyncError> {
    let key = &workload.key;
    let existing = cache.rsrs_for(key);
    let entry = existing.first().map(|e| &**e);
    let text = invalid_text(&desired.recommendation_id, refused);
    if entry.is_some_and(|e| annotation(e, ANNOTATION_INVALID) == Some(&text)) {
        return Ok(None);
    }
    let name = match entry {
        Some(e) => e.name.clone(),
        None => rsr_name(key.kind, &key.name, |n| {
            name_is_free(cache, &key.namespace, n)
        }),
    };
    let withdrawn_at = entry
        .and_then(|e| annotation(e, ANNOTATION_WITHDRAWN))
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map_or(now, |t| t.with_timezone(&Utc));
    let spec = held_spec(desired, workload, entry);
    let encode = |source| SyncError::Encode {
        name: name.clone(),
        source,
    };
    let mut body = apply_body(&name, workload, &spec, Some(withdrawn_at)).map_err(encode)?;
    body["metadata"]["annotations"][ANNOTATION_INVALID] = json!(text);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    rsr_api(client.clone(), &key.namespace)
        .patch(&name, &pp, &Patch::Apply(&body))
        .await
        .map_err(|source| SyncError::Kube {
            namespace: key.namespace.to_string(),
            name: name.clone(),
            source,
        })?;
    tracing::warn!(rsr = %name, namespace = %key.namespace, recommendation = %desired.recommendation_id, "{text}; the agent acts on nothing until the hub recommends again");
    Ok(Some((name, false)))
}

/// An rsr the hub does not list whose stored spec the schema refuses (written by hand, or
/// stored under an older CRD): written once more with the refusal named, like a refused
/// recommendation, since a write that keeps the spec would be refused on every poll.
/// `None` when its spec is valid.
pub(super) async fn refuse_stored(
    client: &kube::Client,
    cache: &CacheSet,
    entry: &RsrEntry,
    now: DateTime<Utc>,
) -> Option<Result<Option<(String, bool)>, SyncError>> {
    let (Ok(rsr), Some(key)) = (&entry.rsr, &entry.workload) else {
        return None;
    };
    let refused = validate_recommendation_spec(&rsr.spec);
    if refused.is_empty() {
        return None;
    }
    let workload = cache.workload(key)?;
    Some(sync_invalid(client, cache, &rsr.spec, &workload, &refused, now).await)
}
