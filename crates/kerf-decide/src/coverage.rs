//! What each RightsizingPolicy covers among the cluster's workloads: how many it matches
//! (its selector matches them, or they pin it by annotation), how many it governs (it is
//! their selected policy, see [`select_policy`]), and which other policies match some of
//! the same workloads and which one governs those. The agent writes the counts to the
//! policy's status and the overlaps to its `Overlap` condition.

use std::collections::BTreeMap;

use kerf_api::policy::RightsizingPolicy;

use crate::select::{Selection, WorkloadMeta, matching_policies, policy_name, select_policy};

/// The workloads a policy shares with one other policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shared {
    /// The other policy's priority (absent = 0).
    pub other_priority: i32,
    /// Workloads both policies match.
    pub workloads: u32,
    /// Of those, the ones this policy governs.
    pub governed_here: u32,
    /// Of those, the ones the other policy governs.
    pub governed_there: u32,
    /// Of those, the ones whose annotation pins a policy (priority did not decide).
    pub pinned: u32,
}

impl Shared {
    /// Shared workloads a third policy governs.
    pub fn governed_elsewhere(&self) -> u32 {
        self.workloads - self.governed_here - self.governed_there
    }
}

/// What one policy covers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyCoverage {
    /// The policy's priority (absent = 0).
    pub priority: i32,
    /// Workloads its selector matches or that pin it.
    pub matched: u32,
    /// Workloads it governs.
    pub governed: u32,
    /// The other policies that match some of the same workloads, by name.
    pub shared: BTreeMap<String, Shared>,
}

/// The coverage of every policy (an entry for each, even one that matches nothing).
pub fn coverage<'w>(
    policies: &[RightsizingPolicy],
    workloads: impl IntoIterator<Item = &'w WorkloadMeta>,
) -> BTreeMap<String, PolicyCoverage> {
    let priority_of = |p: &RightsizingPolicy| p.spec.priority.unwrap_or(0);
    let mut out: BTreeMap<String, PolicyCoverage> = policies
        .iter()
        .map(|p| {
            let c = PolicyCoverage {
                priority: priority_of(p),
                ..PolicyCoverage::default()
            };
            (policy_name(p).to_owned(), c)
        })
        .collect();
    for w in workloads {
        let selection = select_policy(policies, w);
        let governor = selection.policy().map(policy_name);
        let pinned = u32::from(matches!(selection, Selection::Pinned(_)));
        let mut matching = matching_policies(policies, w);
        if let Some(pinned) = selection.policy()
            && !matching.iter().any(|p| std::ptr::eq(*p, pinned))
        {
            matching.insert(0, pinned);
        }
        for p in &matching {
            let name = policy_name(p);
            let Some(c) = out.get_mut(name) else { continue };
            c.matched += 1;
            c.governed += u32::from(governor == Some(name));
            for other in matching.iter().filter(|o| !std::ptr::eq(**o, *p)) {
                let other_name = policy_name(other);
                let s = c.shared.entry(other_name.to_owned()).or_default();
                s.other_priority = priority_of(other);
                s.workloads += 1;
                s.governed_here += u32::from(governor == Some(name));
                s.governed_there += u32::from(governor == Some(other_name));
                s.pinned += pinned;
            }
        }
    }
    out
}

/// Most other policies an `Overlap` message names one by one.
pub const OVERLAP_NAMED_MAX: usize = 5;

/// The `Overlap` condition's message of a policy: each other policy that matches some of
/// the same workloads, how many, who governs them and why; `None` when no other policy
/// does.
pub fn overlap_message(c: &PolicyCoverage) -> Option<String> {
    if c.shared.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = c
        .shared
        .iter()
        .take(OVERLAP_NAMED_MAX)
        .map(|(other, s)| shared_part(c.priority, other, s))
        .collect();
    let rest = c.shared.len().saturating_sub(OVERLAP_NAMED_MAX);
    if rest > 0 {
        parts.push(format!(
            "and {rest} more {}",
            plural(rest, "policy", "policies")
        ));
    }
    Some(parts.join("; "))
}

fn shared_part(priority: i32, other: &str, s: &Shared) -> String {
    let mut who = Vec::new();
    if s.governed_here > 0 {
        who.push(format!("this policy governs {}", s.governed_here));
    }
    if s.governed_there > 0 {
        who.push(format!("{other} governs {}", s.governed_there));
    }
    if s.governed_elsewhere() > 0 {
        who.push(format!(
            "a policy of higher precedence or a pin governs {}",
            s.governed_elsewhere()
        ));
    }
    if s.pinned > 0 {
        who.push(format!("{} pinned by annotation", s.pinned));
    }
    let why = match priority.cmp(&s.other_priority) {
        std::cmp::Ordering::Greater => "this policy has the higher priority".to_owned(),
        std::cmp::Ordering::Less => format!("{other} has the higher priority"),
        std::cmp::Ordering::Equal => "same priority: the smaller name wins".to_owned(),
    };
    format!(
        "policy {other} (priority {}) also matches {} {}: {} ({why})",
        s.other_priority,
        s.workloads,
        plural(s.workloads as usize, "workload", "workloads"),
        who.join(", "),
    )
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}
