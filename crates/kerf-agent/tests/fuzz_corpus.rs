//! Replays the committed corpus of every fuzz target (`fuzz/corpus/TARGET/`: the seeds and
//! each input that once crashed a target) through the targets' own code, built as a plain
//! test: a parser that panics on one of them fails the test suite without a fuzzing run
//! (docs/reliability.md, "Fuzzing"). `make soak` fuzzes each target for real.

#[allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "../../../fuzz/src/targets/mod.rs"]
mod targets;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn inputs(target: &str) -> anyhow::Result<Vec<PathBuf>> {
    let dir = fuzz_dir().join("corpus").join(target);
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[test]
fn every_committed_input_of_every_fuzz_target_runs_without_a_panic() {
    let mut failed = Vec::new();
    let mut replayed = 0;
    for (name, run) in targets::ALL {
        let files = inputs(name).unwrap();
        assert!(!files.is_empty(), "fuzz/corpus/{name} holds no input");
        for file in files {
            let data = std::fs::read(&file).unwrap();
            if let Err(e) = catch_unwind(AssertUnwindSafe(|| run(&data))) {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                failed.push(format!("{}: {why}", file.display()));
            }
            replayed += 1;
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {replayed} inputs panicked:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn the_replay_covers_every_target_of_the_fuzz_crate() {
    // A target added to fuzz/Cargo.toml without an entry in `targets::ALL` (or a corpus)
    // would never be replayed.
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    let mut bins: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| *n != "kerf-fuzz")
        .collect();
    bins.sort_unstable();
    let mut listed: Vec<&str> = targets::ALL.iter().map(|(n, _)| *n).collect();
    listed.sort_unstable();
    assert_eq!(bins, listed);
    let mut corpora: Vec<String> = std::fs::read_dir(fuzz_dir().join("corpus"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    corpora.sort();
    assert_eq!(corpora, listed);
}
