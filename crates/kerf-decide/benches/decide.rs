//! Latency and heap allocations of `decide()`, reported as percentiles.
//!
//! A Deployment with 3 containers, 10 pods, an HPA, a PodDisruptionBudget and 4 windows
//! (maintenance windows in Europe/Berlin and America/New_York, a UTC freeze window and a
//! one-off freeze window). Three scenarios: no significant change, a block (a deferred
//! change outside its maintenance windows) and an apply. The facts and the effective
//! policy are built once (the windows validated once, as the agent's policy holds them).
//! Each call is timed on its own with `Instant` and recorded in an HDR histogram, which
//! gives the percentiles; allocations are counted by a counting global allocator.
//!
//! Run: `cargo bench -p kerf-decide --bench decide` (release build; prints a table).

use kerf_testkit::decide as fixture;

use std::alloc::System;
use std::hint::black_box;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use kerf_api::GoDuration;
use kerf_api::policy::{Strategy, Window};
use kerf_decide::effective::{EffectivePolicy, Layer, Sourced};
use kerf_decide::facts::{ContainerFacts, ContainerRole, Facts, PodContainerFacts};
use kerf_decide::replicas::PdbInput;
use kerf_decide::{Outcome, decide};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const WARM_UP: usize = 10_000;
const SAMPLES: usize = 100_000;
const BATCH: usize = 10_000;

fn recurring(schedule: &str, duration: &str, zone: &str) -> Window {
    Window {
        schedule: Some(schedule.into()),
        duration: Some(GoDuration::from(duration)),
        time_zone: Some(zone.into()),
        ..Window::default()
    }
}

/// The three containers: the fixture's `app`, a sidecar and a log shipper.
fn containers() -> Vec<ContainerFacts> {
    let app = fixture::app_container();
    let mut proxy = fixture::app_container();
    proxy.name = "proxy".into();
    proxy.role = ContainerRole::RestartableInit;
    proxy.requests = fixture::values(Some(200), Some(128 * fixture::MI));
    proxy.limits = fixture::values(None, Some(256 * fixture::MI));
    let mut logs = fixture::app_container();
    logs.name = "logs".into();
    logs.requests = fixture::values(Some(100), Some(64 * fixture::MI));
    logs.limits = fixture::values(None, Some(128 * fixture::MI));
    vec![app, proxy, logs]
}

/// The workload's facts; `recommended` gives per container the cpu and memory asked for.
fn facts(recommended: [(&str, &str); 3]) -> Facts {
    let mut f = fixture::facts();
    f.workload.containers = containers();
    f.workload.replicas.replicas = Some(10);
    f.workload.replicas.pdbs = vec![PdbInput {
        name: "checkout".into(),
        min_available: Some("80%".into()),
        max_unavailable: None,
        expected_pods: 10,
    }];
    let template = f.pods[0].clone();
    f.pods = (0..10)
        .map(|i| {
            let mut p = template.clone();
            p.name = format!("checkout-abc-{i}");
            p.uid = format!("uid-{i}");
            p.containers = f
                .workload
                .containers
                .iter()
                .map(|c| PodContainerFacts {
                    name: c.name.clone(),
                    requests: c.requests.clone(),
                    limits: c.limits.clone(),
                })
                .collect();
            p
        })
        .collect();
    f.hpa = Some(fixture::cpu_hpa(60));
    f.recommendation.containers = f
        .workload
        .containers
        .iter()
        .zip(recommended)
        .map(|(c, (cpu, memory))| {
            let mut r = fixture::recommendation(cpu, memory);
            r.name = c.name.clone();
            r
        })
        .collect();
    f
}

/// Auto-patch with four windows; `strategy` in-place applies now, deferred waits for a
/// maintenance window (none is open at the fixture's instant, a Wednesday at 12:00 UTC).
fn policy(strategy: Strategy) -> EffectivePolicy {
    let mut p = fixture::policy();
    p.strategy = Sourced::new(strategy, Layer::Policy);
    p.maintenance_windows = Sourced::new(
        vec![
            recurring("0 2 * * *", "2h", "Europe/Berlin"),
            recurring("30 22 * * 1-5", "90m", "America/New_York"),
        ]
        .into(),
        Layer::Policy,
    );
    p.freeze_windows = Sourced::new(
        vec![
            recurring("0 0 24 12 *", "48h", "UTC"),
            Window {
                start: Some("2026-12-31T00:00:00Z".into()),
                end: Some("2027-01-02T00:00:00Z".into()),
                ..Window::default()
            },
        ]
        .into(),
        Layer::Policy,
    );
    p
}

struct Scenario {
    name: &'static str,
    facts: Facts,
    policy: EffectivePolicy,
    expect: &'static str,
}

fn scenarios() -> Vec<Scenario> {
    let same = [("500m", "256Mi"), ("200m", "128Mi"), ("100m", "64Mi")];
    let lower = [("400m", "256Mi"), ("180m", "128Mi"), ("100m", "64Mi")];
    vec![
        Scenario {
            name: "no change (NoSignificantChange)",
            facts: facts(same),
            policy: policy(Strategy::InPlace),
            expect: "NoSignificantChange",
        },
        Scenario {
            name: "block (deferred, window closed)",
            facts: facts(lower),
            policy: policy(Strategy::Deferred),
            expect: "OutsideMaintenanceWindow",
        },
        Scenario {
            name: "apply (in-place, HPA coordinated)",
            facts: facts(lower),
            policy: policy(Strategy::InPlace),
            expect: "apply",
        },
    ]
}

fn kind(o: &Outcome) -> &'static str {
    match o {
        Outcome::Apply(_) => "apply",
        Outcome::Skip(s) => s.reason,
        Outcome::Block(b) => b.reason,
    }
}

struct Figures {
    p50: Duration,
    p99: Duration,
    p999: Duration,
    max: Duration,
    allocs: f64,
    bytes: f64,
}

/// Calls timed one by one into a histogram of nanoseconds (1 ns to 1 s, 3 significant
/// digits), then allocations counted over 1,000 calls.
#[allow(clippy::unwrap_used)]
fn measure(s: &Scenario) -> Figures {
    let now = fixture::now();
    for _ in 0..WARM_UP {
        black_box(decide(black_box(&s.facts), black_box(&s.policy), now));
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 3).unwrap();
    for _ in 0..SAMPLES {
        let t = Instant::now();
        let d = decide(black_box(&s.facts), black_box(&s.policy), now);
        drop(black_box(d));
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        hist.saturating_record(ns);
    }
    let at = |q: f64| Duration::from_nanos(hist.value_at_quantile(q));
    let region = Region::new(GLOBAL);
    for _ in 0..1000 {
        drop(black_box(decide(black_box(&s.facts), &s.policy, now)));
    }
    let stats = region.change();
    Figures {
        p50: at(0.50),
        p99: at(0.99),
        p999: at(0.999),
        max: Duration::from_nanos(hist.max()),
        allocs: (stats.allocations + stats.reallocations) as f64 / 1000.0,
        bytes: stats.bytes_allocated as f64 / 1000.0,
    }
}

/// Time this thread has spent on a CPU (`CLOCK_THREAD_CPUTIME_ID`): on a shared machine,
/// wall time also counts the time other processes hold the CPU.
fn on_cpu() -> Option<Duration> {
    cpu_time::ThreadTime::try_now()
        .ok()
        .map(|t| t.as_duration())
}

/// `BATCH` calls on one thread, taking the scenarios in turn from `pick`, 5 runs: the best
/// and the median wall time, and the least time on a CPU.
fn batch(
    all: &[Scenario],
    pick: impl Fn(usize) -> usize,
) -> (Duration, Duration, Option<Duration>) {
    let now = fixture::now();
    let mut runs: Vec<(Duration, Option<Duration>)> = (0..5)
        .map(|_| {
            let (t, cpu) = (Instant::now(), on_cpu());
            for i in 0..BATCH {
                let s = &all[pick(i)];
                drop(black_box(decide(black_box(&s.facts), &s.policy, now)));
            }
            let cpu = on_cpu()
                .zip(cpu)
                .map(|(after, before)| after.saturating_sub(before));
            (t.elapsed(), cpu)
        })
        .collect();
    let least_cpu = runs.iter().filter_map(|r| r.1).min();
    runs.sort_unstable_by_key(|r| r.0);
    (runs[0].0, runs[2].0, least_cpu)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run a smoke
    // pass only then.
    let full = std::env::args().any(|a| a == "--bench");
    let all = scenarios();
    let now = fixture::now();
    for s in &all {
        let d = decide(&s.facts, &s.policy, now);
        let got = kind(&d.outcome);
        if got != s.expect {
            eprintln!(
                "scenario {:?}: expected {}, got {:?}",
                s.name, s.expect, d.outcome
            );
            std::process::exit(1);
        }
    }
    if !full {
        return;
    }
    println!("decide(): {SAMPLES} timed calls per scenario after {WARM_UP} warm-up calls");
    println!(
        "{:<36} {:>9} {:>9} {:>9} {:>9} {:>12} {:>12}",
        "scenario", "p50", "p99", "p99.9", "max", "allocs/call", "bytes/call"
    );
    for s in &all {
        let f = measure(s);
        println!(
            "{:<36} {:>9.2?} {:>9.2?} {:>9.2?} {:>9.2?} {:>12.1} {:>12.0}",
            s.name, f.p50, f.p99, f.p999, f.max, f.allocs, f.bytes
        );
    }
    println!("{BATCH} calls on one thread, 5 runs: best and median wall time, least on-CPU time");
    let show = |name: &str, (best, median, cpu): (Duration, Duration, Option<Duration>)| {
        let cpu = cpu.map_or_else(|| "-".to_owned(), |c| format!("{c:.2?}"));
        println!("  {name:<34} best {best:>9.2?}, median {median:>9.2?}, on CPU {cpu:>9}");
    };
    for (i, s) in all.iter().enumerate() {
        show(s.name, batch(&all, |_| i));
    }
    show("mixed (the three in turn)", batch(&all, |i| i % all.len()));
}
