//! helm for the chart tests (`kerf_testkit::helm`: `KERF_HELM`, else `helm` on PATH, else
//! the binary `make chart-lint` caches; a missing helm fails the test with how to get one)
//! and the agent's settings as its binary prints them.

#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;
use std::error::Error;
use std::process::Command;

pub use kerf_testkit::{chart_dir, helm, strs, template};

/// What `kerf-agent run --print-settings` prints with only `env` set.
pub fn print_settings(env: &BTreeMap<String, String>) -> Result<serde_json::Value, Box<dyn Error>> {
    let out = Command::new(env!("CARGO_BIN_EXE_kerf-agent"))
        .env_clear()
        .envs(env)
        .args(["run", "--print-settings"])
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "kerf-agent run --print-settings failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}
