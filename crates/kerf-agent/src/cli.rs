//! Command line: `kerf-agent run | crds | explain | report`. Every setting of `run` is a flag with an
//! environment variable (`KERF_*`); [`crate::settings::Settings::from_args`] validates the
//! raw values into typed settings.

use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::{Args, FromArgMatches, Parser, Subcommand, ValueEnum};

/// What `kerf-agent --version` prints after the name: the version and the commit the
/// binary was built from (`build.rs`; `unknown` when neither git nor `KERF_COMMIT` named it).
pub const VERSION_AND_COMMIT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("KERF_BUILD_COMMIT"),
    ")"
);

/// The ConfigMap `explain` reads without `--from-agent=<namespace>/<name>`: the chart's
/// release `kerf-agent` in `kerf-system`.
pub const DEFAULT_AGENT_CONFIG: &str = "kerf-system/kerf-agent-config";

/// The Kerf rightsizing agent: puts the hub's CPU and memory recommendations into effect
/// within the guardrails.
#[derive(Debug, Parser)]
#[command(name = "kerf-agent", version = VERSION_AND_COMMIT, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the CRD YAML generated from the Rust types.
    Crds,
    /// Run the agent: watches, reconciler (leader only), webhook and metrics.
    Run(Box<RunArgs>),
    /// Explain the decision for one workload: the effective policy with the layer of every
    /// field, the current and target values, each pipeline step with its value and
    /// threshold, and when the change could go in next. Reads the cluster (KUBECONFIG or
    /// in-cluster) and the hub with the running agent's decision settings (its ConfigMap),
    /// each overridden by a flag or variable given.
    #[command(mut_arg("cluster_name", |a| a.required(false)))]
    Explain(Box<ExplainArgs>),
    /// Print the savings report: per namespace and for the cluster, the CPU and memory
    /// requested now, what the hub recommends, what Kerf applied and what is held back and
    /// why. Reads the cluster (KUBECONFIG or in-cluster) and writes nothing.
    Report(ReportArgs),
}

/// Arguments of `kerf-agent report`.
#[derive(Clone, Debug, Args)]
pub struct ReportArgs {
    /// `table` for people (at most 120 columns), `json` for tools (schema in docs/report.md).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = crate::report::source::Output::Table)]
    pub output: crate::report::source::Output,
}

/// Arguments of `kerf-agent explain`: the workload and the settings decisions read.
#[derive(Clone, Debug, Args)]
pub struct ExplainArgs {
    /// The workload: `<namespace>/<kind>/<name>`, kind Deployment, StatefulSet or DaemonSet.
    pub target: String,
    /// The running agent's settings: the ConfigMap `<namespace>/<name>` the chart renders
    /// (`<release>-config`). Without the flag `kerf-system/kerf-agent-config` is read, and
    /// when it is missing the flags alone are used if they name the cluster.
    #[arg(long, value_name = "NAMESPACE/NAME", num_args = 0..=1,
        default_missing_value = DEFAULT_AGENT_CONFIG)]
    pub from_agent: Option<String>,
    /// The settings decisions read (flags or `KERF_*` environment, as for `run`); each one
    /// given overrides the agent's.
    #[command(flatten)]
    pub decision: DecisionArgs,
}

/// Log output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The settings that decisions read: both `run` and `explain` take them.
#[derive(Clone, Debug, Args)]
pub struct DecisionArgs {
    /// Name of this cluster at the hub (required by `run`; `explain` reads it from the
    /// agent's ConfigMap).
    #[arg(
        long,
        env = "KERF_CLUSTER_NAME",
        required = true,
        help_heading = "Cluster"
    )]
    pub cluster_name: Option<String>,

    /// Base URL of the hub (http or https). Without it, and without
    /// --recommendation-source, the agent starts held (not ready) and makes no change.
    #[arg(long, env = "KERF_HUB_URL", help_heading = "Hub")]
    pub hub_url: Option<String>,

    /// Where recommendations come from: `hub` (fetched from --hub-url; the default when it
    /// is set) or `vpa` (VerticalPodAutoscaler objects in `Off` or `Initial` mode, without a
    /// hub). See docs/sources.md.
    #[arg(long, env = "KERF_RECOMMENDATION_SOURCE", help_heading = "Hub")]
    pub recommendation_source: Option<String>,

    /// File holding the hub's bearer token (mounted from a Secret); read at each request.
    #[arg(long, env = "KERF_HUB_TOKEN_FILE", help_heading = "Hub")]
    pub hub_token_file: Option<PathBuf>,

    /// With no successful hub fetch for this long, new changes are blocked HubUnreachable
    /// (hub.staleAfter).
    #[arg(
        long,
        env = "KERF_HUB_STALE_AFTER",
        default_value = "30m",
        help_heading = "Hub"
    )]
    pub hub_stale_after: String,

    /// A change smaller than this percentage keeps the current value; decimals allowed,
    /// greater than 0 and less than 100.
    #[arg(
        long,
        env = "KERF_TOLERANCE",
        default_value = "5",
        help_heading = "Decisions"
    )]
    pub tolerance: String,

    /// Nodes where in-place changes are refused (UnsupportedNode), as `key=value[,key=value]`
    /// (all pairs must match). Repeatable; in the environment separate selectors with `;`.
    #[arg(
        long = "unsupported-node-selector",
        env = "KERF_UNSUPPORTED_NODE_SELECTORS",
        value_delimiter = ';',
        help_heading = "Decisions"
    )]
    pub unsupported_node_selectors: Vec<String>,

    /// YAML file with the cluster's default policy fields (a RightsizingPolicy spec without
    /// selector and priority): the clusterDefaults layer. An unknown key is refused.
    #[arg(long, env = "KERF_CLUSTER_DEFAULTS_FILE", help_heading = "Decisions")]
    pub cluster_defaults_file: Option<PathBuf>,

    /// Freeze the whole cluster: nothing is applied or released (FreezeWindow).
    #[arg(long, env = "KERF_FREEZE_NOW", value_parser = BoolishValueParser::new(),
        num_args = 0..=1, default_value = "false", default_missing_value = "true",
        help_heading = "Freeze")]
    pub freeze_now: bool,

    /// Cluster-wide freeze windows: a path to a YAML file holding a list of windows, or the
    /// list inline as JSON (starting with `[`). An invalid window is refused at startup.
    #[arg(long, env = "KERF_FREEZE_WINDOWS", help_heading = "Freeze")]
    pub freeze_windows: Option<String>,
}

/// Every setting of `kerf-agent run`, as written on the command line or in the
/// environment. Durations use Go syntax (`30s`, `2m`, `1h30m`).
#[derive(Clone, Debug, Args)]
pub struct RunArgs {
    /// The settings decisions read (shared with `explain`).
    #[command(flatten)]
    pub decision: DecisionArgs,

    /// Namespace the agent runs in (Lease, hub state ConfigMap). Falls back to
    /// POD_NAMESPACE, then the service account's namespace, then `kerf-system`.
    #[arg(long, env = "KERF_NAMESPACE", help_heading = "Cluster")]
    pub namespace: Option<String>,

    /// The namespaces the agent manages (`scope.namespaces`), comma separated; empty:
    /// every namespace. Cannot be combined with --scope-namespace-selector.
    #[arg(
        long,
        env = "KERF_SCOPE_NAMESPACES",
        value_delimiter = ',',
        help_heading = "Scope"
    )]
    pub scope_namespaces: Vec<String>,

    /// Only namespaces whose labels match this label selector are managed
    /// (`scope.namespaceSelector`, `kubectl get -l` syntax: `team=a,tier in (web,api),!legacy`);
    /// empty: every namespace.
    #[arg(long, env = "KERF_SCOPE_NAMESPACE_SELECTOR", help_heading = "Scope")]
    pub scope_namespace_selector: Option<String>,

    /// Only workloads whose labels match this label selector are managed
    /// (`scope.workloadSelector`, same syntax); empty: every workload.
    #[arg(long, env = "KERF_SCOPE_WORKLOAD_SELECTOR", help_heading = "Scope")]
    pub scope_workload_selector: Option<String>,

    /// How often recommendations and config are fetched from the hub.
    #[arg(
        long,
        env = "KERF_HUB_POLL_INTERVAL",
        default_value = "60s",
        help_heading = "Hub"
    )]
    pub hub_poll_interval: String,

    /// Prometheus-compatible endpoint the health watch queries for CPU throttling.
    #[arg(long, env = "KERF_HEALTH_METRICS_URL", help_heading = "Health watch")]
    pub health_metrics_url: Option<String>,

    /// Without a metrics endpoint, read throttling from the kubelets' cAdvisor metrics
    /// through the API server's node proxy.
    #[arg(long, env = "KERF_HEALTH_CADVISOR_FALLBACK", value_parser = BoolishValueParser::new(),
        num_args = 0..=1, default_value = "false", default_missing_value = "true",
        help_heading = "Health watch")]
    pub health_cadvisor_fallback: bool,

    /// Throttling is measured from this long after a change.
    #[arg(
        long,
        env = "KERF_HEALTH_THROTTLING_DELAY",
        default_value = "2m",
        help_heading = "Health watch"
    )]
    pub health_throttling_delay: String,

    /// Outdated OnDelete StatefulSet pods replaced per run.
    #[arg(
        long,
        env = "KERF_ON_DELETE_MAX_POD_DELETES_PER_RUN",
        default_value = "1",
        help_heading = "OnDelete StatefulSets"
    )]
    pub on_delete_max_pod_deletes_per_run: String,

    /// Every pod must have been Ready this long before an outdated pod is replaced.
    #[arg(
        long,
        env = "KERF_ON_DELETE_SETTLE",
        default_value = "30s",
        help_heading = "OnDelete StatefulSets"
    )]
    pub on_delete_settle: String,

    /// Elect a leader among the replicas; only the leader reconciles.
    #[arg(long, env = "KERF_LEADER_ELECTION", value_parser = BoolishValueParser::new(),
        num_args = 0..=1, default_value = "true", default_missing_value = "true",
        help_heading = "Leader election")]
    pub leader_election: bool,

    /// Name of the coordination.k8s.io Lease in the agent's namespace.
    #[arg(
        long,
        env = "KERF_LEASE_NAME",
        default_value = "kerf-agent",
        help_heading = "Leader election"
    )]
    pub lease_name: String,

    /// Identity written into the Lease. Falls back to POD_NAME, then the host name.
    #[arg(long, env = "KERF_LEADER_IDENTITY", help_heading = "Leader election")]
    pub leader_identity: Option<String>,

    /// How long a Lease is valid after its last renewal.
    #[arg(
        long,
        env = "KERF_LEASE_DURATION",
        default_value = "15s",
        help_heading = "Leader election"
    )]
    pub lease_duration: String,

    /// The leader steps down when it has not renewed for this long.
    #[arg(
        long,
        env = "KERF_LEASE_RENEW_DEADLINE",
        default_value = "10s",
        help_heading = "Leader election"
    )]
    pub lease_renew_deadline: String,

    /// Time between two attempts to acquire or renew.
    #[arg(
        long,
        env = "KERF_LEASE_RETRY_PERIOD",
        default_value = "2s",
        help_heading = "Leader election"
    )]
    pub lease_retry_period: String,

    /// Workloads reconciled at once (one pass per workload at a time).
    #[arg(
        long,
        env = "KERF_RECONCILE_CONCURRENCY",
        default_value = "16",
        help_heading = "Reconciler"
    )]
    pub reconcile_concurrency: String,

    /// Actuating writes (pod resizes and evictions, template applies, HPA patches) per
    /// second once the burst is spent.
    #[arg(
        long,
        env = "KERF_MAX_WRITES_PER_SECOND",
        default_value = "20",
        help_heading = "Reconciler"
    )]
    pub max_writes_per_second: String,

    /// Actuating writes that may go out at once before the rate applies.
    #[arg(
        long,
        env = "KERF_WRITE_BURST",
        default_value = "40",
        help_heading = "Reconciler"
    )]
    pub write_burst: String,

    /// Most events the outbox holds; the oldest is dropped beyond it.
    #[arg(
        long,
        env = "KERF_OUTBOX_MAX_EVENTS",
        default_value = "10000",
        help_heading = "Outbox"
    )]
    pub outbox_max_events: String,

    /// Most bytes of events the outbox holds (`8Mi`, `500Ki` or a number of bytes).
    #[arg(
        long,
        env = "KERF_OUTBOX_MAX_BYTES",
        default_value = "8Mi",
        help_heading = "Outbox"
    )]
    pub outbox_max_bytes: String,

    /// Listen address of /metrics, /healthz and /readyz.
    #[arg(
        long,
        env = "KERF_METRICS_ADDR",
        default_value = "0.0.0.0:8080",
        help_heading = "Servers"
    )]
    pub metrics_addr: String,

    /// Listen address of the mutating webhook (HTTPS); `:8443` listens on every address.
    #[arg(
        long,
        env = "KERF_WEBHOOK_ADDR",
        default_value = ":8443",
        help_heading = "Servers"
    )]
    pub webhook_addr: String,

    /// PEM certificate of the webhook; reloaded when it changes.
    #[arg(
        long,
        env = "KERF_WEBHOOK_CERT_FILE",
        default_value = "/etc/kerf/webhook/tls.crt",
        help_heading = "Servers"
    )]
    pub webhook_cert_file: PathBuf,

    /// PEM private key of the webhook; reloaded when it changes.
    #[arg(
        long,
        env = "KERF_WEBHOOK_KEY_FILE",
        default_value = "/etc/kerf/webhook/tls.key",
        help_heading = "Servers"
    )]
    pub webhook_key_file: PathBuf,

    /// Log format: `text` (colour codes only when the output is a terminal) or `json`
    /// (one object per line).
    #[arg(long, env = "KERF_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text,
        help_heading = "Logging")]
    pub log_format: LogFormat,

    /// Log filter in tracing's EnvFilter syntax (`info`, `kerf_agent=debug,kube=warn`).
    #[arg(
        long,
        env = "KERF_LOG",
        default_value = "info",
        help_heading = "Logging"
    )]
    pub log_filter: String,

    /// Validate the settings, print them as JSON (durations, percentages and sizes written
    /// as the flags take them) and exit without starting.
    #[arg(long)]
    pub print_settings: bool,
}

impl RunArgs {
    /// `run`'s arguments with `decision` as given and every other setting at its default,
    /// without reading the environment: what `explain` validates its settings with.
    pub fn with_defaults(decision: DecisionArgs) -> Result<RunArgs, clap::Error> {
        let cmd =
            RunArgs::augment_args(clap::Command::new("run")).mut_args(|a| a.env(None::<&str>));
        let argv = [
            "run",
            "--cluster-name",
            "unused",
            "--leader-identity",
            "explain",
        ];
        let mut run = RunArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)?;
        run.decision = decision;
        Ok(run)
    }
}
