//! The reconciler (leader only): one pass per workload at a time (see [`key`]): gather the
//! facts from the caches once, take the one step [`kerf_decide::pass::next_step`] names,
//! write the status, record events, schedule the next pass.
//!
//! Triggers: the caches' change notification, hub state changes, delivery reports of the
//! outbox, and timers (cooldown end, window opening, `fallbackAfter`, watch end), never
//! polling. A malformed rsr or policy never stops the loop; transient errors back off per
//! workload. Every actuating write checks the lease locally first (design D25).

pub mod act;
mod applied;
mod dispatch;
pub mod facts;
pub mod failure;
pub mod fresh;
mod healthwatch;
pub mod hpa_step;
pub mod hub_sync;
mod interpret;
mod key;
pub mod memory;
mod mirror;
pub mod ondelete_step;
pub mod out_of_scope;
pub mod pass;
pub mod policies;
mod record;
pub mod release_step;
pub mod report;
pub mod rollback_step;
mod sink;
pub mod step;
pub mod trace;
mod writer;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use tokio::sync::{broadcast, mpsc, watch};
use uuid::Uuid;

use crate::cache::{Change, WorkloadKey};
use crate::context::Context;
use crate::hub::HubState;
use crate::outbox::{DeliveryReport, Outbox, Reporter};

pub use key::{BREACH_GUARD_OFF, reconcile_key};
pub use memory::{InFlight, Memory};
pub use step::KeyError;

/// How often the rsrs are mirrored from the hub state again, the policies' status written
/// again and acknowledged event ids pruned, even without a trigger.
pub const RESYNC: Duration = Duration::from_secs(60);
/// Every this many resyncs (10 minutes) every workload is decided again even without a
/// trigger; in between a workload is decided only when its facts changed or a timer of
/// its own is due.
pub const DECIDE_EVERY_RESYNCS: u32 = 10;
/// First backoff after a transient error.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// Longest backoff.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// While the API server does not answer, workloads due for a pass are looked at again
/// this much later.
const API_RECHECK: chrono::Duration = chrono::Duration::seconds(2);
/// After a 409 the rsr is read again this many milliseconds later.
const CONFLICT_RETRY_MS: i64 = 200;

/// The rank of a workload that needs nothing soon.
const URGENCY_NONE: u8 = 3;

/// How soon a pass should reach an rsr: 0 for a rollback in flight (`RollingBack`), 1 for
/// a change in flight (`Intent`, `Applying`) and for an rsr never decided (no phase yet:
/// `kubectl get rsr` shows it blank until its first pass), 2 for an applied change under
/// a running health watch, [`URGENCY_NONE`] for the rest. Within a rank passes go in the
/// order their workloads turned ready, so the first decisions of a new cluster are not
/// held back by the follow-up passes of the changes they start.
fn urgency(
    status: Option<&kerf_api::rsr::RightsizingRecommendationStatus>,
    now: DateTime<Utc>,
) -> u8 {
    use kerf_api::rsr::ChangeState;
    let Some(status) = status.filter(|s| s.phase.is_some()) else {
        return 1;
    };
    match status.change.as_ref().map(|c| c.state) {
        Some(ChangeState::RollingBack) => 0,
        Some(ChangeState::Intent | ChangeState::Applying) => 1,
        Some(ChangeState::Applied)
            if status
                .watch
                .as_ref()
                .is_some_and(|w| w.end.is_none_or(|end| now < end)) =>
        {
            2
        }
        _ => URGENCY_NONE,
    }
}

/// The health watcher of the agent's settings; an unusable metrics URL leaves throttling
/// unwatched (RB-16) rather than stopping the reconciler.
fn watcher(settings: &crate::settings::HealthSettings) -> crate::health::Watcher {
    crate::health::Watcher::new(settings).unwrap_or_else(|e| {
        tracing::error!(error = %e, "throttling is not watched");
        crate::health::Watcher::with_source(
            crate::health::ThrottlingSource::Off,
            chrono::Duration::from_std(settings.throttling_delay)
                .unwrap_or(kerf_decide::health::DEFAULT_THROTTLING_DELAY),
        )
    })
}

/// What the policies' status depends on: every policy's resourceVersion and the workloads.
type PolicyMark = (Vec<(String, String)>, usize);

fn policy_mark(cache: &crate::cache::CacheSet) -> PolicyMark {
    let policies = cache
        .policies()
        .iter()
        .map(|p| (p.name.to_string(), p.resource_version.clone()))
        .collect();
    (policies, cache.workload_count())
}

/// A delivery-report callback for the outbox and the receiver the reconciler reads.
pub fn ack_channel() -> (Reporter, mpsc::UnboundedReceiver<DeliveryReport>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let reporter: Reporter = Arc::new(move |r| {
        let _ = tx.send(r);
    });
    (reporter, rx)
}

/// A pass that ended: its workload, the part of the memory it took, and how it went and
/// how long it took (none when the API server did not answer and it did not run).
struct Ended {
    key: WorkloadKey,
    part: Memory,
    ran: Option<(Result<(), KeyError>, Duration)>,
}

/// The passes running.
type Running = FuturesUnordered<BoxFuture<'static, Ended>>;

/// The reconciler of one leader term.
pub struct Reconciler {
    ctx: Context,
    hub: watch::Receiver<HubState>,
    /// The hub state passes read, as last seen through `hub`.
    hub_now: Arc<HubState>,
    recorder: report::EventRecorder,
    acks: mpsc::UnboundedReceiver<DeliveryReport>,
    memory: Memory,
    watcher: Arc<crate::health::Watcher>,
    /// Turns true once the hub poll of this term finished its first round.
    first_poll: Option<watch::Receiver<bool>>,
    /// The mirroring of the recommendations into rsrs, beside the passes.
    mirror: mirror::Mirror,
    /// Delivery reports waiting for passes to end.
    held: Vec<dispatch::HeldReport>,
    /// The recommendations outside the scope reported this term.
    out_of_scope: out_of_scope::Reported,
}

impl Reconciler {
    /// A reconciler over the shared context, the hub state, the outbox and its delivery
    /// reports (from [`ack_channel`]).
    pub fn new(
        ctx: Context,
        hub: watch::Receiver<HubState>,
        outbox: Outbox,
        acks: mpsc::UnboundedReceiver<DeliveryReport>,
    ) -> Reconciler {
        let recorder = report::EventRecorder {
            client: ctx.client.clone(),
            outbox,
        };
        let watcher = Arc::new(watcher(&ctx.settings.health));
        let hub_now = Arc::new(hub.borrow().clone());
        let out_of_scope = out_of_scope::Reported::new(ctx.settings.outbox.max_events);
        Reconciler {
            ctx,
            hub,
            hub_now,
            recorder,
            acks,
            memory: Memory::default(),
            watcher,
            first_poll: None,
            mirror: mirror::Mirror::default(),
            held: Vec::new(),
            out_of_scope,
        }
    }

    /// Makes the first pass wait for the first hub poll (see [`Reconciler::run`]).
    pub fn with_first_poll(mut self, polled: watch::Receiver<bool>) -> Reconciler {
        self.first_poll = Some(polled);
        self
    }

    /// Waits until the first hub poll finished, for twice the poll interval at most, so a
    /// new leader does not block every pending change `HubUnreachable` (and send those
    /// events) only because it has not asked the hub yet.
    async fn wait_first_poll(&mut self) {
        let Some(mut polled) = self.first_poll.take() else {
            return;
        };
        let limit = self.ctx.settings.hub.poll_interval.saturating_mul(2);
        let mut shutdown = self.ctx.shutdown.clone();
        tokio::select! {
            r = tokio::time::timeout(limit, polled.wait_for(|p| *p)) => {
                if r.is_err() {
                    tracing::warn!(limit_s = limit.as_secs_f64(), "first hub poll not finished in time; deciding without it");
                }
            }
            _ = async { let _ = shutdown.wait_for(|s| *s).await; } => {}
        }
    }

    fn all_keys(&self) -> BTreeSet<WorkloadKey> {
        self.ctx
            .cache
            .rsrs()
            .iter()
            .filter_map(|r| r.workload.clone())
            .collect()
    }

    /// Every workload, to be queued for a pass because of `cause` (logged at debug level).
    fn every_key(&self, cause: &'static str) -> BTreeSet<WorkloadKey> {
        let keys = self.all_keys();
        tracing::debug!(cause, workloads = keys.len(), "every workload queued");
        keys
    }

    /// Rebuilds the outbox from every rsr's `pendingEvents` (design D25).
    fn restore_pending(&self) {
        let rsrs = self.ctx.cache.rsrs();
        let events = rsrs.iter().filter_map(|r| {
            let change = r.rsr.as_ref().ok()?.status.as_ref()?.change.as_ref()?;
            Some(change.pending_events.clone())
        });
        let n = self.recorder.outbox.restore(events.flatten());
        if n > 0 {
            tracing::info!(events = n, "outbox rebuilt from pendingEvents");
        }
    }

    /// Starts mirroring the hub state passes read into rsrs ([`mirror`]); the workloads
    /// waiting for a slot wait for it. Returns the workloads that need not wait.
    fn start_mirror(&mut self, queue: &mut dispatch::Queue<WorkloadKey>) -> BTreeSet<WorkloadKey> {
        let waiting = queue.take_ready();
        self.mirror.start(&self.ctx, &self.hub_now, waiting)
    }

    /// The running mirroring ended: the recommendations it found outside the scope are
    /// reported (once each), then the workloads that waited for it go, or, when another
    /// mirroring was asked for meanwhile, that one starts and they wait for it.
    fn mirror_ended(
        &mut self,
        queue: &mut dispatch::Queue<WorkloadKey>,
        mut ended: Result<mirror::Mirrored, tokio::task::JoinError>,
    ) -> BTreeSet<WorkloadKey> {
        if let Ok(m) = &mut ended {
            self.report_out_of_scope(m.take_out_of_scope());
        }
        if self.mirror.finish(ended, self.ctx.api_health.is_up()) {
            return self.start_mirror(queue);
        }
        self.mirror.release()
    }

    /// Sends a `skipped` `OutOfScope` event to the hub for each recommendation `found`
    /// outside the scope that was not reported yet ([`out_of_scope`]).
    fn report_out_of_scope(&mut self, found: out_of_scope::Found) {
        let now = self.ctx.clock.now();
        let outbox = &self.recorder.outbox;
        let scope = &self.ctx.settings.scope;
        self.out_of_scope.take_new(found, scope, now, |event| {
            enqueue_out_of_scope(outbox, event)
        });
    }

    /// Takes a delivery report in for the `OutOfScope` reports, and sends those that
    /// waited for the room it made.
    fn out_of_scope_settled(&mut self, report: &DeliveryReport) {
        if self.out_of_scope.settled(report) {
            let now = self.ctx.clock.now();
            let outbox = &self.recorder.outbox;
            let scope = &self.ctx.settings.scope;
            self.out_of_scope
                .emit_waiting(scope, now, |event| enqueue_out_of_scope(outbox, event));
        }
    }

    /// Runs until shutdown or until this replica stops leading. The passes run from a
    /// [`dispatch::Queue`]: each trigger marks workloads ready, and a pass starts whenever
    /// a slot is free, while the loop keeps taking triggers. The recommendations are
    /// mirrored into rsrs beside the passes ([`mirror`]).
    pub async fn run(mut self) {
        let mut changes = self.ctx.cache.subscribe();
        let mut shutdown = self.ctx.shutdown.clone();
        let mut leader = self.ctx.leader.clone();
        let mut webhook_certificate = self.ctx.webhook_certificate.clone();
        let mut api_up = self.ctx.api_health.subscribe();
        self.restore_pending();
        self.wait_first_poll().await;
        // What the first mirroring mirrors is seen: only a later change of the hub state
        // decides everything again.
        self.hub_now = Arc::new(self.hub.borrow_and_update().clone());
        let limit = usize::try_from(self.ctx.settings.reconcile.concurrency).unwrap_or(1);
        let mut queue = dispatch::Queue::new(limit);
        let mut running = Running::new();
        let mut dirty = self.start_mirror(&mut queue);
        dirty.extend(self.all_keys());
        let mut resync = tokio::time::interval(RESYNC);
        let mut resyncs = 0u32;
        let mut policies_seen = None;
        loop {
            if self.mirror.owed && self.ctx.api_health.is_up() {
                dirty.extend(self.start_mirror(&mut queue));
            }
            self.enqueue(&mut queue, std::mem::take(&mut dirty));
            self.start_passes(&mut queue, &mut running);
            self.sync_policies(&mut policies_seen).await;
            let (sleep, stale_at) = self.next_wake(self.ctx.clock.now());
            tokio::select! {
                Some(ended) = running.next() => self.finish(&mut queue, ended),
                c = changes.recv() => match c {
                    Ok(Change::Workload(k)) => { dirty.insert(k); }
                    Ok(Change::Namespace(ns)) => dirty.extend(self.all_keys().into_iter().filter(|k| k.namespace == ns)),
                    Ok(Change::All) => dirty = self.every_key("cache"),
                    Err(broadcast::error::RecvError::Lagged(_)) => dirty = self.every_key("change channel lagged"),
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                r = self.hub.changed() => {
                    if r.is_err() { break; }
                    self.hub_now = Arc::new(self.hub.borrow_and_update().clone());
                    dirty = self.start_mirror(&mut queue);
                    dirty.extend(self.every_key("hub state"));
                }
                Some(keys) = mirror::next_handled(&mut self.mirror.progress) => dirty.extend(self.mirror.handled(keys)),
                ended = mirror::join(&mut self.mirror.task), if self.mirror.task.is_some() => {
                    dirty.extend(self.mirror_ended(&mut queue, ended));
                }
                Some(report) = self.acks.recv() => {
                    self.out_of_scope_settled(&report);
                    dirty.extend(self.take_report(&queue, report));
                    dirty.extend(self.pending_holders());
                }
                _ = tokio::time::sleep(sleep) => dirty.extend(self.woken(stale_at)),
                _ = resync.tick() => {
                    self.prune_acked();
                    policies_seen = None;
                    dirty.extend(self.start_mirror(&mut queue));
                    resyncs = resyncs.wrapping_add(1);
                    if resyncs.is_multiple_of(DECIDE_EVERY_RESYNCS) {
                        dirty = self.every_key("periodic");
                    }
                }
                _ = async { let _ = shutdown.wait_for(|s| *s).await; } => break,
                _ = leader.changed() => if !self.ctx.may_write() { break },
                // In-place changes held for the certificate go in once it is usable.
                r = webhook_certificate.changed() => if r.is_ok() { dirty = self.every_key("webhook certificate") },
                r = api_up.changed() => if r.is_ok() && *api_up.borrow_and_update() { dirty = self.api_returned() },
            }
        }
        // The passes that started end as they would have: each checks the lease before
        // any actuating write.
        while let Some(ended) = running.next().await {
            self.finish(&mut queue, ended);
        }
    }

    /// The API server answers again after an outage: what failed during it is retried at
    /// once, every workload's pass and every rollback's restore, instead of at the end of a
    /// backoff that grew while nothing could succeed.
    fn api_returned(&mut self) -> BTreeSet<WorkloadKey> {
        self.memory.schedule.backoff.clear();
        self.watcher.retry_now();
        self.every_key("API server back")
    }

    /// The workloads due when the loop's timer fired: those whose own timer is due, every
    /// one when the hub state turned stale (a fetch may have moved `fresh_until` since the
    /// timer was set).
    fn woken(&mut self, stale_at: Option<DateTime<Utc>>) -> BTreeSet<WorkloadKey> {
        let now = self.ctx.clock.now();
        let mut due = BTreeSet::new();
        if stale_at.is_some_and(|t| t <= now) && !self.hub.borrow().is_fresh(now) {
            due = self.every_key("hub state stale");
        }
        due.extend(self.memory.schedule.take_due(now));
        due
    }

    /// The workloads whose rsr still lists an acknowledged lifecycle event as pending.
    fn pending_holders(&self) -> BTreeSet<WorkloadKey> {
        let acked = &self.memory.reports.acked_ids;
        if acked.is_empty() {
            return BTreeSet::new();
        }
        self.ctx
            .cache
            .rsrs()
            .iter()
            .filter(|r| {
                r.rsr
                    .as_ref()
                    .ok()
                    .and_then(|r| r.status.as_ref()?.change.as_ref())
                    .is_some_and(|c| c.pending_events.iter().any(|e| acked.contains(&e.id)))
            })
            .filter_map(|r| r.workload.clone())
            .collect()
    }

    /// Forgets acknowledged ids that no rsr lists as pending any more (at each resync, so
    /// the cache has long seen the status that listed them).
    fn prune_acked(&mut self) {
        if self.memory.reports.acked_ids.is_empty() {
            return;
        }
        let pending: std::collections::HashSet<Uuid> = self
            .ctx
            .cache
            .rsrs()
            .iter()
            .filter_map(|r| r.rsr.as_ref().ok()?.status.as_ref()?.change.clone())
            .flat_map(|c| c.pending_events.into_iter().map(|e| e.id))
            .collect();
        self.memory
            .reports
            .acked_ids
            .retain(|id| pending.contains(id));
    }

    /// Writes the policies' status when a policy or the set of workloads changed since the
    /// last successful sync (or a resync forces it), once the API server answers.
    async fn sync_policies(&self, seen: &mut Option<PolicyMark>) {
        let mark = policy_mark(&self.ctx.cache);
        if seen.as_ref() == Some(&mark) || !self.ctx.api_health.is_up() {
            return;
        }
        let now = self.ctx.clock.now();
        let scope = &self.ctx.settings.scope;
        let errors = policies::sync(&self.ctx.client, &self.ctx.cache, scope, now).await;
        for e in &errors {
            tracing::warn!(error = %e, "policy status not written");
        }
        if errors.is_empty() {
            *seen = Some(mark);
        }
    }

    /// How long the loop waits for a trigger at most: until the next timer or the hub
    /// turning stale (the second value: that blocks new changes, EV-37, so everything is
    /// decided again then), [`RESYNC`] at most, and [`API_RECHECK`] while an rsr sync is
    /// owed.
    fn next_wake(&self, now: DateTime<Utc>) -> (Duration, Option<DateTime<Utc>>) {
        let stale_at = self.hub.borrow().fresh_until.filter(|t| *t > now);
        let next = match (self.memory.schedule.next_timer(), stale_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut sleep = next.map_or(RESYNC, |at| (at - now).to_std().unwrap_or_default());
        if self.mirror.owed {
            // Looks again soon for the API server's return.
            sleep = sleep.min(API_RECHECK.to_std().unwrap_or(RESYNC));
        }
        (sleep, stale_at)
    }

    /// Marks `keys` ready for a pass, a rollback or a change in flight first, then those
    /// under a running health watch, so resuming what was cut off (the first pass after a
    /// restart) does not wait behind idle workloads. A workload that backs off is left to
    /// its timer; one the running mirroring has not handled yet waits for it.
    fn enqueue(&mut self, queue: &mut dispatch::Queue<WorkloadKey>, keys: BTreeSet<WorkloadKey>) {
        let now = self.ctx.clock.now();
        for key in keys {
            if let Some((_, until)) = self.memory.schedule.backoff.get(&key)
                && *until > now
            {
                continue;
            }
            if !self.mirror.settled(&key) {
                self.mirror.park(key);
                continue;
            }
            let rank = self
                .ctx
                .cache
                .rsrs_for(&key)
                .iter()
                .filter_map(|r| Some(urgency(r.rsr.as_ref().ok()?.status.as_ref(), now)))
                .min()
                .unwrap_or(URGENCY_NONE);
            queue.push(key, rank);
        }
    }

    /// Starts a pass for every ready workload while a slot is free. While the API server
    /// does not answer a pass does not run: its workload is looked at again after
    /// [`API_RECHECK`].
    fn start_passes(&mut self, queue: &mut dispatch::Queue<WorkloadKey>, running: &mut Running) {
        let Reconciler {
            ctx,
            hub_now,
            recorder,
            watcher,
            memory,
            ..
        } = self;
        dispatch::fill(queue, running, |key| {
            let ids = dispatch::change_ids(&ctx.cache, &key);
            let mut part = dispatch::take(memory, &key, &ids);
            let (ctx, hub, recorder, watcher) = (
                ctx.clone(),
                hub_now.clone(),
                recorder.clone(),
                watcher.clone(),
            );
            async move {
                let guard_off = crate::failpoints::is_set(crate::apiclient::WRITE_GUARD_OFF);
                if !ctx.api_health.is_up() && !guard_off {
                    return Ended {
                        key,
                        part,
                        ran: None,
                    };
                }
                let started = std::time::Instant::now();
                let res = reconcile_key(&ctx, &hub, &recorder, &mut part, &watcher, &key).await;
                let ran = Some((res, started.elapsed()));
                Ended { key, part, ran }
            }
            .boxed()
        });
    }

    /// Takes back what an ended pass held, frees its slot and schedules its workload: at
    /// once after a step that acted, after a backoff after an error (a trigger during the
    /// pass then waits for the backoff's timer, as a trigger after it does).
    fn finish(&mut self, queue: &mut dispatch::Queue<WorkloadKey>, ended: Ended) {
        let Ended { key, part, ran } = ended;
        dispatch::put_back(&mut self.memory, part);
        for k in self.release_held(&key) {
            queue.push(k, URGENCY_NONE);
        }
        let now = self.ctx.clock.now();
        match ran {
            Some((res, took)) => self.count(&key, res, took, now),
            None => self.memory.schedule.wake_at(now + API_RECHECK, &key),
        }
        let memory = &mut self.memory;
        if memory
            .schedule
            .backoff
            .get(&key)
            .is_some_and(|(_, until)| *until > now)
        {
            queue.forget_again(&key);
        }
        queue.done(&key);
        // A pass that acted is followed at once by the next one (key.rs).
        for k in std::mem::take(&mut memory.schedule.requeued) {
            queue.push(k, 0);
        }
        memory.shrink_sparse();
        queue.shrink_sparse();
        tracing::debug!(workload = %key, running = queue.running(), ready = queue.ready(), "slot freed");
    }

    /// Takes a delivery report in; returns the workloads whose status should record it.
    /// Ids no ledger entry names while passes run wait until those passes ended (they
    /// may hold the entry).
    fn take_report(
        &mut self,
        queue: &dispatch::Queue<WorkloadKey>,
        report: DeliveryReport,
    ) -> BTreeSet<WorkloadKey> {
        let ledger = &mut self.memory.reports;
        let (now, later) = dispatch::split_report(report, |id| ledger.in_flight.contains_key(id));
        let mut keys = now.map(|r| ledger.handle(r)).unwrap_or_default();
        match later {
            Some(report) if queue.running() > 0 => self.held.push(dispatch::HeldReport {
                report,
                waiting: queue.running_keys(),
            }),
            Some(report) => keys.extend(ledger.handle(report)),
            None => {}
        }
        keys
    }

    /// After the pass of `key` ended: the held reports its entries answer, and those no
    /// running pass can answer any more, are taken in. Like a report taken in at once, one
    /// taken in here also wakes the workloads whose rsr still lists an acknowledged event
    /// as pending (an event the outbox was rebuilt with has no ledger entry to name them).
    fn release_held(&mut self, key: &WorkloadKey) -> BTreeSet<WorkloadKey> {
        let mut keys = BTreeSet::new();
        let mut taken = false;
        let ledger = &mut self.memory.reports;
        for mut h in std::mem::take(&mut self.held) {
            h.waiting.remove(key);
            let (now, later) =
                dispatch::split_report(h.report, |id| ledger.in_flight.contains_key(id));
            if let Some(r) = now {
                keys.extend(ledger.handle(r));
                taken = true;
            }
            match later {
                Some(report) if h.waiting.is_empty() => {
                    keys.extend(ledger.handle(report));
                    taken = true;
                }
                Some(report) => self.held.push(dispatch::HeldReport {
                    report,
                    waiting: h.waiting,
                }),
                None => {}
            }
        }
        if taken {
            keys.extend(self.pending_holders());
        }
        keys
    }

    /// Counts the pass of `key` that ran for `took` and ended with `res`; an error backs
    /// off.
    fn count(
        &mut self,
        key: &WorkloadKey,
        res: Result<(), KeyError>,
        took: Duration,
        now: DateTime<Utc>,
    ) {
        let result = match &res {
            Ok(()) => "ok",
            Err(e) => e.category(),
        };
        let label = crate::metrics::ResultLabel {
            result: result.to_owned(),
        };
        let duration = &self.ctx.metrics.reconcile.duration;
        duration.get_or_create(&label).observe(took.as_secs_f64());
        tracing::debug!(workload = %key, took_ms = took.as_millis(), result, "pass ended");
        match res {
            Ok(()) => {
                self.memory.schedule.backoff.remove(key);
            }
            Err(e) => back_off(&mut self.memory, key, &e, now),
        }
    }
}

fn back_off(memory: &mut Memory, key: &WorkloadKey, e: &KeyError, now: DateTime<Utc>) {
    if matches!(
        e,
        KeyError::Intent(crate::intent::IntentError::Conflict { .. })
    ) {
        // Someone else wrote the rsr: read it again soon, no backoff (design D25).
        tracing::debug!(workload = %key, error = %e, "rsr changed meanwhile; reading it again");
        memory.writes.superseded.remove(key);
        memory
            .schedule
            .wake_at(now + chrono::Duration::milliseconds(CONFLICT_RETRY_MS), key);
        return;
    }
    let entry = memory
        .schedule
        .backoff
        .entry(key.clone())
        .or_insert((0, now));
    entry.0 = entry.0.saturating_add(1);
    let secs = BACKOFF_BASE
        .as_secs()
        .saturating_mul(1 << entry.0.min(9))
        .min(BACKOFF_MAX.as_secs());
    let at = now + chrono::Duration::seconds(i64::try_from(secs).unwrap_or(300));
    entry.1 = at;
    memory.schedule.wake_at(at, key);
    tracing::warn!(workload = %key, error = %e, category = e.category(), retry_in_s = secs, "reconcile failed");
}

/// Starts the controllers of one leader term: the hub client and its poll loop, the
/// outbox sender, and the reconciler; with a source other than the hub, that source's
/// task (`crate::source`) instead of the hub client, poll loop and sender. The tasks stop when the set is dropped or aborted.
pub fn start(ctx: Context) -> tokio::task::JoinSet<()> {
    let mut tasks = tokio::task::JoinSet::new();
    let (reporter, acks) = ack_channel();
    let outbox_config = crate::outbox::OutboxConfig {
        max_events: ctx.settings.outbox.max_events,
        max_bytes: usize::try_from(ctx.settings.outbox.max_bytes).unwrap_or(usize::MAX),
        ..crate::outbox::OutboxConfig::default()
    };
    let source = ctx.settings.recommendation_source;
    if source.is_local() {
        // No hub: events stay in the cluster (Kubernetes Events, metrics, report), and
        // count as delivered once recorded; nothing is buffered for a hub.
        let outbox = Outbox::local(outbox_config, ctx.metrics.outbox.clone(), Some(reporter));
        let (state, first_read) = crate::source::start(&ctx, source, &mut tasks);
        let reconciler = Reconciler::new(ctx, state, outbox, acks).with_first_poll(first_read);
        tasks.spawn(reconciler.run());
        return tasks;
    }
    let outbox = Outbox::new(outbox_config, ctx.metrics.outbox.clone(), Some(reporter));
    let mut first_poll = None;
    let hub_rx = match ctx.settings.hub.url.clone() {
        Some(url) => {
            let mut cfg = crate::hub::HubClientConfig::new(url, ctx.settings.cluster_name.clone());
            cfg.token_file = ctx.settings.hub.token_file.clone();
            cfg.stale_after = ctx.settings.hub.stale_after;
            cfg.scope_namespaces = ctx.settings.scope.namespaces.clone();
            cfg.auth_backoff = ctx.settings.hub.poll_interval;
            match crate::hub::HubClient::new(cfg, ctx.metrics.hub.clone(), ctx.clock.clone()) {
                Ok(client) => {
                    let client = Arc::new(client);
                    let rx = client.subscribe();
                    tasks.spawn({
                        let outbox = outbox.clone();
                        let client = client.clone();
                        async move { outbox.run(client).await }
                    });
                    let (polled_tx, polled_rx) = watch::channel(false);
                    first_poll = Some(polled_rx);
                    tasks.spawn(poll_hub(client, ctx.clone(), polled_tx));
                    rx
                }
                Err(e) => {
                    tracing::error!(error = %e, "no hub client: every workload is blocked HubUnreachable");
                    watch::channel(HubState::default()).1
                }
            }
        }
        None => watch::channel(HubState::default()).1,
    };
    let mut reconciler = Reconciler::new(ctx, hub_rx, outbox, acks);
    if let Some(polled) = first_poll {
        reconciler = reconciler.with_first_poll(polled);
    }
    tasks.spawn(reconciler.run());
    tasks
}

/// The hub poll of one leader term (design section 9, D26): restores the configuration
/// kept in `kerf-hub-state`, then every `hub.pollInterval` fetches the configuration and
/// the recommendations, keeps a changed configuration in `kerf-hub-state` and puts the
/// inventory when it changed. `polled` turns true when the first round finished.
pub async fn poll_hub(
    client: Arc<crate::hub::HubClient>,
    ctx: Context,
    polled: watch::Sender<bool>,
) {
    let interval = ctx.settings.hub.poll_interval;
    let mut shutdown = ctx.shutdown.clone();
    let mut sync = hub_sync::HubSync::new(client, ctx);
    tokio::select! {
        _ = sync.restore() => {}
        _ = async { let _ = shutdown.wait_for(|s| *s).await; } => return,
    }
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = async { let _ = shutdown.wait_for(|s| *s).await; } => return,
        }
        sync.poll_once().await;
        polled.send_replace(true);
    }
}

/// Logs an `OutOfScope` report and queues it; false when the outbox did not take it.
fn enqueue_out_of_scope(outbox: &Outbox, event: kerf_api::event::Event) -> bool {
    let w = &event.workload;
    tracing::info!(workload = %format!("{}/{}/{}", w.namespace, w.kind, w.name), recommendation = event.recommendation_id.as_deref().unwrap_or_default(), "{}", event.message.as_deref().unwrap_or_default());
    match outbox.enqueue(event) {
        Ok(_) => true,
        Err(e) => {
            tracing::error!(error = %e, category = e.category(), "event not queued");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::rsr::{ChangeState, RightsizingRecommendationStatus};

    fn status(
        state: Option<ChangeState>,
        watch_end: Option<&str>,
    ) -> RightsizingRecommendationStatus {
        serde_json::from_value(serde_json::json!({
            "phase": "Pending",
            "change": state.map(|st| serde_json::json!({
                "id": "c1", "state": st, "recommendationID": "r1", "strategy": "rollout",
                "resources": ["cpu"], "startedAt": "2026-11-30T10:00:00Z", "containers": [],
                "eventIds": {},
            })),
            "watch": watch_end.map(|end| serde_json::json!({
                "start": "2026-11-30T10:00:00Z", "end": end,
            })),
        }))
        .expect("status")
    }

    // rule: design D25
    #[test]
    fn rollbacks_come_first_then_changes_and_first_decisions_then_running_watches() {
        let now: DateTime<Utc> = "2026-11-30T11:00:00Z".parse().expect("time");
        let rank = |s: &RightsizingRecommendationStatus| urgency(Some(s), now);
        assert_eq!(rank(&status(Some(ChangeState::RollingBack), None)), 0);
        for st in [ChangeState::Intent, ChangeState::Applying] {
            assert_eq!(rank(&status(Some(st), None)), 1, "{st:?}");
        }
        assert_eq!(urgency(None, now), 1, "an rsr without a status");
        let mut undecided = status(None, None);
        undecided.phase = None;
        assert_eq!(rank(&undecided), 1, "an rsr without a phase");
        let watching = status(Some(ChangeState::Applied), Some("2026-11-30T12:00:00Z"));
        assert_eq!(rank(&watching), 2);
        let watched = status(Some(ChangeState::Applied), Some("2026-11-30T10:30:00Z"));
        assert_eq!(rank(&watched), URGENCY_NONE);
        assert_eq!(
            rank(&status(Some(ChangeState::RolledBack), None)),
            URGENCY_NONE
        );
        assert_eq!(rank(&status(None, None)), URGENCY_NONE);
    }
}
