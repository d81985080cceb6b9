//! The savings report (`kerf-agent report`, `GET /report`): per namespace and for the
//! cluster, the CPU and memory requested now, what the hub recommends, what Kerf's live
//! changes moved, and what is held back and why. The JSON schema is documented in
//! `docs/report.md`; [`SCHEMA_VERSION`] changes with any incompatible change to it.
//!
//! [`compute::build`] is a pure function of the workloads and their rsrs; [`table`] words
//! a report for people; [`source`] reads the caches, serves `/report` and runs the command.

use chrono::{DateTime, Utc};
use kerf_api::Resource;
use kerf_decide::duration::Rfc3339;
use serde::{Deserialize, Serialize};

pub mod compute;
pub mod source;
pub mod table;

#[cfg(test)]
mod tests;

/// The version of the report's JSON schema.
pub const SCHEMA_VERSION: u32 = 1;

/// The report: totals for the cluster and per namespace, and one line per workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub version: u32,
    /// When the report was made, RFC 3339 UTC in whole seconds.
    #[serde(serialize_with = "whole_seconds")]
    pub generated_at: DateTime<Utc>,
    /// The units of every amount.
    pub units: Units,
    /// The whole cluster.
    pub cluster: Totals,
    /// Per namespace, by name.
    pub namespaces: Vec<NamespaceTotals>,
    /// Per workload, by namespace, kind and name.
    pub workloads: Vec<WorkloadLine>,
    /// Inputs that could not be read (a quantity that does not parse, an rsr that does not
    /// convert), each naming its object; what they held counts as absent.
    pub problems: Vec<String>,
}

/// Writes a time as every Kerf output does ([`Rfc3339`]).
fn whole_seconds<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&Rfc3339(*t))
}

/// The units of the amounts: CPU in millicores, memory in bytes (exact integers).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Units {
    /// `millicores`.
    pub cpu: String,
    /// `bytes`.
    pub memory: String,
}

impl Default for Units {
    fn default() -> Self {
        Units {
            cpu: "millicores".to_owned(),
            memory: "bytes".to_owned(),
        }
    }
}

/// Totals over a set of workloads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Workloads counted.
    pub workloads: u32,
    /// Of them, those with a recommendation (an rsr).
    pub recommended_workloads: u32,
    /// CPU, in millicores.
    pub cpu: ResourceTotals,
    /// Memory, in bytes.
    pub memory: ResourceTotals,
    /// The savings held back, by reason (sorted by reason).
    pub held_back: Vec<HeldBack>,
}

/// The totals of one namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceTotals {
    /// The namespace.
    pub namespace: String,
    /// Its totals.
    #[serde(flatten)]
    pub totals: Totals,
}

/// Amounts of one resource, each already multiplied by the replicas.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTotals {
    /// The requests the pods run now, summed over containers.
    pub requested: i64,
    /// The requests with the hub's recommendation (a container without one at `requested`).
    pub recommended: i64,
    /// `requested - recommended`, and its split.
    pub savings: Split,
    /// What the live changes made by Kerf moved (their `from - to`).
    pub applied: Split,
    /// The part of `savings` not in effect: every held-back reason together, `Applying`
    /// (going in now) included.
    pub held_back: Split,
}

/// An amount and its split into what goes down and what goes up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    /// `decrease - increase`: positive saves.
    pub net: i64,
    /// Lowered requests, summed (zero or more).
    pub decrease: i64,
    /// Raised requests, summed (zero or more).
    pub increase: i64,
}

impl Split {
    /// A split of `decrease` and `increase`.
    pub fn new(decrease: i64, increase: i64) -> Split {
        Split {
            net: decrease.saturating_sub(increase),
            decrease,
            increase,
        }
    }

    /// The split of moving from `from` to `to` (positive when `to` is lower).
    pub fn between(from: i64, to: i64) -> Split {
        Split::new(
            from.saturating_sub(to).max(0),
            to.saturating_sub(from).max(0),
        )
    }

    /// `self` and `other` added.
    pub fn plus(self, other: Split) -> Split {
        Split::new(
            self.decrease.saturating_add(other.decrease),
            self.increase.saturating_add(other.increase),
        )
    }

    /// `self` multiplied by `n` replicas.
    pub fn times(self, n: i64) -> Split {
        Split::new(
            self.decrease.saturating_mul(n),
            self.increase.saturating_mul(n),
        )
    }

    /// Whether nothing moves.
    pub fn is_zero(&self) -> bool {
        self.decrease == 0 && self.increase == 0
    }
}

/// The savings held back for one reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldBack {
    /// The reason, as the rsr status names it (see `docs/report.md`).
    pub reason: String,
    /// Workloads with some savings held back for it.
    pub workloads: u32,
    /// CPU held back, in millicores.
    pub cpu: Split,
    /// Memory held back, in bytes.
    pub memory: Split,
}

/// One workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadLine {
    /// Namespace.
    pub namespace: String,
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Pods the amounts count: `spec.replicas` (DaemonSet: pods scheduled).
    pub replicas: i64,
    /// Whether the hub recommends for it (it has an rsr).
    pub recommended: bool,
    /// The rsr's mode column (`status.summary.mode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The rsr's phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// CPU, in millicores.
    pub cpu: WorkloadResource,
    /// Memory, in bytes.
    pub memory: WorkloadResource,
}

impl WorkloadLine {
    /// The amounts of `r`.
    pub fn get(&self, r: Resource) -> &WorkloadResource {
        match r {
            Resource::Cpu => &self.cpu,
            Resource::Memory => &self.memory,
        }
    }
}

/// The amounts of one resource of one workload.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadResource {
    /// Requested now, times the replicas.
    pub requested: i64,
    /// Recommended, times the replicas.
    pub recommended: i64,
    /// `requested - recommended`, split.
    pub savings: Split,
    /// What Kerf's live change moved, times the replicas.
    pub applied: Split,
    /// Why `savings` is not in effect, when it is not zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_back: Option<String>,
}
