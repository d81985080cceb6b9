//! Executor and health watch metrics: actuating calls by action and result, rollbacks by
//! reason, and RBAC refusals by resource (design D17). Each error of an actuating call
//! implements [`ActionError`] where it is defined.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::metrics::set::metric_set;

/// Labels of an action: what was done and how it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    /// `resize`, `apply`, `evict`, `hpa_patch`, `release`, `rollback`.
    pub action: String,
    /// `ok` or an error category.
    pub result: String,
}

/// Labels of a rollback.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    /// Contract reason (`OOMKills`, `Restarts`, `Throttling`).
    pub reason: String,
}

/// Labels of a refused API call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabel {
    /// The API resource (`pods/resize`, `deployments`, ...).
    pub resource: String,
}

metric_set! {
    /// Executor and health watch metrics.
    pub struct ExecutorMetrics {
        /// `kerf_agent_actions_total{action, result}`.
        actions: Family<ActionLabels, Counter> => "actions", "Actuating API calls by action and result";
        /// `kerf_agent_rollbacks_total{reason}`.
        rollbacks: Family<ReasonLabel, Counter> => "rollbacks", "Rollbacks by reason";
        /// `kerf_agent_permission_denied_total{resource}`: RBAC refusals (design D17).
        permission_denied: Family<ResourceLabel, Counter> => "permission_denied", "API calls refused by RBAC, by resource";
    }
}

/// An error of an actuating call: a bounded category for the `result` label, and its
/// message (an RBAC denial names the missing permission there).
pub trait ActionError: std::fmt::Display {
    /// A short, bounded name (`forbidden`, `conflict`, ...).
    fn category(&self) -> &'static str;
}

/// Gives an error type its `category()`, one label a variant, and implements
/// [`ActionError`] through it.
macro_rules! action_error {
    ($error:ident { $($variant:ident => $label:literal),+ $(,)? }) => {
        impl $error {
            /// A short, bounded label for metrics and logs.
            pub fn category(&self) -> &'static str {
                match self {
                    $($error::$variant { .. } => $label,)+
                }
            }
        }

        impl $crate::executor::metrics::ActionError for $error {
            fn category(&self) -> &'static str {
                <$error>::category(self)
            }
        }
    };
}

pub(crate) use action_error;

impl ExecutorMetrics {
    /// Counts one actuating call (`actions_total{action, result}`). A refusal by RBAC also
    /// counts under `permission_denied_total{resource}` and logs the permission to grant
    /// (design D17).
    pub fn observe<T, E: ActionError>(&self, action: &str, res: &Result<T, E>) {
        let result = match res {
            Ok(_) => "ok",
            Err(e) => e.category(),
        };
        self.actions
            .get_or_create(&ActionLabels {
                action: action.to_owned(),
                result: result.to_owned(),
            })
            .inc();
        let Err(e) = res else {
            return;
        };
        let message = e.to_string();
        if let Some(p) = super::error::missing_permission(&message) {
            self.permission_denied
                .get_or_create(&ResourceLabel {
                    resource: p.resource.clone(),
                })
                .inc();
            tracing::error!(
                action,
                user = %p.user,
                verb = %p.verb,
                resource = %p.resource,
                api_group = %p.group,
                namespace = p.namespace.as_deref().unwrap_or("(cluster scope)"),
                "RBAC refused an actuating call: grant this permission to the agent's ServiceAccount"
            );
        }
    }
}
