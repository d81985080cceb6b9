//! The validating admission webhook for RightsizingPolicies.
//!
//! A policy CREATE or UPDATE is refused when the agent would mark the policy
//! `Valid=False` (a cron schedule, time zone, window, duration or any other field it
//! cannot use), with the condition's own message: the decision is
//! [`validity`](crate::reconcile::policies::validity), the function that sets the
//! condition, over the policy converted as the agent's cache converts it. An UPDATE that
//! leaves the spec as it was (labels, annotations, finalizers) is allowed, so a policy
//! stored while the webhook did not answer can still be relabelled or cleaned up. A
//! request the webhook cannot read is allowed with a warning (HTTP 400 without a uid):
//! the webhook never blocks a policy for its own failure (the chart registers it with
//! `failurePolicy: Ignore` for the same reason).

use kerf_api::condition::ConditionStatus;
use kerf_api::wellknown as wk;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::{DynamicObject, Status};

use super::WebhookError;
use super::review::{Answer, Outcome, allowed_with_warning, read_request, respond};
use crate::cache::{Interner, PolicyEntry};
use crate::reconcile::policies::validity;

/// The path the API server posts policy AdmissionReviews to.
pub const VALIDATE_POLICY_PATH: &str = "/validate-policy";

/// The kind the webhook checks.
const POLICY_KIND: &str = "RightsizingPolicy";

/// The lead-in of a policy request's warning.
const POLICY_UNCHECKED: &str = "kerf webhook did not check the policy";

/// HTTP status of a refusal, as the API server's own schema validation answers.
const INVALID_CODE: u16 = 422;

/// Answers one policy request body: allowed, or refused with the `Valid` condition's
/// message.
pub fn answer_policy(body: &[u8]) -> Answer {
    let request = match read_request::<DynamicObject>(body, POLICY_UNCHECKED) {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    match problems(&request) {
        Ok(None) => respond(AdmissionResponse::from(&request), Outcome::Allowed),
        Ok(Some(message)) => respond(refused(&request, &message), Outcome::Denied),
        Err(e) => allowed_with_warning(&request.uid, POLICY_UNCHECKED, &e),
    }
}

/// The `Valid=False` message the policy of the request would get, if any.
fn problems(req: &AdmissionRequest<DynamicObject>) -> Result<Option<String>, WebhookError> {
    let is_policy = req.kind.group == wk::API_GROUP && req.kind.kind == POLICY_KIND;
    let subresource = req.sub_resource.as_deref().is_some_and(|s| !s.is_empty());
    let checked = matches!(req.operation, Operation::Create | Operation::Update);
    if !checked || !is_policy || subresource {
        return Ok(None);
    }
    let Some(object) = &req.object else {
        return Err(WebhookError::NoObject);
    };
    let spec_unchanged = req
        .old_object
        .as_ref()
        .is_some_and(|old| old.data.get("spec") == object.data.get("spec"));
    if req.operation == Operation::Update && spec_unchanged {
        return Ok(None);
    }
    let mut object = object.clone();
    // The API server keeps the stored status (the status subresource); the agent reads
    // that one, not the request's.
    if let Some(data) = object.data.as_object_mut() {
        data.remove("status");
    }
    let entry = PolicyEntry::from_dynamic(object, &mut Interner::default());
    let (status, _, message) = validity(&entry);
    Ok(matches!(status, ConditionStatus::False).then_some(message))
}

/// A refusal carrying `message` as the API server shows it
/// (`admission webhook "policies.kerf.getkerf.dev" denied the request: <message>`).
fn refused(req: &AdmissionRequest<DynamicObject>, message: &str) -> AdmissionResponse {
    let mut resp = AdmissionResponse::from(req);
    resp.allowed = false;
    resp.result = Status::failure(message, "Invalid").with_code(INVALID_CODE);
    resp
}
