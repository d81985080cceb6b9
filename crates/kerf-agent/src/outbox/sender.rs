//! The sender task: batches, retries with backoff, and the hub's refusals.

use std::collections::HashSet;
use std::sync::Arc;

use kerf_api::event::Event;
use uuid::Uuid;

use super::metrics::TypeLabel;
use super::{DeliveryReport, Shared};
use crate::hub::lock_unpoisoned as lock;
use crate::hub::retry::Backoff;
use crate::hub::{HubClient, HubClientError};

/// What to do after one batch.
enum Next {
    /// Send the next batch now.
    Continue,
    /// Wait this long first.
    Wait(std::time::Duration),
}

pub(crate) async fn run(shared: Arc<Shared>, client: Arc<HubClient>) {
    let cfg = shared.config.clone();
    let mut backoff = Backoff::new(cfg.backoff_base, cfg.backoff_max);
    let mut cap = cfg.batch_events.max(1);
    loop {
        let batch = loop {
            let batch = lock(&shared.buffer).batch(cap, cfg.batch_bytes);
            if !batch.is_empty() {
                break batch;
            }
            shared.wake.notified().await;
        };
        let result = client.post_events(&batch).await;
        let next = match result {
            Ok(_) => {
                acked(&shared, &batch);
                backoff.reset();
                cap = cfg.batch_events.max(1);
                Next::Continue
            }
            Err(HubClientError::InvalidItem { index, id, message }) => {
                match refused_item(&batch, index, id.as_deref()) {
                    Some(victim) => {
                        rejected(&shared, victim, message);
                        Next::Continue
                    }
                    None => Next::Wait(backoff.next_delay()),
                }
            }
            Err(HubClientError::TooLarge { .. }) if batch.len() > 1 => {
                cap = (batch.len() / 2).max(1);
                tracing::debug!(cap, "hub refused the batch as too large; halving it");
                Next::Continue
            }
            Err(HubClientError::TooLarge { .. }) => {
                rejected(&shared, batch[0].id, "too large for the hub".to_owned());
                Next::Continue
            }
            Err(e) => {
                let wait = backoff
                    .next_delay()
                    .max(e.retry_after().unwrap_or_default());
                tracing::debug!(error = %e, ?wait, buffered = batch.len(), "event batch not delivered; retrying");
                Next::Wait(wait)
            }
        };
        if let Next::Wait(d) = next {
            tokio::time::sleep(d).await;
        }
    }
}

/// The item a 400 `invalid_item` names: by id when it is in the batch, else by index.
fn refused_item(batch: &[Event], index: Option<usize>, id: Option<&str>) -> Option<Uuid> {
    let by_id = id
        .and_then(|s| Uuid::parse_str(s).ok())
        .filter(|id| batch.iter().any(|e| e.id == *id));
    by_id.or_else(|| index.and_then(|i| batch.get(i)).map(|e| e.id))
}

fn acked(shared: &Shared, batch: &[Event]) {
    let ids: HashSet<Uuid> = batch.iter().map(|e| e.id).collect();
    {
        let mut buffer = lock(&shared.buffer);
        buffer.remove(&ids);
        shared.gauges(&buffer);
    }
    for e in batch {
        shared
            .metrics
            .sent
            .get_or_create(&TypeLabel {
                r#type: e.type_.as_str().to_owned(),
            })
            .inc();
    }
    shared.report(DeliveryReport::Acked(batch.iter().map(|e| e.id).collect()));
}

fn rejected(shared: &Shared, id: Uuid, message: String) {
    {
        let mut buffer = lock(&shared.buffer);
        buffer.remove(&HashSet::from([id]));
        shared.gauges(&buffer);
    }
    shared.metrics.rejected.inc();
    tracing::warn!(%id, %message, "the hub refused an event; it is dropped and the rest resent");
    shared.report(DeliveryReport::Rejected { id, message });
}
