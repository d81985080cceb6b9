//! From Prometheus' answers to recommendations (pure): margins, rounding, floors,
//! coverage, confidence and the recommendation id.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use kerf_api::duration::{GoDuration, UnitDecimal};
use kerf_api::hub::Recommendation;
use kerf_api::policy::{LimitsHandling, RecommendationSettings};
use kerf_api::quantity::{Quantity, Resource, ResourceValues};
use kerf_api::rsr::{ContainerFlag, ContainerRecommendation, DataCoverage};
use sha2::{Digest, Sha256};

use super::query::{STAT_LABEL, WORKLOAD_LABEL};
use super::{PromSettings, Target};
use crate::settings::format_duration;

const MIB: u128 = 1 << 20;

/// What Prometheus said about one container of one workload over the window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ContainerUsage {
    /// The CPU percentile, in cores.
    pub cpu_cores: Option<f64>,
    /// Steps of the window with a CPU rate.
    pub cpu_steps: u64,
    /// The memory peak (or percentile), in bytes.
    pub memory_bytes: Option<f64>,
    /// Steps of the window with a memory sample.
    pub memory_steps: u64,
    /// OOM-killed in the window.
    pub oom_killed: bool,
    /// Throttled over the throttling window.
    pub throttled: bool,
}

/// Which query an answer is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The CPU percentile and count.
    Cpu,
    /// The memory peak (or percentile) and count.
    Memory,
    /// The flags.
    Flags,
}

/// Usage per (`Kind/name`, container).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage(pub BTreeMap<(String, String), ContainerUsage>);

impl Usage {
    /// Records one series of an answer; a series without the workload or container label,
    /// or with a value that is not a finite number, is left out.
    pub fn record(&mut self, answer: Answer, labels: &HashMap<String, String>, value: f64) {
        let (Some(workload), Some(container), Some(stat)) = (
            labels.get(WORKLOAD_LABEL),
            labels.get("container"),
            labels.get(STAT_LABEL),
        ) else {
            return;
        };
        if !value.is_finite() || value < 0.0 {
            return;
        }
        let u = self
            .0
            .entry((workload.clone(), container.clone()))
            .or_default();
        match (answer, stat.as_str()) {
            (Answer::Cpu, "value") => u.cpu_cores = Some(value),
            (Answer::Cpu, "count") => u.cpu_steps = value as u64,
            (Answer::Memory, "value") => u.memory_bytes = Some(value),
            (Answer::Memory, "count") => u.memory_steps = value as u64,
            (Answer::Flags, "oom") => u.oom_killed = true,
            (Answer::Flags, "throttled") => u.throttled = true,
            _ => {}
        }
    }

    fn get(&self, target: &Target, container: &str) -> Option<&ContainerUsage> {
        let key = format!("{}/{}", target.workload.kind, target.workload.name);
        self.0.get(&(key, container.to_owned()))
    }
}

/// CPU with the margin, rounded up to a whole millicore, at least the floor.
pub fn cpu_millicores(cores: f64, margin_percent: u16, floor: u32) -> u64 {
    let exact = cores * 1000.0 * (100.0 + f64::from(margin_percent)) / 100.0;
    // Round away float noise first (0.2 * 1.15 is 0.23000000000000004), then up.
    let m = ((exact * 1e6).round() / 1e6).ceil();
    (m as u64).max(u64::from(floor))
}

/// Memory with the margin, rounded up to a whole MiB, at least the floor.
pub fn memory_mib(bytes: f64, margin_percent: u16, floor_mib: u32) -> u64 {
    let bytes = bytes.round() as u128;
    let scaled = bytes * (100 + u128::from(margin_percent));
    let mib = scaled.div_ceil(100 * MIB);
    (mib as u64).max(u64::from(floor_mib))
}

/// The time covered by `steps` evaluation steps, at most the window.
pub fn covered(steps: u64, settings: &PromSettings) -> Duration {
    let secs = steps.saturating_mul(settings.step.as_secs());
    Duration::from_secs(secs.min(settings.window.as_secs()))
}

/// Confidence: the covered part of the window, rounded down to hundredths (`"0.14"`,
/// `"1"`), so it never claims more than the data shows.
pub fn confidence(covered: Duration, window: Duration) -> UnitDecimal {
    let hundredths = (u128::from(covered.as_secs()) * 100)
        .checked_div(u128::from(window.as_secs()))
        .unwrap_or(0)
        .min(100);
    if hundredths == 100 {
        UnitDecimal("1".to_owned())
    } else {
        UnitDecimal(format!("0.{hundredths:02}"))
    }
}

/// The settings echo: what the numbers were computed with. `headroomPercent` is written
/// only when CPU and memory have the same margin (one number cannot say two).
pub fn settings_echo(s: &PromSettings) -> RecommendationSettings {
    RecommendationSettings {
        window: Some(GoDuration(format_duration(s.window))),
        cpu_percentile: Some(s.cpu_percentile),
        memory_percentile: Some(s.memory_percentile),
        headroom_percent: (s.cpu_margin_percent == s.memory_margin_percent)
            .then_some(s.cpu_margin_percent),
        limits: Some(LimitsHandling::Keep),
    }
}

/// One container's recommendation and coverage; `None` without enough data of both
/// resources (less than `min_coverage`).
pub fn container_recommendation(
    name: &str,
    usage: &ContainerUsage,
    s: &PromSettings,
) -> Option<(ContainerRecommendation, Duration)> {
    let (cores, bytes) = (usage.cpu_cores?, usage.memory_bytes?);
    let covered = covered(usage.cpu_steps.min(usage.memory_steps), s);
    if covered < s.min_coverage || covered.is_zero() {
        return None;
    }
    let mut requests = ResourceValues::default();
    let cpu = cpu_millicores(cores, s.cpu_margin_percent, s.min_cpu_millicores);
    let memory = memory_mib(bytes, s.memory_margin_percent, s.min_memory_mib);
    requests.set(Resource::Cpu, Some(Quantity(format!("{cpu}m"))));
    requests.set(Resource::Memory, Some(Quantity(format!("{memory}Mi"))));
    let rec = ContainerRecommendation {
        name: name.to_owned(),
        requests,
        limits: ResourceValues::default(),
        remove_limits: Vec::new(),
        confidence: Some(confidence(covered, s.window)),
        flags: flags(usage),
    };
    Some((rec, covered))
}

/// The container's flags, in the contract's order.
fn flags(usage: &ContainerUsage) -> Vec<ContainerFlag> {
    [
        (usage.throttled, ContainerFlag::Throttled),
        (usage.oom_killed, ContainerFlag::OomKilled),
    ]
    .into_iter()
    .filter_map(|(set, flag)| set.then_some(flag))
    .collect()
}

/// A recommendation id that changes only with the workload, the recommended values and
/// flags, or the settings they were computed with: `prom-` and 16 hex digits of a SHA-256.
pub fn recommendation_id(
    target: &Target,
    containers: &[ContainerRecommendation],
    echo: &RecommendationSettings,
) -> String {
    let mut h = Sha256::new();
    let w = &target.workload;
    h.update(format!("{}/{}/{}\n", w.namespace, w.kind, w.name));
    for c in containers {
        let value = |r: Resource| c.requests.get(r).map_or("", |q| q.as_str()).to_owned();
        h.update(format!(
            "{} {} {} {:?}\n",
            c.name,
            value(Resource::Cpu),
            value(Resource::Memory),
            c.flags
        ));
    }
    h.update(serde_json::to_string(echo).unwrap_or_default());
    let digest = hex::encode(h.finalize());
    format!("prom-{}", &digest[..16])
}

/// The recommendation of one target; `None` when no container of it has enough data.
pub fn build(
    target: &Target,
    usage: &Usage,
    s: &PromSettings,
    now: DateTime<Utc>,
) -> Option<Recommendation> {
    let mut containers = Vec::new();
    let mut least = s.window;
    for name in &target.containers {
        let Some(u) = usage.get(target, name) else {
            continue;
        };
        if let Some((rec, covered)) = container_recommendation(name, u, s) {
            least = least.min(covered);
            containers.push(rec);
        }
    }
    if containers.is_empty() {
        return None;
    }
    let echo = settings_echo(s);
    Some(Recommendation {
        workload: target.workload.clone(),
        recommendation_id: recommendation_id(target, &containers, &echo),
        generated_at: now,
        confidence: confidence(least, s.window),
        data_coverage: DataCoverage {
            covered: GoDuration(format_duration(least)),
            window: GoDuration(format_duration(s.window)),
        },
        settings: echo,
        containers,
    })
}
