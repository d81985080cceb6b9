//! Typed, validated settings of `kerf-agent run`.
//!
//! [`Settings::from_args`] turns the raw flags of [`RunArgs`] into [`Settings`]; an invalid
//! value stops startup with a message naming the flag and the value
//! (`invalid --tolerance "150": must be between 0 and 100 (exclusive)`). The parsers of
//! single values live in `settings/parse.rs`; durations follow Go's `time.ParseDuration`
//! through `kerf_decide::duration`.

mod held;
mod parse;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kerf_api::policy::{RightsizingPolicySpec, Window};
use kerf_api::rsr::RecommendationSource;
use serde::Serialize;

use crate::cli::{DecisionArgs, LogFormat, RunArgs};
use crate::scope::{Scope, parse_selector};

pub use held::{CLUSTER_SETTINGS, InvalidSetting};
pub use parse::{
    cluster_defaults_from_text, format_duration, freeze_windows_from_text, parse_addr, parse_bytes,
    parse_freeze_windows, parse_node_selector, parse_tolerance, read_cluster_defaults,
};
use parse::{
    duration, is_dns_label, is_dns_subdomain, opt_url, parse_cluster_name, parse_count,
    parse_log_filter, parse_recommendation_source, positive_duration,
};

/// Namespace used when neither the flag, POD_NAMESPACE nor the service account name one.
pub const DEFAULT_NAMESPACE: &str = "kerf-system";
/// Where Kubernetes mounts the service account's namespace.
pub const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
/// Safety margin of the local lease check (design D25): a leader acts only while
/// `now < renewTime + leaseDuration - LEASE_SAFETY_MARGIN`.
pub const LEASE_SAFETY_MARGIN: Duration = Duration::from_secs(2);
/// Most windows a list may hold (design D2).
pub const MAX_WINDOWS: usize = 16;

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A flag (or its environment variable) holds a bad value.
    #[error("invalid --{flag} {value:?}: {reason}")]
    Invalid {
        /// The flag without its dashes.
        flag: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A file named by a flag cannot be read.
    #[error("invalid --{flag} {path:?}: cannot read the file: {source}")]
    Unreadable {
        /// The flag without its dashes.
        flag: &'static str,
        /// The path as given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The defaults of `run` do not parse (a defect of the flag definitions).
    #[error("cannot build the default settings: {0}")]
    Defaults(String),
}

impl SettingsError {
    fn defaults(e: clap::Error) -> Self {
        SettingsError::Defaults(e.to_string())
    }

    /// A short, bounded name of the error kind.
    pub fn category(&self) -> &'static str {
        match self {
            SettingsError::Invalid { .. } => "invalid",
            SettingsError::Unreadable { .. } => "unreadable",
            SettingsError::Defaults(_) => "defaults",
        }
    }

    fn invalid(flag: &'static str, value: impl Into<String>, reason: impl Into<String>) -> Self {
        SettingsError::Invalid {
            flag,
            value: value.into(),
            reason: reason.into(),
        }
    }
}

/// The validated settings of the agent.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Name of this cluster at the hub.
    pub cluster_name: String,
    /// Namespace the agent runs in.
    pub namespace: String,
    /// Where recommendations come from (`recommendations.source`).
    pub recommendation_source: RecommendationSource,
    /// The workloads the agent manages.
    pub scope: Scope,
    /// Hub connection.
    pub hub: HubSettings,
    /// Tolerance: changes smaller than this keep the current value.
    pub tolerance: Tolerance,
    /// Health watch.
    pub health: HealthSettings,
    /// Nodes where in-place changes are refused; a node matching any selector is
    /// unsupported.
    pub unsupported_node_selectors: Vec<NodeSelector>,
    /// OnDelete StatefulSets.
    pub on_delete: OnDeleteSettings,
    /// Cluster-wide freeze.
    pub freeze: FreezeSettings,
    /// The clusterDefaults layer of the effective policy.
    pub cluster_defaults: Option<RightsizingPolicySpec>,
    /// Leader election.
    pub leader_election: LeaderElectionSettings,
    /// Outbox bounds.
    pub outbox: OutboxSettings,
    /// Concurrent passes and the limit on actuating writes.
    pub reconcile: ReconcileSettings,
    /// Listen address of /metrics, /healthz and /readyz.
    pub metrics_addr: SocketAddr,
    /// Webhook server.
    pub webhook: WebhookSettings,
    /// Logging.
    pub log: LogSettings,
    /// Cluster settings left out because they cannot be used (`run` only, see
    /// [`Settings::from_args_holding`]): while any is listed the agent makes no change.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid_settings: Vec<InvalidSetting>,
}

/// Hub connection settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HubSettings {
    /// Base URL without a trailing slash; `None`: no hub configured.
    pub url: Option<String>,
    /// File with the bearer token.
    pub token_file: Option<PathBuf>,
    /// Time between two fetches.
    #[serde(serialize_with = "ser_duration")]
    pub poll_interval: Duration,
    /// hub.staleAfter (design D26).
    #[serde(serialize_with = "ser_duration")]
    pub stale_after: Duration,
}

/// The tolerance as an exact number: thousandths of a percent (5 % = 5000). It prints and
/// serializes as a percentage (`5%`, `2.5%`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tolerance {
    /// Thousandths of a percent, as `kerf_decide::quantity::within_tolerance` takes them.
    pub percent_milli: u32,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            percent_milli: 5_000,
        }
    }
}

impl std::fmt::Display for Tolerance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (int, frac) = (self.percent_milli / 1000, self.percent_milli % 1000);
        if frac == 0 {
            write!(f, "{int}%")
        } else {
            let digits = format!("{frac:03}");
            write!(f, "{int}.{}%", digits.trim_end_matches('0'))
        }
    }
}

impl Serialize for Tolerance {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Health watch settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthSettings {
    /// Prometheus-compatible endpoint for throttling queries.
    pub metrics_url: Option<String>,
    /// Read cAdvisor metrics through the node proxy when no endpoint is set.
    pub cadvisor_fallback: bool,
    /// Throttling is measured from this long after a change (design D29).
    #[serde(serialize_with = "ser_duration")]
    pub throttling_delay: Duration,
}

/// A node selector: every pair must equal the node's label.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct NodeSelector(pub BTreeMap<String, String>);

impl NodeSelector {
    /// Whether a node with these labels matches.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
}

/// OnDelete StatefulSet settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OnDeleteSettings {
    /// Outdated pods replaced per run (at least 1).
    pub max_pod_deletes_per_run: u32,
    /// How long every pod must have been Ready before the next replacement.
    #[serde(serialize_with = "ser_duration")]
    pub settle: Duration,
}

/// Cluster-wide freeze settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FreezeSettings {
    /// freeze.now: the whole cluster is frozen.
    pub now: bool,
    /// freeze.windows, as written (checked by kerf-decide when evaluated; an invalid one
    /// counts as open).
    pub windows: Vec<Window>,
}

/// Leader election settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElectionSettings {
    /// Off: this replica always leads (a single replica, or tests).
    pub enabled: bool,
    /// Lease name.
    pub lease_name: String,
    /// Lease namespace (the agent's namespace).
    pub namespace: String,
    /// This replica's identity in the Lease.
    pub identity: String,
    /// Lease duration.
    #[serde(serialize_with = "ser_duration")]
    pub lease_duration: Duration,
    /// The leader steps down when it has not renewed for this long.
    #[serde(serialize_with = "ser_duration")]
    pub renew_deadline: Duration,
    /// Time between attempts.
    #[serde(serialize_with = "ser_duration")]
    pub retry_period: Duration,
}

/// Outbox bounds.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxSettings {
    /// Most events held.
    pub max_events: usize,
    /// Most bytes held (serialized as `--outbox-max-bytes` takes it: `8Mi`).
    #[serde(serialize_with = "ser_bytes")]
    pub max_bytes: u64,
}

/// Concurrent passes and the client-side limit on actuating writes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileSettings {
    /// Workloads reconciled at once (at least 1).
    pub concurrency: u32,
    /// Actuating writes per second once the burst is spent (at least 1).
    pub writes_per_second: u32,
    /// Actuating writes that may go out at once (at least 1).
    pub write_burst: u32,
}

impl ReconcileSettings {
    /// The rate of the write limiter.
    pub fn write_rate(&self) -> crate::apiclient::WriteRate {
        crate::apiclient::WriteRate {
            per_second: self.writes_per_second,
            burst: self.write_burst,
        }
    }
}

/// Webhook server settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSettings {
    /// Listen address.
    pub addr: SocketAddr,
    /// PEM certificate.
    pub cert_file: PathBuf,
    /// PEM private key.
    pub key_file: PathBuf,
}

/// Logging settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogSettings {
    /// Output format.
    pub format: LogFormat,
    /// EnvFilter directives.
    pub filter: String,
}

fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

fn ser_bytes<S: serde::Serializer>(b: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_bytes(*b))
}

/// Formats a byte size as `--outbox-max-bytes` takes it: `8Mi`, `500Ki`, or bytes.
pub fn format_bytes(b: u64) -> String {
    [("Gi", 1u64 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)]
        .into_iter()
        .find(|(_, m)| b >= *m && b.is_multiple_of(*m))
        .map_or_else(|| b.to_string(), |(suffix, m)| format!("{}{suffix}", b / m))
}

/// Looks up a process environment variable; passed in so that tests need not change the
/// process environment.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

impl Settings {
    /// The settings of `explain`: its decision settings, validated as `run` validates them,
    /// and `run`'s defaults for the rest.
    pub fn for_explain(
        decision: DecisionArgs,
        env: EnvLookup<'_>,
    ) -> Result<Settings, SettingsError> {
        let run = RunArgs::with_defaults(decision).map_err(SettingsError::defaults)?;
        Settings::from_args(&run, env)
    }

    /// Validates raw flags. `env` answers the fallbacks that are not flags (POD_NAMESPACE,
    /// POD_NAME, HOSTNAME); files named by flags are read here.
    pub fn from_args(args: &RunArgs, env: EnvLookup<'_>) -> Result<Settings, SettingsError> {
        let namespace = resolve_namespace(args.namespace.as_deref(), env)?;
        Ok(Settings {
            cluster_name: parse_cluster_name(
                args.decision.cluster_name.as_deref().unwrap_or_default(),
            )?,
            recommendation_source: parse_recommendation_source(
                args.decision.recommendation_source.as_deref(),
            )?,
            scope: parse_scope(args)?,
            hub: HubSettings {
                url: opt_url("hub-url", args.decision.hub_url.as_deref())?,
                token_file: args.decision.hub_token_file.clone(),
                poll_interval: positive_duration("hub-poll-interval", &args.hub_poll_interval)?,
                stale_after: positive_duration("hub-stale-after", &args.decision.hub_stale_after)?,
            },
            tolerance: parse_tolerance(&args.decision.tolerance)?,
            health: HealthSettings {
                metrics_url: opt_url("health-metrics-url", args.health_metrics_url.as_deref())?,
                cadvisor_fallback: args.health_cadvisor_fallback,
                throttling_delay: duration(
                    "health-throttling-delay",
                    &args.health_throttling_delay,
                )?,
            },
            unsupported_node_selectors: args
                .decision
                .unsupported_node_selectors
                .iter()
                .filter(|s| !s.trim().is_empty())
                .map(|s| parse_node_selector(s))
                .collect::<Result<_, _>>()?,
            on_delete: OnDeleteSettings {
                max_pod_deletes_per_run: parse_count(
                    "on-delete-max-pod-deletes-per-run",
                    &args.on_delete_max_pod_deletes_per_run,
                )?,
                settle: duration("on-delete-settle", &args.on_delete_settle)?,
            },
            freeze: FreezeSettings {
                now: args.decision.freeze_now,
                windows: parse_freeze_windows(args.decision.freeze_windows.as_deref())?,
            },
            cluster_defaults: read_cluster_defaults(
                args.decision.cluster_defaults_file.as_deref(),
            )?,
            leader_election: leader_election(args, namespace.clone(), env)?,
            outbox: OutboxSettings {
                max_events: parse_count("outbox-max-events", &args.outbox_max_events)? as usize,
                max_bytes: parse_bytes("outbox-max-bytes", &args.outbox_max_bytes)?,
            },
            reconcile: ReconcileSettings {
                concurrency: parse_count("reconcile-concurrency", &args.reconcile_concurrency)?,
                writes_per_second: parse_count(
                    "max-writes-per-second",
                    &args.max_writes_per_second,
                )?,
                write_burst: parse_count("write-burst", &args.write_burst)?,
            },
            metrics_addr: parse_addr("metrics-addr", &args.metrics_addr)?,
            webhook: WebhookSettings {
                addr: parse_addr("webhook-addr", &args.webhook_addr)?,
                cert_file: args.webhook_cert_file.clone(),
                key_file: args.webhook_key_file.clone(),
            },
            log: LogSettings {
                format: args.log_format,
                filter: parse_log_filter(&args.log_filter)?,
            },
            namespace,
            invalid_settings: Vec::new(),
        })
    }
}

/// The scope of `args`: a namespace list and a namespace selector together are refused,
/// as is a name that is not a namespace name or a selector that does not parse.
fn parse_scope(args: &RunArgs) -> Result<Scope, SettingsError> {
    const NAMESPACES: &str = "scope-namespaces";
    const NAMESPACE_SELECTOR: &str = "scope-namespace-selector";
    let namespaces: Vec<String> = args
        .scope_namespaces
        .iter()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect();
    if let Some(bad) = namespaces.iter().find(|n| !is_dns_label(n)) {
        return Err(SettingsError::invalid(
            NAMESPACES,
            args.scope_namespaces.join(","),
            format!(
                "{bad:?} is not a namespace name (a DNS label: lowercase letters, digits and \
                 '-', at most 63) in scope.namespaces"
            ),
        ));
    }
    let selector = |flag: &'static str, key: &str, text: Option<&str>| {
        let text = text.unwrap_or_default();
        parse_selector(text).map_err(|why| {
            SettingsError::invalid(flag, text, format!("{key} is not a label selector: {why}"))
        })
    };
    let namespace_selector = selector(
        NAMESPACE_SELECTOR,
        "scope.namespaceSelector",
        args.scope_namespace_selector.as_deref(),
    )?;
    let workload_selector = selector(
        "scope-workload-selector",
        "scope.workloadSelector",
        args.scope_workload_selector.as_deref(),
    )?;
    if let Some(s) = namespace_selector
        .as_ref()
        .filter(|_| !namespaces.is_empty())
    {
        return Err(SettingsError::invalid(
            NAMESPACE_SELECTOR,
            &s.text,
            format!(
                "cannot be used together with --{NAMESPACES} ({}): choose either the list of \
                 namespaces (scope.namespaces) or the namespace label selector \
                 (scope.namespaceSelector)",
                namespaces.join(",")
            ),
        ));
    }
    Ok(Scope {
        namespaces,
        namespace_selector,
        workload_selector,
    })
}

fn resolve_namespace(flag: Option<&str>, env: EnvLookup<'_>) -> Result<String, SettingsError> {
    let found = flag
        .map(str::to_owned)
        .or_else(|| env("POD_NAMESPACE"))
        .or_else(|| std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE_FILE).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    if is_dns_label(&found) {
        Ok(found)
    } else {
        Err(SettingsError::invalid(
            "namespace",
            found,
            "must be a DNS label (lowercase letters, digits and '-', at most 63)",
        ))
    }
}

fn leader_election(
    args: &RunArgs,
    namespace: String,
    env: EnvLookup<'_>,
) -> Result<LeaderElectionSettings, SettingsError> {
    let lease_duration = positive_duration("lease-duration", &args.lease_duration)?;
    let renew_deadline = positive_duration("lease-renew-deadline", &args.lease_renew_deadline)?;
    let retry_period = positive_duration("lease-retry-period", &args.lease_retry_period)?;
    if lease_duration <= 2 * LEASE_SAFETY_MARGIN {
        return Err(SettingsError::invalid(
            "lease-duration",
            &args.lease_duration,
            "must be longer than 4s (the leader stops acting 2s before the lease expires)",
        ));
    }
    let renew = (
        "lease-renew-deadline",
        args.lease_renew_deadline.as_str(),
        renew_deadline,
    );
    let lease = (
        "lease-duration",
        args.lease_duration.as_str(),
        lease_duration,
    );
    let retry = (
        "lease-retry-period",
        args.lease_retry_period.as_str(),
        retry_period,
    );
    shorter(renew, lease)?;
    shorter(retry, renew)?;
    if !is_dns_subdomain(&args.lease_name) {
        return Err(SettingsError::invalid(
            "lease-name",
            &args.lease_name,
            "must be a DNS subdomain",
        ));
    }
    Ok(LeaderElectionSettings {
        enabled: args.leader_election,
        lease_name: args.lease_name.clone(),
        namespace,
        identity: resolve_identity(args.leader_identity.as_deref(), env)?,
        lease_duration,
        renew_deadline,
        retry_period,
    })
}

/// A lease flag `(name, given text, value)` that must be shorter than another one.
type LeaseFlag<'a> = (&'static str, &'a str, Duration);

/// Refuses `flag` unless it is shorter than `than`, naming both as given.
fn shorter(flag: LeaseFlag<'_>, than: LeaseFlag<'_>) -> Result<(), SettingsError> {
    let ((name, text, value), (other, other_text, limit)) = (flag, than);
    if value >= limit {
        return Err(SettingsError::invalid(
            name,
            text,
            format!("must be shorter than --{other} ({other_text})"),
        ));
    }
    Ok(())
}

fn resolve_identity(flag: Option<&str>, env: EnvLookup<'_>) -> Result<String, SettingsError> {
    let found = flag
        .map(str::to_owned)
        .or_else(|| env("POD_NAME"))
        .or_else(|| env("HOSTNAME"))
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    match found {
        Some(id) if id.len() <= 253 => Ok(id),
        Some(id) => Err(SettingsError::invalid(
            "leader-identity",
            id,
            "must be at most 253 characters",
        )),
        None => Err(SettingsError::invalid(
            "leader-identity",
            "",
            "not set, and neither POD_NAME nor a host name is available",
        )),
    }
}
