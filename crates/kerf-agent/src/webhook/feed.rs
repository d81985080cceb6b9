//! Keeps the webhook's index in step with the agent's caches, and starts the server.
//!
//! The caches announce which workload changed ([`Change`]); the feed re-reads that
//! workload's rsrs and ReplicaSets from the caches into the index. A namespace-wide or
//! global change, or a missed notification, rebuilds the whole index. The live values of
//! a workload outside the agent's scope (or whose scope cannot be told from the caches)
//! are left out, so its new pods get no patch.

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
use crate::context::CertificateProblem;
use crate::metrics::WebhookMetrics;
use crate::scope::{Scope, Verdict, in_cache};
use crate::settings::WebhookSettings;

/// How often a missing or unusable certificate is tried again at start.
const CERT_RETRY: Duration = Duration::from_secs(5);

/// Starts the webhook on every replica: the feed from the caches (the workloads of
/// `scope` only) and the HTTPS server on `listener` (bound to `settings.addr`). Returns
/// the index the server reads and whether its certificate is usable, checked every few
/// seconds.
pub fn spawn(
    tasks: &mut JoinSet<()>,
    settings: &WebhookSettings,
    scope: &Scope,
    listener: TcpListener,
    cache: &CacheSet,
    metrics: WebhookMetrics,
    shutdown: watch::Receiver<bool>,
) -> (SharedIndex, CertificateProblem) {
    let index = SharedIndex::new();
    let fed = feed(
        cache.clone(),
        index.clone(),
        scope.clone(),
        shutdown.clone(),
    );
    tasks.spawn(fed);
    let router = super::router(index.clone(), metrics);
    let settings = settings.clone();
    let (problem_tx, problem) = watch::channel(Some("not read yet".to_owned()));
    tasks.spawn(async move {
        let stop = stopped(shutdown.clone());
        let files = (settings.cert_file.as_path(), settings.key_file.as_path());
        let Some(certs) = load_certs(files, &problem_tx, shutdown.clone()).await else {
            return;
        };
        let check = check_certificate(certs.clone(), problem_tx, shutdown);
        let serve = super::serve(listener, certs, router, stop);
        if let (Err(e), ()) = tokio::join!(serve, check) {
            tracing::error!(error = %e, "webhook server failed");
        }
    });
    (index, problem)
}

async fn stopped(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// Publishes `problem` when it differs from the one published, logging the change.
fn publish(tx: &watch::Sender<Option<String>>, problem: Option<String>) {
    tx.send_if_modified(|published| {
        if *published == problem {
            return false;
        }
        match &problem {
            Some(why) => tracing::warn!(
                error = %why,
                "webhook certificate not usable: in-place changes wait"
            ),
            None => tracing::info!("webhook certificate usable: in-place changes resume"),
        }
        *published = problem;
        true
    });
}

/// Loads the certificate, retrying until it is usable (cert-manager may not have issued
/// it yet) or the agent stops; publishes why it is not usable meanwhile.
async fn load_certs(
    (cert, key): (&Path, &Path),
    problem: &watch::Sender<Option<String>>,
    mut shutdown: watch::Receiver<bool>,
) -> Option<Arc<ReloadingCert>> {
    loop {
        match ReloadingCert::load(cert, key) {
            Ok(c) => return Some(c),
            Err(e) => publish(problem, Some(e.to_string())),
        }
        tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return None,
            () = tokio::time::sleep(CERT_RETRY) => {}
        }
    }
}

/// Checks the certificate now and every [`CERT_RETRY`] until the agent stops (the files
/// may change, the certificate may expire), publishing what it finds.
async fn check_certificate(
    certs: Arc<ReloadingCert>,
    problem: watch::Sender<Option<String>>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        publish(&problem, certs.problem(chrono::Utc::now()));
        tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            () = tokio::time::sleep(CERT_RETRY) => {}
        }
    }
}

/// Follows the caches' change notifications until shutdown, indexing the workloads of
/// `scope`.
pub async fn feed(
    cache: CacheSet,
    index: SharedIndex,
    scope: Scope,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut changes = cache.subscribe();
    index.replace(rebuild(&cache, &scope));
    loop {
        let change = tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            c = changes.recv() => c,
        };
        match change {
            Ok(Change::Workload(key)) => refresh(&cache, &index, &scope, &key),
            Ok(Change::Namespace(_) | Change::All)
            | Err(broadcast::error::RecvError::Lagged(_)) => {
                index.replace(rebuild(&cache, &scope));
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// A new index from everything the caches hold: every rsr of a workload in `scope`, and
/// the ReplicaSets of the Deployments those rsrs describe (pods of other Deployments get
/// no patch either way).
pub fn rebuild(cache: &CacheSet, scope: &Scope) -> LiveIndex {
    let mut index = LiveIndex::default();
    for entry in cache.rsrs() {
        let Ok(rsr) = &entry.rsr else {
            continue;
        };
        let (Some(ns), wref) = (&rsr.metadata.namespace, &rsr.spec.workload_ref) else {
            warn_invalid(index.upsert_rsr(rsr));
            continue;
        };
        let key = WorkloadKey::new(ns, wref.kind, &wref.name);
        if in_cache(scope, cache, &key) != Verdict::In {
            continue;
        }
        warn_invalid(index.upsert_rsr(rsr));
        if wref.kind == WorkloadKind::Deployment {
            for rs in cache.replicasets_of(ns, &wref.name) {
                index.upsert_replicaset(ns, &rs.name, Some(&wref.name));
            }
        }
    }
    index
}

/// Re-reads one workload's rsrs and ReplicaSets into the index; a workload outside
/// `scope` is only taken out.
fn refresh(cache: &CacheSet, index: &SharedIndex, scope: &Scope, key: &WorkloadKey) {
    if in_cache(scope, cache, key) != Verdict::In {
        index.update(|i| i.remove_workload(&key.namespace, key.kind, &key.name));
        return;
    }
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
