//! Single-replica arithmetic (design D12; AP-44, AP-45, AP-48, AP-49, AP-50).
//!
//! A workload counts as single-replica when it is a Deployment or StatefulSet with one
//! replica, or when a PodDisruptionBudget selecting its pods would allow no disruption
//! with every selected pod healthy: `maxUnavailable` resolves to 0, or `minAvailable` to at
//! least the expected pods (PDB percentages round up, as the disruption controller does).
//!
//! A rollout keeps a Ready pod only for a Deployment (strategy RollingUpdate) or a DaemonSet
//! (updateStrategy RollingUpdate) whose `maxSurge` resolves to at least 1 and
//! `maxUnavailable` to 0. Percentages resolve as the controllers do: a Deployment against
//! `spec.replicas` (surge rounds up, unavailable rounds down); a DaemonSet against
//! `status.desiredNumberScheduled` (both round up); in both, 0 and 0 makes unavailable 1.
//! Absent fields take the API defaults: 25 % / 25 % for a Deployment, `maxSurge` 0 /
//! `maxUnavailable` 1 for a DaemonSet. A Recreate Deployment, an OnDelete DaemonSet and a
//! StatefulSet never qualify. A value that does not parse is read the restrictive way: a
//! PDB allows no disruption, a rollout does not keep a Ready pod.

use kerf_api::policy::WorkloadKind;

/// Why an int-or-percent value did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplicasError {
    /// Not an integer or a percentage.
    #[error("{0:?} is not a non-negative integer or percentage")]
    InvalidIntOrPercent(String),
}

/// An int-or-string field: a count or a percentage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    /// A count.
    Int(i64),
    /// A percentage.
    Percent(i64),
}

impl IntOrPercent {
    /// Reads `"1"`, `"25%"`.
    pub fn parse(s: &str) -> Result<IntOrPercent, ReplicasError> {
        let bad = || ReplicasError::InvalidIntOrPercent(s.to_owned());
        let t = s.trim();
        let (digits, percent) = match t.strip_suffix('%') {
            Some(d) => (d, true),
            None => (t, false),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let n: i64 = digits.parse().map_err(|_| bad())?;
        Ok(if percent {
            IntOrPercent::Percent(n)
        } else {
            IntOrPercent::Int(n)
        })
    }

    /// The value against `total`, rounding up or down for a percentage.
    pub fn resolve(self, total: i64, round_up: bool) -> i64 {
        match self {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => {
                let num = i128::from(p) * i128::from(total);
                let q = if round_up {
                    (num + 99).div_euclid(100)
                } else {
                    num.div_euclid(100)
                };
                i64::try_from(q).unwrap_or(i64::MAX)
            }
        }
    }
}

/// A PodDisruptionBudget that selects the workload's pods.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PdbInput {
    /// Its name.
    pub name: String,
    /// `spec.minAvailable` as written (`"1"`, `"50%"`).
    pub min_available: Option<String>,
    /// `spec.maxUnavailable` as written.
    pub max_unavailable: Option<String>,
    /// The pods it expects (`status.expectedPods`, or the workload's replicas).
    pub expected_pods: i64,
}

/// What single-replica safety reads about a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaInput {
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: WorkloadKind,
    /// `spec.replicas` (Deployment, StatefulSet); absent means 1.
    pub replicas: Option<i64>,
    /// `spec.strategy.type` of a Deployment (`RollingUpdate`, `Recreate`) or
    /// `spec.updateStrategy.type` of a DaemonSet or StatefulSet (`RollingUpdate`,
    /// `OnDelete`); absent means `RollingUpdate`.
    pub strategy_type: Option<String>,
    /// `rollingUpdate.maxSurge` as written (`"1"`, `"25%"`).
    pub max_surge: Option<String>,
    /// `rollingUpdate.maxUnavailable` as written.
    pub max_unavailable: Option<String>,
    /// `status.desiredNumberScheduled` of a DaemonSet.
    pub desired_number_scheduled: i64,
    /// PodDisruptionBudgets that select the workload's pods.
    pub pdbs: Vec<PdbInput>,
}

impl Default for ReplicaInput {
    fn default() -> Self {
        ReplicaInput {
            kind: WorkloadKind::Deployment,
            replicas: None,
            strategy_type: None,
            max_surge: None,
            max_unavailable: None,
            desired_number_scheduled: 0,
            pdbs: Vec::new(),
        }
    }
}

/// Whether the workload counts as single-replica (AP-44, AP-45).
pub fn is_single_replica(w: &ReplicaInput) -> bool {
    let one = matches!(w.kind, WorkloadKind::Deployment | WorkloadKind::StatefulSet)
        && w.replicas.unwrap_or(1) == 1;
    one || w.pdbs.iter().any(pdb_allows_no_disruption)
}

/// Whether `pdb` would allow no disruption with every selected pod healthy (rule
/// reading 13).
pub fn pdb_allows_no_disruption(pdb: &PdbInput) -> bool {
    let expected = pdb.expected_pods;
    if let Some(raw) = &pdb.max_unavailable {
        return IntOrPercent::parse(raw).map_or(true, |v| v.resolve(expected, true) <= 0);
    }
    if let Some(raw) = &pdb.min_available {
        return IntOrPercent::parse(raw).map_or(true, |v| v.resolve(expected, true) >= expected);
    }
    false
}

/// The resolved `(maxSurge, maxUnavailable)` of the workload's rolling update, or `None`
/// when it does not roll (Recreate, OnDelete, StatefulSet) or a value does not parse.
pub fn resolved_rolling_update(w: &ReplicaInput) -> Option<(i64, i64)> {
    let rolling = w
        .strategy_type
        .as_deref()
        .is_none_or(|t| t == "RollingUpdate");
    if !rolling {
        return None;
    }
    let parse = |v: &Option<String>, default: &str| {
        IntOrPercent::parse(v.as_deref().unwrap_or(default)).ok()
    };
    match w.kind {
        WorkloadKind::Deployment => {
            let total = w.replicas.unwrap_or(1);
            let surge = parse(&w.max_surge, "25%")?.resolve(total, true);
            let unavailable = parse(&w.max_unavailable, "25%")?.resolve(total, false);
            // The Deployment controller's fenceposts: both 0 would never progress.
            Some(fencepost(surge, unavailable))
        }
        WorkloadKind::DaemonSet => {
            let total = w.desired_number_scheduled;
            let surge = parse(&w.max_surge, "0")?.resolve(total, true);
            let unavailable = parse(&w.max_unavailable, "1")?.resolve(total, true);
            // The DaemonSet controller's fencepost: both 0 makes unavailable 1.
            Some(fencepost(surge, unavailable))
        }
        WorkloadKind::StatefulSet => None,
    }
}

/// The controllers' fencepost: a rolling update with both maxSurge and maxUnavailable at 0
/// would never progress, so maxUnavailable counts as 1.
fn fencepost(surge: i64, unavailable: i64) -> (i64, i64) {
    if surge == 0 && unavailable == 0 {
        (surge, 1)
    } else {
        (surge, unavailable)
    }
}

/// Whether a rollout of the workload keeps a Ready pod throughout (AP-48, AP-49, AP-50).
pub fn rollout_keeps_a_ready_pod(w: &ReplicaInput) -> bool {
    resolved_rolling_update(w).is_some_and(|(surge, unavailable)| surge >= 1 && unavailable == 0)
}
