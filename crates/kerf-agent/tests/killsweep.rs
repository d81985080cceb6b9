//! The kill sweep at N = 20 (design D25, D29): the real `kerf-agent` binary, killed with
//! SIGKILL at 20 random moments and ended once at each fail point while a stream of changes
//! of every kind goes through it; every invariant is checked against the cluster and the
//! hub at the end. `cargo run --release -p kerf-agent --example killsweep -- --points N`
//! runs the same sweep at any N.

mod killsweep_support;

use std::time::Duration;

use killsweep_support::Options;

// sim
// rule: EV-12, design D25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_survives_kills_at_random_moments_and_at_every_fail_point()
-> anyhow::Result<()> {
    let log = tempfile::NamedTempFile::new()?;
    let opts = Options {
        points: 20,
        seed: 20,
        stretch: Duration::from_millis(2500),
        fail_point_rounds: 1,
        binary: env!("CARGO_BIN_EXE_kerf-agent").into(),
        log: log.path().to_path_buf(),
    };
    let counts = killsweep_support::run(&opts).await?;
    eprintln!("{counts}");
    if !counts.failures.is_empty() {
        let (_, kept) = log.keep()?;
        panic!("{counts}\nthe agents' log is kept in {}", kept.display());
    }
    assert_eq!(counts.random_kills, 20, "{counts}");
    for point in killsweep_support::agent::FAIL_POINTS {
        assert!(
            counts.fail_point_kills.get(point).is_some_and(|n| *n >= 1),
            "{point}: {counts}"
        );
    }
    assert!(counts.changes >= 7, "{counts}");
    Ok(())
}
