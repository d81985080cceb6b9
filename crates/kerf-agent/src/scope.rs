//! The agent's scope (docs/configuration.md#scoped-installs): the namespaces it manages, as
//! a list or a namespace label selector, and a workload label selector. Outside the scope
//! the agent makes no rsr, takes no pass, gives new pods no live values, and reports a
//! hub recommendation once as skipped `OutOfScope`.
//!
//! [`Scope::verdict`] is the pure check over what is known of a workload; [`in_cache`]
//! reads those facts from the caches. Label selectors are written in the syntax of
//! `kubectl get -l` (`team=a,tier in (web,api),!legacy`) and matched with the policy
//! selectors' matcher (`kerf_decide::select`).

use std::collections::BTreeMap;

use kerf_api::VecMap;
use kerf_api::policy::{LabelSelector, LabelSelectorOperator, LabelSelectorRequirement};
use kerf_decide::select::label_selector_matches_by;
use serde::Serialize;

use crate::cache::{CacheSet, WorkloadKey};

/// Longest label value, and longest name part of a label key.
const MAX_LABEL_NAME: usize = 63;
/// Longest prefix of a label key (a DNS subdomain).
const MAX_LABEL_PREFIX: usize = 253;

/// The workloads the agent manages. The default, every part empty, is every workload of
/// the cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scope {
    /// The namespaces managed (`scope.namespaces`); empty: every namespace.
    pub namespaces: Vec<String>,
    /// Only namespaces whose labels match (`scope.namespaceSelector`).
    pub namespace_selector: Option<Selector>,
    /// Only workloads whose labels match (`scope.workloadSelector`).
    pub workload_selector: Option<Selector>,
}

/// A label selector as written and as parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    /// The text as given (`team=a,!legacy`).
    pub text: String,
    /// Its requirements.
    pub selector: LabelSelector,
}

impl Serialize for Selector {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// Whether a workload is in the scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It is.
    In,
    /// It is not, and why (`namespace "b" is not in scope.namespaces (a)`).
    Out(String),
    /// A selector needs labels that are not known (the namespace or the workload is not
    /// in the caches): the agent acts as if it were out, and reports nothing.
    Unknown,
}

impl Scope {
    /// Whether the scope is the whole cluster (no part set).
    pub fn is_cluster(&self) -> bool {
        self.namespaces.is_empty()
            && self.namespace_selector.is_none()
            && self.workload_selector.is_none()
    }

    /// Whether the namespace list leaves `namespace` out: the first check of
    /// [`Scope::verdict`], with no message made.
    pub fn lists_out(&self, namespace: &str) -> bool {
        !self.namespaces.is_empty() && !self.namespaces.iter().any(|n| n == namespace)
    }

    /// Whether a workload of `namespace` is in the scope, given its namespace's labels and
    /// its own (`None`: not known). Out as soon as one known fact excludes it; unknown
    /// when a selector needs labels that are not known.
    pub fn verdict(
        &self,
        namespace: &str,
        namespace_labels: Option<&BTreeMap<String, String>>,
        workload_labels: Option<&VecMap<String, String>>,
    ) -> Verdict {
        if self.lists_out(namespace) {
            let list = self.namespaces.join(", ");
            return Verdict::Out(format!(
                "namespace {namespace:?} is not in scope.namespaces ({list})"
            ));
        }
        let namespace_ok = self.namespace_selector.as_ref().map(|s| {
            namespace_labels.map(|l| {
                let matched =
                    label_selector_matches_by(&s.selector, |k| l.get(k).map(String::as_str));
                (s, matched)
            })
        });
        if let Some(Some((s, false))) = namespace_ok {
            return Verdict::Out(format!(
                "the labels of namespace {namespace:?} do not match scope.namespaceSelector {:?}",
                s.text
            ));
        }
        let workload_ok = self.workload_selector.as_ref().map(|s| {
            workload_labels.map(|l| {
                let matched =
                    label_selector_matches_by(&s.selector, |k| l.get(k).map(String::as_str));
                (s, matched)
            })
        });
        if let Some(Some((s, false))) = workload_ok {
            return Verdict::Out(format!(
                "the workload's labels do not match scope.workloadSelector {:?}",
                s.text
            ));
        }
        if matches!(namespace_ok, Some(None)) || matches!(workload_ok, Some(None)) {
            return Verdict::Unknown;
        }
        Verdict::In
    }

    /// Whether a workload of `namespace` with these namespace and workload labels is in
    /// the scope.
    pub fn contains(
        &self,
        namespace: &str,
        namespace_labels: &BTreeMap<String, String>,
        workload_labels: &VecMap<String, String>,
    ) -> bool {
        self.verdict(namespace, Some(namespace_labels), Some(workload_labels)) == Verdict::In
    }
}

/// Whether the workload `key` is in `scope`, with its labels and its namespace's as the
/// caches hold them.
pub fn in_cache(scope: &Scope, cache: &CacheSet, key: &WorkloadKey) -> Verdict {
    if scope.is_cluster() {
        return Verdict::In;
    }
    let namespace = scope
        .namespace_selector
        .as_ref()
        .and_then(|_| cache.namespace(&key.namespace));
    let workload = scope
        .workload_selector
        .as_ref()
        .and_then(|_| cache.workload(key));
    scope.verdict(
        &key.namespace,
        namespace.as_ref().map(|n| &n.labels),
        workload.as_ref().map(|w| &w.labels),
    )
}

/// Parses a label selector in the syntax of `kubectl get -l`: requirements separated by
/// commas, each `key=value`, `key==value`, `key!=value`, `key in (v1,v2)`,
/// `key notin (v1,v2)`, `key` (the label is set) or `!key` (it is not). An empty text is
/// no selector. The error says which requirement is wrong and why.
pub fn parse_selector(text: &str) -> Result<Option<Selector>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let requirements = split_requirements(text)?
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            parse_requirement(r).map_err(|why| format!("requirement {} {:?}: {why}", i + 1, r))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(Selector {
        text: text.to_owned(),
        selector: LabelSelector {
            match_labels: None,
            match_expressions: Some(requirements),
        },
    }))
}

/// The requirements of `text`: split at the commas outside parentheses.
fn split_requirements(text: &str) -> Result<Vec<&str>, String> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0u32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' if depth > 0 => return Err("a '(' inside a value list".to_owned()),
            '(' => depth += 1,
            ')' if depth == 0 => return Err("a ')' without its '('".to_owned()),
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err("a '(' without its ')'".to_owned());
    }
    out.push(text[start..].trim());
    Ok(out)
}

/// One requirement, trimmed.
fn parse_requirement(r: &str) -> Result<LabelSelectorRequirement, String> {
    if r.is_empty() {
        return Err("empty (two commas in a row, or one at an end)".to_owned());
    }
    if let Some(c) = r.chars().find(|c| matches!(c, '<' | '>')) {
        return Err(format!(
            "operator {c} is not supported: use =, ==, !=, in, notin, a key alone or !key"
        ));
    }
    if let Some(key) = r.strip_prefix('!').filter(|rest| !rest.starts_with('=')) {
        return requirement(key.trim(), LabelSelectorOperator::DoesNotExist, None);
    }
    if let Some((key, value)) = r.split_once("!=") {
        return requirement(key, LabelSelectorOperator::NotIn, Some(vec![value]));
    }
    if let Some((key, value)) = r.split_once("==").or_else(|| r.split_once('=')) {
        return requirement(key, LabelSelectorOperator::In, Some(vec![value]));
    }
    if let Some((head, list)) = r.split_once('(') {
        return set_requirement(head, list);
    }
    if r.contains(char::is_whitespace) {
        return Err(
            "expected key=value, key!=value, key in (...), key notin (...), key or !key".to_owned(),
        );
    }
    requirement(r, LabelSelectorOperator::Exists, None)
}

/// `key in (v1,v2)` or `key notin (v1,v2)`: `head` is the part before `(`, `list` the
/// part after it.
fn set_requirement(head: &str, list: &str) -> Result<LabelSelectorRequirement, String> {
    let words: Vec<&str> = head.split_whitespace().collect();
    let operator = match words.as_slice() {
        [_, "in"] => LabelSelectorOperator::In,
        [_, "notin"] => LabelSelectorOperator::NotIn,
        _ => return Err("expected key in (...) or key notin (...)".to_owned()),
    };
    let Some(inner) = list.trim_end().strip_suffix(')') else {
        return Err("nothing may follow the ')'".to_owned());
    };
    let values: Vec<&str> = inner.split(',').collect();
    if values.iter().all(|v| v.trim().is_empty()) {
        return Err("the value list of in and notin must not be empty".to_owned());
    }
    requirement(words[0], operator, Some(values))
}

/// A requirement with its key and values checked as Kubernetes checks labels.
fn requirement(
    key: &str,
    operator: LabelSelectorOperator,
    values: Option<Vec<&str>>,
) -> Result<LabelSelectorRequirement, String> {
    let key = key.trim();
    check_key(key)?;
    let values = values
        .map(|vs| {
            vs.into_iter()
                .map(|v| {
                    let v = v.trim();
                    check_value(v).map(|()| v.to_owned())
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    Ok(LabelSelectorRequirement {
        key: key.to_owned(),
        operator,
        values,
    })
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name.
fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = key.rsplit_once('/').unwrap_or(("", key));
    let prefix_ok = key.rsplit_once('/').is_none()
        || (!prefix.is_empty()
            && prefix.len() <= MAX_LABEL_PREFIX
            && prefix.split('.').all(is_dns_label_part));
    if !prefix_ok || name.is_empty() || !is_label_name(name) {
        return Err(format!(
            "{key:?} is not a label key (an optional DNS subdomain and '/', then at most 63 \
             letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
        ));
    }
    Ok(())
}

/// A label value: empty, or a label name.
fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_name(value) {
        return Ok(());
    }
    Err(format!(
        "{value:?} is not a label value (at most 63 letters, digits, '-', '_' or '.', \
         starting and ending with a letter or digit)"
    ))
}

fn is_label_name(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    s.len() <= MAX_LABEL_NAME
        && edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn is_dns_label_part(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (1..=MAX_LABEL_NAME).contains(&s.len())
        && edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

#[cfg(test)]
mod tests;
