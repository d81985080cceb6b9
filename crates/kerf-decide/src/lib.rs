//! The pure decision core of the Kerf agent.

pub mod canary;
pub mod canary_policy;
pub mod coverage;
pub mod dedup;
pub mod duration;
pub mod effective;
pub mod explain;
pub mod facts;
pub mod health;
pub mod hpa;
pub mod inplace;
pub mod jvm;
pub mod ondelete;
pub mod pass;
pub mod pipeline;
pub mod plan;
pub mod quantity;
pub mod replicas;
pub mod resources;
pub mod select;
pub mod status;
pub mod strategy;
pub mod values;
pub mod window;

pub use explain::{Explanation, explain};
pub use facts::Facts;
pub use pipeline::{Decision, Outcome, decide};
