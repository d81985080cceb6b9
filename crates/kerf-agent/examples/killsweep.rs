//! The kill sweep: `cargo run --release -p kerf-agent --example killsweep -- --points N
//! [--seed S] [--stretch-ms MS] [--fail-point-rounds R] [--agent PATH] [--log FILE]`.
//!
//! Starts kerf-sim and the dev hub in this process, builds (unless `--agent` names one) and
//! runs the `kerf-agent` binary with its fail points, kills it at N random moments within
//! `--stretch-ms` (default 1000) of its controllers starting (one in five of its start) and at every fail point R times (default N/100, at least
//! 1), restarting it each time, then checks every invariant and prints the counts. Exits
//! with status 1 when an invariant is broken. The same sweep runs at N = 20 in
//! `tests/killsweep.rs`. With `KERF_RESULT_FILE` set, the counts are also written there as
//! JSON (`make soak`).

#[path = "../tests/killsweep_support/mod.rs"]
mod killsweep_support;

use std::path::PathBuf;
use std::time::Duration;

use killsweep_support::Options;

/// The value after flag `name`, if given.
fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn number(args: &[String], name: &str, default: u64) -> anyhow::Result<u64> {
    flag(args, name).map_or(Ok(default), |v| {
        v.parse().map_err(|e| anyhow::anyhow!("{name} {v}: {e}"))
    })
}

fn options() -> anyhow::Result<Options> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let points = number(&args, "--points", 20)? as usize;
    let binary = match flag(&args, "--agent") {
        Some(path) => PathBuf::from(path),
        None => killsweep_support::agent::build_beside_example()?,
    };
    let log = flag(&args, "--log").map_or_else(
        || std::env::temp_dir().join("killsweep-agent.log"),
        PathBuf::from,
    );
    Ok(Options {
        points,
        seed: number(&args, "--seed", 1)?,
        stretch: Duration::from_millis(number(&args, "--stretch-ms", 1000)?),
        fail_point_rounds: number(&args, "--fail-point-rounds", (points as u64 / 100).max(1))?
            as usize,
        binary,
        log,
    })
}

/// The counts as the JSON `scripts/soak.sh` records.
fn result_json(opts: &Options, c: &killsweep_support::Counts) -> serde_json::Value {
    serde_json::json!({
        "points": opts.points,
        "seed": opts.seed,
        "random_kills": c.random_kills,
        "fail_point_kills": c.fail_point_kills,
        "agent_starts": c.starts,
        "changes": c.changes,
        "applied": c.applied,
        "rolled_back": c.rolled_back,
        "released": c.released,
        "deferred": c.deferred,
        "fell_back": c.fallbacks,
        "on_delete": c.on_delete,
        "canary": c.canary,
        "events_stored": c.events_stored,
        "duplicate_deliveries": c.duplicate_deliveries,
        "failures": c.failures,
        "elapsed_s": c.elapsed.as_secs(),
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let opts = options()?;
    eprintln!(
        "killsweep: {} random kills within {:?}, {} per fail point, seed {}, agent {}, log {}",
        opts.points,
        opts.stretch,
        opts.fail_point_rounds,
        opts.seed,
        opts.binary.display(),
        opts.log.display()
    );
    let counts = killsweep_support::run(&opts).await?;
    println!("{counts}");
    if let Some(path) = std::env::var_os("KERF_RESULT_FILE") {
        std::fs::write(path, result_json(&opts, &counts).to_string())?;
    }
    if !counts.failures.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
