//! `kerf-agent`: the Kerf rightsizing agent.

use clap::{Parser, Subcommand};

/// The Kerf rightsizing agent: puts the hub's CPU and memory recommendations into effect
/// within the guardrails.
#[derive(Debug, Parser)]
#[command(name = "kerf-agent", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the CRD YAML generated from the Rust types.
    Crds,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Crds => match kerf_api::crds_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("kerf-agent: cannot render the CRDs: {e}");
                std::process::ExitCode::FAILURE
            }
        },
    }
}
