//! How the executor reads a failed Kubernetes API call.
//!
//! Every write's error type keeps the server's answer; [`ErrorClass`] says what kind of
//! answer it was, so each write maps it to its own outcome (a fallback, a block, a retry).

use kube::core::Status;

/// What kind of failure an API answer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// 403 from the PodResizeValidator admission: the node can never fit the resize
    /// (design D17, section 13).
    Infeasible,
    /// Any other 403: RBAC, quota, a webhook.
    Forbidden,
    /// 404: the object or the subresource does not exist.
    NotFound,
    /// 405: the method is not allowed on that path (an API server without `pods/resize`).
    MethodNotAllowed,
    /// 409: a conflict (resourceVersion, or a server-side apply field conflict).
    Conflict,
    /// 422: the request is invalid (a resize that would change the QoS class, a failed
    /// JSON patch test).
    Invalid,
    /// 429: too many requests, or an eviction a PodDisruptionBudget refuses.
    TooManyRequests,
    /// Anything else: 5xx, timeouts, connection errors.
    Transient,
}

impl ErrorClass {
    /// Classifies an HTTP status code and the server's message.
    pub fn from_code(code: u16, message: &str) -> ErrorClass {
        match code {
            403 if message.contains(kerf_api::wellknown::RESIZE_INFEASIBLE_ADMISSION_MESSAGE) => {
                ErrorClass::Infeasible
            }
            403 => ErrorClass::Forbidden,
            404 => ErrorClass::NotFound,
            405 => ErrorClass::MethodNotAllowed,
            409 => ErrorClass::Conflict,
            422 => ErrorClass::Invalid,
            429 => ErrorClass::TooManyRequests,
            _ => ErrorClass::Transient,
        }
    }

    /// Classifies a kube error; anything that is not an API answer is transient.
    pub fn of(err: &kube::Error) -> ErrorClass {
        match err {
            kube::Error::Api(status) => ErrorClass::from_code(status.code, &status.message),
            _ => ErrorClass::Transient,
        }
    }

    /// A short, bounded label for metrics and logs.
    pub fn category(self) -> &'static str {
        match self {
            ErrorClass::Infeasible => "infeasible",
            ErrorClass::Forbidden => "forbidden",
            ErrorClass::NotFound => "not_found",
            ErrorClass::MethodNotAllowed => "method_not_allowed",
            ErrorClass::Conflict => "conflict",
            ErrorClass::Invalid => "invalid",
            ErrorClass::TooManyRequests => "too_many_requests",
            ErrorClass::Transient => "transient",
        }
    }

    /// Whether the same request may succeed later without any change.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::Conflict
                | ErrorClass::TooManyRequests
                | ErrorClass::Transient
                | ErrorClass::Forbidden
        )
    }
}

/// The server's message of a kube error, or the error's text.
pub fn message_of(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// The server's Status of a kube error, if it is an API answer.
pub fn status_of(err: &kube::Error) -> Option<&Status> {
    match err {
        kube::Error::Api(status) => Some(status),
        _ => None,
    }
}

/// Whether a 403 message is an RBAC denial (`User "..." cannot patch resource ...`).
pub fn is_rbac_denial(message: &str) -> bool {
    message.contains(" cannot ") && message.contains("resource \"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_allocatable_message_makes_a_403_infeasible() {
        let msg = "pods \"p\" is forbidden: node didn't have enough allocatable resources: cpu, requested: 5000, allocatable: 4000";
        assert_eq!(ErrorClass::from_code(403, msg), ErrorClass::Infeasible);
        assert_eq!(
            ErrorClass::from_code(403, "pods \"p\" is forbidden: exceeded quota: q"),
            ErrorClass::Forbidden
        );
        assert_eq!(ErrorClass::from_code(500, msg), ErrorClass::Transient);
    }

    #[test]
    fn rbac_denial_is_recognised() {
        assert!(is_rbac_denial(
            "pods \"p\" is forbidden: User \"system:serviceaccount:kerf:kerf\" cannot patch resource \"pods/resize\" in API group \"\" in the namespace \"a\""
        ));
        assert!(!is_rbac_denial(
            "pods \"p\" is forbidden: exceeded quota: q"
        ));
    }
}
