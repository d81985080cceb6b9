//! Whether a rollout has completed: all pods updated and available (design D23).
//!
//! Pure over the workload object as JSON, so the cache's slim objects and a live
//! `DynamicObject` both fit.

use kerf_api::WorkloadKind;
use serde_json::Value;

/// Where a workload's rollout stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RolloutState {
    /// Every pod is updated and available.
    Complete,
    /// The controller is still rolling.
    InProgress {
        /// Pods of the new revision.
        updated: i64,
        /// Pods wanted.
        desired: i64,
    },
    /// `Progressing=False` with reason `ProgressDeadlineExceeded` (Deployments):
    /// `Applied=False` with the message (design D23).
    DeadlineExceeded {
        /// The condition's message.
        message: String,
    },
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// The rollout state of a workload object (`metadata`, `spec`, `status`).
pub fn rollout_state(kind: WorkloadKind, obj: &Value) -> RolloutState {
    let status = &obj["status"];
    let observed = int(&status["observedGeneration"]) >= int(&obj["metadata"]["generation"]);
    let (updated, desired, done) = match kind {
        WorkloadKind::Deployment => {
            if let Some(message) = deadline_exceeded(status) {
                return RolloutState::DeadlineExceeded { message };
            }
            let desired = obj["spec"]["replicas"].as_i64().unwrap_or(1);
            let updated = int(&status["updatedReplicas"]);
            let done = updated == desired
                && int(&status["replicas"]) == desired
                && int(&status["availableReplicas"]) == desired;
            (updated, desired, done)
        }
        WorkloadKind::StatefulSet => {
            let desired = obj["spec"]["replicas"].as_i64().unwrap_or(1);
            let updated = int(&status["updatedReplicas"]);
            let same_revision = status["updateRevision"].is_string()
                && status["updateRevision"] == status["currentRevision"];
            let done = (same_revision || updated == desired)
                && int(&status["availableReplicas"]) == desired
                && int(&status["readyReplicas"]) == desired;
            (updated, desired, done)
        }
        WorkloadKind::DaemonSet => {
            let desired = int(&status["desiredNumberScheduled"]);
            let updated = int(&status["updatedNumberScheduled"]);
            let done = updated == desired && int(&status["numberAvailable"]) == desired;
            (updated, desired, done)
        }
    };
    if observed && done {
        RolloutState::Complete
    } else {
        RolloutState::InProgress { updated, desired }
    }
}

fn deadline_exceeded(status: &Value) -> Option<String> {
    status["conditions"].as_array()?.iter().find_map(|c| {
        (c["type"] == "Progressing"
            && c["status"] == "False"
            && c["reason"] == "ProgressDeadlineExceeded")
            .then(|| {
                c["message"]
                    .as_str()
                    .unwrap_or("ProgressDeadlineExceeded")
                    .to_owned()
            })
    })
}
