//! The effective policy of a workload: every layer merged, each value with its layer.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use kerf_api::Resource;
use kerf_api::hub::PolicyDefaults;
use kerf_api::policy::{LimitsHandling, Mode, RightsizingPolicy, Strategy};
use kerf_api::wellknown::{
    ANNOTATION_ALLOW_DISRUPTION, ANNOTATION_MODE, ANNOTATION_POLICY, ANNOTATION_REVERT,
    ANNOTATION_STRATEGY,
};
use sha2::{Digest, Sha256};

use crate::duration::format_go_duration;
use crate::select::{Selection, WorkloadMeta, policy_name, select_policy};
use crate::window::WindowList;

mod layer;
pub mod unknown_keys;

pub use layer::UNBOUNDED_HOURS;

/// Where an effective value came from, lowest layer first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Layer {
    /// The defaults of the guardrails document.
    BuiltIn,
    /// The hub's fleet-wide defaults.
    HubFleet,
    /// The hub's defaults for this cluster.
    HubCluster,
    /// The chart's `clusterDefaults`.
    ClusterDefaults,
    /// The matching RightsizingPolicy.
    Policy,
    /// A workload annotation.
    Annotation,
    /// A hub override for this workload.
    HubOverride,
    /// The agent's scope: a workload outside it has every mode off while what the agent
    /// did to it winds down (its change finishes or rolls back, its fields are released).
    Scope,
}

/// A value and the layer that set it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// The layer that set it.
    pub layer: Layer,
}

impl<T> Sourced<T> {
    /// A value set by `layer`.
    pub fn new(value: T, layer: Layer) -> Self {
        Sourced { value, layer }
    }

    /// A built-in default.
    pub fn builtin(value: T) -> Self {
        Sourced::new(value, Layer::BuiltIn)
    }
}

/// Why a ratio did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RatioError {
    /// Not a decimal from 0 to 1.
    #[error("{0:?} is not a decimal from 0 to 1")]
    Invalid(String),
}

/// A decimal from 0 to 1 in parts per million ("0.7" = 700_000), exact for comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ratio(pub u32);

impl Ratio {
    /// Parts per million of 1.
    pub const ONE: Ratio = Ratio(1_000_000);

    /// Reads `"0.7"`, `"1"`, `"0"`, `"0.25"`; more than six decimals are an error.
    pub fn parse(s: &str) -> Result<Ratio, RatioError> {
        let bad = || RatioError::Invalid(s.to_owned());
        let (int, frac) = match s.split_once('.') {
            Some((i, f)) => (i, f),
            None => (s, ""),
        };
        if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        if s.contains('.') && frac.is_empty() {
            return Err(bad());
        }
        if !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let frac = frac.trim_end_matches('0');
        if frac.len() > 6 {
            return Err(bad());
        }
        let int: u32 = match int.trim_start_matches('0') {
            "" => 0,
            "1" => 1,
            _ => return Err(bad()),
        };
        let mut ppm: u32 = 0;
        for (i, b) in frac.bytes().enumerate() {
            ppm += u32::from(b - b'0') * 10u32.pow(5 - i as u32);
        }
        let total = int * 1_000_000 + ppm;
        if total > 1_000_000 {
            return Err(bad());
        }
        Ok(Ratio(total))
    }
}

impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let int = self.0 / 1_000_000;
        let frac = self.0 % 1_000_000;
        if frac == 0 {
            return write!(f, "{int}");
        }
        let digits = format!("{frac:06}");
        write!(f, "{int}.{}", digits.trim_end_matches('0'))
    }
}

/// One value per resource.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PerResource<T> {
    /// CPU.
    pub cpu: T,
    /// Memory.
    pub memory: T,
}

impl<T> PerResource<T> {
    /// The value for `r`.
    pub fn get(&self, r: Resource) -> &T {
        match r {
            Resource::Cpu => &self.cpu,
            Resource::Memory => &self.memory,
        }
    }

    /// The value for `r`, mutable.
    pub fn get_mut(&mut self, r: Resource) -> &mut T {
        match r {
            Resource::Cpu => &mut self.cpu,
            Resource::Memory => &mut self.memory,
        }
    }
}

/// The recommender settings of the effective policy (design D6). `None`: no layer sets the
/// field, so any value the recommendation echoes is acceptable.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct EffectiveSettings {
    /// Usage window.
    pub window: Option<Sourced<chrono::Duration>>,
    /// CPU percentile.
    pub cpu_percentile: Option<Sourced<u8>>,
    /// Memory percentile.
    pub memory_percentile: Option<Sourced<u8>>,
    /// Headroom percent.
    pub headroom_percent: Option<Sourced<u16>>,
    /// Limit handling.
    pub limits: Option<Sourced<LimitsHandling>>,
}

/// The CRD's range of `recommendation.cpuPercentile` and `memoryPercentile`.
pub const PERCENTILE_RANGE: RangeInclusive<u8> = 1..=100;

/// The CRD's range of `recommendation.headroomPercent`.
pub const HEADROOM_RANGE: RangeInclusive<u16> = 0..=1000;

/// An invalid value found while merging the layers: an annotation or a policy field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyProblem {
    /// The annotation (`kerf.getkerf.dev/mode`) or field path (`guardrails.cooldown`).
    pub field: String,
    /// The layer the value came from.
    pub layer: Layer,
    /// The value as written.
    pub value: String,
    /// What was used instead and why.
    pub message: String,
}

/// The effective policy of one workload.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectivePolicy {
    /// The winning RightsizingPolicy.
    pub policy_name: Option<String>,
    /// Mode per resource.
    pub mode: PerResource<Sourced<Mode>>,
    /// Configured apply strategy.
    pub strategy: Sourced<Strategy>,
    /// Annotation `kerf.getkerf.dev/allow-disruption: "true"`.
    pub allow_disruption: bool,
    /// Annotation `kerf.getkerf.dev/revert: "true"`: put the workload back to its template
    /// values and start no change until the annotation goes. Not part of the values hash.
    pub revert: bool,
    /// Minimum usage data before a change.
    pub learning_period: Sourced<chrono::Duration>,
    /// Minimum confidence of a recommendation.
    pub min_confidence: Sourced<Ratio>,
    /// Largest decrease of one step, in percent.
    pub max_change_percent: Sourced<u8>,
    /// Lowest CPU request, millicores.
    pub min_cpu: Sourced<i64>,
    /// Lowest memory request, bytes.
    pub min_memory: Sourced<i64>,
    /// Minimum time between changes.
    pub cooldown: Sourced<chrono::Duration>,
    /// Health watch length.
    pub watch_duration: Sourced<chrono::Duration>,
    /// OOM kills that roll memory back.
    pub oom_kills: Sourced<u32>,
    /// Restarts that roll back.
    pub restarts: Sourced<u32>,
    /// Throttled share that rolls CPU back.
    pub throttling_ratio: Sourced<Ratio>,
    /// How long a Deferred resize waits before the rollout fallback.
    pub fallback_after: Sourced<chrono::Duration>,
    /// Minimum time left in a maintenance window to start a deferred change.
    pub min_window_remaining: Sourced<chrono::Duration>,
    /// Maintenance windows, each validated once.
    pub maintenance_windows: Sourced<WindowList>,
    /// Freeze windows, each validated once.
    pub freeze_windows: Sourced<WindowList>,
    /// The canary of in-place changes (`apply.canary`); `None` resizes every pod at once.
    pub canary: Sourced<Option<crate::canary_policy::CanaryPolicy>>,
    /// HPA coordination on or off.
    pub hpa_coordination: Sourced<bool>,
    /// Lowest coordinated HPA target, percent.
    pub hpa_min_target: Sourced<i32>,
    /// Highest coordinated HPA target, percent.
    pub hpa_max_target: Sourced<i32>,
    /// Recommender settings.
    pub recommendation: EffectiveSettings,
    /// Invalid annotations and fields, each naming the field and its layer.
    pub problems: Vec<PolicyProblem>,
}

impl EffectivePolicy {
    /// The built-in defaults of the guardrails document (mode audit: no policy).
    pub fn builtin() -> EffectivePolicy {
        EffectivePolicy {
            policy_name: None,
            mode: PerResource {
                cpu: Sourced::builtin(Mode::Audit),
                memory: Sourced::builtin(Mode::Audit),
            },
            strategy: Sourced::builtin(Strategy::InPlace),
            allow_disruption: false,
            revert: false,
            learning_period: Sourced::builtin(chrono::Duration::hours(168)),
            min_confidence: Sourced::builtin(Ratio(700_000)),
            max_change_percent: Sourced::builtin(50),
            min_cpu: Sourced::builtin(10),
            min_memory: Sourced::builtin(32 * 1024 * 1024),
            cooldown: Sourced::builtin(chrono::Duration::hours(24)),
            watch_duration: Sourced::builtin(chrono::Duration::minutes(30)),
            oom_kills: Sourced::builtin(1),
            restarts: Sourced::builtin(3),
            throttling_ratio: Sourced::builtin(Ratio(250_000)),
            fallback_after: Sourced::builtin(chrono::Duration::minutes(10)),
            min_window_remaining: Sourced::builtin(chrono::Duration::minutes(30)),
            maintenance_windows: Sourced::builtin(WindowList::default()),
            freeze_windows: Sourced::builtin(WindowList::default()),
            canary: Sourced::builtin(None),
            hpa_coordination: Sourced::builtin(true),
            hpa_min_target: Sourced::builtin(50),
            hpa_max_target: Sourced::builtin(90),
            recommendation: EffectiveSettings::default(),
            problems: Vec::new(),
        }
    }

    /// Sha256 (hex) of the effective values, not their provenance (design D15): the
    /// layers, the policy's name and the problems do not enter it.
    pub fn values_hash(&self) -> String {
        let d = |v: &Sourced<chrono::Duration>| format_go_duration(v.value);
        let rec = &self.recommendation;
        let values = serde_json::json!({
            "mode": [self.mode.cpu.value.as_str(), self.mode.memory.value.as_str()],
            "strategy": self.strategy.value.as_str(),
            "allowDisruption": self.allow_disruption,
            "learningPeriod": d(&self.learning_period),
            "minConfidence": self.min_confidence.value.0,
            "maxChangePercent": self.max_change_percent.value,
            "minCPU": self.min_cpu.value,
            "minMemory": self.min_memory.value,
            "cooldown": d(&self.cooldown),
            "watchDuration": d(&self.watch_duration),
            "oomKills": self.oom_kills.value,
            "restarts": self.restarts.value,
            "throttlingRatio": self.throttling_ratio.value.0,
            "fallbackAfter": d(&self.fallback_after),
            "minWindowRemaining": d(&self.min_window_remaining),
            "maintenanceWindows": self.maintenance_windows.value,
            "freezeWindows": self.freeze_windows.value,
            "hpa": [
                serde_json::json!(self.hpa_coordination.value),
                serde_json::json!(self.hpa_min_target.value),
                serde_json::json!(self.hpa_max_target.value),
            ],
            "recommendation": {
                "window": rec.window.as_ref().map(|w| format_go_duration(w.value)),
                "cpuPercentile": rec.cpu_percentile.as_ref().map(|v| v.value),
                "memoryPercentile": rec.memory_percentile.as_ref().map(|v| v.value),
                "headroomPercent": rec.headroom_percent.as_ref().map(|v| v.value),
                "limits": rec.limits.as_ref().map(|v| v.value),
            },
        });
        let mut values = values;
        if let Some(c) = &self.canary.value {
            // Only when set, so the hash of a policy without a canary stays as it was.
            values["canary"] =
                serde_json::json!([format!("{:?}", c.size), format_go_duration(c.duration)]);
        }
        hex::encode(Sha256::digest(values.to_string().as_bytes()))
    }

    /// The mode of `r`.
    pub fn mode_of(&self, r: Resource) -> Mode {
        self.mode.get(r).value
    }
}

/// Everything the effective policy of one workload is made from.
#[derive(Clone, Copy, Debug)]
pub struct PolicyInputs<'a> {
    /// The workload: namespace, labels, kind, annotations.
    pub workload: &'a WorkloadMeta,
    /// Every RightsizingPolicy of the cluster (selection picks one, design D13).
    pub policies: &'a [RightsizingPolicy],
    /// The hub's fleet defaults.
    pub hub_fleet: Option<&'a PolicyDefaults>,
    /// The hub's defaults for this cluster.
    pub hub_cluster: Option<&'a PolicyDefaults>,
    /// The chart's `clusterDefaults`.
    pub cluster_defaults: Option<&'a PolicyDefaults>,
    /// The hub's override for this workload.
    pub hub_override: Option<&'a PolicyDefaults>,
}

/// Merges the layers of design section 4, lowest first: built-in defaults, hub fleet
/// defaults, hub cluster defaults, the chart's `clusterDefaults`, the selected
/// RightsizingPolicy, the workload's annotations, the hub's workload override. A higher
/// layer replaces each field it sets; every field keeps the layer that set it.
pub fn effective_policy(inputs: &PolicyInputs<'_>) -> EffectivePolicy {
    let mut ep = EffectivePolicy::builtin();
    let lower = [
        (Layer::HubFleet, inputs.hub_fleet),
        (Layer::HubCluster, inputs.hub_cluster),
        (Layer::ClusterDefaults, inputs.cluster_defaults),
    ];
    for (l, spec) in lower {
        if let Some(spec) = spec {
            layer::apply_layer(&mut ep, spec, l);
        }
    }
    let selection = select_policy(inputs.policies, inputs.workload);
    if let Some(p) = selection.policy() {
        ep.policy_name = Some(policy_name(p).to_owned());
        layer::apply_layer(&mut ep, &PolicyDefaults::from(&p.spec), Layer::Policy);
    }
    apply_annotations(&mut ep, &inputs.workload.annotations, &selection);
    if let Some(spec) = inputs.hub_override {
        layer::apply_layer(&mut ep, spec, Layer::HubOverride);
    }
    layer::check_hpa_bounds(&mut ep);
    ep
}

/// The annotation layer. An invalid value never widens: an invalid mode counts as `off`,
/// an invalid strategy keeps the strategy of the layers below, an allow-disruption value
/// other than "true" or "false" counts as "false", a pin to a missing policy sets `off`
/// (even over a valid mode annotation), a revert value other than "true" or "false" reverts
/// nothing and counts as mode `off`. Each is listed in `problems`, and so is every key under
/// Kerf's prefix that Kerf does not read (it changes nothing else).
fn apply_annotations(
    ep: &mut EffectivePolicy,
    annotations: &BTreeMap<String, String>,
    selection: &Selection<'_>,
) {
    let a = Layer::Annotation;
    if let Some(v) = annotations.get(ANNOTATION_MODE) {
        let mode = Mode::parse(v.trim()).unwrap_or_else(|| {
            ep.problem(
                ANNOTATION_MODE,
                a,
                v,
                "not off, audit or auto-patch; counts as off",
            );
            Mode::Off
        });
        ep.set_mode_both(mode, a);
    }
    if let Some(v) = annotations.get(ANNOTATION_STRATEGY) {
        match Strategy::parse(v.trim()) {
            Some(s) => ep.strategy = Sourced::new(s, a),
            None => {
                let keep = ep.strategy.value;
                let msg = format!("not in-place, rollout or deferred; the policy's {keep} applies");
                ep.problem(ANNOTATION_STRATEGY, a, v, &msg);
            }
        }
    }
    if let Some(v) = annotations.get(ANNOTATION_ALLOW_DISRUPTION) {
        match v.trim() {
            "true" => ep.allow_disruption = true,
            "false" => ep.allow_disruption = false,
            _ => ep.problem(
                ANNOTATION_ALLOW_DISRUPTION,
                a,
                v,
                "not \"true\" or \"false\"; counts as \"false\"",
            ),
        }
    }
    if let Some(v) = annotations.get(ANNOTATION_REVERT) {
        match v.trim() {
            "true" => ep.revert = true,
            "false" => {}
            _ => {
                let msg = "not \"true\" or \"false\"; nothing is reverted and mode counts as off";
                ep.problem(ANNOTATION_REVERT, a, v, msg);
                ep.set_mode_both(Mode::Off, a);
            }
        }
    }
    if let Selection::PinMissing(name) = selection {
        let msg = "no RightsizingPolicy has this name; mode counts as off";
        ep.problem(ANNOTATION_POLICY, a, name, msg);
        ep.set_mode_both(Mode::Off, a);
    }
    unknown_annotations(ep, annotations);
}

/// Keys under Kerf's prefix that Kerf does not read, each listed in `problems` with the
/// nearest known key. They change nothing else.
fn unknown_annotations(ep: &mut EffectivePolicy, annotations: &BTreeMap<String, String>) {
    for u in unknown_keys::unknown_keys(annotations.keys().map(String::as_str)) {
        let value = annotations.get(u.key).map_or("", String::as_str);
        let msg = format!(
            "not an annotation Kerf reads (the nearest known key is {}); ignored, it changes nothing",
            u.nearest
        );
        ep.problem(u.key, Layer::Annotation, value, &msg);
    }
}

impl EffectivePolicy {
    /// The policy of a workload that left the agent's scope: every mode `off`, set by
    /// [`Layer::Scope`], so that its applied change is released as when it leaves
    /// auto-patch (an approved one too) and nothing new starts.
    pub fn outside_scope(mut self) -> EffectivePolicy {
        self.set_mode_both(Mode::Off, Layer::Scope);
        self
    }

    fn set_mode_both(&mut self, mode: Mode, layer: Layer) {
        self.mode.cpu = Sourced::new(mode, layer);
        self.mode.memory = Sourced::new(mode, layer);
    }

    fn problem(&mut self, field: &str, layer: Layer, value: &str, message: &str) {
        self.problems.push(PolicyProblem {
            field: field.to_owned(),
            layer,
            value: value.to_owned(),
            message: message.to_owned(),
        });
    }
}
