//! What every component of the running agent shares: settings, client, caches, clock,
//! leadership, metrics and shutdown. Below the runtime that builds it and the controllers
//! that read it.

use std::sync::Arc;

use tokio::sync::watch;

use crate::cache::CacheSet;
use crate::clock::SharedClock;
use crate::lease::LeaderState;
use crate::metrics::Metrics;
use crate::settings::Settings;

/// Why the webhook cannot serve, as the reconciler reads it: `None` while it serves a
/// usable certificate. In-place changes wait while it is `Some`.
pub type CertificateProblem = watch::Receiver<Option<String>>;

/// What every component of the running agent shares.
#[derive(Clone)]
pub struct Context {
    /// Validated settings.
    pub settings: Arc<Settings>,
    /// Kubernetes client.
    pub client: kube::Client,
    /// Slim caches.
    pub cache: CacheSet,
    /// The clock; decision code gets `now` from it, never reads time itself.
    pub clock: SharedClock,
    /// Leadership; check `borrow().is_leader_at(clock.now())` before every actuating write.
    pub leader: watch::Receiver<LeaderState>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Turns true when the agent shuts down.
    pub shutdown: watch::Receiver<bool>,
    /// Whether the API server serves `pods/resize` (design D19), from discovery at start.
    pub resize_subresource: bool,
    /// Why the webhook has no usable certificate; `None` while it has one (in-place
    /// changes wait meanwhile).
    pub webhook_certificate: CertificateProblem,
    /// Whether the API server answers, as the client's requests see it.
    pub api_health: crate::apiclient::ApiHealth,
    /// The limit on actuating writes that the client applies.
    pub limiter: Arc<crate::apiclient::WriteLimiter>,
}

impl Context {
    /// Whether this replica may make an actuating write now (local check, design D25).
    pub fn may_write(&self) -> bool {
        self.leader.borrow().is_leader_at(self.clock.now())
    }
}
