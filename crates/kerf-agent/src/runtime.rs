//! `kerf-agent run`: settings -> Kubernetes client -> caches -> lease -> servers.
//!
//! Every replica runs the watches, the metrics server and (later) the webhook; only the
//! leader runs the controllers. Components get what they need through [`Context`].

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::apiclient::{ApiHealth, Guard, resize_subresource_served};
use crate::cache::CacheSet;
use crate::cli::LogFormat;
use crate::clock::{SharedClock, SystemClock};
use crate::context::{CertificateProblem, Context};
use crate::lease::{Elector, LeaderState, always_leader};
use crate::listen::{BindError, bind_setting};
use crate::logging;
use crate::metrics::{self, Metrics};
use crate::settings::{LogSettings, Settings};

/// The allocator of the `kerf-agent` binary: `jemalloc` with the default feature
/// `jemalloc` (`src/main.rs` makes it the global allocator), else `system`.
pub const ALLOCATOR: &str = if cfg!(feature = "jemalloc") {
    "jemalloc"
} else {
    "system"
};

/// The settings the binary's jemalloc runs with: those built into it
/// (`JEMALLOC_SYS_WITH_MALLOC_CONF` in `.cargo/config.toml`), then `_RJEM_MALLOC_CONF` from
/// the environment, which jemalloc reads after them so that its options win. Empty with the
/// system allocator. With glibc's allocator, memory freed inside its heap stayed resident:
/// at 10,000 workloads the agent's RSS was twice the heap it held (docs/benchmarks.md,
/// "jemalloc and a smaller binary").
pub fn allocator_settings() -> String {
    #[cfg(feature = "jemalloc")]
    {
        // The C string as read keeps its terminating NUL.
        let built = tikv_jemalloc_ctl::config::malloc_conf::read()
            .unwrap_or_default()
            .trim_end_matches('\0');
        match std::env::var("_RJEM_MALLOC_CONF") {
            Ok(env) if !env.is_empty() && !built.is_empty() => format!("{built},{env}"),
            Ok(env) if !env.is_empty() => env,
            _ => built.to_owned(),
        }
    }
    #[cfg(not(feature = "jemalloc"))]
    String::new()
}

/// How long shutdown waits for tasks to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Runs the agent on a new tokio runtime; returns the process exit code.
pub fn main(settings: Settings) -> ExitCode {
    init_tracing(&settings.log);
    crate::failpoints::init_from_env();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Each error of `run` names its cause in its own message.
            tracing::error!(error = %e, "kerf-agent stopped");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to standard output ([`logging::subscriber`]), with colour codes only when
/// standard output is a terminal.
fn init_tracing(log: &LogSettings) {
    use tracing_subscriber::util::SubscriberInitExt as _;
    let ansi =
        log.format == LogFormat::Text && std::io::IsTerminal::is_terminal(&std::io::stdout());
    if let Err(e) = logging::subscriber(log, std::io::stdout, ansi).try_init() {
        eprintln!("kerf-agent: logging already initialised: {e}");
    }
}

/// Runs the agent until SIGTERM or Ctrl-C.
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    let client = client().await.map_err(|e| {
        anyhow::anyhow!("cannot build a Kubernetes client (in-cluster or KUBECONFIG): {e}")
    })?;
    let agent = Agent::start(client, settings, Arc::new(SystemClock)).await?;
    wait_for_signal().await;
    tracing::info!("shutting down");
    agent.stop().await;
    Ok(())
}

/// The Kubernetes client from the in-cluster configuration or `KUBECONFIG`, without kube's
/// own retries of 429, 503 and 504 answers: the watches and the reconciler back off
/// themselves, and an API server outage shows at once (readiness, no pass started).
async fn client() -> Result<kube::Client, kube::Error> {
    let mut config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    config.default_retry = false;
    kube::Client::try_from(config)
}

/// A running agent: the watches, the metrics server and the leader's controllers. `run`
/// uses it for the process; tests start several in one process against kerf-sim.
pub struct Agent {
    ctx: Context,
    shutdown_tx: watch::Sender<bool>,
    tasks: JoinSet<()>,
    watches: JoinSet<()>,
    _leader_tx: watch::Sender<LeaderState>,
}

impl Agent {
    /// Starts the agent's tasks on `client` with `settings` and `clock`: caches, lease
    /// (when enabled), metrics server and, once the caches synced and while leading, the
    /// controllers. Asks discovery once whether `pods/resize` is served (design D19).
    /// Fails, before anything starts, when the metrics or webhook address cannot be bound.
    pub async fn start(
        client: kube::Client,
        settings: Settings,
        clock: SharedClock,
    ) -> Result<Agent, BindError> {
        let listeners = Listeners::bind(&settings)?;
        let settings = Arc::new(settings);
        let metrics = Arc::new(Metrics::new());
        let guard = Guard::new(settings.reconcile.write_rate(), metrics.api.clone());
        let client = guard.wrap(client);
        let holding = report_invalid_settings(&settings, &metrics);
        let (shutdown_tx, shutdown) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let resize_subresource = resize_subresource_served(&client).await;
        let cache = CacheSet::new();
        let watches = cache.start(
            client.clone(),
            metrics.cache.clone(),
            &settings.scope.namespaces,
        );
        let leadership = Leadership {
            holding,
            client: &client,
            settings: &settings,
            clock: &clock,
            metrics: &metrics,
        };
        let (leader_tx, leader) = leadership.start(&mut tasks, &shutdown);
        tasks.spawn(crate::apiclient::probe_while_down(
            client.clone(),
            guard.health.clone(),
            shutdown.clone(),
        ));
        let webhook_certificate = listeners.serve(
            &mut tasks,
            Served {
                settings: &settings,
                cache: &cache,
                health: &guard.health,
                clock: &clock,
                metrics: &metrics,
            },
            &shutdown,
        );
        let ctx = Context {
            settings: settings.clone(),
            client,
            cache,
            clock,
            leader,
            metrics,
            shutdown,
            resize_subresource,
            webhook_certificate,
            api_health: guard.health.clone(),
            limiter: guard.limiter.clone(),
        };
        if !holding {
            tasks.spawn(leader_work(ctx.clone()));
        }
        tracing::info!(
            cluster = %settings.cluster_name,
            namespace = %settings.namespace,
            allocator = ALLOCATOR,
            allocator_settings = %allocator_settings(),
            "kerf-agent started"
        );
        Ok(Agent {
            ctx,
            shutdown_tx,
            tasks,
            watches,
            _leader_tx: leader_tx,
        })
    }

    /// What the components share.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Stops every task, waiting up to the shutdown grace for them to finish.
    pub async fn stop(mut self) {
        let _ = self.shutdown_tx.send(true);
        let drain = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
            tracing::warn!("tasks did not stop in time");
        }
        self.watches.abort_all();
    }

    /// Stops every task at once, wherever it is, as a killed process would.
    pub async fn abort(mut self) {
        self.tasks.abort_all();
        self.watches.abort_all();
        while self.tasks.join_next().await.is_some() {}
        while self.watches.join_next().await.is_some() {}
    }
}

/// The two listening sockets of a replica, bound before anything starts so that an address
/// in use fails the start at once.
struct Listeners {
    metrics: tokio::net::TcpListener,
    webhook: tokio::net::TcpListener,
}

/// What the metrics server and the webhook read once they run.
struct Served<'a> {
    settings: &'a Settings,
    cache: &'a CacheSet,
    health: &'a ApiHealth,
    clock: &'a SharedClock,
    metrics: &'a Metrics,
}

impl Listeners {
    /// Binds the metrics and the webhook address of `settings`.
    fn bind(settings: &Settings) -> Result<Listeners, BindError> {
        let metrics = bind_setting(
            "metrics-addr",
            settings.metrics_addr,
            "metrics and health server",
        )?;
        let webhook = bind_setting("webhook-addr", settings.webhook.addr, "webhook")?;
        Ok(Listeners { metrics, webhook })
    }

    /// Starts the metrics server (with readiness and `/report`) and the webhook on their
    /// sockets; returns whether the webhook's certificate is usable.
    fn serve(
        self,
        tasks: &mut JoinSet<()>,
        served: Served<'_>,
        shutdown: &watch::Receiver<bool>,
    ) -> CertificateProblem {
        let settings = served.settings;
        let ready = ready_check(served.cache, served.health, settings.holding_reason());
        let report = crate::report::source::router(served.cache.clone(), served.clock.clone());
        let servers = MetricsServer { ready, report };
        spawn_metrics_server(
            tasks,
            self.metrics,
            served.metrics,
            servers,
            shutdown.clone(),
        );
        let (_, webhook_certificate) = crate::webhook::spawn(
            tasks,
            &settings.webhook,
            &settings.scope,
            self.webhook,
            served.cache,
            served.metrics.webhook.clone(),
            shutdown.clone(),
        );
        webhook_certificate
    }
}

/// How a replica comes to lead: never while `holding` (an invalid cluster setting), by the
/// Lease when leader election is on, at once otherwise.
struct Leadership<'a> {
    holding: bool,
    client: &'a kube::Client,
    settings: &'a Settings,
    clock: &'a SharedClock,
    metrics: &'a Metrics,
}

impl Leadership<'_> {
    /// Starts the elector when there is one; returns the leadership channel.
    fn start(
        self,
        tasks: &mut JoinSet<()>,
        shutdown: &watch::Receiver<bool>,
    ) -> (watch::Sender<LeaderState>, watch::Receiver<LeaderState>) {
        if self.holding {
            // Never leads: no Lease taken, no controller started.
            watch::channel(LeaderState::Follower { holder: None })
        } else if self.settings.leader_election.enabled {
            let (tx, rx) = watch::channel(LeaderState::Follower { holder: None });
            let elector = Elector::new(
                self.client.clone(),
                self.settings.leader_election.clone(),
                self.clock.clone(),
                self.metrics.leader.clone(),
            );
            tasks.spawn(elector.run(tx.clone(), shutdown.clone()));
            (tx, rx)
        } else {
            self.metrics.leader.leader.set(1);
            always_leader()
        }
    }
}

/// Ready once every watch listed and while the API server answers; never while `holding`
/// (an invalid cluster setting, named in it).
fn ready_check(
    cache: &CacheSet,
    health: &ApiHealth,
    holding: Option<String>,
) -> metrics::ReadyCheck {
    let cache = cache.clone();
    let health = health.clone();
    Arc::new(move || {
        if let Some(reason) = &holding {
            return Err(reason.clone().into());
        }
        if !cache.is_synced() {
            return Err("caches not synced".into());
        }
        health.outage().map_or(Ok(()), |e| Err(e.into()))
    })
}

/// Logs each invalid cluster setting at error level and sets
/// `kerf_agent_invalid_setting{setting}` to 1; true when there is any: the agent then
/// starts without leading, so it makes no change (docs/configuration.md).
fn report_invalid_settings(settings: &Settings, metrics: &Metrics) -> bool {
    for invalid in &settings.invalid_settings {
        let label = metrics::SettingLabel {
            setting: invalid.setting.to_owned(),
        };
        metrics.invalid_setting.get_or_create(&label).set(1);
        tracing::error!(
            setting = invalid.setting,
            error = %invalid.message,
            "invalid cluster setting: the agent runs but makes no change and reports not ready until it is fixed"
        );
    }
    settings.holding()
}

/// What the metrics port serves besides `/metrics`: readiness and `/report`.
struct MetricsServer {
    ready: metrics::ReadyCheck,
    report: axum::Router,
}

fn spawn_metrics_server(
    tasks: &mut JoinSet<()>,
    listener: tokio::net::TcpListener,
    metrics: &Metrics,
    servers: MetricsServer,
    mut shutdown: watch::Receiver<bool>,
) {
    let router = metrics::router(metrics.registry.clone(), servers.ready).merge(servers.report);
    tasks.spawn(async move {
        let stop = async move {
            let _ = shutdown.wait_for(|s| *s).await;
        };
        if let Err(e) = metrics::serve_on(listener, router, stop).await {
            tracing::error!(error = %e, "metrics server failed");
        }
    });
}

/// Waits for the caches, then for leadership, and runs the controllers while leading.
async fn leader_work(ctx: Context) {
    let mut shutdown = ctx.shutdown.clone();
    tokio::select! {
        _ = ctx.cache.wait_synced() => {}
        _ = shutdown.wait_for(|s| *s) => return,
    }
    tracing::info!("caches synced");
    let mut leader = ctx.leader.clone();
    loop {
        tokio::select! {
            r = leader.wait_for(|l| l.is_leader_at(ctx.clock.now())) => if r.is_err() { return },
            _ = shutdown.wait_for(|s| *s) => return,
        }
        tracing::info!("leading: controllers start");
        // ================================================================================
        // THE RECONCILER STARTS HERE (leader only): reconciler, executor, health watch,
        // hub client and outbox, each given `ctx.clone()`. They stop when leadership is
        // lost (below) or on shutdown, and check `ctx.may_write()` before every
        // actuating write.
        // ================================================================================
        let mut controllers = crate::reconcile::start(ctx.clone());
        tokio::select! {
            _ = leader.wait_for(|l| !l.is_leader_at(ctx.clock.now())) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        controllers.abort_all();
        tracing::info!("leadership lost: controllers stop");
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
