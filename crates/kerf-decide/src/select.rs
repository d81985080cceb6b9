//! Which RightsizingPolicy decides for a workload (design D13).
//!
//! Every selector part that is set must match; `kinds` defaults to all three. A selector
//! must say what it selects (`kerf_api::validate::selector_problems`: a non-empty namespace,
//! namespace-label or workload-label term, or `all: true` alone): a policy whose selector
//! does not (absent, `{}`, `kinds` alone, an empty label selector) selects nothing, never
//! everything. The highest `priority` wins (absent = 0) and a tie goes to the smallest
//! name. The annotation `kerf.getkerf.dev/policy` pins a policy by name even if its
//! selector does not match; a pin to a policy that does not exist selects nothing and is
//! reported as an invalid annotation.

use std::collections::BTreeMap;

use kerf_api::policy::{
    LabelSelector, LabelSelectorOperator, LabelSelectorRequirement, PolicySelector,
    RightsizingPolicy, WorkloadKind,
};
use kerf_api::validate::selects_explicitly;
use kerf_api::wellknown::ANNOTATION_POLICY;

/// What selection needs to know about a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadMeta {
    /// The workload's namespace.
    pub namespace: String,
    /// The labels of that namespace.
    pub namespace_labels: BTreeMap<String, String>,
    /// The workload's kind.
    pub kind: WorkloadKind,
    /// The workload's name.
    pub name: String,
    /// The workload's labels.
    pub labels: BTreeMap<String, String>,
    /// The workload's annotations.
    pub annotations: BTreeMap<String, String>,
}

/// The outcome of policy selection.
#[derive(Clone, Copy, Debug)]
pub enum Selection<'a> {
    /// No policy matches and none is pinned.
    None,
    /// The policy with the highest priority among those whose selector matches.
    Matched(&'a RightsizingPolicy),
    /// The policy named by the `kerf.getkerf.dev/policy` annotation.
    Pinned(&'a RightsizingPolicy),
    /// The annotation pins a policy that does not exist (the name as written).
    PinMissing(&'a str),
}

impl<'a> Selection<'a> {
    /// The name of the selected policy, or of the missing pinned one.
    pub fn name(&self) -> Option<&'a str> {
        match self {
            Selection::Matched(p) | Selection::Pinned(p) => Some(policy_name(p)),
            Selection::PinMissing(n) => Some(n),
            Selection::None => None,
        }
    }

    /// The selected policy, if any.
    pub fn policy(&self) -> Option<&'a RightsizingPolicy> {
        match self {
            Selection::Matched(p) | Selection::Pinned(p) => Some(p),
            Selection::None | Selection::PinMissing(_) => None,
        }
    }
}

/// The name of a policy ("" when it has none).
pub fn policy_name(p: &RightsizingPolicy) -> &str {
    p.metadata.name.as_deref().unwrap_or("")
}

/// Selects the policy that decides for `w` among `policies`.
pub fn select_policy<'a>(policies: &'a [RightsizingPolicy], w: &'a WorkloadMeta) -> Selection<'a> {
    if let Some(pin) = w.annotations.get(ANNOTATION_POLICY) {
        return match policies.iter().find(|p| policy_name(p) == pin.as_str()) {
            Some(p) => Selection::Pinned(p),
            None => Selection::PinMissing(pin.as_str()),
        };
    }
    matching_policies(policies, w)
        .into_iter()
        .next()
        .map_or(Selection::None, Selection::Matched)
}

/// The policies whose selector matches `w`, the winner first: highest priority, then the
/// smallest name. A policy whose selector does not say what it selects matches nothing.
pub fn matching_policies<'a>(
    policies: &'a [RightsizingPolicy],
    w: &WorkloadMeta,
) -> Vec<&'a RightsizingPolicy> {
    let mut out: Vec<&RightsizingPolicy> =
        policies.iter().filter(|p| policy_selects(p, w)).collect();
    out.sort_by(|a, b| precedence(a, b));
    out
}

/// Whether `p`'s selector says what it selects and matches `w`.
pub fn policy_selects(p: &RightsizingPolicy, w: &WorkloadMeta) -> bool {
    selects_explicitly(&p.spec)
        && p.spec
            .selector
            .as_ref()
            .is_some_and(|s| selector_matches(s, w))
}

/// Orders policies by precedence: the higher priority first (absent = 0), then the smaller
/// name.
pub fn precedence(a: &RightsizingPolicy, b: &RightsizingPolicy) -> std::cmp::Ordering {
    let pa = a.spec.priority.unwrap_or(0);
    let pb = b.spec.priority.unwrap_or(0);
    pb.cmp(&pa).then_with(|| policy_name(a).cmp(policy_name(b)))
}

/// Whether every set part of `sel` matches `w` (the shape of the selector is
/// [`policy_selects`]'s business).
pub fn selector_matches(sel: &PolicySelector, w: &WorkloadMeta) -> bool {
    let namespaces = match sel.namespaces.as_deref() {
        None | Some([]) => true,
        Some(list) => list.contains(&w.namespace),
    };
    let kinds = match sel.kinds.as_deref() {
        None | Some([]) => true,
        Some(list) => list.contains(&w.kind),
    };
    let ns_labels = sel
        .namespace_selector
        .as_ref()
        .is_none_or(|s| label_selector_matches(s, &w.namespace_labels));
    let labels = sel
        .workload_selector
        .as_ref()
        .is_none_or(|s| label_selector_matches(s, &w.labels));
    namespaces && kinds && ns_labels && labels
}

/// Whether `labels` satisfy a Kubernetes label selector. An empty selector matches
/// everything.
pub fn label_selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    label_selector_matches_by(sel, |k| labels.get(k).map(String::as_str))
}

/// Whether the labels `label` looks up (the value of a key, if set) satisfy a Kubernetes
/// label selector: [`label_selector_matches`] for any map of labels.
pub fn label_selector_matches_by<'a>(
    sel: &LabelSelector,
    label: impl Fn(&str) -> Option<&'a str>,
) -> bool {
    let equal = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| label(k) == Some(v.as_str()));
    let expressions = sel
        .match_expressions
        .iter()
        .flatten()
        .all(|r| requirement_matches(r, label(&r.key)));
    equal && expressions
}

/// One requirement on the value of its key (`None`: the label is not set): `In` with no
/// values matches nothing, `NotIn` with no values matches everything;
/// `Exists`/`DoesNotExist` ignore values.
fn requirement_matches(r: &LabelSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or(&[]);
    let listed = |v: &str| values.iter().any(|x| x == v);
    match r.operator {
        LabelSelectorOperator::In => value.is_some_and(listed),
        LabelSelectorOperator::NotIn => value.is_none_or(|v| !listed(v)),
        LabelSelectorOperator::Exists => value.is_some(),
        LabelSelectorOperator::DoesNotExist => value.is_none(),
    }
}
