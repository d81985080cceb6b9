//! Where the API server reaches webhook Services: addresses routed by tests.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Addresses of webhook Services (`namespace/name` -> socket address).
#[derive(Clone, Debug, Default)]
pub struct WebhookRoutes {
    inner: Arc<Mutex<HashMap<String, SocketAddr>>>,
}

impl WebhookRoutes {
    pub(crate) fn set(&self, namespace: &str, name: &str, addr: SocketAddr) {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(format!("{namespace}/{name}"), addr);
    }

    pub(super) fn get(&self, namespace: &str, name: &str) -> Option<SocketAddr> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&format!("{namespace}/{name}"))
            .copied()
    }
}
