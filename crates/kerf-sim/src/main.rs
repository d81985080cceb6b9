//! `kerf-sim`: `serve` runs a simulated Kubernetes cluster (and optionally the dev hub)
//! until stopped (ctrl-c); `fault` injects a container fault into a running one through its
//! control listener.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kerf_sim::hub::{DevHub, DevHubConfig};
use kerf_sim::kubelet::{Fault, send_fault, serve_control};
use kerf_sim::sim::{Sim, SimConfig};

#[derive(Parser)]
#[command(
    name = "kerf-sim",
    about = "A simulated Kubernetes cluster for Kerf's tests and demo"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the simulated cluster and write a kubeconfig for it.
    Serve(ServeArgs),
    /// Inject a fault into a running container of a served cluster.
    Fault(FaultArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// Where to write the kubeconfig.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Number of nodes.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Allocatable CPU per node.
    #[arg(long, default_value = "4")]
    node_cpu: String,
    /// Allocatable memory per node.
    #[arg(long, default_value = "16Gi")]
    node_memory: String,
    /// Names of the nodes with swap (comma-separated).
    #[arg(long, value_delimiter = ',')]
    swap_nodes: Vec<String>,
    /// Kubernetes version to emulate (1.33 to 1.36).
    #[arg(long, default_value = "1.36")]
    kubernetes_version: String,
    /// Port of the API server (0: any).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Address of the plain-HTTP control listener (faults, cAdvisor counters).
    #[arg(long, default_value = "127.0.0.1:0")]
    control_addr: SocketAddr,
    /// Also serve the dev hub with the recommendations of this YAML file.
    #[arg(long)]
    hub_file: Option<PathBuf>,
    /// Address of the dev hub (with --hub-file).
    #[arg(long, default_value = "127.0.0.1:0")]
    hub_addr: SocketAddr,
    /// Bearer token the dev hub requires (with --hub-file; none: any request is accepted).
    #[arg(long)]
    hub_token: Option<String>,
    /// How late watches deliver each change: a range such as `50ms..400ms` (a random delay
    /// per change and watch, order kept) or a fixed `200ms`. Default: at once.
    #[arg(long, value_parser = kerf_sim::api::watch_delay::parse_range)]
    watch_delay: Option<std::ops::Range<std::time::Duration>>,
    /// How long the kubelet defers each resize (`PodResizePending` reason `Deferred`)
    /// before it actuates it, such as `5s`. Default: at once.
    #[arg(long, value_parser = parse_fixed_duration)]
    resize_defer: Option<std::time::Duration>,
}

#[derive(Args)]
struct FaultArgs {
    /// URL of the control listener, as `kerf-sim serve` printed it.
    #[arg(long)]
    control: String,
    /// What to do to the container.
    #[arg(value_enum)]
    kind: FaultKind,
    /// Namespace of the pod.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Pod name.
    #[arg(long)]
    pod: String,
    /// Container name.
    #[arg(long)]
    container: String,
    /// Throttled share of the CFS periods, 0 to 1 (throttle only).
    #[arg(long, required_if_eq("kind", "throttle"))]
    ratio: Option<f64>,
}

#[derive(Clone, Copy, ValueEnum)]
enum FaultKind {
    /// OOM-kill the container (exit code 137, restarted).
    OomKill,
    /// Make the container exit with an error (exit code 1, restarted).
    Restart,
    /// Throttle `--ratio` of the container's CFS periods from now on.
    Throttle,
}

fn parse_fixed_duration(v: &str) -> Result<std::time::Duration, String> {
    let range = kerf_sim::api::watch_delay::parse_range(v)?;
    if range.start != range.end {
        return Err(format!("{v}: one duration, such as 5s"));
    }
    Ok(range.start)
}

fn parse_minor(v: &str) -> anyhow::Result<u32> {
    let v = v.trim_start_matches('v');
    let minor: u32 = v
        .split('.')
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("version must look like 1.36"))?
        .parse()?;
    if !(33..=36).contains(&minor) {
        anyhow::bail!("supported versions are 1.33 to 1.36");
    }
    Ok(minor)
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = SimConfig {
        nodes: args.nodes,
        node_cpu: args.node_cpu,
        node_memory: args.node_memory,
        swap_nodes: args.swap_nodes,
        kubernetes_minor: parse_minor(&args.kubernetes_version)?,
        kubeconfig_path: Some(args.kubeconfig),
        port: args.port,
        watch_delay: args.watch_delay.unwrap_or(kerf_sim::api::watch_delay::NONE),
        resize_defer: args.resize_defer.unwrap_or_default(),
        ..SimConfig::default()
    };
    let sim = Sim::start(config).await?;
    let control = serve_control(sim.context(), args.control_addr).await?;
    println!(
        "kerf-sim serving {} (kubeconfig {})",
        sim.url(),
        sim.kubeconfig_path().display()
    );
    println!("control listener http://{control}");
    let hub = match &args.hub_file {
        Some(path) => {
            let config = DevHubConfig {
                addr: args.hub_addr,
                token: args.hub_token,
                ..DevHubConfig::default()
            };
            let hub = DevHub::from_file(path, config).await?;
            println!("dev hub {} (file {})", hub.url(), path.display());
            Some(hub)
        }
        None => None,
    };
    tokio::signal::ctrl_c().await?;
    drop(hub);
    drop(sim);
    Ok(())
}

async fn fault(args: FaultArgs) -> anyhow::Result<()> {
    let (namespace, pod, container) = (args.namespace, args.pod, args.container);
    let fault = match args.kind {
        FaultKind::OomKill => Fault::OomKill {
            namespace,
            pod,
            container,
        },
        FaultKind::Restart => Fault::Restart {
            namespace,
            pod,
            container,
        },
        FaultKind::Throttle => Fault::Throttle {
            namespace,
            pod,
            container,
            ratio: args.ratio.unwrap_or_default(),
        },
    };
    send_fault(&args.control, &fault).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    match Cli::parse().command {
        Command::Serve(args) => serve(args).await,
        Command::Fault(args) => fault(args).await,
    }
}
