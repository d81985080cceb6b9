//! The kubelet's bookkeeping that outlives one pass: when pods were bound, resizes in
//! progress, the cAdvisor counters and the next pod IP.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};

use super::cadvisor;

/// The kubelet's bookkeeping, shared through [`crate::context::SimState`].
#[derive(Clone, Debug, Default)]
pub struct KubeletState {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
pub(super) struct Inner {
    /// Pod uid -> when the kubelet first saw it bound.
    pub(super) bound_at: HashMap<String, DateTime<Utc>>,
    /// Pod uid -> (generation, when actuation started).
    pub(super) resizing: HashMap<String, (i64, DateTime<Utc>)>,
    /// Pod uid -> (generation, when the kubelet first deferred that resize).
    pub(super) deferred: HashMap<String, (i64, DateTime<Utc>)>,
    pub(super) counters: cadvisor::Counters,
    pub(super) next_ip: u32,
}

impl KubeletState {
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }
}
