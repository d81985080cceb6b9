//! `kerf-agent`: the Kerf rightsizing agent.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use kerf_agent::cli::{Cli, Command, ExplainArgs, ReportArgs};
use kerf_agent::explain_cmd::{ExplainError, Given};
use kerf_agent::settings::Settings;

/// jemalloc, with the settings built into it (`kerf_agent::runtime::allocator_settings`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Exit code of an invalid setting (as clap uses for bad arguments).
const EXIT_INVALID_SETTING: u8 = 2;

fn main() -> ExitCode {
    // Two TLS providers are linked (ring for the Kubernetes client and the webhook,
    // aws-lc-rs through the PromQL client): choose ring for the whole process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
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
        Command::Explain(args) => {
            let given = matches
                .subcommand_matches("explain")
                .map(kerf_agent::explain_cmd::agent_config::given_in)
                .unwrap_or_default();
            explain(&args, &given)
        }
        Command::Report(args) => report(&args),
    }
}

/// `kerf-agent explain <ns>/<kind>/<name>`: prints the explanation and exits; exit code 2
/// when the settings are invalid or cannot be found.
fn explain(args: &ExplainArgs, given: &Given) -> ExitCode {
    let code = |e: &ExplainError| match e {
        ExplainError::Settings(_) => ExitCode::from(EXIT_INVALID_SETTING),
        _ => ExitCode::FAILURE,
    };
    print_result(kerf_agent::explain_cmd::run(args, given), code)
}

/// `kerf-agent report`: prints the savings report and exits.
fn report(args: &ReportArgs) -> ExitCode {
    print_result(kerf_agent::report::source::run(args.output), |_| {
        ExitCode::FAILURE
    })
}

/// Runs `fut` on a runtime of its own and prints its text, or its error and exits with
/// `code` of it.
fn print_result<E: std::fmt::Display>(
    fut: impl std::future::Future<Output = Result<String, E>>,
    code: impl Fn(&E) -> ExitCode,
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
            code(&e)
        }
    }
}
