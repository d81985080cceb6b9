//! Leader election on a `coordination.k8s.io/v1` Lease in the agent's namespace.
//!
//! The decision what to do with a Lease is a pure function ([`next_step`]) of its contents,
//! this replica's identity and `now`; the loop in [`run`] does the I/O, writes with the
//! Lease's resourceVersion (a concurrent writer gets 409 and retries), and publishes
//! [`LeaderState`] on a watch channel. Whether this replica may act is checked locally
//! with [`LeaderState::is_leader_at`], never by an API call (design D25).

pub mod metrics;

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;

use crate::clock::SharedClock;
use crate::settings::{LEASE_SAFETY_MARGIN, LeaderElectionSettings};

pub use metrics::LeaderMetrics;

/// Why a Lease operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Someone else wrote the Lease first (409).
    #[error("lease changed concurrently")]
    Conflict,
    /// Any other API error.
    #[error("lease request failed: {0}")]
    Api(#[source] kube::Error),
}

impl LeaseError {
    /// A short, bounded name of the error kind.
    pub fn category(&self) -> &'static str {
        match self {
            LeaseError::Conflict => "conflict",
            LeaseError::Api(_) => "api",
        }
    }
}

/// Whether this replica leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderState {
    /// Leader election is off: this replica always leads.
    Always,
    /// This replica holds the Lease, last renewed at `renewed_at`.
    Leader {
        /// When the Lease was last renewed (the time written into it).
        renewed_at: DateTime<Utc>,
        /// The Lease's duration.
        lease_duration: Duration,
    },
    /// Another replica (or nobody) holds the Lease.
    Follower {
        /// The current holder, if known.
        holder: Option<String>,
    },
}

impl LeaderState {
    /// Whether this replica may act at `now`: `now < renewTime + leaseDuration - 2s`.
    pub fn is_leader_at(&self, now: DateTime<Utc>) -> bool {
        match self {
            LeaderState::Always => true,
            LeaderState::Leader {
                renewed_at,
                lease_duration,
            } => {
                let valid = lease_duration.saturating_sub(LEASE_SAFETY_MARGIN);
                chrono::Duration::from_std(valid).is_ok_and(|v| now < *renewed_at + v)
            }
            LeaderState::Follower { .. } => false,
        }
    }
}

/// The parts of a Lease the election reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseRecord {
    /// holderIdentity.
    pub holder: Option<String>,
    /// renewTime.
    pub renew_time: Option<DateTime<Utc>>,
    /// acquireTime.
    pub acquire_time: Option<DateTime<Utc>>,
    /// leaseDurationSeconds.
    pub lease_duration_seconds: Option<i32>,
    /// leaseTransitions.
    pub transitions: i32,
}

impl LeaseRecord {
    /// Reads a Lease.
    pub fn from_lease(l: &Lease) -> LeaseRecord {
        let spec = l.spec.clone().unwrap_or_default();
        LeaseRecord {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.as_ref().and_then(micro_to_chrono),
            acquire_time: spec.acquire_time.as_ref().and_then(micro_to_chrono),
            lease_duration_seconds: spec.lease_duration_seconds,
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// When the holder's claim runs out; `None` for a Lease nobody holds.
    pub fn expires_at(&self) -> Option<DateTime<Utc>> {
        let secs = self.lease_duration_seconds.unwrap_or(0).max(0);
        self.renew_time
            .or(self.acquire_time)
            .map(|t| t + chrono::Duration::seconds(i64::from(secs)))
    }
}

/// What to do with the Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No Lease exists: create it holding it.
    Create,
    /// The Lease is free or expired: take it (a new transition).
    Acquire,
    /// This replica holds it: renew.
    Renew,
    /// Another replica holds it until `until`.
    Wait {
        /// The holder.
        holder: String,
        /// When its claim runs out.
        until: Option<DateTime<Utc>>,
    },
}

/// Decides what to do with the Lease `record` (absent: `None`) as `identity` at `now`.
pub fn next_step(record: Option<&LeaseRecord>, identity: &str, now: DateTime<Utc>) -> Step {
    let Some(r) = record else {
        return Step::Create;
    };
    match r.holder.as_deref() {
        None => Step::Acquire,
        Some(h) if h == identity => Step::Renew,
        Some(h) => match r.expires_at() {
            Some(end) if end > now => Step::Wait {
                holder: h.to_owned(),
                until: Some(end),
            },
            _ => Step::Acquire,
        },
    }
}

/// The Lease spec this replica writes for `step` at `now`.
pub fn desired_spec(
    record: Option<&LeaseRecord>,
    step: &Step,
    identity: &str,
    lease_duration: Duration,
    now: DateTime<Utc>,
) -> Option<LeaseSpec> {
    let prev = record.cloned().unwrap_or_default();
    let (acquire, transitions) = match step {
        Step::Create => (now, 0),
        Step::Acquire => (now, prev.transitions + 1),
        Step::Renew => (prev.acquire_time.unwrap_or(now), prev.transitions),
        Step::Wait { .. } => return None,
    };
    Some(LeaseSpec {
        holder_identity: Some(identity.to_owned()),
        lease_duration_seconds: Some(i32::try_from(lease_duration.as_secs()).unwrap_or(i32::MAX)),
        acquire_time: chrono_to_micro(acquire),
        renew_time: chrono_to_micro(now),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    })
}

/// Whether a leader that last renewed at `renewed_at` must step down at `now`.
pub fn must_step_down(
    renewed_at: DateTime<Utc>,
    renew_deadline: Duration,
    now: DateTime<Utc>,
) -> bool {
    chrono::Duration::from_std(renew_deadline).map_or(true, |d| now >= renewed_at + d)
}

fn micro_to_chrono(t: &MicroTime) -> Option<DateTime<Utc>> {
    let nanos = u32::try_from(t.0.subsec_nanosecond()).unwrap_or(0);
    DateTime::from_timestamp(t.0.as_second(), nanos)
}

fn chrono_to_micro(t: DateTime<Utc>) -> Option<MicroTime> {
    let nanos = i32::try_from(t.timestamp_subsec_micros() * 1000).unwrap_or(0);
    k8s_openapi::jiff::Timestamp::new(t.timestamp(), nanos)
        .ok()
        .map(MicroTime)
}

/// Leader election over the API: the Lease, who we are, and the clock.
pub struct Elector {
    api: Api<Lease>,
    settings: LeaderElectionSettings,
    clock: SharedClock,
    metrics: LeaderMetrics,
}

impl Elector {
    /// An elector for the Lease named in `settings`.
    pub fn new(
        client: Client,
        settings: LeaderElectionSettings,
        clock: SharedClock,
        metrics: LeaderMetrics,
    ) -> Self {
        Elector {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            clock,
            metrics,
        }
    }

    /// One attempt: reads the Lease and acquires or renews it if it may. Returns the
    /// time written into the Lease on success, `None` if another replica holds it.
    pub async fn try_once(&self) -> Result<Result<DateTime<Utc>, Option<String>>, LeaseError> {
        let s = &self.settings;
        let current = self
            .api
            .get_opt(&s.lease_name)
            .await
            .map_err(LeaseError::Api)?;
        let record = current.as_ref().map(LeaseRecord::from_lease);
        let now = self.clock.now();
        let step = next_step(record.as_ref(), &s.identity, now);
        let Some(spec) = desired_spec(record.as_ref(), &step, &s.identity, s.lease_duration, now)
        else {
            return Ok(Err(record.and_then(|r| r.holder)));
        };
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(s.lease_name.clone()),
                namespace: Some(s.namespace.clone()),
                // The precondition: the write fails with 409 if someone wrote in between.
                resource_version: current.and_then(|l| l.metadata.resource_version),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        };
        let pp = PostParams::default();
        let res = if step == Step::Create {
            self.api.create(&pp, &lease).await
        } else {
            self.api.replace(&s.lease_name, &pp, &lease).await
        };
        match res {
            Ok(_) => Ok(Ok(now)),
            Err(kube::Error::Api(e)) if e.code == 409 => Err(LeaseError::Conflict),
            Err(e) => Err(LeaseError::Api(e)),
        }
    }

    /// Gives the Lease up if this replica holds it, so another replica can take over at once.
    pub async fn release(&self) -> Result<(), LeaseError> {
        let s = &self.settings;
        let Some(mut lease) = self
            .api
            .get_opt(&s.lease_name)
            .await
            .map_err(LeaseError::Api)?
        else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(s.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        match self
            .api
            .replace(&s.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Err(LeaseError::Conflict),
            Err(e) => Err(LeaseError::Api(e)),
        }
    }

    fn publish(&self, tx: &watch::Sender<LeaderState>, state: LeaderState) {
        let was = tx.borrow().is_leader_at(self.clock.now());
        let is = state.is_leader_at(self.clock.now());
        if was != is {
            self.metrics.transitions.inc();
            tracing::info!(leader = is, identity = %self.settings.identity, "leadership changed");
        }
        self.metrics.leader.set(i64::from(is));
        tx.send_replace(state);
    }

    /// Runs the election until `shutdown` changes to true, publishing leadership on `tx`;
    /// on shutdown a leader steps down and releases the Lease.
    pub async fn run(self, tx: watch::Sender<LeaderState>, mut shutdown: watch::Receiver<bool>) {
        let mut last_renew: Option<DateTime<Utc>> = None;
        loop {
            match self.try_once().await {
                Ok(Ok(at)) => {
                    last_renew = Some(at);
                    let lease_duration = self.settings.lease_duration;
                    self.publish(
                        &tx,
                        LeaderState::Leader {
                            renewed_at: at,
                            lease_duration,
                        },
                    );
                }
                Ok(Err(holder)) => {
                    last_renew = None;
                    self.publish(&tx, LeaderState::Follower { holder });
                }
                Err(e) => {
                    tracing::warn!(error = %e, category = e.category(), "lease attempt failed");
                    let now = self.clock.now();
                    if last_renew
                        .is_some_and(|t| must_step_down(t, self.settings.renew_deadline, now))
                    {
                        last_renew = None;
                        self.publish(&tx, LeaderState::Follower { holder: None });
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.settings.retry_period) => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
        self.publish(&tx, LeaderState::Follower { holder: None });
        if let Err(e) = self.release().await {
            tracing::warn!(error = %e, "cannot release the lease");
        }
    }
}

/// A leadership channel for a replica without leader election: always leader.
pub fn always_leader() -> (watch::Sender<LeaderState>, watch::Receiver<LeaderState>) {
    watch::channel(LeaderState::Always)
}
