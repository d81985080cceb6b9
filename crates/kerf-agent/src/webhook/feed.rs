//! Keeps the webhook's index in step with the agent's caches, and starts the server.
//!
//! The caches announce which workload changed ([`Change`]); the feed re-reads that
//! workload's rsrs and ReplicaSets from the caches into the index. A namespace-wide or
//! global change, or a missed notification, rebuilds the whole index.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kerf_api::WorkloadKind;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;

use super::index::{LiveIndex, SharedIndex};
use super::tls::ReloadingCert;
use crate::cache::{CacheSet, Change, WorkloadKey};
use crate::metrics::WebhookMetrics;
use crate::settings::WebhookSettings;

/// How often a missing or unusable certificate is tried again at start.
const CERT_RETRY: Duration = Duration::from_secs(5);

/// Starts the webhook on every replica: the feed from the caches and the HTTPS server on
/// `listener` (bound to `settings.addr`). Returns the index the server reads.
pub fn spawn(
    tasks: &mut JoinSet<()>,
    settings: &WebhookSettings,
    listener: TcpListener,
    cache: &CacheSet,
    metrics: WebhookMetrics,
    shutdown: watch::Receiver<bool>,
) -> SharedIndex {
    let index = SharedIndex::new();
    tasks.spawn(feed(cache.clone(), index.clone(), shutdown.clone()));
    let router = super::router(index.clone(), metrics);
    let settings = settings.clone();
    tasks.spawn(async move {
        let stop = stopped(shutdown.clone());
        let Some(certs) = load_certs(&settings.cert_file, &settings.key_file, shutdown).await
        else {
            return;
        };
        if let Err(e) = super::serve(listener, certs, router, stop).await {
            tracing::error!(error = %e, "webhook server failed");
        }
    });
    index
}

async fn stopped(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// Loads the certificate, retrying until it is usable (cert-manager may not have issued
/// it yet) or the agent stops.
async fn load_certs(
    cert: &Path,
    key: &Path,
    mut shutdown: watch::Receiver<bool>,
) -> Option<Arc<ReloadingCert>> {
    loop {
        match ReloadingCert::load(cert, key) {
            Ok(c) => return Some(c),
            Err(e) => tracing::warn!(error = %e, "webhook certificate not usable yet"),
        }
        tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return None,
            () = tokio::time::sleep(CERT_RETRY) => {}
        }
    }
}

/// Follows the caches' change notifications until shutdown.
pub async fn feed(cache: CacheSet, index: SharedIndex, mut shutdown: watch::Receiver<bool>) {
    let mut changes = cache.subscribe();
    index.replace(rebuild(&cache));
    loop {
        let change = tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            c = changes.recv() => c,
        };
        match change {
            Ok(Change::Workload(key)) => refresh(&cache, &index, &key),
            Ok(Change::Namespace(_) | Change::All)
            | Err(broadcast::error::RecvError::Lagged(_)) => {
                index.replace(rebuild(&cache));
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// A new index from everything the caches hold: every rsr, and the ReplicaSets of the
/// Deployments rsrs describe (pods of other Deployments get no patch either way).
pub fn rebuild(cache: &CacheSet) -> LiveIndex {
    let mut index = LiveIndex::default();
    for entry in cache.rsrs() {
        let Ok(rsr) = &entry.rsr else {
            continue;
        };
        warn_invalid(index.upsert_rsr(rsr));
        let (Some(ns), wref) = (&rsr.metadata.namespace, &rsr.spec.workload_ref) else {
            continue;
        };
        if wref.kind == WorkloadKind::Deployment {
            for rs in cache.replicasets_of(ns, &wref.name) {
                index.upsert_replicaset(ns, &rs.name, Some(&wref.name));
            }
        }
    }
    index
}

/// Re-reads one workload's rsrs and ReplicaSets into the index.
fn refresh(cache: &CacheSet, index: &SharedIndex, key: &WorkloadKey) {
    let rsrs = cache.rsrs_for(key);
    let replicasets = match key.kind {
        WorkloadKind::Deployment => cache.replicasets_of(&key.namespace, &key.name),
        _ => Vec::new(),
    };
    index.update(|i| {
        i.remove_workload(&key.namespace, key.kind, &key.name);
        for entry in &rsrs {
            if let Ok(rsr) = &entry.rsr {
                warn_invalid(i.upsert_rsr(rsr));
            }
        }
        for rs in &replicasets {
            i.upsert_replicaset(&key.namespace, &rs.name, Some(&key.name));
        }
    });
}

fn warn_invalid(result: Result<(), super::WebhookError>) {
    if let Err(e) = result {
        tracing::warn!(error = %e, category = e.category(), "rsr live values not indexed");
    }
}
