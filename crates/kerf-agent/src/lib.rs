//! The Kerf agent: settings, caches, leader election, metrics and the `run` command.

pub mod apiclient;
pub mod cache;
pub mod cli;
pub mod clock;
pub mod context;
pub mod executor;
pub mod explain_cmd;
pub mod failpoints;
pub mod health;
pub mod hub;
pub mod intent;
pub mod lease;
pub mod listen;
pub mod logging;
pub mod metrics;
pub mod outbox;
pub mod prom_recommend;
pub mod reconcile;
pub mod report;
pub mod room;
pub mod rsr_sync;
pub mod runtime;
pub mod scope;
pub mod settings;
pub mod source;
pub mod webhook;
