//! Cluster settings the chart cannot refuse at render time (docs/configuration.md).
//!
//! `freeze.windows` and `clusterDefaults` reach the agent as files from its ConfigMap. The
//! values schema checks their shape, but not all of their content (a well-formed but
//! unknown time zone such as `Europe/Berln`, a ConfigMap edited by hand). Exiting on such a
//! setting would restart the agent in a loop; instead [`Settings::from_args_holding`]
//! leaves the setting out, records it as an [`InvalidSetting`], and the runtime then
//! starts without acting: not ready, naming the setting, and no change to anything. Every
//! other bad flag still stops startup.
//!
//! `recommendations.source` is held the same way: a value that is not a source, no source
//! at all (no hub URL and no `recommendations.source`), or a source other than the hub
//! together with a hub URL.

use serde::Serialize;

use kerf_api::rsr::RecommendationSource;

use super::{EnvLookup, Settings, SettingsError};
use crate::cli::RunArgs;

/// A cluster setting that cannot be used; while one is recorded the agent makes no change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InvalidSetting {
    /// The chart value it comes from (`freeze.windows`, `clusterDefaults`): the
    /// `setting` label of `kerf_agent_invalid_setting`.
    pub setting: &'static str,
    /// Why it cannot be used, naming the flag, the value and what is wrong.
    pub message: String,
}

/// The flags of the cluster settings and the chart values they come from.
pub const CLUSTER_SETTINGS: [(&str, &str); 3] = [
    ("freeze-windows", "freeze.windows"),
    ("cluster-defaults-file", "clusterDefaults"),
    ("recommendation-source", SOURCE_SETTING),
];

/// The chart value of `--recommendation-source`.
const SOURCE_SETTING: &str = "recommendations.source";

impl SettingsError {
    /// The flag the error is about, if it names one.
    pub fn flag(&self) -> Option<&'static str> {
        match self {
            SettingsError::Invalid { flag, .. } | SettingsError::Unreadable { flag, .. } => {
                Some(flag)
            }
            SettingsError::Defaults(_) => None,
        }
    }
}

impl Settings {
    /// Like [`Settings::from_args`], except that an invalid cluster setting (see
    /// [`CLUSTER_SETTINGS`]) is left out and recorded in `invalid_settings` instead of
    /// failing; any other error still fails.
    pub fn from_args_holding(
        args: &RunArgs,
        env: EnvLookup<'_>,
    ) -> Result<Settings, SettingsError> {
        let mut args = args.clone();
        let mut invalid: Vec<InvalidSetting> = Vec::new();
        loop {
            let error = match Settings::from_args(&args, env) {
                Ok(mut settings) => {
                    if invalid.iter().all(|i| i.setting != SOURCE_SETTING)
                        && let Some(message) = source_problem(&args, &settings)
                    {
                        invalid.push(InvalidSetting {
                            setting: SOURCE_SETTING,
                            message,
                        });
                    }
                    settings.invalid_settings = invalid;
                    return Ok(settings);
                }
                Err(e) => e,
            };
            let setting = error.flag().and_then(|flag| {
                let (_, setting) = CLUSTER_SETTINGS.iter().find(|(f, _)| *f == flag)?;
                leave_out(&mut args, flag).then_some(*setting)
            });
            let Some(setting) = setting else {
                return Err(error);
            };
            invalid.push(InvalidSetting {
                setting,
                message: error.to_string(),
            });
        }
    }

    /// Whether a cluster setting could not be used: the agent then makes no change.
    pub fn holding(&self) -> bool {
        !self.invalid_settings.is_empty()
    }

    /// Why the agent is not ready while holding: every invalid setting, named.
    pub fn holding_reason(&self) -> Option<String> {
        let parts: Vec<String> = self
            .invalid_settings
            .iter()
            .map(|i| format!("invalid setting {}: {}", i.setting, i.message))
            .collect();
        (!parts.is_empty()).then(|| {
            format!(
                "{}; the agent makes no change until it is fixed",
                parts.join("; ")
            )
        })
    }
}

/// Why the source and the hub URL cannot go together: no hub URL and no source (nothing
/// to take recommendations from), or a source other than the hub with a hub URL (one
/// source per agent, docs/decisions.md).
fn source_problem(args: &RunArgs, settings: &Settings) -> Option<String> {
    let source = settings.recommendation_source;
    let given = args
        .decision
        .recommendation_source
        .as_deref()
        .is_some_and(|s| !s.trim().is_empty());
    if source == RecommendationSource::Prometheus && settings.health.metrics_url.is_none() {
        return Some(
            "--recommendation-source prometheus needs health.metricsURL (--health-metrics-url): \
             the Prometheus the recommendations are computed from"
                .to_owned(),
        );
    }
    match (source.is_local(), settings.hub.url.is_some()) {
        (false, false) if !given => Some(
            "no recommendation source: set hub.url (--hub-url) to take recommendations from \
             the hub, or recommendations.source (--recommendation-source) to vpa or \
             prometheus to run without a hub"
                .to_owned(),
        ),
        (false, false) => Some(
            "--recommendation-source hub needs hub.url (--hub-url); set it, or choose vpa or \
             prometheus to run without a hub"
                .to_owned(),
        ),
        (true, true) => Some(format!(
            "--recommendation-source {source} runs without a hub, but hub.url (--hub-url) is \
             set: unset hub.url, or set recommendations.source to hub"
        )),
        _ => None,
    }
}

/// Clears the flag's value in `args`; false when it was already clear (nothing to leave
/// out, so the error is not about its value).
fn leave_out(args: &mut RunArgs, flag: &str) -> bool {
    match flag {
        "freeze-windows" => args.decision.freeze_windows.take().is_some(),
        "cluster-defaults-file" => args.decision.cluster_defaults_file.take().is_some(),
        "recommendation-source" => args.decision.recommendation_source.take().is_some(),
        _ => false,
    }
}
