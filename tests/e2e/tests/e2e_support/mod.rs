//! The e2e harness: a cluster, a dev hub and the agent, all in this process. It lives in
//! `kerf_testkit::e2e` (feature `e2e`); this module names it for the scenario files.

#![allow(unused_imports)]

pub use kerf_testkit::e2e::*;
