//! The API error type of the store and the HTTP layer, rendered as a metav1 Status.

use serde_json::{Value, json};

use super::Gvr;

/// `(reason, field, message)` of one cause of a 422 Invalid.
pub type Cause = (String, String, String);

/// An API error, rendered as a metav1 Status.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Status reason (NotFound, Conflict, Invalid, ...).
    pub reason: String,
    /// Status message.
    pub message: String,
    /// Status details.
    pub details: Option<Value>,
}

impl ApiError {
    /// A new error.
    pub fn new(
        code: u16,
        reason: &str,
        message: impl Into<String>,
        details: Option<Value>,
    ) -> ApiError {
        ApiError {
            code,
            reason: reason.into(),
            message: message.into(),
            details,
        }
    }
    /// 404 NotFound for a named object.
    pub fn not_found(gvr: &Gvr, name: &str) -> ApiError {
        Self::named(
            404,
            "NotFound",
            gvr,
            name,
            format!("{} \"{name}\" not found", gvr.key()),
        )
    }
    /// 409 AlreadyExists.
    pub fn already_exists(gvr: &Gvr, name: &str) -> ApiError {
        Self::named(
            409,
            "AlreadyExists",
            gvr,
            name,
            format!("{} \"{name}\" already exists", gvr.key()),
        )
    }
    /// 409 Conflict on a stale resourceVersion.
    pub fn conflict(gvr: &Gvr, name: &str) -> ApiError {
        let msg = format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            gvr.key()
        );
        Self::named(409, "Conflict", gvr, name, msg)
    }
    /// 400 BadRequest without details.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message, None)
    }
    /// 422 Invalid with causes; the message lists them.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: &[Cause]) -> ApiError {
        let kind_str = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let parts: Vec<String> = causes.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
        let joined = if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        };
        let message = format!("{kind_str} \"{name}\" is invalid: {joined}");
        let causes: Vec<Value> = causes
            .iter()
            .map(|(r, f, m)| json!({"reason": r, "message": format!("{f}: {m}").split_once(": ").map(|x| x.1.to_string()).unwrap_or_default(), "field": f}))
            .collect();
        let mut details = json!({"name": name, "kind": kind, "causes": causes});
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        ApiError::new(422, "Invalid", message, Some(details))
    }
    fn named(code: u16, reason: &str, gvr: &Gvr, name: &str, message: String) -> ApiError {
        let mut details = json!({"name": name, "kind": gvr.resource});
        if !gvr.group.is_empty() {
            details["group"] = json!(gvr.group);
        }
        ApiError::new(code, reason, message, Some(details))
    }
    /// The metav1 Status body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}
