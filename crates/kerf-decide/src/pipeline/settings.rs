//! Check 4's comparison (GR-48, EV-29, design D6): every recommender setting some layer of
//! the effective policy sets, against the settings the recommendation echoes.

use chrono::Duration;
use kerf_api::policy::{LimitsHandling, RecommendationSettings};

use crate::duration::{format_go_duration, parse_go_duration};
use crate::effective::{EffectivePolicy, HEADROOM_RANGE, PERCENTILE_RANGE};
use crate::facts::Facts;

/// Whether every setting some layer sets matches the echo (allocates nothing).
pub(crate) fn settings_match(policy: &EffectivePolicy, facts: &Facts) -> bool {
    let echo = facts.recommendation.settings.as_ref();
    setting_checks(policy, echo).all(|c| c.same())
}

/// One recommender setting some layer sets, with what the recommendation echoes.
enum SettingCheck<'a> {
    Window {
        wanted: Duration,
        echoed: Option<&'a str>,
    },
    Percentile {
        field: &'static str,
        wanted: u8,
        echoed: Option<u8>,
    },
    Headroom {
        wanted: u16,
        echoed: Option<u16>,
    },
    Limits {
        wanted: LimitsHandling,
        echoed: Option<LimitsHandling>,
    },
}

impl SettingCheck<'_> {
    /// Whether the echo matches (design D6: durations and numbers compared as values). A
    /// value no valid layer can set (a window that did not parse, a percentile out of
    /// range) matches no echo: the recommendation stays stale until it is fixed.
    fn same(&self) -> bool {
        match self {
            SettingCheck::Window { wanted, echoed } => {
                *wanted > Duration::zero()
                    && echoed.and_then(|e| parse_go_duration(e).ok()) == Some(*wanted)
            }
            SettingCheck::Percentile { wanted, echoed, .. } => {
                PERCENTILE_RANGE.contains(wanted) && *echoed == Some(*wanted)
            }
            SettingCheck::Headroom { wanted, echoed } => {
                HEADROOM_RANGE.contains(wanted) && *echoed == Some(*wanted)
            }
            SettingCheck::Limits { wanted, echoed } => *echoed == Some(*wanted),
        }
    }

    /// `cpuPercentile 95 (recommendation: 90)`.
    fn describe(&self) -> String {
        let unset = || "unset".to_owned();
        let (field, wanted, echoed) = match self {
            SettingCheck::Window { wanted, echoed } => (
                "window",
                format_go_duration(*wanted),
                echoed.map_or_else(unset, str::to_owned),
            ),
            SettingCheck::Percentile {
                field,
                wanted,
                echoed,
            } => (
                *field,
                wanted.to_string(),
                echoed.map_or_else(unset, |e| e.to_string()),
            ),
            SettingCheck::Headroom { wanted, echoed } => (
                "headroomPercent",
                wanted.to_string(),
                echoed.map_or_else(unset, |e| e.to_string()),
            ),
            SettingCheck::Limits { wanted, echoed } => (
                "limits",
                format!("{wanted:?}"),
                echoed.map_or_else(unset, |e| format!("{e:?}")),
            ),
        };
        format!("{field} {wanted} (recommendation: {echoed})")
    }
}

/// The settings some layer of `policy` sets, in field order, against the echo.
fn setting_checks<'a>(
    policy: &EffectivePolicy,
    echo: Option<&'a RecommendationSettings>,
) -> impl Iterator<Item = SettingCheck<'a>> {
    let want = &policy.recommendation;
    let window = want.window.as_ref().map(|w| SettingCheck::Window {
        wanted: w.value,
        echoed: echo.and_then(|e| e.window.as_ref()).map(|g| g.as_str()),
    });
    let percentile = |field, wanted: Option<u8>, echoed: Option<u8>| {
        wanted.map(|wanted| SettingCheck::Percentile {
            field,
            wanted,
            echoed,
        })
    };
    let cpu = percentile(
        "cpuPercentile",
        want.cpu_percentile.as_ref().map(|p| p.value),
        echo.and_then(|e| e.cpu_percentile),
    );
    let memory = percentile(
        "memoryPercentile",
        want.memory_percentile.as_ref().map(|p| p.value),
        echo.and_then(|e| e.memory_percentile),
    );
    let headroom = want
        .headroom_percent
        .as_ref()
        .map(|p| SettingCheck::Headroom {
            wanted: p.value,
            echoed: echo.and_then(|e| e.headroom_percent),
        });
    let limits = want.limits.as_ref().map(|l| SettingCheck::Limits {
        wanted: l.value,
        echoed: echo.and_then(|e| e.limits),
    });
    [window, cpu, memory, headroom, limits]
        .into_iter()
        .flatten()
}

/// The settings some layer sets that differ from the echo, worded (design D6).
pub(crate) fn settings_diffs(policy: &EffectivePolicy, facts: &Facts) -> Vec<String> {
    let echo = facts.recommendation.settings.as_ref();
    setting_checks(policy, echo)
        .filter(|c| !c.same())
        .map(|c| c.describe())
        .collect()
}
