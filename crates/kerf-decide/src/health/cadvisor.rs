//! The cAdvisor fallback (rule RB-17): reads the kubelet's `/metrics/cadvisor` text
//! format into CFS counters per container, and turns two scrapes into a throttling sample.
//!
//! Only the lines of `container_cpu_cfs_periods_total` and
//! `container_cpu_cfs_throttled_periods_total` are read; every other line is skipped
//! unread. A malformed line of those two metrics is an error naming its line number; the
//! parser never panics, whatever the input. Series without `namespace`, `pod` or
//! `container`, and the pod-level series (`container=""` or `"POD"`), are left out. Series
//! of the same container (an old cgroup next to the new one after a restart) are summed.

use std::collections::BTreeMap;
use std::iter::Peekable;
use std::str::Chars;

use chrono::{DateTime, Utc};

use super::ThrottlingSample;
use super::promql::{METRIC_CFS_PERIODS, METRIC_CFS_THROTTLED_PERIODS};

/// Longest excerpt of a bad line an error quotes, in characters.
const EXCERPT_CHARS: usize = 120;

/// Why cAdvisor metrics could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CadvisorError {
    /// A line of a CFS metric is not in the text format.
    #[error("cAdvisor metrics line {line}: {reason}: {excerpt:?}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: &'static str,
        /// The start of the line.
        excerpt: String,
    },
}

impl CadvisorError {
    /// A short label for metrics and logs.
    pub fn category(&self) -> &'static str {
        "CadvisorMalformed"
    }
}

/// One container of one pod.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CfsKey {
    /// Namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Container name.
    pub container: String,
}

/// The CFS counters of one container.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CfsCounters {
    /// `container_cpu_cfs_periods_total`.
    pub periods: u64,
    /// `container_cpu_cfs_throttled_periods_total`.
    pub throttled_periods: u64,
}

/// Reads a cAdvisor scrape into counters per container.
pub fn parse_cadvisor(text: &str) -> Result<BTreeMap<CfsKey, CfsCounters>, CadvisorError> {
    let mut out: BTreeMap<CfsKey, CfsCounters> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line
            .find(|c: char| c == '{' || c.is_whitespace())
            .unwrap_or(line.len());
        let (name, rest) = line.split_at(name_end);
        let throttled = match name {
            METRIC_CFS_PERIODS => false,
            METRIC_CFS_THROTTLED_PERIODS => true,
            _ => continue,
        };
        let bad = |reason| CadvisorError::Malformed {
            line: i + 1,
            reason,
            excerpt: line.chars().take(EXCERPT_CHARS).collect(),
        };
        let (labels, value) = parse_sample(rest).map_err(bad)?;
        let Some(key) = key_of(labels) else {
            continue;
        };
        let entry = out.entry(key).or_default();
        let slot = if throttled {
            &mut entry.throttled_periods
        } else {
            &mut entry.periods
        };
        *slot = slot.saturating_add(value);
    }
    Ok(out)
}

/// The throttling of `container` over the workload's `pods` between two scrapes: the
/// increase of each counter, summed over the pods. A pod missing from `before` (created
/// since) counts from zero; a counter lower than before (a reset) counts from zero too.
pub fn sample_from_scrapes(
    before: &BTreeMap<CfsKey, CfsCounters>,
    after: &BTreeMap<CfsKey, CfsCounters>,
    namespace: &str,
    pods: &[String],
    container: &str,
    window_start: DateTime<Utc>,
) -> ThrottlingSample {
    let increase = |now: u64, then: u64| if now >= then { now - then } else { now };
    let (mut periods, mut throttled) = (0u64, 0u64);
    for pod in pods {
        let key = CfsKey {
            namespace: namespace.to_owned(),
            pod: pod.clone(),
            container: container.to_owned(),
        };
        let Some(now) = after.get(&key) else {
            continue;
        };
        let then = before.get(&key).copied().unwrap_or_default();
        periods = periods.saturating_add(increase(now.periods, then.periods));
        throttled =
            throttled.saturating_add(increase(now.throttled_periods, then.throttled_periods));
    }
    ThrottlingSample {
        container: container.to_owned(),
        periods,
        throttled_periods: throttled.min(periods),
        window_start,
    }
}

fn key_of(mut labels: BTreeMap<String, String>) -> Option<CfsKey> {
    let container = labels.remove("container")?;
    if container.is_empty() || container == "POD" {
        return None;
    }
    let namespace = labels.remove("namespace").filter(|s| !s.is_empty())?;
    let pod = labels.remove("pod").filter(|s| !s.is_empty())?;
    Some(CfsKey {
        namespace,
        pod,
        container,
    })
}

/// Parses `{labels} value [timestamp]` (labels optional).
fn parse_sample(rest: &str) -> Result<(BTreeMap<String, String>, u64), &'static str> {
    let mut chars = rest.chars().peekable();
    let labels = if chars.peek() == Some(&'{') {
        chars.next();
        parse_labels(&mut chars)?
    } else {
        BTreeMap::new()
    };
    let tail: String = chars.collect();
    let mut fields = tail.split_whitespace();
    let value = fields.next().ok_or("missing value")?;
    if let Some(ts) = fields.next() {
        ts.parse::<i64>().map_err(|_| "bad timestamp")?;
    }
    if fields.next().is_some() {
        return Err("trailing text");
    }
    let v: f64 = value.parse().map_err(|_| "bad value")?;
    if !v.is_finite() || v < 0.0 {
        return Err("counter is negative or not finite");
    }
    Ok((labels, v as u64))
}

/// Parses `name="value",...}` after the opening brace.
fn parse_labels(chars: &mut Peekable<Chars<'_>>) -> Result<BTreeMap<String, String>, &'static str> {
    let mut labels = BTreeMap::new();
    loop {
        skip_spaces(chars);
        match chars.peek() {
            Some('}') => {
                chars.next();
                return Ok(labels);
            }
            None => return Err("unterminated labels"),
            _ => {}
        }
        let name = label_name(chars)?;
        skip_spaces(chars);
        if chars.next() != Some('=') {
            return Err("expected '=' after label name");
        }
        skip_spaces(chars);
        if chars.next() != Some('"') {
            return Err("expected '\"' before label value");
        }
        labels.insert(name, label_value(chars)?);
        skip_spaces(chars);
        match chars.next() {
            Some(',') => {}
            Some('}') => return Ok(labels),
            _ => return Err("expected ',' or '}' after label value"),
        }
    }
}

fn label_name(chars: &mut Peekable<Chars<'_>>) -> Result<String, &'static str> {
    let mut name = String::new();
    while let Some(&c) = chars.peek() {
        let ok = c == '_' || c.is_ascii_alphabetic() || (!name.is_empty() && c.is_ascii_digit());
        if !ok {
            break;
        }
        name.push(c);
        chars.next();
    }
    if name.is_empty() {
        return Err("bad label name");
    }
    Ok(name)
}

fn label_value(chars: &mut Peekable<Chars<'_>>) -> Result<String, &'static str> {
    let mut value = String::new();
    loop {
        match chars.next() {
            None => return Err("unterminated label value"),
            Some('"') => return Ok(value),
            Some('\\') => match chars.next() {
                Some('n') => value.push('\n'),
                Some('\\') => value.push('\\'),
                Some('"') => value.push('"'),
                _ => return Err("bad escape in label value"),
            },
            Some(c) => value.push(c),
        }
    }
}

fn skip_spaces(chars: &mut Peekable<Chars<'_>>) {
    while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
        chars.next();
    }
}
