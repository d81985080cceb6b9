//! Merging one layer (a policy spec, hub defaults, chart defaults, a hub override) into
//! the effective policy, with the rules for values that do not parse.
//!
//! A value that does not parse never widens what the agent may do (design D13):
//! - a field that holds changes back (learningPeriod, cooldown, minWindowRemaining,
//!   minConfidence, maxChangePercent, the HPA bounds) takes the value that holds back the
//!   most: [`UNBOUNDED_HOURS`] for the durations, "1" for minConfidence, 1 for
//!   maxChangePercent, an empty HPA range;
//! - a field whose extreme would itself move values or undo changes (minCPU, minMemory,
//!   the health-watch thresholds, watchDuration, fallbackAfter) keeps the value of the
//!   layers below, ultimately the built-in default;
//! - a recommender window that does not parse is kept as 0s, and a percentile or headroom
//!   outside the CRD's range is kept as written; neither matches any echo, so every
//!   recommendation is stale until it is fixed;
//! - an invalid maintenance or freeze window (bad schedule, time zone, duration, start or
//!   end) is kept and reads as closed or open (AP-33, AP-39).
//!
//! Every such value is listed in `problems` with its field path and layer.

use chrono::Duration;
use kerf_api::Resource;
use kerf_api::hub::PolicyDefaults;
use kerf_api::policy::{
    ApplySettings, Guardrails, HpaSettings, RecommendationSettings, RollbackSettings,
};
use kerf_api::{GoDuration, Quantity, UnitDecimal};

use super::{EffectivePolicy, HEADROOM_RANGE, Layer, PERCENTILE_RANGE, Ratio, Sourced};
use crate::duration::parse_go_duration;
use crate::quantity::parse_quantity;
use crate::window::{WindowError, WindowList};

/// The hours a gating duration takes when its value does not parse (100 years).
pub const UNBOUNDED_HOURS: i64 = 876_000;

/// Most maintenance or freeze windows a list may hold.
const MAX_WINDOWS: usize = 16;

/// Merges `spec`, set by `layer`, over `ep`.
pub(super) fn apply_layer(ep: &mut EffectivePolicy, spec: &PolicyDefaults, layer: Layer) {
    for r in Resource::ALL {
        let per = spec
            .resources
            .as_ref()
            .and_then(|m| match r {
                Resource::Cpu => m.cpu.as_ref(),
                Resource::Memory => m.memory.as_ref(),
            })
            .and_then(|m| m.mode);
        if let Some(mode) = per.or(spec.mode) {
            *ep.mode.get_mut(r) = Sourced::new(mode, layer);
        }
    }
    if let Some(rec) = &spec.recommendation {
        apply_recommendation(ep, rec, layer);
    }
    if let Some(g) = &spec.guardrails {
        apply_guardrails(ep, g, layer);
    }
    if let Some(a) = &spec.apply {
        apply_apply(ep, a, layer);
    }
    if let Some(h) = &spec.hpa {
        apply_hpa(ep, h, layer);
    }
}

/// Which side an unparsable duration falls to.
#[derive(Clone, Copy)]
enum OnError {
    /// The duration holds changes back: take [`UNBOUNDED_HOURS`].
    Unbounded,
    /// Keep the value of the layers below.
    KeepLower,
}

/// Merges one duration field.
fn merge_duration(
    ep: &mut EffectivePolicy,
    slot: fn(&mut EffectivePolicy) -> &mut Sourced<Duration>,
    field: &str,
    raw: Option<&GoDuration>,
    layer: Layer,
    on_error: OnError,
) {
    let Some(raw) = raw else { return };
    let parsed = parse_go_duration(raw.as_str()).map_err(|e| e.to_string());
    let parsed = parsed.and_then(|d| {
        if d < Duration::zero() {
            Err(format!("negative duration {:?}", raw.as_str()))
        } else {
            Ok(d)
        }
    });
    match (parsed, on_error) {
        (Ok(d), _) => *slot(ep) = Sourced::new(d, layer),
        (Err(e), OnError::Unbounded) => {
            let msg = format!("{e}; counts as {UNBOUNDED_HOURS}h until it is fixed");
            ep.problem(field, layer, raw.as_str(), &msg);
            *slot(ep) = Sourced::new(Duration::hours(UNBOUNDED_HOURS), layer);
        }
        (Err(e), OnError::KeepLower) => {
            let msg = format!("{e}; the value of the layers below applies");
            ep.problem(field, layer, raw.as_str(), &msg);
        }
    }
}

/// Merges one ratio field; `on_error` is the value an unparsable ratio takes (None: keep
/// the layers below).
fn merge_ratio(
    ep: &mut EffectivePolicy,
    slot: fn(&mut EffectivePolicy) -> &mut Sourced<Ratio>,
    field: &str,
    raw: Option<&UnitDecimal>,
    layer: Layer,
    on_error: Option<Ratio>,
) {
    let Some(raw) = raw else { return };
    match (Ratio::parse(raw.as_str()), on_error) {
        (Ok(r), _) => *slot(ep) = Sourced::new(r, layer),
        (Err(e), Some(fallback)) => {
            ep.problem(
                field,
                layer,
                raw.as_str(),
                &format!("{e}; counts as \"{fallback}\""),
            );
            *slot(ep) = Sourced::new(fallback, layer);
        }
        (Err(e), None) => {
            let msg = format!("{e}; the value of the layers below applies");
            ep.problem(field, layer, raw.as_str(), &msg);
        }
    }
}

/// Merges a minimum (minCPU, minMemory); an unparsable or negative quantity keeps the
/// layers below.
fn merge_minimum(
    ep: &mut EffectivePolicy,
    resource: Resource,
    field: &str,
    raw: Option<&Quantity>,
    layer: Layer,
) {
    let Some(raw) = raw else { return };
    let parsed = parse_quantity(resource, raw.as_str()).map_err(|e| e.to_string());
    let parsed = parsed.and_then(|v| {
        if v < 0 {
            Err(format!("negative quantity {:?}", raw.as_str()))
        } else {
            Ok(v)
        }
    });
    match parsed {
        Ok(v) => {
            let slot = match resource {
                Resource::Cpu => &mut ep.min_cpu,
                Resource::Memory => &mut ep.min_memory,
            };
            *slot = Sourced::new(v, layer);
        }
        Err(e) => {
            let msg = format!("{e}; the value of the layers below applies");
            ep.problem(field, layer, raw.as_str(), &msg);
        }
    }
}

/// Merges a count threshold (oomKills, restarts), valid from 1 to 1000; otherwise the
/// layers below apply.
fn merge_count(
    ep: &mut EffectivePolicy,
    slot: fn(&mut EffectivePolicy) -> &mut Sourced<u32>,
    field: &str,
    raw: Option<u32>,
    layer: Layer,
) {
    let Some(v) = raw else { return };
    if (1..=1000).contains(&v) {
        *slot(ep) = Sourced::new(v, layer);
    } else {
        let msg = "outside 1 to 1000; the value of the layers below applies";
        ep.problem(field, layer, &v.to_string(), msg);
    }
}

fn apply_guardrails(ep: &mut EffectivePolicy, g: &Guardrails, layer: Layer) {
    use OnError::Unbounded;
    let lp = g.learning_period.as_ref();
    merge_duration(
        ep,
        |e| &mut e.learning_period,
        "guardrails.learningPeriod",
        lp,
        layer,
        Unbounded,
    );
    let mc = g.min_confidence.as_ref();
    merge_ratio(
        ep,
        |e| &mut e.min_confidence,
        "guardrails.minConfidence",
        mc,
        layer,
        Some(Ratio::ONE),
    );
    apply_max_change(ep, g.max_change_percent, layer);
    merge_minimum(
        ep,
        Resource::Cpu,
        "guardrails.minCPU",
        g.min_cpu.as_ref(),
        layer,
    );
    merge_minimum(
        ep,
        Resource::Memory,
        "guardrails.minMemory",
        g.min_memory.as_ref(),
        layer,
    );
    let cd = g.cooldown.as_ref();
    merge_duration(
        ep,
        |e| &mut e.cooldown,
        "guardrails.cooldown",
        cd,
        layer,
        Unbounded,
    );
    if let Some(rb) = &g.rollback {
        apply_rollback(ep, rb, layer);
    }
}

/// `guardrails.maxChangePercent`: 1 to 100; a value outside counts as 1.
fn apply_max_change(ep: &mut EffectivePolicy, v: Option<u8>, layer: Layer) {
    let Some(v) = v else { return };
    if (1..=100).contains(&v) {
        ep.max_change_percent = Sourced::new(v, layer);
    } else {
        ep.problem(
            "guardrails.maxChangePercent",
            layer,
            &v.to_string(),
            "outside 1 to 100; counts as 1",
        );
        ep.max_change_percent = Sourced::new(1, layer);
    }
}

/// `guardrails.rollback`: the health watch's duration and thresholds.
fn apply_rollback(ep: &mut EffectivePolicy, rb: &RollbackSettings, layer: Layer) {
    let wd = rb.watch_duration.as_ref();
    merge_duration(
        ep,
        |e| &mut e.watch_duration,
        "guardrails.rollback.watchDuration",
        wd,
        layer,
        OnError::KeepLower,
    );
    merge_count(
        ep,
        |e| &mut e.oom_kills,
        "guardrails.rollback.oomKills",
        rb.oom_kills,
        layer,
    );
    merge_count(
        ep,
        |e| &mut e.restarts,
        "guardrails.rollback.restarts",
        rb.restarts,
        layer,
    );
    let tr = rb.throttling_ratio.as_ref();
    merge_ratio(
        ep,
        |e| &mut e.throttling_ratio,
        "guardrails.rollback.throttlingRatio",
        tr,
        layer,
        None,
    );
}

fn apply_apply(ep: &mut EffectivePolicy, a: &ApplySettings, layer: Layer) {
    use OnError::{KeepLower, Unbounded};
    if let Some(c) = &a.canary {
        apply_canary(ep, c, layer);
    }
    if let Some(s) = a.strategy {
        ep.strategy = Sourced::new(s, layer);
    }
    let fa = a.fallback_after.as_ref();
    merge_duration(
        ep,
        |e| &mut e.fallback_after,
        "apply.fallbackAfter",
        fa,
        layer,
        KeepLower,
    );
    let mw = a.min_window_remaining.as_ref();
    merge_duration(
        ep,
        |e| &mut e.min_window_remaining,
        "apply.minWindowRemaining",
        mw,
        layer,
        Unbounded,
    );
    if let Some(list) = &a.maintenance_windows {
        let mut list = list.clone();
        if list.len() > MAX_WINDOWS {
            let msg = format!(
                "{} windows, at most {MAX_WINDOWS}; the ones past {MAX_WINDOWS} count as closed",
                list.len()
            );
            ep.problem(
                "apply.maintenanceWindows",
                layer,
                &list.len().to_string(),
                &msg,
            );
            list.truncate(MAX_WINDOWS);
        }
        let list = WindowList::new(list);
        window_problems(ep, "apply.maintenanceWindows", &list, layer, "closed");
        ep.maintenance_windows = Sourced::new(list, layer);
    }
    if let Some(list) = &a.freeze_windows {
        if list.len() > MAX_WINDOWS {
            let msg = format!(
                "{} windows, at most {MAX_WINDOWS}; all of them count",
                list.len()
            );
            ep.problem("apply.freezeWindows", layer, &list.len().to_string(), &msg);
        }
        let list = WindowList::new(list.clone());
        window_problems(ep, "apply.freezeWindows", &list, layer, "open");
        ep.freeze_windows = Sourced::new(list, layer);
    }
}

/// Lists each invalid window (a bad schedule, time zone, duration, start or end, or a
/// mix of both shapes) under its field path, e.g. `apply.maintenanceWindows[1].schedule`.
/// Kerf reads an invalid maintenance window as closed and an invalid freeze window as
/// open (AP-33, AP-39).
fn window_problems(
    ep: &mut EffectivePolicy,
    path: &str,
    list: &WindowList,
    layer: Layer,
    counts_as: &str,
) {
    for (i, e) in list.window_errors() {
        let (field, value) = match e {
            WindowError::Field { field, value, .. } => (format!("{path}[{i}].{field}"), value),
            WindowError::Shape { found } => (format!("{path}[{i}]"), found),
            WindowError::TooMany { .. } => continue,
        };
        let msg = format!("{e}; the window counts as {counts_as}");
        ep.problem(&field, layer, value, &msg);
    }
}

fn apply_hpa(ep: &mut EffectivePolicy, h: &HpaSettings, layer: Layer) {
    if let Some(c) = h.coordination {
        ep.hpa_coordination = Sourced::new(c, layer);
    }
    // An out-of-range bound narrows the range to nothing: min 100, max 1.
    if let Some(v) = h.min_target_utilization {
        let v = bound(ep, "hpa.minTargetUtilization", v, 100, layer);
        ep.hpa_min_target = Sourced::new(v, layer);
    }
    if let Some(v) = h.max_target_utilization {
        let v = bound(ep, "hpa.maxTargetUtilization", v, 1, layer);
        ep.hpa_max_target = Sourced::new(v, layer);
    }
}

fn bound(ep: &mut EffectivePolicy, field: &str, v: i32, fallback: i32, layer: Layer) -> i32 {
    if (1..=100).contains(&v) {
        v
    } else {
        let msg = format!("outside 1 to 100; counts as {fallback}");
        ep.problem(field, layer, &v.to_string(), &msg);
        fallback
    }
}

/// Lists HPA bounds whose minimum exceeds the maximum (after all layers): no coordinated
/// target fits, so every coordinated change is blocked `HPACoupled`.
pub(super) fn check_hpa_bounds(ep: &mut EffectivePolicy) {
    let (min, max) = (ep.hpa_min_target.value, ep.hpa_max_target.value);
    if min > max {
        let layer = ep.hpa_min_target.layer.max(ep.hpa_max_target.layer);
        let msg = format!(
            "minTargetUtilization {min} exceeds maxTargetUtilization {max}; no coordinated target fits"
        );
        ep.problem("hpa", layer, &format!("{min}-{max}"), &msg);
    }
}

fn apply_recommendation(ep: &mut EffectivePolicy, rec: &RecommendationSettings, layer: Layer) {
    let out = &mut ep.recommendation;
    if let Some(raw) = &rec.window {
        match parse_go_duration(raw.as_str()) {
            Ok(d) if d > Duration::zero() => out.window = Some(Sourced::new(d, layer)),
            other => {
                out.window = Some(Sourced::new(Duration::zero(), layer));
                let e = other
                    .err()
                    .map_or_else(|| "not positive".to_owned(), |e| e.to_string());
                let msg = format!("{e}; every recommendation counts as stale until it is fixed");
                ep.problem("recommendation.window", layer, raw.as_str(), &msg);
            }
        }
    }
    let stale = "every recommendation counts as stale until it is fixed";
    for (field, value) in [
        ("recommendation.cpuPercentile", rec.cpu_percentile),
        ("recommendation.memoryPercentile", rec.memory_percentile),
    ] {
        if let Some(v) = value.filter(|v| !PERCENTILE_RANGE.contains(v)) {
            let msg = format!("outside 1 to 100; {stale}");
            ep.problem(field, layer, &v.to_string(), &msg);
        }
    }
    if let Some(v) = rec.headroom_percent.filter(|v| !HEADROOM_RANGE.contains(v)) {
        let msg = format!("outside 0 to 1000; {stale}");
        ep.problem(
            "recommendation.headroomPercent",
            layer,
            &v.to_string(),
            &msg,
        );
    }
    // An out-of-range value is kept: it matches no echo (the stale check reads it as
    // invalid), so no lower layer's value takes its place.
    let out = &mut ep.recommendation;
    if let Some(v) = rec.cpu_percentile {
        out.cpu_percentile = Some(Sourced::new(v, layer));
    }
    if let Some(v) = rec.memory_percentile {
        out.memory_percentile = Some(Sourced::new(v, layer));
    }
    if let Some(v) = rec.headroom_percent {
        out.headroom_percent = Some(Sourced::new(v, layer));
    }
    if let Some(v) = rec.limits {
        out.limits = Some(Sourced::new(v, layer));
    }
}

/// Reads `apply.canary`; bad parts are reported and count as the narrower value (1 pod,
/// the watchDuration of the layers so far).
fn apply_canary(ep: &mut EffectivePolicy, c: &kerf_api::policy::Canary, layer: Layer) {
    let (canary, problems) = crate::canary_policy::parse(c, ep.watch_duration.value);
    for p in problems {
        let (field, value, counts) = match &p {
            crate::canary_policy::CanaryError::Pods(v) => ("apply.canary.pods", v.clone(), "1 pod"),
            crate::canary_policy::CanaryError::Duration(v) => {
                ("apply.canary.duration", v.clone(), "the watchDuration")
            }
        };
        ep.problem(field, layer, &value, &format!("{p}; counts as {counts}"));
    }
    ep.canary = Sourced::new(Some(canary), layer);
}
