//! Whether a policy's selector says what it selects: the checks of the CRD's CEL rules on
//! `spec`, `spec.selector` and its label selectors, for a policy the API server did not
//! check (stored before the CRD had the rules, or by a server that skipped them). A policy
//! with any of these problems selects no workload (kerf-decide's selection asks
//! [`selector_problems`]); the messages are the CEL rules' own.

use super::FieldError;
use crate::policy::{
    LABEL_SELECTOR_EMPTY_MESSAGE, LabelSelector, RightsizingPolicySpec,
    SELECTOR_ALL_WITH_TERMS_MESSAGE, SELECTOR_EMPTY_NAMESPACES_MESSAGE, SELECTOR_NO_TERM_MESSAGE,
    SELECTOR_REQUIRED_MESSAGE,
};

/// Every reason the policy's selector does not say what it selects, in field order; empty
/// when it does. Paths start with `spec.`.
pub fn selector_problems(spec: &RightsizingPolicySpec) -> Vec<FieldError> {
    let Some(s) = &spec.selector else {
        return vec![FieldError::new("spec.selector", SELECTOR_REQUIRED_MESSAGE)];
    };
    let path = "spec.selector";
    let all = s.all == Some(true);
    let other_terms =
        s.namespaces.is_some() || s.namespace_selector.is_some() || s.workload_selector.is_some();
    let mut out = Vec::new();
    if !all && !other_terms {
        out.push(FieldError::new(path, SELECTOR_NO_TERM_MESSAGE));
    }
    if all && other_terms {
        out.push(FieldError::new(path, SELECTOR_ALL_WITH_TERMS_MESSAGE));
    }
    if s.namespaces.as_ref().is_some_and(Vec::is_empty) {
        out.push(FieldError::new(
            format!("{path}.namespaces"),
            SELECTOR_EMPTY_NAMESPACES_MESSAGE,
        ));
    }
    let labels = [
        ("namespaceSelector", &s.namespace_selector),
        ("workloadSelector", &s.workload_selector),
    ];
    for (field, l) in labels {
        if l.as_ref().is_some_and(is_empty) {
            out.push(FieldError::new(
                format!("{path}.{field}"),
                LABEL_SELECTOR_EMPTY_MESSAGE,
            ));
        }
    }
    out
}

/// Whether the policy's selector says what it selects (no [`selector_problems`]; a good
/// selector costs no allocation).
pub fn selects_explicitly(spec: &RightsizingPolicySpec) -> bool {
    selector_problems(spec).is_empty()
}

/// A label selector with no matchLabels entry and no matchExpressions item.
fn is_empty(l: &LabelSelector) -> bool {
    l.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && l.match_expressions.as_ref().is_none_or(Vec::is_empty)
}
