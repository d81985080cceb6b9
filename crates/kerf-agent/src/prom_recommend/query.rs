//! The PromQL text of one batch of targets in one namespace (pure).
//!
//! Pods are mapped to their workload by the names their controllers give them
//! (docs/prometheus-source.md, "Which pods belong to a workload"):
//! - Deployment: `<name>-<pod-template-hash>-<5 characters>`,
//! - StatefulSet: `<name>-<ordinal>`,
//! - DaemonSet: `<name>-<5 characters>`,
//!
//! where the API server cuts a generated name's base (`<name>-<hash>-` or `<name>-`) to 58
//! characters before it adds the 5 random characters. One `label_replace` per kind writes
//! `kerf_workload="<Kind>/<name>"`, so each query aggregates by workload and container.

use prometheus_http_query::Selector;

use super::{PromSettings, Target};

/// The characters of generated suffixes and pod template hashes (Kubernetes'
/// `k8s.io/apimachinery/pkg/util/rand`: no vowels, no `0`, `1`, `3`).
const SUFFIX_CHARS: &str = "[bcdfghjklmnpqrstvwxz2456789]";
/// Longest generated-name base the API server keeps (63 - 5 random characters).
const MAX_GENERATED_BASE: usize = 58;
/// Longest pod template hash (a 32-bit number, safe-encoded).
const MAX_HASH: usize = 10;
/// The CPU counter.
pub const CPU_METRIC: &str = "container_cpu_usage_seconds_total";
/// The memory gauge.
pub const MEMORY_METRIC: &str = "container_memory_working_set_bytes";
/// OOM kills per container (cAdvisor).
pub const OOM_METRIC: &str = "container_oom_events_total";
/// The last termination reason of a container (kube-state-metrics, where it runs).
pub const TERMINATED_METRIC: &str = "kube_pod_container_status_last_terminated_reason";
/// CFS periods in which the container was throttled (cAdvisor).
pub const THROTTLED_METRIC: &str = "container_cpu_cfs_throttled_periods_total";
/// CFS periods (cAdvisor).
pub const PERIODS_METRIC: &str = "container_cpu_cfs_periods_total";
/// Every metric the queries read, for the series count.
const SERIES_READ: [&str; 6] = [
    CPU_METRIC,
    MEMORY_METRIC,
    OOM_METRIC,
    TERMINATED_METRIC,
    THROTTLED_METRIC,
    PERIODS_METRIC,
];
/// The rate window of the CPU counter.
pub const RATE_WINDOW: &str = "5m";
/// The label the queries write the workload into.
pub const WORKLOAD_LABEL: &str = "kerf_workload";
/// The label that tells the value series from the count series of one answer.
pub const STAT_LABEL: &str = "kerf_stat";

/// The workload kinds whose pods this module can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PodNaming {
    /// `<name>-<ordinal>`.
    StatefulSet,
    /// `<name>-<5>`, cut to 58 + 5.
    DaemonSet,
    /// `<name>-<hash>-<5>`, cut to 58 + 5.
    Deployment,
}

impl PodNaming {
    /// The naming of a workload kind; `None` for a kind whose pods cannot be named.
    pub fn of_kind(kind: &str) -> Option<PodNaming> {
        match kind {
            "Deployment" => Some(PodNaming::Deployment),
            "StatefulSet" => Some(PodNaming::StatefulSet),
            "DaemonSet" => Some(PodNaming::DaemonSet),
            _ => None,
        }
    }

    fn kind(self) -> &'static str {
        match self {
            PodNaming::Deployment => "Deployment",
            PodNaming::StatefulSet => "StatefulSet",
            PodNaming::DaemonSet => "DaemonSet",
        }
    }
}

/// A Kubernetes object name as it may appear in a query: a DNS subdomain (lower-case
/// letters, digits, `-`, `.`), at most 253 characters. Anything else is never put in a
/// query.
pub fn is_queryable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// `name` as a regex that matches it literally (`.` as `[.]`, so no backslash has to be
/// escaped inside the PromQL string).
fn literal(name: &str) -> String {
    name.replace('.', "[.]")
}

/// What follows `<name>` in the pod names of a workload whose generated names are not cut;
/// `None` where the API server may cut them (long names).
fn suffix_of(naming: PodNaming, name: &str) -> Option<String> {
    match naming {
        PodNaming::StatefulSet => Some("-[0-9]+".to_owned()),
        PodNaming::DaemonSet => {
            (name.len() < MAX_GENERATED_BASE).then(|| format!("-{SUFFIX_CHARS}{{5}}"))
        }
        PodNaming::Deployment => (name.len() + 2 + MAX_HASH <= MAX_GENERATED_BASE)
            .then(|| format!("-{SUFFIX_CHARS}{{1,{MAX_HASH}}}-{SUFFIX_CHARS}{{5}}")),
    }
}

/// The regex of the pod names of one workload. Names are cut by bytes; they are ASCII.
pub fn pod_regex(naming: PodNaming, name: &str) -> String {
    let lit = literal(name);
    if let Some(suffix) = suffix_of(naming, name) {
        return format!("{lit}{suffix}");
    }
    if naming == PodNaming::Deployment && name.len() + 1 < MAX_GENERATED_BASE {
        // The base `<name>-<hash>-` is whole (a hash short enough) or cut inside the hash.
        let kept = MAX_GENERATED_BASE - name.len() - 1;
        return format!(
            "{lit}-(?:{SUFFIX_CHARS}{{1,{MAX_HASH}}}-|{SUFFIX_CHARS}{{{kept}}}){SUFFIX_CHARS}{{5}}"
        );
    }
    // The base is cut inside `<name>-`: the pod name is its first 58 characters and 5
    // random ones.
    let base = format!("{name}-");
    format!(
        "{}{SUFFIX_CHARS}{{5}}",
        literal(&base[..MAX_GENERATED_BASE.min(base.len())])
    )
}

/// The text of the three queries of one batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchQueries {
    /// The namespace.
    pub namespace: String,
    /// The alternation of the containers' names.
    pub containers: String,
    /// The alternation of the pod regexes of every target.
    pub pods: String,
    /// CPU: the percentile (`kerf_stat="value"`) and the number of steps with data
    /// (`kerf_stat="count"`), per `kerf_workload` and `container`.
    pub cpu: String,
    /// Memory: the peak or percentile and the number of steps with data.
    pub memory: String,
    /// Flags: `kerf_stat="oom"` where a container was OOM-killed in the window,
    /// `kerf_stat="throttled"` where its throttled share of CFS periods over the throttling
    /// window reaches the threshold.
    pub flags: String,
}

impl BatchQueries {
    /// The queries of `targets`, all in `namespace`, all with a pod naming and queryable
    /// names (the caller filters).
    pub fn new(namespace: &str, targets: &[(&Target, PodNaming)], s: &PromSettings) -> Self {
        let relabel = Relabel::new(targets);
        let containers = union(targets.iter().flat_map(|(t, _)| t.containers.iter()));
        let matchers = format!(
            "namespace=\"{namespace}\",container!=\"\",container!=\"POD\",container=~\"{containers}\",pod=~\"{}\"",
            relabel.all_pods
        );
        let cpu_selector = format!("{CPU_METRIC}{{{matchers}}}");
        let memory_selector = format!("{MEMORY_METRIC}{{{matchers}}}");
        let window = seconds(s.window);
        let range = format!("[{window}:{}]", seconds(s.step));
        let by = format!("max by ({WORKLOAD_LABEL}, container)");
        let cpu_usage = format!(
            "{by} ({})",
            relabel.apply(&format!("rate({cpu_selector}[{RATE_WINDOW}])"))
        );
        let memory_usage = format!("{by} ({})", relabel.apply(&memory_selector));
        let cpu_value = format!(
            "quantile_over_time({}, {cpu_usage}{range})",
            fraction(s.cpu_percentile)
        );
        let memory_value = if s.memory_percentile >= 100 {
            format!(
                "{by} ({})",
                relabel.apply(&format!("max_over_time({memory_selector}[{window}])"))
            )
        } else {
            format!(
                "quantile_over_time({}, {memory_usage}{range})",
                fraction(s.memory_percentile)
            )
        };
        BatchQueries {
            cpu: with_count(&cpu_value, &format!("count_over_time({cpu_usage}{range})")),
            memory: with_count(
                &memory_value,
                &format!("count_over_time({memory_usage}{range})"),
            ),
            flags: flags_query(&relabel, &matchers, s),
            namespace: namespace.to_owned(),
            containers,
            pods: relabel.all_pods,
        }
    }

    /// The raw series the queries read, as selectors of the series endpoint.
    pub fn selectors(&self) -> [Selector<'_>; 6] {
        SERIES_READ.map(|metric| {
            Selector::new()
                .metric(metric)
                .eq("namespace", &self.namespace)
                .ne("container", "")
                .ne("container", "POD")
                .regex_eq("container", &self.containers)
                .regex_eq("pod", &self.pods)
        })
    }
}

/// The flags query: OOM kills in the window from cAdvisor's counter or kube-state-metrics'
/// last termination reason, and the throttled share of CFS periods, summed over the pods,
/// over the throttling window.
fn flags_query(relabel: &Relabel, matchers: &str, s: &PromSettings) -> String {
    let window = seconds(s.window);
    let recent = seconds(s.throttled_window);
    let max = format!("max by ({WORKLOAD_LABEL}, container)");
    let sum = format!("sum by ({WORKLOAD_LABEL}, container)");
    let oom_events = format!(
        "{max} ({})",
        relabel.apply(&format!(
            "increase({OOM_METRIC}{{{matchers}}}[{window}]) > 0"
        ))
    );
    let oom_reason = format!(
        "{max} ({})",
        relabel.apply(&format!(
            "max_over_time({TERMINATED_METRIC}{{{matchers},reason=\"OOMKilled\"}}[{window}]) > 0"
        ))
    );
    let periods = |metric: &str| {
        format!(
            "{sum} ({})",
            relabel.apply(&format!("increase({metric}{{{matchers}}}[{recent}])"))
        )
    };
    let throttled = format!(
        "{} / {} >= {}",
        periods(THROTTLED_METRIC),
        periods(PERIODS_METRIC),
        fraction(s.throttled_percent)
    );
    format!(
        "label_replace({oom_events} or {oom_reason}, \"{STAT_LABEL}\", \"oom\", \"\", \"\") or label_replace({throttled}, \"{STAT_LABEL}\", \"throttled\", \"\", \"\")"
    )
}

/// A duration in whole seconds as PromQL writes it.
fn seconds(d: std::time::Duration) -> String {
    format!("{}s", d.as_secs().max(1))
}

/// A percentile as the fraction `quantile_over_time` takes (`90` → `0.9`).
fn fraction(percentile: u8) -> String {
    let p = percentile.clamp(1, 100);
    if p == 100 {
        "1".to_owned()
    } else {
        format!("{}", f64::from(p) / 100.0)
    }
}

/// Both series of one answer, told apart by `kerf_stat`.
fn with_count(value: &str, count: &str) -> String {
    format!(
        "label_replace({value}, \"{STAT_LABEL}\", \"value\", \"\", \"\") or label_replace({count}, \"{STAT_LABEL}\", \"count\", \"\", \"\")"
    )
}

/// An alternation of literal names, sorted and without repeats.
fn union<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let mut v: Vec<String> = names.map(|n| literal(n)).collect();
    v.sort();
    v.dedup();
    v.join("|")
}

/// The `label_replace` steps (regex, replacement) of a batch, in the order they apply.
#[cfg(test)]
pub(crate) fn relabel_steps(targets: &[(&Target, PodNaming)]) -> Vec<(String, String)> {
    Relabel::new(targets).steps
}

/// The `label_replace` chain that writes `kerf_workload`.
struct Relabel {
    /// (regex, replacement) in the order they are applied: a later match wins.
    steps: Vec<(String, String)>,
    /// The alternation of every pod regex, for the selectors.
    all_pods: String,
}

impl Relabel {
    /// One step per kind whose names capture as `$1` (longer names first in the
    /// alternation, so the more specific name wins), then one step per name the API server
    /// cuts, with the workload written literally. Kinds apply in the order StatefulSet,
    /// DaemonSet, Deployment.
    fn new(targets: &[(&Target, PodNaming)]) -> Self {
        let mut sorted: Vec<(PodNaming, &str)> = targets
            .iter()
            .map(|(t, n)| (*n, t.workload.name.as_str()))
            .collect();
        sorted.sort_by(|a, b| (a.0, b.1.len(), a.1).cmp(&(b.0, a.1.len(), b.1)));
        sorted.dedup();
        let mut steps = Vec::new();
        let mut cut_steps = Vec::new();
        let mut all = Vec::new();
        for naming in [
            PodNaming::StatefulSet,
            PodNaming::DaemonSet,
            PodNaming::Deployment,
        ] {
            let mut names = Vec::new();
            for (_, name) in sorted.iter().filter(|(n, _)| *n == naming) {
                let regex = pod_regex(naming, name);
                all.push(regex.clone());
                match suffix_of(naming, name) {
                    Some(_) => names.push(literal(name)),
                    None => cut_steps.push((regex, format!("{}/{name}", naming.kind()))),
                }
            }
            if let (false, Some(suffix)) = (names.is_empty(), suffix_of(naming, "")) {
                let regex = format!("({}){suffix}", names.join("|"));
                steps.push((regex, format!("{}/$1", naming.kind())));
            }
        }
        steps.extend(cut_steps);
        Relabel {
            steps,
            all_pods: all.join("|"),
        }
    }

    fn apply(&self, inner: &str) -> String {
        self.steps
            .iter()
            .fold(inner.to_owned(), |acc, (regex, to)| {
                format!(
                    "label_replace({acc}, \"{WORKLOAD_LABEL}\", \"{to}\", \"pod\", \"{regex}\")"
                )
            })
    }
}
