//! The mirroring of the hub's recommendations into rsrs ([`crate::rsr_sync`]), run beside
//! the passes instead of before them: at 10,000 workloads a first mirroring writes for
//! tens of seconds, and the workloads it has handled need not wait for the rest.
//!
//! While a mirroring runs, a workload gets a pass only once the mirroring reported its
//! recommendation handled (written, found unchanged or failed); until then it is parked.
//! A workload the mirroring may mark withdrawn (no recommendation in the list) waits for
//! the whole mirroring. So a pass never acts on an rsr spec the hub state being mirrored
//! has superseded: after a restart the rsrs in the cache are the last leader's, and a
//! pass on one of them would decide the old recommendation. Only one mirroring runs at a
//! time; one asked for while another runs (a new hub state, a resync) starts when it ends.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::cache::WorkloadKey;
use crate::context::Context;
use crate::hub::HubState;
use crate::rsr_sync::{SyncError, SyncReport};

/// What a mirroring did, and how long it took.
#[derive(Default)]
pub(super) struct Mirrored {
    report: SyncReport,
    /// The recommendations the hub client left out for namespaces outside
    /// `scope.namespaces`.
    listed: Arc<crate::hub::scoped::OutsideScopeHandoff>,
    errors: Vec<SyncError>,
    took: Duration,
}

impl Mirrored {
    /// Takes the recommendations the mirroring found outside the agent's scope.
    pub(super) fn take_out_of_scope(&mut self) -> super::out_of_scope::Found {
        super::out_of_scope::Found {
            cached: std::mem::take(&mut self.report.out_of_scope),
            listed: std::mem::take(&mut self.listed),
        }
    }
}

/// The mirroring that runs, the workloads it handled so far and those that wait for it.
#[derive(Default)]
pub(super) struct Mirror {
    /// The running mirroring, if any.
    pub(super) task: Option<JoinHandle<Mirrored>>,
    /// The workloads the running mirroring reports handled, a recommendation at a time.
    pub(super) progress: Option<mpsc::UnboundedReceiver<Vec<WorkloadKey>>>,
    /// The workloads the running mirroring has handled.
    handled: HashSet<WorkloadKey>,
    /// Workloads due for a pass that wait for the running mirroring.
    parked: BTreeSet<WorkloadKey>,
    /// A mirroring was asked for while one ran: it starts when that one ends.
    again: bool,
    /// A mirroring was skipped or cut off by an API server outage: it is made once the
    /// API server answers again.
    pub(super) owed: bool,
}

impl Drop for Mirror {
    /// A mirroring of a term that ended stops with it (the next leader mirrors again;
    /// every write of a mirroring is an idempotent apply).
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl Mirror {
    /// Starts mirroring `hub`'s recommendations unless one runs (then it starts again when
    /// that one ends) or the API server does not answer (then it is owed). The workloads
    /// `waiting` for a slot are parked until it handled them. Returns the workloads that
    /// need not wait: every parked one when no mirroring runs.
    pub(super) fn start(
        &mut self,
        ctx: &Context,
        hub: &Arc<HubState>,
        waiting: Vec<WorkloadKey>,
    ) -> BTreeSet<WorkloadKey> {
        self.parked.extend(waiting);
        if self.task.is_some() {
            self.again = true;
            return BTreeSet::new();
        }
        self.owed = !ctx.api_health.is_up();
        if self.owed || hub.last_good_recommendations.is_none() {
            return std::mem::take(&mut self.parked);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let (client, cache, hub) = (ctx.client.clone(), ctx.cache.clone(), hub.clone());
        let concurrency = usize::try_from(ctx.settings.reconcile.concurrency).unwrap_or(1);
        let now = ctx.clock.now();
        let source = hub.source;
        let settings = ctx.settings.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let list = hub.last_good_recommendations.as_ref().map(|l| &l.value);
            let approvals = hub
                .last_good_config
                .as_ref()
                .map(|c| c.value.approvals.as_slice())
                .unwrap_or_default();
            let Some(list) = list else {
                return Mirrored::default();
            };
            let origin = crate::rsr_sync::Origin {
                approvals,
                source,
                scope: &settings.scope,
            };
            let handled = |keys| {
                let _ = tx.send(keys);
            };
            let (report, errors) =
                crate::rsr_sync::sync(&client, &cache, list, origin, now, concurrency, handled)
                    .await;
            Mirrored {
                report,
                listed: hub.outside_scope.clone(),
                errors,
                took: started.elapsed(),
            }
        });
        self.begin(task, rx);
        BTreeSet::new()
    }

    /// Takes `task` as the running mirroring, reporting handled workloads on `progress`.
    fn begin(
        &mut self,
        task: JoinHandle<Mirrored>,
        progress: mpsc::UnboundedReceiver<Vec<WorkloadKey>>,
    ) {
        self.task = Some(task);
        self.progress = Some(progress);
        self.handled.clear();
    }

    /// Whether a pass of `key` may start: no mirroring runs, or it handled `key`.
    pub(super) fn settled(&self, key: &WorkloadKey) -> bool {
        self.task.is_none() || self.handled.contains(key)
    }

    /// Keeps `key` until the running mirroring handled it.
    pub(super) fn park(&mut self, key: WorkloadKey) {
        self.parked.insert(key);
    }

    /// Takes a report of handled workloads; returns those that were parked.
    pub(super) fn handled(&mut self, keys: Vec<WorkloadKey>) -> Vec<WorkloadKey> {
        let mut ready = Vec::new();
        for key in keys {
            if self.parked.remove(&key) {
                ready.push(key.clone());
            }
            self.handled.insert(key);
        }
        ready
    }

    /// The running mirroring ended with `ended` (`api_up`: whether the API server answers
    /// now): logs what it did and notes an outage. Returns whether another mirroring was
    /// asked for meanwhile: then start it (what waits keeps waiting), else [`Mirror::release`].
    pub(super) fn finish(
        &mut self,
        ended: Result<Mirrored, tokio::task::JoinError>,
        api_up: bool,
    ) -> bool {
        self.task = None;
        self.progress = None;
        self.handled.clear();
        match ended {
            Ok(m) => self.log(m, api_up),
            Err(e) => {
                tracing::error!(error = %e, "rsr mirroring stopped");
                self.owed = true;
            }
        }
        std::mem::take(&mut self.again)
    }

    /// Every workload that waited for a mirroring.
    pub(super) fn release(&mut self) -> BTreeSet<WorkloadKey> {
        std::mem::take(&mut self.parked)
    }

    fn log(&mut self, m: Mirrored, up: bool) {
        tracing::debug!(
            took_ms = m.took.as_millis(),
            applied = m.report.applied.len(),
            withdrawn = m.report.withdrawn.len(),
            "rsrs synced"
        );
        self.owed = !m.errors.is_empty() && !up;
        for e in m.errors {
            if up {
                tracing::warn!(error = %e, category = e.category(), "rsr sync failed");
            } else {
                // `/readyz` and the watches report the outage; one line per rsr is noise.
                tracing::debug!(error = %e, category = e.category(), "rsr sync failed");
            }
        }
    }
}

/// The next report of handled workloads (pending forever when no mirroring runs).
pub(super) async fn next_handled(
    progress: &mut Option<mpsc::UnboundedReceiver<Vec<WorkloadKey>>>,
) -> Option<Vec<WorkloadKey>> {
    match progress {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Waits for the running mirroring to end (pending forever when none runs: guard the
/// `select!` branch with `task.is_some()`).
pub(super) async fn join(
    task: &mut Option<JoinHandle<Mirrored>>,
) -> Result<Mirrored, tokio::task::JoinError> {
    match task {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::WorkloadKind;
    use tokio::sync::oneshot;

    fn key(name: &str) -> WorkloadKey {
        WorkloadKey::new("ns", WorkloadKind::Deployment, name)
    }

    /// A mirroring that ends when the sender is used, and the sender of its reports.
    fn running(m: &mut Mirror) -> (oneshot::Sender<()>, mpsc::UnboundedSender<Vec<WorkloadKey>>) {
        let (go, wait) = oneshot::channel::<()>();
        let (tx, rx) = mpsc::unbounded_channel();
        m.begin(
            tokio::spawn(async move {
                let _ = wait.await;
                Mirrored::default()
            }),
            rx,
        );
        (go, tx)
    }

    // rule: design D25
    #[tokio::test]
    async fn a_workload_gets_its_pass_once_the_mirroring_handled_its_recommendation() {
        let mut m = Mirror::default();
        assert!(
            m.settled(&key("a")),
            "no mirroring runs: every pass may start"
        );
        let (go, tx) = running(&mut m);
        for k in ["a", "b", "gone"] {
            assert!(!m.settled(&key(k)), "{k} before the mirroring handled it");
            m.park(key(k));
        }
        tx.send(vec![key("a"), key("c")]).expect("send");
        let keys = next_handled(&mut m.progress).await.expect("a report");
        assert_eq!(
            m.handled(keys),
            vec![key("a")],
            "only parked workloads turn ready"
        );
        assert!(m.settled(&key("a")) && m.settled(&key("c")));
        assert!(!m.settled(&key("b")), "b is not handled yet");
        go.send(()).expect("end it");
        let ended = join(&mut m.task).await;
        assert!(!m.finish(ended, true), "no other mirroring was asked for");
        assert!(m.task.is_none() && m.settled(&key("b")));
        // A workload with no recommendation (its rsr may be marked withdrawn) waited for
        // the whole mirroring.
        let released: Vec<_> = m.release().into_iter().collect();
        assert_eq!(released, vec![key("b"), key("gone")]);
        assert!(m.release().is_empty());
    }

    // rule: design D25
    #[tokio::test]
    async fn a_mirroring_asked_for_while_one_runs_comes_after_it_and_holds_what_waits() {
        let mut m = Mirror::default();
        let (go, _tx) = running(&mut m);
        m.park(key("a"));
        // As `start` does while a mirroring runs.
        m.parked.extend([key("b")]);
        m.again = true;
        go.send(()).expect("end it");
        let ended = join(&mut m.task).await;
        assert!(m.finish(ended, true), "the second mirroring is due");
        assert!(!m.again);
        let (_go, _tx) = running(&mut m);
        assert!(!m.settled(&key("a")) && !m.settled(&key("b")));
        assert_eq!(m.parked.len(), 2, "both wait for the second mirroring");
    }

    #[tokio::test]
    async fn a_mirroring_cut_off_by_an_outage_is_owed() {
        let mut m = Mirror::default();
        let (go, _tx) = running(&mut m);
        drop(go);
        let ended = join(&mut m.task).await.map(|_| Mirrored {
            errors: vec![SyncError::Encode {
                name: "rsr".into(),
                source: serde_json::from_str::<()>("x").expect_err("bad json"),
            }],
            ..Mirrored::default()
        });
        assert!(!m.finish(ended, false));
        assert!(m.owed, "an error while the API server is down is owed");
    }
}
