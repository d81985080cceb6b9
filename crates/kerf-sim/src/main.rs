//! `kerf-sim serve`: runs a simulated Kubernetes cluster until stopped (ctrl-c).

use std::path::PathBuf;

use clap::{Parser, Subcommand};
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
    Serve {
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
        /// Kubernetes version to emulate (1.33 to 1.36).
        #[arg(long, default_value = "1.36")]
        kubernetes_version: String,
        /// Port to listen on (0: any).
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let Command::Serve {
        kubeconfig,
        nodes,
        node_cpu,
        node_memory,
        kubernetes_version,
        port,
    } = Cli::parse().command;
    let config = SimConfig {
        nodes,
        node_cpu,
        node_memory,
        kubernetes_minor: parse_minor(&kubernetes_version)?,
        kubeconfig_path: Some(kubeconfig),
        port,
        ..SimConfig::default()
    };
    let sim = Sim::start(config).await?;
    println!(
        "kerf-sim serving {} (kubeconfig {})",
        sim.url(),
        sim.kubeconfig_path().display()
    );
    tokio::signal::ctrl_c().await?;
    drop(sim);
    Ok(())
}
