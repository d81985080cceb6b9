//! The health watch and rollback at run time (rollback document, design section 7, D11,
//! D16, D23-D25, D29): the I/O shell around the pure verdicts of `kerf_decide::health`.
//!
//! - [`Watcher::step`] runs one evaluation of a change whose state is `Applied` and whose
//!   watch runs: it takes the baselines at the change from the slim pod cache (kept in
//!   `status.watch`; the caller writes the status), counts OOM kills and restarts since then
//!   on every call (the reconciler calls it on every pod update, so a breach is acted on at
//!   the update that shows it, RB-11), samples throttling through PromQL or the cAdvisor
//!   fallback, and returns a [`HealthStep`].
//! - A breached change is rolled back by `reconcile::rollback_step`: the rsr marked
//!   `RolledBack` first, then the breached resources restored with the strategy that
//!   applied them, retrying with backoff; a change left in state `RollingBack` by a restart
//!   is resumed from status alone. [`rollback`] holds its parts without I/O and the
//!   watcher keeps the memory of failed restores.

pub mod counters;
pub mod rollback;
pub mod throttling;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Duration, Utc};
use kerf_api::Resource;
use kerf_api::rsr::{ChangeState, RightsizingRecommendationStatus};
use kerf_decide::effective::EffectivePolicy;
use kerf_decide::health::{
    Breach, Counts, DEFAULT_BASELINE_CAP, HealthVerdict, Thresholds, ThrottlingSample,
    WatchBaselines, WatchState, complete_baselines, count_within, evaluate, take_baselines,
};

use crate::cache::PodInfo;
use crate::settings::HealthSettings;

pub use counters::{OomTracker, rollout_complete};
pub use rollback::{RollbackCtx, RollbackOutcome, StatusWriter};
pub use throttling::{FirstScrape, ThrottlingSource, ThrottlingTarget};

/// How often throttling is sampled again while a watch of a CPU change runs (OOM kills and
/// restarts need no timer: pod updates trigger them).
pub const THROTTLING_INTERVAL: Duration = Duration::seconds(10);

/// Errors of the health watch and the rollback.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// `health.metricsURL` is not a usable URL.
    #[error("health.metricsURL {url:?} is not usable: {message}")]
    MetricsUrl {
        /// The URL.
        url: String,
        /// Why.
        message: String,
    },
    /// A PromQL query failed or answered something unusable.
    #[error("throttling query failed: {message}")]
    Prometheus {
        /// The client's message.
        message: String,
    },
    /// A cAdvisor scrape through the node proxy failed or did not parse.
    #[error("cAdvisor metrics of node {node}: {message}")]
    Cadvisor {
        /// The node.
        node: String,
        /// Why.
        message: String,
    },
    /// A status write failed (409 included: read again and resume).
    #[error(transparent)]
    Status(#[from] crate::intent::IntentError),
    /// This replica does not hold the lease.
    #[error("not the leader: no rollback write")]
    NotLeader,
}

impl HealthError {
    /// A short, bounded label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            HealthError::MetricsUrl { .. } => "metrics_url",
            HealthError::Prometheus { .. } => "prometheus",
            HealthError::Cadvisor { .. } => "cadvisor",
            HealthError::Status(e) => e.category(),
            HealthError::NotLeader => "not_leader",
        }
    }
}

/// What one evaluation found.
#[derive(Clone, Debug, PartialEq)]
pub enum HealthStep {
    /// No watch runs: the change is not `Applied`, or there is no watch.
    Idle,
    /// The watch runs until `until` (`None` while a rollout runs). Evaluate again on the
    /// next pod update, and at `recheck_at` for throttling.
    Watching {
        /// When the watch ends.
        until: Option<DateTime<Utc>>,
        /// When to sample throttling again, if it is watched.
        recheck_at: Option<DateTime<Utc>>,
    },
    /// `watchDuration` passed without a breach (RB-19).
    Healthy,
    /// A threshold was reached: roll it back (`reconcile::rollback_step`).
    Breach(Box<Breach>),
}

/// What an evaluation reads besides the rsr status.
#[derive(Clone, Debug)]
pub struct WatchInput<'a> {
    /// The workload's namespace.
    pub namespace: &'a str,
    /// The workload's pods (the slim pod cache).
    pub pods: &'a [Arc<PodInfo>],
    /// The thresholds ([`Watcher::thresholds`]).
    pub thresholds: Thresholds,
    /// `watchDuration` of the effective policy.
    pub watch_duration: Duration,
    /// Whether the workload's rollout has completed ([`rollout_complete`]); ignored for
    /// in-place.
    pub rollout_complete: bool,
    /// The time.
    pub now: DateTime<Utc>,
}

/// The health watch of every workload: the throttling source and what the agent keeps in
/// memory between evaluations (OOM kills seen, first cAdvisor scrapes, rollback attempts).
/// Everything else lives in rsr status, so a restarted agent resumes from it.
#[derive(Debug)]
pub struct Watcher {
    source: ThrottlingSource,
    delay: Duration,
    oom: Mutex<OomTracker>,
    scrapes: Mutex<HashMap<String, FirstScrape>>,
    attempts: Mutex<HashMap<String, rollback::Attempts>>,
}

impl Watcher {
    /// A watcher for the agent's health settings: PromQL with `metricsURL`, else the
    /// cAdvisor fallback when enabled, else no throttling signal (RB-13, RB-16, RB-17).
    pub fn new(settings: &HealthSettings) -> Result<Watcher, HealthError> {
        let source = match (&settings.metrics_url, settings.cadvisor_fallback) {
            (Some(url), _) => {
                let client =
                    prometheus_http_query::Client::try_from(url.as_str()).map_err(|e| {
                        HealthError::MetricsUrl {
                            url: url.clone(),
                            message: e.to_string(),
                        }
                    })?;
                ThrottlingSource::Prometheus(client)
            }
            (None, true) => ThrottlingSource::Cadvisor,
            (None, false) => ThrottlingSource::Off,
        };
        let delay = Duration::from_std(settings.throttling_delay)
            .unwrap_or(kerf_decide::health::DEFAULT_THROTTLING_DELAY);
        Ok(Watcher::with_source(source, delay))
    }

    /// A watcher with an explicit throttling source and delay.
    pub fn with_source(source: ThrottlingSource, delay: Duration) -> Watcher {
        Watcher {
            source,
            delay,
            oom: Mutex::new(OomTracker::default()),
            scrapes: Mutex::new(HashMap::new()),
            attempts: Mutex::new(HashMap::new()),
        }
    }

    /// The thresholds of a watch under `policy`, with the agent's throttling delay.
    pub fn thresholds(&self, policy: &EffectivePolicy) -> Thresholds {
        Thresholds::from_policy(policy, self.delay)
    }

    /// One evaluation of the watch of `status.change` (rules RB-03 to RB-17, RB-19). Updates
    /// `status.watch` (baselines; the end once a rollout completes); the caller writes the
    /// status when it changed, and rolls back on [`HealthStep::Breach`].
    pub async fn step(
        &self,
        client: &kube::Client,
        status: &mut RightsizingRecommendationStatus,
        input: &WatchInput<'_>,
    ) -> HealthStep {
        let Some(change) = status
            .change
            .clone()
            .filter(|c| c.state == ChangeState::Applied)
        else {
            return HealthStep::Idle;
        };
        let Some(watch) = status.watch.as_mut() else {
            return HealthStep::Idle;
        };
        if watch.end.is_none() && !change.strategy.resizes_pods() && input.rollout_complete {
            watch.end = Some(input.now + input.watch_duration);
        }
        self.watch_step(client, watch, &change, input).await
    }

    /// One evaluation of the canary watch of an in-flight in-place change
    /// (`change.canary.watch`, stage Watching): the same signals and thresholds, over the
    /// canary pods only (`input.pods`), until the canary watch's end. Updates its
    /// baselines in `status`.
    pub async fn step_canary(
        &self,
        client: &kube::Client,
        status: &mut RightsizingRecommendationStatus,
        input: &WatchInput<'_>,
    ) -> HealthStep {
        if !kerf_decide::pass::canary_watch_due(status) {
            return HealthStep::Idle;
        }
        let Some(change) = status.change.as_mut() else {
            return HealthStep::Idle;
        };
        let snapshot = change.clone();
        let Some(watch) = change.canary.as_mut().and_then(|c| c.watch.as_mut()) else {
            return HealthStep::Idle;
        };
        let duration = watch.end.map_or(input.watch_duration, |e| e - watch.start);
        let input = WatchInput {
            watch_duration: duration,
            ..input.clone()
        };
        self.watch_step(client, watch, &snapshot, &input).await
    }

    /// Counts, samples and evaluates one watch (the change's or its canary's).
    async fn watch_step(
        &self,
        client: &kube::Client,
        watch: &mut kerf_api::rsr::WatchStatus,
        change: &kerf_api::rsr::ChangeRecord,
        input: &WatchInput<'_>,
    ) -> HealthStep {
        let counts = self.count(watch, change, input);
        let state = WatchState {
            start: watch.start,
            strategy: change.strategy,
            rollout_completed_at: watch.end.map(|e| e - input.watch_duration),
            watch_duration: input.watch_duration,
            rolled_back: false,
        };
        let start = watch.start;
        let cpu = change.resources.contains(&Resource::Cpu);
        let ended = watch.end.is_some_and(|end| input.now >= end);
        let samples = if cpu && !ended && input.now >= start + self.delay {
            self.throttling(client, change, start, input).await
        } else {
            Vec::new()
        };
        let verdict = evaluate(
            &state,
            &change.resources,
            counts,
            &samples,
            &input.thresholds,
            input.now,
        );
        self.verdict_step(verdict, &change.id, cpu, start, input.now)
    }

    fn verdict_step(
        &self,
        verdict: HealthVerdict,
        change_id: &str,
        cpu: bool,
        start: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> HealthStep {
        match verdict {
            HealthVerdict::Watching { until } => {
                let throttling = cpu && !matches!(self.source, ThrottlingSource::Off);
                let recheck_at = throttling
                    .then(|| (now + THROTTLING_INTERVAL).max(start + self.delay))
                    .filter(|t| until.is_none_or(|u| *t < u));
                HealthStep::Watching { until, recheck_at }
            }
            HealthVerdict::Healthy | HealthVerdict::Ended => {
                self.forget(change_id);
                if matches!(verdict, HealthVerdict::Healthy) {
                    HealthStep::Healthy
                } else {
                    HealthStep::Idle
                }
            }
            HealthVerdict::Breach(b) => HealthStep::Breach(Box::new(b)),
        }
    }

    /// Takes or completes the baselines and counts since them (RB-09, RB-10, D24).
    fn count(
        &self,
        watch: &mut kerf_api::rsr::WatchStatus,
        change: &kerf_api::rsr::ChangeRecord,
        input: &WatchInput<'_>,
    ) -> Counts {
        let mut baselines = WatchBaselines::from_status(watch);
        let mut tracker = self.oom.lock().unwrap_or_else(PoisonError::into_inner);
        let pods = counters::pod_counters(&mut tracker, input.pods, change, &baselines, input.now);
        let uids: Vec<String> = input.pods.iter().map(|p| p.uid.to_string()).collect();
        let live: BTreeSet<&str> = uids.iter().map(String::as_str).collect();
        if !baselines.pods.is_empty() {
            tracker.retain_pods(&live);
        }
        drop(tracker);
        if !counters::baselines_taken(&baselines) {
            let at_change = counters::pods_at_change(&pods, input.pods, watch.start);
            baselines = take_baselines(&at_change, DEFAULT_BASELINE_CAP);
            baselines.write_to(watch);
        } else if complete_baselines(&mut baselines, &pods) {
            baselines.write_to(watch);
        }
        count_within(&baselines, &pods, watch.end)
    }

    /// Throttling samples of the CPU containers; a failed read is logged and gives none
    /// (retried at the next evaluation).
    async fn throttling(
        &self,
        client: &kube::Client,
        change: &kerf_api::rsr::ChangeRecord,
        start: DateTime<Utc>,
        input: &WatchInput<'_>,
    ) -> Vec<ThrottlingSample> {
        let target = ThrottlingTarget {
            namespace: input.namespace,
            pods: input.pods.iter().map(|p| p.name.to_string()).collect(),
            nodes: input
                .pods
                .iter()
                .filter_map(|p| p.node_name.as_deref().map(str::to_owned))
                .collect(),
            containers: change
                .containers
                .iter()
                .filter(|c| {
                    c.from.requests.cpu != c.to.requests.cpu || c.from.limits.cpu != c.to.limits.cpu
                })
                .map(|c| c.name.clone())
                .collect(),
            start,
            delay: self.delay,
        };
        let res = match &self.source {
            ThrottlingSource::Off => Ok(Vec::new()),
            ThrottlingSource::Prometheus(p) => {
                throttling::promql_samples(p, &target, input.now).await
            }
            ThrottlingSource::Cadvisor => {
                self.cadvisor(client, &change.id, &target, input.now).await
            }
        };
        res.unwrap_or_else(|e| {
            tracing::warn!(namespace = input.namespace, change = %change.id, category = e.category(), error = %e, "throttling not measured this time");
            Vec::new()
        })
    }

    async fn cadvisor(
        &self,
        client: &kube::Client,
        change_id: &str,
        target: &ThrottlingTarget<'_>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ThrottlingSample>, HealthError> {
        let counters = throttling::scrape_nodes(client, &target.nodes).await?;
        let mut scrapes = self.scrapes.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(first) = scrapes.get(change_id) else {
            scrapes.insert(change_id.to_owned(), FirstScrape { at: now, counters });
            return Ok(Vec::new());
        };
        Ok(throttling::cadvisor_samples(first, &counters, target))
    }

    /// Drops what memory holds for a change whose watch ended.
    fn forget(&self, change_id: &str) {
        self.scrapes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(change_id);
        self.attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(change_id);
    }
}
