//! Pod counters for the health watch: restarts from `restartCount`, OOM kills as the agent
//! sees them (`lastState.terminated.reason: OOMKilled` after a restart), and whether a
//! pod's in-place resize restarts a container (design D24).
//!
//! Pod status holds only the last termination, so OOM kills are counted by the agent: each
//! time a container's `restartCount` goes up and its last termination reads `OOMKilled`, one
//! more kill. A container the agent sees for the first time counts the kill its last state
//! shows; one whose baseline is in rsr status (after an agent restart) starts from that
//! baseline, plus one if it restarted since and its last state is an OOM kill.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use kerf_api::rsr::{Baseline, ChangeRecord};
use kerf_api::{Resource, WorkloadKind};
use kerf_decide::health::{ContainerCounters, LastTermination, PodCounters, WatchBaselines};

use crate::cache::{PodContainer, PodInfo, WorkloadInfo};
use crate::executor::requirements_cover;

/// `lastState.terminated.reason` of an OOM kill.
pub const OOM_KILLED: &str = "OOMKilled";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Seen {
    restarts: u32,
    oom_kills: u32,
}

/// The OOM kills the agent has seen, per pod UID and container.
#[derive(Debug, Default)]
pub struct OomTracker {
    seen: HashMap<(String, String), Seen>,
}

impl OomTracker {
    /// Records a container's status and returns the OOM kills seen so far. `seed` is the
    /// container's baseline in rsr status, used when the tracker has not seen it yet.
    pub fn observe(&mut self, uid: &str, c: &PodContainer, seed: Option<&Baseline>) -> u32 {
        let oom_now = c.last_terminated_reason.as_deref() == Some(OOM_KILLED);
        let key = (uid.to_owned(), c.name.to_string());
        let entry = self.seen.entry(key).or_insert_with(|| {
            let oom_kills = match seed {
                Some(b) => {
                    let base = u32::try_from(b.oom_kills).unwrap_or(0);
                    let restarted = c.restart_count > u32::try_from(b.restarts).unwrap_or(0);
                    base + u32::from(restarted && oom_now)
                }
                None => u32::from(oom_now),
            };
            Seen {
                restarts: c.restart_count,
                oom_kills,
            }
        });
        if c.restart_count > entry.restarts && oom_now {
            entry.oom_kills = entry.oom_kills.saturating_add(1);
        }
        entry.restarts = c.restart_count;
        entry.oom_kills
    }

    /// Forgets pods that no longer exist.
    pub fn retain_pods(&mut self, live: &BTreeSet<&str>) {
        self.seen.retain(|(uid, _), _| live.contains(uid.as_str()));
    }

    /// How many containers are tracked.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// True when nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// Whether the change's in-place resize restarts container `c` (a changed resource whose
/// `resizePolicy` is `RestartContainer`, design D24).
fn restarts_on_resize(change: &ChangeRecord, c: &PodContainer) -> bool {
    if !change.strategy.resizes_pods() {
        return false;
    }
    let Some(cc) = change.containers.iter().find(|x| *x.name == *c.name) else {
        return false;
    };
    Resource::ALL.into_iter().any(|r| {
        let changed = cc.from.requests.get(r) != cc.to.requests.get(r)
            || cc.from.limits.get(r) != cc.to.limits.get(r);
        let restart = match r {
            Resource::Cpu => c.resize_policy.cpu_restart,
            Resource::Memory => c.resize_policy.memory_restart,
        };
        changed && restart
    })
}

/// Whether the pod's resize has completed for container `c`: no resize condition remains
/// and the kubelet reports the change's values.
fn resize_completed(change: &ChangeRecord, pod: &PodInfo, c: &PodContainer) -> bool {
    if pod.resize_pending.is_some() || pod.resize_in_progress.is_some() {
        return false;
    }
    let Some(cc) = change.containers.iter().find(|x| *x.name == *c.name) else {
        return true;
    };
    c.status_resources()
        .is_some_and(|actual| requirements_cover(&cc.to, &actual))
}

/// The counters of the workload's pods at `now`, feeding `tracker` on the way.
pub fn pod_counters(
    tracker: &mut OomTracker,
    pods: &[Arc<PodInfo>],
    change: &ChangeRecord,
    baselines: &WatchBaselines,
    now: DateTime<Utc>,
) -> Vec<PodCounters> {
    pods.iter()
        .map(|pod| {
            let uid = pod.uid.to_string();
            let entry = baselines.pods.get(&uid);
            let containers = pod
                .containers
                .iter()
                .map(|c| {
                    let seed = entry.and_then(|e| e.get(&*c.name));
                    let restarts = restarts_on_resize(change, c);
                    ContainerCounters {
                        name: c.name.to_string(),
                        restart_count: c.restart_count,
                        oom_kills: tracker.observe(&uid, c, seed),
                        restarts_on_resize: restarts,
                        resize_completed_at: (restarts && resize_completed(change, pod, c))
                            .then_some(now),
                        last_termination: c.last_terminated_at.map(|at| LastTermination {
                            finished_at: at,
                            oom_killed: c.last_terminated_reason.as_deref() == Some(OOM_KILLED),
                        }),
                    }
                })
                .collect();
            PodCounters {
                uid,
                containers,
                created_at: pod.created(),
            }
        })
        .collect()
}

/// Whether the baselines of a watch have been taken (an empty watch of a workload without
/// pods counts as not taken, and is taken again when pods exist).
pub fn baselines_taken(b: &WatchBaselines) -> bool {
    !b.pods.is_empty() || b.aggregated.is_some()
}

/// The pods that existed at the change: pods created after `start` count from zero and get
/// no baseline.
pub fn pods_at_change(
    counters: &[PodCounters],
    pods: &[Arc<PodInfo>],
    start: DateTime<Utc>,
) -> Vec<PodCounters> {
    counters
        .iter()
        .filter(|c| {
            pods.iter()
                .find(|p| p.uid == *c.uid)
                .is_none_or(|p| p.created().is_none_or(|t| t <= start))
        })
        .cloned()
        .collect()
}

/// Whether a workload's rollout has completed: the controller saw the latest generation,
/// and every pod is updated and available (design D23).
pub fn rollout_complete(w: &WorkloadInfo) -> bool {
    let st = &w.status;
    if st
        .observed_generation
        .zip(w.generation)
        .is_some_and(|(o, g)| o < g)
    {
        return false;
    }
    match w.key.kind {
        WorkloadKind::DaemonSet => {
            let want = st.desired_number_scheduled.unwrap_or(0);
            st.updated_number_scheduled.unwrap_or(0) >= want
                && st.number_available.unwrap_or(0) >= want
        }
        _ => {
            let want = w.replicas.unwrap_or(1);
            st.updated_replicas.unwrap_or(0) >= want
                && st.available_replicas.unwrap_or(0) >= want
                && st.replicas.unwrap_or(0) <= want
        }
    }
}
