//! The PromQL the agent sends to `health.metricsURL` for the throttling ratio (rules RB-12,
//! RB-13, RB-14).
//!
//! The ratio is the share of a container's CFS periods that were throttled, summed over the
//! workload's pods, over the window from `start + throttlingDelay` to the evaluation time:
//!
//! ```text
//! sum(increase(container_cpu_cfs_throttled_periods_total{namespace="ns",pod=~"a|b",container="app"}[600s]))
//!   / sum(increase(container_cpu_cfs_periods_total{namespace="ns",pod=~"a|b",container="app"}[600s]))
//! ```
//!
//! The agent sends the two sums separately (the periods count gates the ratio, RB-15) and
//! evaluates them at `now`; the ratio query is for people reading the same numbers in
//! Prometheus.

use chrono::{DateTime, Duration, Utc};

/// cAdvisor's counter of CFS periods.
pub const METRIC_CFS_PERIODS: &str = "container_cpu_cfs_periods_total";

/// cAdvisor's counter of throttled CFS periods.
pub const METRIC_CFS_THROTTLED_PERIODS: &str = "container_cpu_cfs_throttled_periods_total";

/// Which pods a query covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodMatch {
    /// The workload's pods by name; each name is matched literally.
    Names(Vec<String>),
    /// A regular expression (RE2, anchored by Prometheus) over pod names, written as is.
    Regex(String),
}

impl PodMatch {
    /// The regular expression; `None` for an empty list of names.
    fn regex(&self) -> Option<String> {
        match self {
            PodMatch::Names(names) if names.is_empty() => None,
            PodMatch::Names(names) => {
                let mut sorted: Vec<String> = names.iter().map(|n| regex_escape(n)).collect();
                sorted.sort();
                sorted.dedup();
                Some(sorted.join("|"))
            }
            PodMatch::Regex(re) => Some(re.clone()),
        }
    }
}

/// The queries of one container's throttling window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThrottlingQueries {
    /// Throttled periods in the window.
    pub throttled_periods: String,
    /// CFS periods in the window.
    pub periods: String,
    /// The ratio, throttled over all periods.
    pub ratio: String,
}

/// The window of a throttling query at `now`: it starts `delay` after the change and is
/// `None` until that has passed (RB-14). Returns the start and the length in whole seconds
/// (at least 1).
pub fn throttling_window(
    change: DateTime<Utc>,
    delay: Duration,
    now: DateTime<Utc>,
) -> Option<(DateTime<Utc>, i64)> {
    let start = change + delay;
    (now > start).then(|| (start, (now - start).num_seconds().max(1)))
}

/// The queries for `container` of the pods `pods` in `namespace` over the last
/// `window_seconds`; `None` when `pods` names no pod.
pub fn throttling_queries(
    namespace: &str,
    pods: &PodMatch,
    container: &str,
    window_seconds: i64,
) -> Option<ThrottlingQueries> {
    let selector = format!(
        "{{namespace=\"{}\",pod=~\"{}\",container=\"{}\"}}",
        string_escape(namespace),
        string_escape(&pods.regex()?),
        string_escape(container)
    );
    let window = window_seconds.max(1);
    let sum = |metric: &str| format!("sum(increase({metric}{selector}[{window}s]))");
    let throttled_periods = sum(METRIC_CFS_THROTTLED_PERIODS);
    let periods = sum(METRIC_CFS_PERIODS);
    let ratio = format!("{throttled_periods} / {periods}");
    Some(ThrottlingQueries {
        throttled_periods,
        periods,
        ratio,
    })
}

/// Escapes a PromQL double-quoted string.
fn string_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes the RE2 metacharacters of a literal.
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
