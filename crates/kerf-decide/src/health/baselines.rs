//! Baselines of OOM kills and restarts, taken at the change, and the counts since
//! (rules RB-06, RB-09, RB-10, design D24, D25).
//!
//! At the change the agent records, per pod and container, `restartCount` and the OOM kills
//! it has seen (`lastState.terminated.reason == OOMKilled`). At most `cap` pods get their
//! own entry; the counters of the other pods are summed into `aggregated`, so rsr status
//! stays small (design D25). Pods whose counters are highest get their own entries first,
//! because a pod that only `aggregated` covers and that is then deleted leaves its counters
//! in the aggregate and hides as many later restarts; a pod with zero counters hides none.
//!
//! A pod whose in-place resize restarts a container (`resizePolicy: RestartContainer` on a
//! changed resource) takes its baseline when its resize completes (design D24): until then
//! its entry is empty and it counts nothing, and [`complete_baselines`] fills the entry
//! once the resize has completed. Such pods get their own entries before any other. If more
//! of them than `cap` exist, the surplus goes into `aggregated` with one restart added per
//! restarting container, the restart the resize is expected to cause.
//!
//! Counting: a pod with an entry counts what its containers added since the baseline; a
//! pod without an entry (created after the change, or covered by `aggregated`) counts
//! everything, less the aggregate. A deleted pod's counts are lost: the watch counts only
//! pods that still exist.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use kerf_api::rsr::{Baseline, WatchStatus};

/// The default number of pods with their own baseline entry.
pub const DEFAULT_BASELINE_CAP: usize = 200;

/// The counters of one container, as the agent reads them from pod status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerCounters {
    /// Container name.
    pub name: String,
    /// `status.containerStatuses[].restartCount`.
    pub restart_count: u32,
    /// OOM kills observed (`lastState.terminated.reason == OOMKilled`), counted by the agent.
    pub oom_kills: u32,
    /// The change's in-place resize restarts this container (a changed resource with
    /// `resizePolicy: RestartContainer`).
    pub restarts_on_resize: bool,
    /// When the pod's resize completed, once it has.
    pub resize_completed_at: Option<DateTime<Utc>>,
    /// `lastState.terminated`, when pod status dates it (`finishedAt`).
    pub last_termination: Option<LastTermination>,
}

/// The last termination of a container, as pod status dates it. Pod status keeps only the
/// last one: earlier terminations have no time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastTermination {
    /// `lastState.terminated.finishedAt`.
    pub finished_at: DateTime<Utc>,
    /// `lastState.terminated.reason == OOMKilled`.
    pub oom_killed: bool,
}

impl ContainerCounters {
    fn resize_pending(&self) -> bool {
        self.restarts_on_resize && self.resize_completed_at.is_none()
    }
}

/// The counters of one pod of the workload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodCounters {
    /// Pod UID.
    pub uid: String,
    /// Containers and restartable init containers.
    pub containers: Vec<ContainerCounters>,
    /// `metadata.creationTimestamp`, if known.
    pub created_at: Option<DateTime<Utc>>,
}

impl PodCounters {
    fn resize_pending(&self) -> bool {
        self.containers
            .iter()
            .any(ContainerCounters::resize_pending)
    }

    fn total(&self) -> u64 {
        self.containers
            .iter()
            .map(|c| u64::from(c.restart_count) + u64::from(c.oom_kills))
            .sum()
    }

    fn entry(&self) -> BTreeMap<String, Baseline> {
        self.containers
            .iter()
            .map(|c| {
                let b = Baseline {
                    restarts: to_i32(u64::from(c.restart_count)),
                    oom_kills: to_i32(u64::from(c.oom_kills)),
                };
                (c.name.clone(), b)
            })
            .collect()
    }
}

/// The baselines of a watch, as rsr `status.watch` holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchBaselines {
    /// Per pod UID and container; an empty entry waits for the pod's resize (design D24).
    pub pods: BTreeMap<String, BTreeMap<String, Baseline>>,
    /// The summed counters of the pods beyond the cap.
    pub aggregated: Option<Baseline>,
}

impl WatchBaselines {
    /// The baselines a watch status holds.
    pub fn from_status(status: &WatchStatus) -> WatchBaselines {
        WatchBaselines {
            pods: status
                .baselines
                .iter()
                .map(|(uid, c)| {
                    (
                        uid.clone(),
                        c.iter().map(|(n, b)| (n.clone(), b.clone())).collect(),
                    )
                })
                .collect(),
            aggregated: status.aggregated.clone(),
        }
    }

    /// Writes the baselines into a watch status.
    pub fn write_to(&self, status: &mut WatchStatus) {
        status.baselines = self
            .pods
            .iter()
            .map(|(uid, c)| {
                (
                    uid.clone(),
                    c.iter().map(|(n, b)| (n.clone(), b.clone())).collect(),
                )
            })
            .collect();
        status.aggregated = self.aggregated.clone();
    }
}

/// OOM kills and restarts since the baselines, over all pods of the workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// OOM kills.
    pub oom_kills: u64,
    /// Container restarts, whatever their cause (RB-06).
    pub restarts: u64,
}

/// Takes the baselines of a workload's pods at the change: at most `cap` pods get their own
/// entry (pods waiting for a restarting resize first, then the highest counters, then by
/// UID), the rest are summed into `aggregated`.
pub fn take_baselines(pods: &[PodCounters], cap: usize) -> WatchBaselines {
    let mut order: Vec<&PodCounters> = pods.iter().collect();
    order.sort_by(|a, b| {
        (b.resize_pending(), b.total())
            .cmp(&(a.resize_pending(), a.total()))
            .then_with(|| a.uid.cmp(&b.uid))
    });
    let mut out = WatchBaselines::default();
    let (mut restarts, mut ooms, mut overflow) = (0u64, 0u64, false);
    for pod in order {
        if out.pods.len() < cap && !out.pods.contains_key(&pod.uid) {
            let entry = if pod.resize_pending() {
                BTreeMap::new()
            } else {
                pod.entry()
            };
            out.pods.insert(pod.uid.clone(), entry);
            continue;
        }
        overflow = true;
        for c in &pod.containers {
            restarts += u64::from(c.restart_count) + u64::from(c.resize_pending());
            ooms += u64::from(c.oom_kills);
        }
    }
    out.aggregated = overflow.then(|| Baseline {
        restarts: to_i32(restarts),
        oom_kills: to_i32(ooms),
    });
    out
}

/// Fills the empty entries of pods whose restarting resize has now completed with their
/// current counters (design D24). Returns whether anything changed.
pub fn complete_baselines(baselines: &mut WatchBaselines, pods: &[PodCounters]) -> bool {
    let mut changed = false;
    for pod in pods {
        let Some(entry) = baselines.pods.get_mut(&pod.uid) else {
            continue;
        };
        if entry.is_empty() && !pod.resize_pending() && !pod.containers.is_empty() {
            *entry = pod.entry();
            changed = true;
        }
    }
    changed
}

/// OOM kills and restarts since the baselines, summed over all current pods (RB-09,
/// RB-10). A pod without an entry counts from zero, less the aggregate of the pods beyond
/// the cap; a pod whose resize is still pending counts nothing.
pub fn count_since(baselines: &WatchBaselines, pods: &[PodCounters]) -> Counts {
    count_within(baselines, pods, None)
}

/// [`count_since`], leaving out the signals pod status places after `end`, the end of the
/// watch when it is known (RB-03): an agent that sees the counters only after the end (it
/// was down) still counts what happened inside the watch. Pod status dates only a
/// container's last termination (`finishedAt`), so a signal is left out only when
/// - its pod was created after `end`, or
/// - it is the container's last termination and that is dated after `end`.
///
/// Every other signal counts as inside, the side that rolls back: a rise of the restart
/// counter with no time, and the earlier of several terminations since the baseline when
/// only the last one is dated after `end` (docs/health.md).
pub fn count_within(
    baselines: &WatchBaselines,
    pods: &[PodCounters],
    end: Option<DateTime<Utc>>,
) -> Counts {
    let mut counts = Counts::default();
    let mut loose = Counts::default();
    for pod in pods {
        if end.is_some_and(|end| pod.created_at.is_some_and(|c| c > end)) {
            continue;
        }
        match baselines.pods.get(&pod.uid) {
            Some(entry) if entry.is_empty() => {}
            Some(entry) => {
                for c in &pod.containers {
                    let base = entry.get(&c.name).cloned().unwrap_or_default();
                    let rise = Counts {
                        restarts: since(c.restart_count, base.restarts),
                        oom_kills: since(c.oom_kills, base.oom_kills),
                    };
                    counts.add(inside(c, rise, end));
                }
            }
            None => {
                for c in &pod.containers {
                    let all = Counts {
                        restarts: u64::from(c.restart_count),
                        oom_kills: u64::from(c.oom_kills),
                    };
                    loose.add(inside(c, all, end));
                }
            }
        }
    }
    let agg = baselines.aggregated.clone().unwrap_or_default();
    counts.restarts += loose.restarts.saturating_sub(from_i32(agg.restarts));
    counts.oom_kills += loose.oom_kills.saturating_sub(from_i32(agg.oom_kills));
    counts
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.restarts += other.restarts;
        self.oom_kills += other.oom_kills;
    }
}

/// `rise`, the signals of container `c` since its baseline, less its last termination when
/// pod status dates that after `end` (see [`count_within`]).
fn inside(c: &ContainerCounters, rise: Counts, end: Option<DateTime<Utc>>) -> Counts {
    match (c.last_termination, end) {
        (Some(last), Some(end)) if last.finished_at > end => Counts {
            restarts: rise.restarts.saturating_sub(1),
            oom_kills: rise.oom_kills.saturating_sub(u64::from(last.oom_killed)),
        },
        _ => rise,
    }
}

fn since(now: u32, base: i32) -> u64 {
    u64::from(now).saturating_sub(from_i32(base))
}

fn to_i32(v: u64) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

fn from_i32(v: i32) -> u64 {
    u64::try_from(v).unwrap_or(0)
}
