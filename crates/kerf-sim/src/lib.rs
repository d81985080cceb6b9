//! kerf-sim: a simulated Kubernetes API server, controllers, kubelet and dev hub for
//! Kerf's tests, demo and benchmarks. Never linked into the agent.

pub mod admission;
pub mod api;
pub mod clock;
pub mod context;
pub mod controllers;
pub mod hub;
pub mod kubelet;
pub mod quantity;
pub mod sim;
pub mod store;
