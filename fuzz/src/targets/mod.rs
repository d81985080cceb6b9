//! The fuzz targets' bodies, one module a target, and the helpers they share: reading an
//! input as lines of text and as an instant.
//!
//! The libFuzzer binaries in `fuzz/fuzz_targets/` call them, and so does the workspace test
//! `crates/kerf-agent/tests/fuzz_corpus.rs`, which replays every committed input of
//! `fuzz/corpus/` (the seeds and the inputs that once crashed a target) through a plain
//! build, without the fuzzer's instrumentation, in every test run.

use chrono::{DateTime, Utc};

pub mod admission_review;
pub mod cron_window;
pub mod go_duration;
pub mod hub_answer;
pub mod policy;
pub mod policy_review;
pub mod quantity;

/// A target's body: one input.
pub type Target = fn(&[u8]);

/// Every target by name, as `fuzz/Cargo.toml` and `fuzz/corpus/` name them.
pub const ALL: &[(&str, Target)] = &[
    ("admission_review", admission_review::run),
    ("cron_window", cron_window::run),
    ("go_duration", go_duration::run),
    ("hub_answer", hub_answer::run),
    ("policy", policy::run),
    ("policy_review", policy_review::run),
    ("quantity", quantity::run),
];

/// The input as UTF-8 text, or `None` (the agent's parsers all take `&str`).
pub fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// The `i`-th line of `lines`; an empty or missing line is `None`.
pub fn field(lines: &[&str], i: usize) -> Option<String> {
    lines
        .get(i)
        .filter(|l| !l.is_empty())
        .map(|l| (*l).to_owned())
}

/// An instant from a line holding Unix seconds; 2026-03-29T00:30:00Z (the night Europe
/// moves its clocks) when the line is missing or out of chrono's range.
pub fn instant(line: Option<&str>) -> DateTime<Utc> {
    line.and_then(|l| l.trim().parse::<i64>().ok())
        .and_then(|s| DateTime::from_timestamp(s, 0))
        .unwrap_or_else(|| DateTime::from_timestamp(1_774_744_200, 0).unwrap_or_default())
}
