//! The running agent's decision settings for `explain`: the chart's ConfigMap holds every
//! `KERF_*` setting decisions read (the Deployment takes its variables from it) and the
//! clusterDefaults and freeze windows files, so `explain` reads the same values the agent
//! runs with. A flag or `KERF_*` variable given to `explain` overrides the agent's value.

use std::collections::BTreeMap;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::cli::DecisionArgs;
use crate::settings::{EnvLookup, Settings, cluster_defaults_from_text, freeze_windows_from_text};

/// The ConfigMap key holding the clusterDefaults file.
pub const CLUSTER_DEFAULTS_KEY: &str = "cluster-defaults.yaml";
/// The ConfigMap key holding the cluster-wide freeze windows file.
pub const FREEZE_WINDOWS_KEY: &str = "freeze-windows.yaml";

/// Decision settings given to `explain` on the command line or in its environment: the
/// setting's id (`tolerance`, `hub_url`, ...) and its values as written.
pub type Given = BTreeMap<String, Vec<String>>;

/// The agent's settings ConfigMap as read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentConfig {
    /// `<namespace>/<name>`.
    pub name: String,
    /// Its data: `KERF_*` keys and the two files.
    pub data: BTreeMap<String, String>,
}

/// Why the agent's settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AgentConfigError {
    /// `--from-agent` is not `<namespace>/<name>`.
    #[error("--from-agent {0:?} is not <namespace>/<name>")]
    Name(String),
    /// The ConfigMap is missing or unreadable and the flags do not name the cluster.
    #[error(
        "the agent's settings: ConfigMap {name} {why}; name the agent's ConfigMap with \
         --from-agent=<namespace>/<name> (the chart's is <release>-config in its namespace), \
         or give the settings as flags (at least --cluster-name)"
    )]
    Unavailable {
        /// `<namespace>/<name>`.
        name: String,
        /// `not found` or `cannot be read: ...`.
        why: String,
    },
    /// A value (from the ConfigMap or a flag) is invalid.
    #[error("settings from {origin}: {reason}")]
    Invalid {
        /// Where the settings came from.
        origin: String,
        /// What is wrong, naming the flag and the value.
        reason: String,
    },
}

/// The decision settings `explain` was given on its command line or in `KERF_*` variables
/// (not their defaults), from the matches of the `explain` subcommand.
pub fn given_in(matches: &ArgMatches) -> Given {
    let cmd = DecisionArgs::augment_args(clap::Command::new("explain"));
    cmd.get_arguments()
        .map(|a| a.get_id().as_str())
        .filter(|id| {
            matches!(
                matches.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        })
        .map(|id| {
            let raw = matches.get_raw(id).into_iter().flatten();
            let values = raw.map(|v| v.to_string_lossy().into_owned()).collect();
            (id.to_owned(), values)
        })
        .collect()
}

/// The settings of the agent whose ConfigMap is `config` (none: the flags alone), each one
/// in `given` overriding it, validated as `run` validates them.
pub fn settings(
    config: Option<&AgentConfig>,
    given: &Given,
    env: EnvLookup<'_>,
) -> Result<Settings, AgentConfigError> {
    let origin = origin(config, given);
    let invalid = |reason: String| AgentConfigError::Invalid {
        origin: origin.clone(),
        reason,
    };
    let decision = decision_args(config, given).map_err(|e| invalid(e.to_string()))?;
    let mut s = Settings::for_explain(decision, env).map_err(|e| invalid(e.to_string()))?;
    let Some(config) = config else {
        return Ok(s);
    };
    let file = |key: &str, id: &str| {
        let text = config.data.get(key).filter(|_| !given.contains_key(id))?;
        Some((format!("ConfigMap {} key {key}", config.name), text))
    };
    if let Some((shown, text)) = file(CLUSTER_DEFAULTS_KEY, "cluster_defaults_file") {
        s.cluster_defaults =
            cluster_defaults_from_text(&shown, text).map_err(|e| invalid(e.to_string()))?;
    }
    if let Some((shown, text)) = file(FREEZE_WINDOWS_KEY, "freeze_windows") {
        s.freeze.windows =
            freeze_windows_from_text(&shown, text).map_err(|e| invalid(e.to_string()))?;
    }
    Ok(s)
}

/// Refuses an invalid setting among those `given`, before any cluster is read; the cluster
/// name may come later from the agent's ConfigMap.
pub fn check_given(given: &Given, env: EnvLookup<'_>) -> Result<(), AgentConfigError> {
    let invalid = |reason: String| AgentConfigError::Invalid {
        origin: "flags and KERF_* variables".to_owned(),
        reason,
    };
    let mut decision = decision_args(None, given).map_err(|e| invalid(e.to_string()))?;
    // Only to validate the rest: the agent's ConfigMap may name the cluster.
    decision
        .cluster_name
        .get_or_insert_with(|| "unnamed".to_owned());
    Settings::for_explain(decision, env).map_err(|e| invalid(e.to_string()))?;
    Ok(())
}

/// The raw decision settings: the value given for each setting, else the ConfigMap's
/// `KERF_*` key, else the default of `run`.
fn decision_args(config: Option<&AgentConfig>, given: &Given) -> Result<DecisionArgs, clap::Error> {
    let cmd = DecisionArgs::augment_args(clap::Command::new("explain"));
    let mut argv = vec!["explain".to_owned()];
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let from_config = || {
            let key = arg.get_env()?.to_str()?;
            config?.data.get(key).map(|v| vec![v.clone()])
        };
        let values = given
            .get(arg.get_id().as_str())
            .cloned()
            .or_else(from_config);
        argv.extend(
            values
                .into_iter()
                .flatten()
                .map(|v| format!("--{long}={v}")),
        );
    }
    // The values are all in `argv`: the process environment must not fill a gap.
    let cmd = cmd.mut_args(|a| a.env(None::<&str>).required(false));
    DecisionArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)
}

/// Where the settings come from, as the first line of the explanation shows it:
/// `ConfigMap kerf-system/kerf-agent-config, overridden by --tolerance`.
pub fn origin(config: Option<&AgentConfig>, given: &Given) -> String {
    let base = config.map_or_else(
        || "flags and KERF_* variables only".to_owned(),
        |c| format!("ConfigMap {}", c.name),
    );
    if config.is_none() || given.is_empty() {
        return base;
    }
    let cmd = DecisionArgs::augment_args(clap::Command::new("explain"));
    let flags: Vec<String> = cmd
        .get_arguments()
        .filter(|a| given.contains_key(a.get_id().as_str()))
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    format!("{base}, overridden by {}", flags.join(", "))
}

/// `<namespace>/<name>` of `--from-agent` (or the default).
fn split_name(name: &str) -> Result<(&str, &str), AgentConfigError> {
    match name.split_once('/') {
        Some((ns, n)) if !ns.is_empty() && !n.is_empty() && !n.contains('/') => Ok((ns, n)),
        _ => Err(AgentConfigError::Name(name.to_owned())),
    }
}

/// Reads the agent's ConfigMap `name` (`<namespace>/<name>`) and resolves the settings
/// with `given` over it. A missing or unreadable ConfigMap falls back to the flags alone
/// when they name the cluster. Returns the settings and the line saying where they came
/// from (`Settings: ...`).
pub async fn resolve(
    client: kube::Client,
    name: &str,
    given: &Given,
    env: EnvLookup<'_>,
) -> Result<(Settings, String), AgentConfigError> {
    let (ns, cm_name) = split_name(name)?;
    let api: Api<ConfigMap> = Api::namespaced(client, ns);
    let why = match api.get_opt(cm_name).await {
        Ok(Some(cm)) => {
            let config = AgentConfig {
                name: name.to_owned(),
                data: cm.data.unwrap_or_default(),
            };
            let s = settings(Some(&config), given, env)?;
            return Ok((s, format!("Settings: {}", origin(Some(&config), given))));
        }
        Ok(None) => "not found".to_owned(),
        Err(e) => format!("cannot be read: {e}"),
    };
    if !given.contains_key("cluster_name") {
        return Err(AgentConfigError::Unavailable {
            name: name.to_owned(),
            why,
        });
    }
    let s = settings(None, given, env)?;
    Ok((
        s,
        format!("Settings: {} (ConfigMap {name} {why})", origin(None, given)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> AgentConfig {
        AgentConfig {
            name: "kerf-system/kerf-agent-config".to_owned(),
            data: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn given(pairs: &[(&str, &[&str])]) -> Given {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.iter().map(|s| (*s).to_owned()).collect()))
            .collect()
    }

    fn agent() -> AgentConfig {
        config(&[
            ("KERF_CLUSTER_NAME", "prod-eu"),
            ("KERF_HUB_URL", "https://hub.example/"),
            ("KERF_HUB_STALE_AFTER", "45m"),
            ("KERF_TOLERANCE", "7.5"),
            ("KERF_UNSUPPORTED_NODE_SELECTORS", "pool=old;arch=arm,os=x"),
            ("KERF_FREEZE_NOW", "true"),
            (CLUSTER_DEFAULTS_KEY, "guardrails:\n  cooldown: 12h\n"),
            (
                FREEZE_WINDOWS_KEY,
                "- start: \"2026-12-23T00:00:00Z\"\n  end: \"2027-01-02T00:00:00Z\"\n",
            ),
        ])
    }

    #[test]
    fn the_agents_configmap_gives_every_decision_setting() {
        let s = settings(Some(&agent()), &Given::new(), &|_| None).unwrap();
        assert_eq!(s.cluster_name, "prod-eu");
        assert_eq!(s.hub.url.as_deref(), Some("https://hub.example"));
        assert_eq!(s.hub.stale_after, std::time::Duration::from_secs(45 * 60));
        assert_eq!(s.tolerance.to_string(), "7.5%");
        assert_eq!(s.unsupported_node_selectors.len(), 2);
        assert!(s.freeze.now);
        assert_eq!(s.freeze.windows.len(), 1);
        let cooldown = s.cluster_defaults.and_then(|d| d.guardrails?.cooldown);
        assert_eq!(cooldown.map(|c| c.to_string()).as_deref(), Some("12h"));
    }

    #[test]
    fn a_given_flag_overrides_the_agents_value_and_is_named() {
        let given = given(&[
            ("tolerance", &["20"]),
            ("freeze_now", &["false"]),
            ("freeze_windows", &["[]"]),
        ]);
        let s = settings(Some(&agent()), &given, &|_| None).unwrap();
        assert_eq!(s.tolerance.to_string(), "20%");
        assert!(!s.freeze.now);
        assert!(s.freeze.windows.is_empty());
        assert_eq!(s.cluster_name, "prod-eu");
        assert_eq!(
            origin(Some(&agent()), &given),
            "ConfigMap kerf-system/kerf-agent-config, overridden by --tolerance, --freeze-now, \
             --freeze-windows"
        );
    }

    #[test]
    fn a_bad_value_in_the_configmap_names_the_configmap_and_the_setting() {
        let bad = config(&[("KERF_CLUSTER_NAME", "prod"), ("KERF_TOLERANCE", "150")]);
        let e = settings(Some(&bad), &Given::new(), &|_| None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "settings from ConfigMap kerf-system/kerf-agent-config: invalid --tolerance \
             \"150\": must be between 0 and 100 (exclusive)"
        );
        let windows = config(&[
            ("KERF_CLUSTER_NAME", "prod"),
            (
                FREEZE_WINDOWS_KEY,
                "- schedule: \"0 25 * * *\"\n  duration: 1h\n",
            ),
        ]);
        let e = settings(Some(&windows), &Given::new(), &|_| None).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("ConfigMap kerf-system/kerf-agent-config key freeze-windows.yaml"),
            "{text}"
        );
    }

    #[test]
    fn without_a_configmap_the_flags_alone_must_name_the_cluster() {
        let e = settings(None, &Given::new(), &|_| None).unwrap_err();
        assert!(e.to_string().contains("--cluster-name"), "{e}");
        let flags = given(&[("cluster_name", &["prod"])]);
        let s = settings(None, &flags, &|_| None).unwrap();
        assert_eq!(s.cluster_name, "prod");
        assert_eq!(origin(None, &flags), "flags and KERF_* variables only");
    }

    #[test]
    fn given_flags_are_checked_before_the_cluster_is_read() {
        assert!(check_given(&Given::new(), &|_| None).is_ok());
        let bad = given(&[(
            "freeze_windows",
            &[r#"[{"schedule":"0 25 * * *","duration":"2h"}]"#],
        )]);
        let e = check_given(&bad, &|_| None).unwrap_err().to_string();
        assert!(
            e.starts_with("settings from flags and KERF_* variables: invalid --freeze-windows"),
            "{e}"
        );
        let name = given(&[("cluster_name", &["Prod EU"])]);
        assert!(check_given(&name, &|_| None).is_err());
    }

    #[test]
    fn from_agent_is_namespace_slash_name() {
        assert!(split_name("kerf-system/kerf-agent-config").is_ok());
        for bad in ["kerf-agent-config", "/x", "x/", "a/b/c"] {
            assert!(split_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn explain_needs_no_cluster_name_and_knows_which_settings_were_given() {
        use clap::CommandFactory;
        let cli = crate::cli::Cli::command();
        let argv = [
            "kerf-agent",
            "explain",
            "shop/deployment/web",
            "--tolerance",
            "9",
        ];
        let m = cli.clone().try_get_matches_from(argv).unwrap();
        let given = given_in(m.subcommand_matches("explain").unwrap());
        assert_eq!(given, self::given(&[("tolerance", &["9"])]));
        let run = cli.try_get_matches_from(["kerf-agent", "run"]);
        assert!(run.unwrap_err().to_string().contains("--cluster-name"));
    }
}
