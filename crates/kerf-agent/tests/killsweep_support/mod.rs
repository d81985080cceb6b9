//! The kill sweep (design D25: intent before action): a kerf-sim and a dev hub in this
//! process, the real `kerf-agent` binary against them, and a stream of changes of every
//! kind (in-place, rollout, deferred into a window, in-place falling back, a breach rolled
//! back, a release, an OnDelete replacement, an in-place change with a canary) driven through it while the agent is killed
//! with SIGKILL at random moments and ended at each fail point, and restarted each time.
//! At the end [`checks::all`] verifies every invariant against the cluster and the hub.
//!
//! Run by `examples/killsweep.rs` (`--points N`) and by `tests/killsweep.rs` (N = 20).

#![allow(dead_code)]

pub mod agent;
pub mod checks;
pub mod cluster;
pub mod workload;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agent::{Ended, FAIL_POINTS, Launch};
use cluster::{CLUSTER, Cluster};
use workload::{Kind, Workload};

/// How often the driver looks at the workloads.
const TICK: Duration = Duration::from_millis(100);
/// How long a fail point may take to fire before the agent is killed and the point tried
/// again later.
const FAIL_POINT_WAIT: Duration = Duration::from_secs(30);
/// Attempts per fail point firing before the sweep gives up on it.
const FAIL_POINT_ATTEMPTS: usize = 4;
/// How long a random kill waits at most for the agent's controllers to start.
const READY_WAIT: Duration = Duration::from_secs(20);
/// How long the last agent has to settle every workload.
const SETTLE: Duration = Duration::from_secs(120);

/// What to sweep.
#[derive(Clone, Debug)]
pub struct Options {
    /// Kills at random moments.
    pub points: usize,
    /// The seed of the random moments and of the order of the kills.
    pub seed: u64,
    /// A random kill comes within this long of the agent's controllers starting (one in
    /// five within this long of the process starting).
    pub stretch: Duration,
    /// Firings of each fail point.
    pub fail_point_rounds: usize,
    /// The `kerf-agent` binary, built with the `failpoints` feature.
    pub binary: PathBuf,
    /// The agents' log (appended).
    pub log: PathBuf,
}

/// What the sweep did and found.
#[derive(Debug, Default)]
pub struct Counts {
    /// SIGKILLs at random moments.
    pub random_kills: usize,
    /// Exits at each fail point.
    pub fail_point_kills: BTreeMap<&'static str, usize>,
    /// Agent starts.
    pub starts: usize,
    /// Recommendations published (changes driven).
    pub changes: usize,
    /// Changes applied (a breach's included).
    pub applied: usize,
    /// Changes rolled back after a breach.
    pub rolled_back: usize,
    /// Changes released.
    pub released: usize,
    /// Changes that waited in phase Deferred for their window.
    pub deferred: usize,
    /// Changes that fell back from in-place to a rollout.
    pub fallbacks: usize,
    /// OnDelete changes (each replacing every pod).
    pub on_delete: usize,
    /// Canary changes (one pod first, then the others).
    pub canary: usize,
    /// Lifecycle and other events the hub stored.
    pub events_stored: usize,
    /// Deliveries of an already stored id the hub ignored.
    pub duplicate_deliveries: usize,
    /// Invariants broken, each naming the workload.
    pub failures: Vec<String>,
    /// How long the sweep took.
    pub elapsed: Duration,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fp: Vec<String> = self
            .fail_point_kills
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect();
        writeln!(
            f,
            "kills: {} at random moments, at fail points: {}",
            self.random_kills,
            fp.join(", ")
        )?;
        writeln!(f, "agent starts: {}", self.starts)?;
        writeln!(
            f,
            "changes: {} ({} applied, {} rolled back, {} released, {} deferred into a window, {} fell back, {} OnDelete, {} with a canary)",
            self.changes,
            self.applied,
            self.rolled_back,
            self.released,
            self.deferred,
            self.fallbacks,
            self.on_delete,
            self.canary
        )?;
        writeln!(
            f,
            "hub: {} events stored, {} duplicate deliveries ignored",
            self.events_stored, self.duplicate_deliveries
        )?;
        writeln!(f, "failures: {}", self.failures.len())?;
        for failure in &self.failures {
            writeln!(f, "  FAIL {failure}")?;
        }
        write!(f, "time: {:.0?}", self.elapsed)
    }
}

/// The kills in a shuffled order: `None` a random moment, `Some(point)` a fail point.
fn plan(opts: &Options, rng: &mut fastrand::Rng) -> Vec<Option<&'static str>> {
    let mut plan: Vec<Option<&'static str>> = vec![None; opts.points];
    for point in FAIL_POINTS {
        plan.extend(std::iter::repeat_n(Some(point), opts.fail_point_rounds));
    }
    rng.shuffle(&mut plan);
    plan
}

/// Runs the sweep and checks the invariants; the counts carry any failure.
pub async fn run(opts: &Options) -> anyhow::Result<Counts> {
    let started = Instant::now();
    let cluster = Arc::new(Cluster::start().await?);
    let mut workloads = Vec::new();
    for kind in Kind::ALL {
        workloads.push(Workload::create(&cluster, kind).await?);
    }
    let launch = Launch {
        binary: opts.binary.clone(),
        kubeconfig: cluster.sim.kubeconfig_path().to_path_buf(),
        hub_url: cluster.hub.url(),
        log: opts.log.clone(),
    };
    let driver = Driver::start(cluster.clone(), workloads)?;
    let mut counts = Counts::default();
    let mut rng = fastrand::Rng::with_seed(opts.seed);
    let mut retries: Vec<&'static str> = Vec::new();
    for (i, slot) in plan(opts, &mut rng).into_iter().enumerate() {
        kill_once(opts, &launch, slot, &mut rng, &mut counts, &mut retries).await?;
        if (i + 1) % 50 == 0 {
            eprintln!("killsweep: {} kills, {} changes done", i + 1, driver.done());
        }
    }
    for point in std::mem::take(&mut retries) {
        retry_fail_point(&launch, point, &mut counts).await?;
    }
    let last = launch.start(None)?;
    counts.starts += 1;
    let workloads = driver.settle().await?;
    let ended = last.kill().await?;
    if let Ended::Exited(status) = ended {
        counts
            .failures
            .push(format!("the last agent ended on its own: {status}"));
    }
    tally(&cluster, &workloads, &mut counts);
    counts
        .failures
        .extend(checks::all(&cluster, &workloads).await?);
    counts.elapsed = started.elapsed();
    Ok(counts)
}

/// One kill: start the agent, then SIGKILL it at a random moment, or let the fail point
/// end it (killed and queued for a retry when it did not fire in time).
async fn kill_once(
    opts: &Options,
    launch: &Launch,
    slot: Option<&'static str>,
    rng: &mut fastrand::Rng,
    counts: &mut Counts,
    retries: &mut Vec<&'static str>,
) -> anyhow::Result<()> {
    let mut agent = launch.start(slot)?;
    counts.starts += 1;
    // One random kill in five lands in the start-up (cache sync, recovery of the recorded
    // intents); the others within the stretch after the controllers start.
    let wait = match slot {
        None if rng.u8(..5) == 0 => opts.stretch.mul_f64(rng.f64()),
        None => {
            agent.wait_ready(READY_WAIT).await;
            opts.stretch.mul_f64(rng.f64())
        }
        Some(_) => FAIL_POINT_WAIT,
    };
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline && agent.ended()?.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(Duration::from_millis(20))).await;
    }
    match (agent.kill().await?, slot) {
        (Ended::Exited(status), _) => counts.failures.push(format!(
            "the agent ended on its own (not killed, no fail point): {status}"
        )),
        (Ended::FailPoint, Some(point)) => *counts.fail_point_kills.entry(point).or_default() += 1,
        (Ended::FailPoint, None) => counts.failures.push("a fail point fired unarmed".into()),
        (Ended::Killed, None) => counts.random_kills += 1,
        (Ended::Killed, Some(point)) => retries.push(point),
    }
    Ok(())
}

/// Tries a fail point that did not fire in its slot again, a few times.
async fn retry_fail_point(
    launch: &Launch,
    point: &'static str,
    counts: &mut Counts,
) -> anyhow::Result<()> {
    for _ in 0..FAIL_POINT_ATTEMPTS {
        let mut agent = launch.start(Some(point))?;
        counts.starts += 1;
        let deadline = Instant::now() + FAIL_POINT_WAIT;
        while Instant::now() < deadline && agent.ended()?.is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        match agent.kill().await? {
            Ended::FailPoint => {
                *counts.fail_point_kills.entry(point).or_default() += 1;
                return Ok(());
            }
            Ended::Exited(status) => counts
                .failures
                .push(format!("the agent ended on its own: {status}")),
            Ended::Killed => {}
        }
    }
    counts.failures.push(format!(
        "fail point {point} never fired in {FAIL_POINT_ATTEMPTS} tries of {FAIL_POINT_WAIT:?} (is kerf-agent built with --features failpoints?)"
    ));
    Ok(())
}

/// The counts of what the workloads went through and what the hub stored.
fn tally(cluster: &Cluster, workloads: &[Workload], counts: &mut Counts) {
    for w in workloads {
        let done = w.recs.iter().filter(|r| r.done).count();
        counts.changes += w.recs.len();
        counts.applied += done;
        counts.deferred += w.recs.iter().filter(|r| r.deferred).count();
        match w.kind {
            Kind::Breach => counts.rolled_back += done,
            Kind::Release => counts.released += done,
            Kind::OnDelete => counts.on_delete += done,
            Kind::Canary => counts.canary += done,
            Kind::Fallback => {
                counts.fallbacks += usize::from(w.recs.first().is_some_and(|r| r.done))
            }
            _ => {}
        }
    }
    counts.events_stored = cluster.hub_events().len();
    counts.duplicate_deliveries = cluster.hub.duplicates(CLUSTER);
}

/// The driver task: ticks every workload, publishing each one's next recommendation once
/// the current one is done, until told to drain.
struct Driver {
    draining: Arc<AtomicBool>,
    settled: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
    passes: Arc<AtomicUsize>,
    stop: Arc<AtomicU8>,
    task: tokio::task::JoinHandle<anyhow::Result<Vec<Workload>>>,
}

impl Driver {
    fn start(cluster: Arc<Cluster>, mut workloads: Vec<Workload>) -> anyhow::Result<Driver> {
        let recs = workloads
            .iter_mut()
            .map(Workload::next_rec)
            .collect::<anyhow::Result<Vec<_>>>()?;
        cluster.hub.set_recommendations(CLUSTER, recs);
        let draining = Arc::new(AtomicBool::new(false));
        let settled = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let passes = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicU8::new(0));
        let (d, s, n, st) = (
            draining.clone(),
            settled.clone(),
            done.clone(),
            stop.clone(),
        );
        let p = passes.clone();
        let task = tokio::spawn(async move {
            while st.load(Ordering::SeqCst) == 0 {
                drive(&cluster, &mut workloads, !d.load(Ordering::SeqCst)).await?;
                let finished = workloads
                    .iter()
                    .map(|w| w.recs.iter().filter(|r| r.done).count())
                    .sum();
                n.store(finished, Ordering::SeqCst);
                let quiet = workloads.iter().all(|w| w.settled() && w.pending == 0);
                s.store(quiet, Ordering::SeqCst);
                p.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(TICK).await;
            }
            Ok(workloads)
        });
        Ok(Driver {
            draining,
            settled,
            done,
            passes,
            stop,
            task,
        })
    }

    /// Changes done so far.
    fn done(&self) -> usize {
        self.done.load(Ordering::SeqCst)
    }

    /// Stops publishing, waits (at most [`SETTLE`]) until every current change is done,
    /// and hands the workloads back.
    async fn settle(self) -> anyhow::Result<Vec<Workload>> {
        self.draining.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + SETTLE;
        // A pass that started before the drain may still publish: wait for two more.
        let from = self.passes.load(Ordering::SeqCst);
        while self.passes.load(Ordering::SeqCst) < from + 2 && !self.task.is_finished() {
            tokio::time::sleep(TICK).await;
        }
        while !self.settled.load(Ordering::SeqCst)
            && Instant::now() < deadline
            && !self.task.is_finished()
        {
            tokio::time::sleep(TICK).await;
        }
        self.stop.store(1, Ordering::SeqCst);
        self.task.await?
    }
}

/// One pass over the workloads; with `publish`, settled ones get their next
/// recommendation.
async fn drive(cluster: &Cluster, workloads: &mut [Workload], publish: bool) -> anyhow::Result<()> {
    let mut changed = false;
    for w in workloads.iter_mut() {
        w.tick(cluster).await?;
        if publish && w.ready_for_next() {
            w.next_rec()?;
            changed = true;
        }
    }
    if changed {
        let recs = workloads
            .iter()
            .map(Workload::recommendation)
            .collect::<anyhow::Result<Vec<_>>>()?;
        cluster.hub.set_recommendations(CLUSTER, recs);
    }
    Ok(())
}
