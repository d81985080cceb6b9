//! The event outbox (design section 9, events contract "Delivery"): a bounded buffer that
//! never blocks its callers, and a sender task that delivers batches to the hub.
//!
//! - Bounded by count and serialized bytes; when full the oldest event is dropped first
//!   and counted in `kerf_agent_events_dropped_total` (rules EV-05, EV-06).
//! - [`Outbox::enqueue`] validates the event (an invalid one is never sent, EV-48) and
//!   pushes it under a short lock: a decision or a rollback never waits (RB-30).
//! - Batches of at most 500 events or 1 MiB; a batch whose delivery is not confirmed is
//!   sent again whole with the same ids (EV-03), after a backoff with full jitter that
//!   honours `Retry-After`. A 400 `invalid_item` drops only that item; 413 halves the
//!   batch (design D28).
//! - Acknowledged, refused and dropped ids are reported to a callback, so the reconciler
//!   can clear `status.change.pendingEvents` and mark skips and blocks as reported (D25).

mod buffer;
pub mod metrics;
mod sender;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kerf_api::event::{Event, EventError};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use uuid::Uuid;

pub use buffer::{Buffer, Pushed};
pub use metrics::OutboxMetrics;

use crate::hub::HubClient;
use crate::hub::lock_unpoisoned as lock;

/// The outbox's bounds and pacing.
#[derive(Clone, Debug)]
pub struct OutboxConfig {
    /// Most events buffered (default 10,000).
    pub max_events: usize,
    /// Most serialized bytes buffered (default 8 MiB).
    pub max_bytes: usize,
    /// Most events per batch (default 500).
    pub batch_events: usize,
    /// Most serialized bytes per batch (default 1 MiB).
    pub batch_bytes: usize,
    /// First backoff ceiling after a failed batch (default 1 s).
    pub backoff_base: Duration,
    /// Largest backoff ceiling (default 60 s).
    pub backoff_max: Duration,
}

impl Default for OutboxConfig {
    fn default() -> Self {
        OutboxConfig {
            max_events: 10_000,
            max_bytes: 8 << 20,
            batch_events: 500,
            batch_bytes: 1 << 20,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
        }
    }
}

/// What became of buffered events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeliveryReport {
    /// The hub acknowledged these ids (stored now or before).
    Acked(Vec<Uuid>),
    /// The hub refused this event as invalid; it is not sent again.
    Rejected {
        /// The event's id.
        id: Uuid,
        /// The hub's message.
        message: String,
    },
    /// Dropped, oldest first, because the outbox was full.
    Dropped(Vec<Uuid>),
}

/// Receives delivery reports. It is called from the sender task and from `enqueue`, so it
/// must not block (push into a channel, for example).
pub type Reporter = Arc<dyn Fn(DeliveryReport) + Send + Sync>;

/// Errors of the outbox.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// The event breaks the events contract; it is never sent.
    #[error("event {id} is not valid: {source}")]
    Invalid {
        /// The event's id.
        id: Uuid,
        /// What is wrong.
        #[source]
        source: EventError,
    },
    /// The event cannot be serialized.
    #[error("event {id} cannot be serialized: {message}")]
    Encode {
        /// The event's id.
        id: Uuid,
        /// The cause.
        message: String,
    },
}

impl OutboxError {
    /// A short, bounded name for metric labels.
    pub fn category(&self) -> &'static str {
        match self {
            OutboxError::Invalid { .. } => "invalid",
            OutboxError::Encode { .. } => "encode",
        }
    }
}

pub(crate) struct Shared {
    pub config: OutboxConfig,
    pub buffer: Mutex<Buffer>,
    pub wake: Notify,
    pub metrics: OutboxMetrics,
    pub reporter: Option<Reporter>,
    /// No hub: an event counts as delivered once recorded and is never buffered.
    pub local: bool,
}

impl Shared {
    pub fn report(&self, r: DeliveryReport) {
        if let Some(f) = &self.reporter {
            f(r);
        }
    }

    pub fn gauges(&self, buffer: &Buffer) {
        self.metrics
            .buffered
            .set(i64::try_from(buffer.len()).unwrap_or(i64::MAX));
        self.metrics
            .buffered_bytes
            .set(i64::try_from(buffer.bytes()).unwrap_or(i64::MAX));
    }
}

/// The outbox handle; clones share one buffer.
#[derive(Clone)]
pub struct Outbox {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").field("len", &self.len()).finish()
    }
}

impl Outbox {
    /// An empty outbox. Pass the metrics from [`OutboxMetrics::register`].
    pub fn new(config: OutboxConfig, metrics: OutboxMetrics, reporter: Option<Reporter>) -> Outbox {
        let buffer = Buffer::new(config.max_events, config.max_bytes);
        Outbox {
            shared: Arc::new(Shared {
                config,
                buffer: Mutex::new(buffer),
                wake: Notify::new(),
                metrics,
                reporter,
                local: false,
            }),
        }
    }

    /// An outbox for an agent without a hub (a recommendation source other than the hub,
    /// docs/sources.md): [`Outbox::enqueue`] validates and counts an event, reports it
    /// acknowledged at once (its Kubernetes Event on the rsr is its record) and buffers
    /// nothing, so nothing waits for a delivery.
    pub fn local(
        config: OutboxConfig,
        metrics: OutboxMetrics,
        reporter: Option<Reporter>,
    ) -> Outbox {
        let mut outbox = Outbox::new(config, metrics, reporter);
        if let Some(shared) = Arc::get_mut(&mut outbox.shared) {
            shared.local = true;
        }
        outbox
    }

    /// Validates and buffers an event; never blocks and never waits for the hub. Returns
    /// false when an event with the same id is already buffered (a resumed action that
    /// emits again, design D25).
    pub fn enqueue(&self, event: Event) -> Result<bool, OutboxError> {
        event.validate().map_err(|source| OutboxError::Invalid {
            id: event.id,
            source,
        })?;
        let size = serde_json::to_vec(&event)
            .map_err(|e| OutboxError::Encode {
                id: event.id,
                message: e.to_string(),
            })?
            .len();
        if self.shared.local {
            self.shared.metrics.applied.observe(&event);
            self.shared.report(DeliveryReport::Acked(vec![event.id]));
            return Ok(true);
        }
        let pushed = {
            let mut buffer = lock(&self.shared.buffer);
            if !buffer.contains(&event.id) {
                self.shared.metrics.applied.observe(&event);
            }
            let pushed = buffer.push(event, size);
            self.shared.gauges(&buffer);
            pushed
        };
        if !pushed.dropped.is_empty() {
            self.shared
                .metrics
                .dropped
                .inc_by(pushed.dropped.len() as u64);
            tracing::warn!(
                dropped = pushed.dropped.len(),
                "event outbox full; oldest events dropped"
            );
            self.shared.report(DeliveryReport::Dropped(pushed.dropped));
        }
        self.shared.wake.notify_one();
        Ok(pushed.added)
    }

    /// Rebuilds the outbox from the pending events of rsr status when a leader starts,
    /// keeping their ids (design D25). Returns how many were added; invalid ones are
    /// skipped and logged.
    pub fn restore(&self, events: impl IntoIterator<Item = Event>) -> usize {
        let mut added = 0;
        for event in events {
            let id = event.id;
            match self.enqueue(event) {
                Ok(true) => added += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(%id, error = %e, "pending event not restored"),
            }
        }
        added
    }

    /// Events buffered.
    pub fn len(&self) -> usize {
        lock(&self.shared.buffer).len()
    }

    /// Whether nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Serialized bytes buffered.
    pub fn bytes(&self) -> usize {
        lock(&self.shared.buffer).bytes()
    }

    /// Delivers buffered events to the hub until the returned future is dropped.
    pub async fn run(&self, client: Arc<HubClient>) {
        sender::run(self.shared.clone(), client).await;
    }

    /// Spawns [`Outbox::run`] on the current runtime.
    pub fn spawn(&self, client: Arc<HubClient>) -> JoinHandle<()> {
        let outbox = self.clone();
        tokio::spawn(async move { outbox.run(client).await })
    }
}
