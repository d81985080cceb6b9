//! Test set-up shared by the tests of the workspace, each part behind a feature so that
//! every crate's tests can use it without a dependency cycle:
//!
//! - [`api`] (always): Kerf's resources as tests write them and what validation says of
//!   them; it needs kerf-api alone, so kerf-api's tests use it with no default features.
//! - `sim` (default): the simulated cluster tests start by default, Kerf's CRDs applied to
//!   a cluster, a test CA for TLS servers, [`eventually`], which polls a condition until it
//!   holds or a deadline passes; helm and the chart, the `kerf-agent` binary and guards for
//!   the processes a test starts.
//! - `decide`: the pure core's fixture ([`decide`]): facts, policies and decisions; it
//!   leaves out the agent, so kerf-decide's tests use it (`default-features = false`).
//! - `e2e`: the harness of the agent's end-to-end scenarios ([`e2e::Env`]).
//!
//! A dev-dependency only: nothing here is linked into the agent.

pub mod api;
#[cfg(feature = "decide")]
pub mod decide;
#[cfg(feature = "e2e")]
pub mod e2e;

#[cfg(feature = "sim")]
mod ca;
#[cfg(feature = "sim")]
mod chart;
#[cfg(feature = "sim")]
mod cluster;
#[cfg(feature = "sim")]
mod fixtures;
#[cfg(feature = "sim")]
mod kubectl;
#[cfg(feature = "sim")]
mod process;

#[cfg(feature = "sim")]
pub use ca::{Leaf, TestCa, webhook_cert_files};
#[cfg(feature = "sim")]
pub use chart::{chart_dir, helm, repo_root, strs, template};
#[cfg(feature = "sim")]
pub use cluster::*;
#[cfg(feature = "sim")]
pub use fixtures::{
    App, BENCH_APP, deployment_json, hub_recommendation, seed_deployment, seed_running_deployment,
};
#[cfg(feature = "sim")]
pub use kubectl::{KUBECTL, kubectl, kubectl_stdout, table};
#[cfg(feature = "sim")]
pub use process::{
    AgentBuild, KillOnDrop, agent_binary, agent_run, free_port, printed_settings, spawn_with_stdout,
};
