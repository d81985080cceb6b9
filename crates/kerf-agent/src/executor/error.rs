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

/// The permission an RBAC denial names (`User "u" cannot patch resource "pods/resize" in
/// API group "" in the namespace "a"`), for the log line that says what to grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingPermission {
    /// The user or ServiceAccount refused.
    pub user: String,
    /// The verb (`patch`, `create`, ...).
    pub verb: String,
    /// The resource with its subresource (`pods/resize`).
    pub resource: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The namespace, or `None` at cluster scope.
    pub namespace: Option<String>,
}

/// Reads the missing permission out of an RBAC denial; `None` for any other message.
pub fn missing_permission(message: &str) -> Option<MissingPermission> {
    if !is_rbac_denial(message) {
        return None;
    }
    let quoted_after = |marker: &str| -> Option<String> {
        let rest = &message[message.find(marker)? + marker.len()..];
        let end = rest.find('"')?;
        Some(rest[..end].to_owned())
    };
    let user = quoted_after("User \"").unwrap_or_default();
    let after_cannot = &message[message.find(" cannot ")? + " cannot ".len()..];
    let verb = after_cannot.split_whitespace().next()?.to_owned();
    Some(MissingPermission {
        user,
        verb,
        resource: quoted_after("resource \"")?,
        group: quoted_after("API group \"").unwrap_or_default(),
        namespace: quoted_after("namespace \""),
    })
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

    // rule: design D17
    #[test]
    fn an_rbac_denial_names_the_missing_permission() {
        let p = missing_permission(
            "pods \"p\" is forbidden: User \"system:serviceaccount:kerf:kerf\" cannot patch resource \"pods/resize\" in API group \"\" in the namespace \"a\"",
        );
        assert_eq!(
            p,
            Some(MissingPermission {
                user: "system:serviceaccount:kerf:kerf".into(),
                verb: "patch".into(),
                resource: "pods/resize".into(),
                group: String::new(),
                namespace: Some("a".into()),
            })
        );
        let cluster = missing_permission(
            "nodes is forbidden: User \"u\" cannot list resource \"nodes\" in API group \"\" at the cluster scope",
        )
        .expect("denial");
        assert_eq!((cluster.verb.as_str(), cluster.namespace), ("list", None));
        assert_eq!(
            missing_permission("pods \"p\" is forbidden: exceeded quota: q"),
            None
        );
        // A message cut short names what it can, never panics.
        assert_eq!(missing_permission("User \"u\" cannot "), None);
    }
}
