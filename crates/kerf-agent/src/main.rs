//! `kerf-agent`: the Kerf rightsizing agent.

use std::process::ExitCode;

use clap::Parser;
use kerf_agent::cli::{Cli, Command, ExplainArgs, ReportArgs};
use kerf_agent::settings::Settings;

/// Exit code of an invalid setting (as clap uses for bad arguments).
const EXIT_INVALID_SETTING: u8 = 2;

fn main() -> ExitCode {
    // Two TLS providers are linked (ring for the Kubernetes client and the webhook,
    // aws-lc-rs through the PromQL client): choose ring for the whole process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
        Command::Crds => match kerf_api::crds_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("kerf-agent: cannot render the CRDs: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => {
            // `--print-settings` checks every setting strictly; `run` holds on an invalid
            // cluster setting instead of exiting (docs/configuration.md).
            let env = |k: &str| std::env::var(k).ok();
            let parsed = if args.print_settings {
                Settings::from_args(&args, &env)
            } else {
                Settings::from_args_holding(&args, &env)
            };
            let settings = match parsed {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("kerf-agent: {e}");
                    return ExitCode::from(EXIT_INVALID_SETTING);
                }
            };
            if args.print_settings {
                return match serde_json::to_string_pretty(&settings) {
                    Ok(json) => {
                        println!("{json}");
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("kerf-agent: cannot print the settings: {e}");
                        ExitCode::FAILURE
                    }
                };
            }
            kerf_agent::runtime::main(settings)
        }
        Command::Explain(args) => explain(&args),
        Command::Report(args) => report(&args),
    }
}

/// `kerf-agent explain <ns>/<kind>/<name>`: prints the explanation and exits.
fn explain(args: &ExplainArgs) -> ExitCode {
    let settings = match Settings::for_explain(args, &|k| std::env::var(k).ok()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kerf-agent: {e}");
            return ExitCode::from(EXIT_INVALID_SETTING);
        }
    };
    print_result(kerf_agent::explain_cmd::run(&args.target, settings))
}

/// `kerf-agent report`: prints the savings report and exits.
fn report(args: &ReportArgs) -> ExitCode {
    print_result(kerf_agent::report::source::run(args.output))
}

/// Runs `fut` on a runtime of its own and prints its text, or its error and fails.
fn print_result<E: std::fmt::Display>(
    fut: impl std::future::Future<Output = Result<String, E>>,
) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kerf-agent: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(fut) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kerf-agent: {e}");
            ExitCode::FAILURE
        }
    }
}
