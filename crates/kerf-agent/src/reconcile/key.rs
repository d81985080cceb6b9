//! One pass over one workload's rsr: gather the facts once, ask
//! [`kerf_decide::pass::next_step`] for the one step of the pass, carry it out, record
//! status and events, schedule the next pass. A pass that acted and wrote its rsr is
//! followed at once by the next one, which waits until the caches show its writes (to the
//! rsr, the workload, its pods and HPAs): the watch event that brings them wakes it again.
//! A pass whose write found no token of the write limit free ends there and is woken when
//! the token reserved for it is due.

use std::sync::Arc;

use kerf_api::rsr::{RightsizingRecommendation, RightsizingRecommendationStatus};
use kerf_decide::Outcome;
use kerf_decide::pass::{
    Decided, PassFacts, Step, StepKind, next_step, on_delete_wake, settle_wake,
};
use kerf_decide::plan;
use tracing::Instrument as _;

use super::act;
use super::failure::Action;
use super::fresh::Snapshot;
use super::healthwatch;
use super::interpret;
use super::memory::Memory;
use super::ondelete_step;
use super::pass::{Pass, Seen};
use super::record;
use super::report::{EventRecorder, RsrRef};
use super::rollback_step;
use super::sink::{Carried, Sink};
use super::step::{ActError, KeyError, StepResult};
use super::trace::{self, PassTimer};
use super::writer::Writer;
use crate::cache::{RsrEntry, WorkloadInfo, WorkloadKey};
use crate::context::Context;
use crate::health::{HealthStep, Watcher};
use crate::hub::HubState;
use crate::intent;
use crate::rsr_sync::is_withdrawn;
use crate::scope::{Verdict, in_cache};
use kerf_decide::status;

/// Reconciles the rsr of `key`. An rsr the cache still shows at a resourceVersion this
/// reconciler has written over is left until the watch brings the newer one (its write
/// would only get a 409); a workload whose own writes to it, its pods or HPAs the caches
/// do not show yet is looked at again shortly. `watcher` runs the health watch of an applied change and rolls a
/// breached one back. The pass runs in a span `pass` ([`trace::pass_span`]). A workload
/// whose scope the caches cannot tell gets no pass; one outside the agent's scope gets
/// passes only while what the agent did to it winds down: its change in flight finishes
/// or rolls back and its fields are released, as when it leaves auto-patch.
pub async fn reconcile_key(
    ctx: &Context,
    hub: &HubState,
    recorder: &EventRecorder,
    memory: &mut Memory,
    watcher: &Watcher,
    key: &WorkloadKey,
) -> Result<(), KeyError> {
    let verdict = in_cache(&ctx.settings.scope, &ctx.cache, key);
    if verdict == Verdict::Unknown {
        return Ok(());
    }
    let Some(entry) = ctx.cache.rsrs_for(key).into_iter().next() else {
        return Ok(());
    };
    let in_scope = verdict == Verdict::In;
    if !in_scope && !winds_down(&entry) {
        return Ok(());
    }
    if !ctx.may_write() || memory.writes.stale(key, &entry.resource_version) {
        return Ok(());
    }
    let now = ctx.clock.now();
    // The workload, its pods and HPAs are read once, for the freshness check and the pass.
    let snapshot = Snapshot::read(ctx, key);
    if memory.objects.holds_back(key, &snapshot, now) {
        // The watch event that brings the write wakes the workload; the timer is the cap.
        if let Some(cap) = memory.objects.unseen_until(key) {
            memory.schedule.wake_at(cap, key);
        }
        return Ok(());
    }
    let mut sink = Sink {
        writer: Writer::new(ctx, &entry),
        recorder,
        rsr: rsr_ref(&entry),
        memory,
    };
    let read = Read {
        hub,
        key,
        snapshot,
        now,
        in_scope,
    };
    let res = reconcile_entry(ctx, read, watcher, &entry, &mut sink)
        .instrument(trace::pass_span(key))
        .await;
    let Sink { writer, memory, .. } = sink;
    let wrote = !writer.replaced.is_empty();
    memory.writes.replaced(key, writer.replaced);
    if wrote && matches!(res, Ok(true)) {
        memory.schedule.requeued.insert(key.clone());
    }
    res.map(|_| ())
}

fn rsr_ref(entry: &RsrEntry) -> RsrRef {
    RsrRef {
        namespace: entry.namespace.to_string(),
        name: entry.name.clone(),
        uid: entry.rsr.as_ref().ok().and_then(|r| r.metadata.uid.clone()),
    }
}

/// What [`reconcile_key`] read for a pass before it starts.
struct Read<'a> {
    hub: &'a HubState,
    key: &'a WorkloadKey,
    snapshot: Snapshot,
    now: chrono::DateTime<chrono::Utc>,
    /// Whether the workload is in the agent's scope.
    in_scope: bool,
}

/// Whether the rsr of a workload outside the scope still has something to finish.
fn winds_down(entry: &RsrEntry) -> bool {
    let status = entry.rsr.as_ref().ok().and_then(|r| r.status.as_ref());
    status.is_some_and(kerf_decide::pass::left_to_wind_down)
}

/// One pass; returns whether its step acted (anything but a report).
async fn reconcile_entry(
    ctx: &Context,
    read: Read<'_>,
    watcher: &Watcher,
    entry: &RsrEntry,
    sink: &mut Sink<'_>,
) -> Result<bool, KeyError> {
    let key = read.key;
    let rsr = match &entry.rsr {
        Ok(r) => r,
        Err(e) => return record::invalid_rsr(sink, key, entry, e.to_string(), ctx).await,
    };
    let Some(workload) = live_workload(key, read.snapshot.workload.clone(), rsr) else {
        return Ok(false);
    };
    let mut timer = PassTimer::start(&ctx.metrics.reconcile.pass_duration);
    let mut s = rsr.status.clone().unwrap_or_default();
    intent::clear_pending(&mut s, &sink.memory.reports.acked_ids);
    let mut seen = Seen::new(
        ctx,
        read.hub,
        key,
        workload,
        read.snapshot,
        read.now,
        watcher,
    );
    if !read.in_scope {
        seen.leave_scope();
    }
    let watched = watch(&seen, entry, &mut s).await;
    let mut p = Pass::new(seen, &rsr.spec, &s);
    let res = pass_step(&mut p, rsr, &mut s, &watched, sink, &mut timer).await;
    sink.memory.objects.record(key, p.writes.take());
    match p.writes.held_back() {
        // A write waits for its token: the next step comes when the token is due, not at once.
        Some(at) => {
            sink.memory.schedule.wake_at(at, key);
            res.map(|_| false)
        }
        None => res,
    }
}

/// What the health watch of a pass found, and whether the hub withdrew the rsr's
/// recommendation (no watch is evaluated then).
struct Watched {
    health: HealthStep,
    withdrawn: bool,
}

/// The health watch of the pass, before its facts are made: the watch may record its
/// baselines and its end in `s`, and the decision reads the status as the watch left it.
async fn watch(
    seen: &Seen<'_>,
    entry: &RsrEntry,
    s: &mut RightsizingRecommendationStatus,
) -> Watched {
    trace::record_status_change(s, seen.now);
    let withdrawn = is_withdrawn(entry);
    let health = if withdrawn {
        HealthStep::Idle
    } else if kerf_decide::pass::watch_due(s, seen.now) {
        healthwatch::evaluate(seen, seen.watcher, s).await
    } else if kerf_decide::pass::canary_watch_due(s) {
        healthwatch::evaluate_canary(seen, seen.watcher, s).await
    } else {
        HealthStep::Idle
    };
    Watched { health, withdrawn }
}

/// The step of one pass and its record; `timer` learns the step.
async fn pass_step(
    p: &mut Pass<'_>,
    rsr: &RightsizingRecommendation,
    s: &mut RightsizingRecommendationStatus,
    watched: &Watched,
    sink: &mut Sink<'_>,
    timer: &mut PassTimer,
) -> Result<bool, KeyError> {
    let (step, wakes) = choose_step(p, s, watched.withdrawn, &watched.health);
    if !p.in_scope && !step.kind().winds_down() {
        // Outside the scope nothing new is carried out or reported: the status reads what
        // the agent left (after a release: phase Released, MODE off outside the scope) and
        // drops the events the hub has acknowledged.
        let new = match &step {
            Step::Report(d) => record::decision_status(p, s, &d.decision, rsr.metadata.generation),
            _ => s.clone(),
        };
        sink.writer.write(&new).await?;
        return Ok(false);
    }
    timer.step(step.kind(), s);
    let acted = !matches!(
        step.kind(),
        StepKind::Report | StepKind::Withdrawn | StepKind::Settle
    );
    let generation = rsr.metadata.generation;
    let carried = carry_out(p, step, s, sink, generation).await?;
    record::record(p, rsr, s, &carried, sink).await?;
    record::schedule(sink.memory, p, s, &carried, wakes);
    Ok(acted)
}

/// The workload of the rsr, if the cache has it and it is the one the rsr names.
fn live_workload(
    key: &WorkloadKey,
    workload: Option<Arc<WorkloadInfo>>,
    rsr: &RightsizingRecommendation,
) -> Option<Arc<WorkloadInfo>> {
    let Some(workload) = workload else {
        let in_flight = rsr
            .status
            .as_ref()
            .is_some_and(kerf_decide::pass::in_flight);
        if in_flight {
            tracing::info!(workload = %key, "workload deleted: the change in flight is dropped");
        }
        return None;
    };
    let uid = rsr.spec.workload_ref.uid.as_deref();
    uid.is_none_or(|u| u == workload.uid).then_some(workload)
}

/// The switch that hides a health breach from the pass of an OnDelete workload.
pub const BREACH_GUARD_OFF: &str = "breach-guard-off";

/// Whether fail point [`BREACH_GUARD_OFF`] hides this OnDelete workload's breach: the pass
/// then neither rolls back first nor holds the next eviction (AP-58), so a test can show
/// that it fails without the guard. Always false without the `failpoints` feature.
fn breach_guard_off(p: &Pass<'_>) -> bool {
    crate::failpoints::is_set(BREACH_GUARD_OFF) && super::pass::is_on_delete(&p.workload)
}

/// The step of the pass, and when to look again at what waits (OnDelete pods, the
/// throttling of a running watch).
fn choose_step(
    p: &Pass<'_>,
    s: &RightsizingRecommendationStatus,
    withdrawn: bool,
    health: &HealthStep,
) -> (Step, Vec<chrono::DateTime<chrono::Utc>>) {
    let f = PassFacts {
        status: s,
        facts: &p.facts,
        withdrawn,
        workload: p.workload_state(s),
        breach: match health {
            HealthStep::Breach(_) if breach_guard_off(p) => None,
            HealthStep::Breach(b) => Some((**b).clone()),
            _ => None,
        },
        outdated: ondelete_step::outdated(p),
    };
    let mut wakes: Vec<_> = on_delete_wake(&f, &p.policy, p.now)
        .into_iter()
        .chain(settle_wake(&f, &p.policy, p.now))
        .collect();
    if let HealthStep::Watching {
        recheck_at: Some(t),
        ..
    } = health
    {
        wakes.push(*t);
    }
    (next_step(&f, &p.policy, p.now), wakes)
}

/// Carries out the one step of the pass.
async fn carry_out(
    p: &Pass<'_>,
    step: Step,
    s: &mut RightsizingRecommendationStatus,
    sink: &mut Sink<'_>,
    generation: Option<i64>,
) -> Result<Carried, KeyError> {
    let result = match step {
        Step::Withdrawn => {
            record::withdrawn(p, s, sink, generation).await?;
            StepResult::default()
        }
        // The change's progress is in status already; nothing new is decided.
        Step::Settle => StepResult::default(),
        Step::Resume { may_start } => {
            let res = act::advance(s, p, may_start).await;
            sink.checked(p, s, res, Action::Apply).await?
        }
        Step::ResumeRollback => {
            let r = rollback_step::resume_pass(p, s, &mut sink.writer).await?;
            sink.emit(&r.events).await;
            r
        }
        Step::Release(rel) => {
            let res = release(s, p, &rel).await;
            let r = sink.checked(p, s, res, Action::Release).await?;
            StepResult {
                finished: true,
                ..r
            }
        }
        Step::RollBack(breach) => {
            let r = rollback_step::roll_back_pass(p, s, &breach, &mut sink.writer).await?;
            sink.emit(&r.events).await;
            r
        }
        Step::HpaAfter => {
            let mut r = StepResult::default();
            interpret::run(plan::hpa_after(), s, p, &mut r).await?;
            r
        }
        Step::Evict(pods) => {
            let mut r = StepResult::default();
            interpret::run(plan::evict(pods, p.now), s, p, &mut r).await?;
            ondelete_step::first_refusals(s, &mut r, &mut sink.memory.attempts);
            sink.emit(&r.events).await;
            r
        }
        // A revert is a change: intent first, the same executor and write limit.
        Step::Start(d) | Step::Revert(d) => {
            return start(p, s, *d, sink, generation).await;
        }
        Step::Report(d) => {
            return Ok(Carried {
                decided: Some(*d),
                result: StepResult::default(),
            });
        }
    };
    Ok(Carried {
        decided: None,
        result,
    })
}

/// Carries out the planner's effects of a release (AP-21, EV-46).
async fn release(
    s: &mut RightsizingRecommendationStatus,
    p: &Pass<'_>,
    rel: &kerf_decide::pass::Release,
) -> Result<StepResult, ActError> {
    let mut out = StepResult::default();
    let Some(change) = s.change.clone() else {
        return Ok(out);
    };
    if !p.may_write() {
        return Err(ActError::NotLeader);
    }
    interpret::run(plan::release(&change, rel), s, p, &mut out).await?;
    Ok(out)
}

/// Starts the change a decision applies: intent before action (design D25), in a whole
/// status (strategy, summary, mode, conditions) so a change whose action fails still shows
/// what it is. A decision that applies passed the pause and freeze checks.
async fn start(
    p: &Pass<'_>,
    s: &mut RightsizingRecommendationStatus,
    decided: Decided,
    sink: &mut Sink<'_>,
    generation: Option<i64>,
) -> Result<Carried, KeyError> {
    record::count_decision(p, &decided.decision);
    let Outcome::Apply(plan) = &decided.decision.outcome else {
        return Ok(Carried {
            decided: Some(decided),
            result: StepResult::default(),
        });
    };
    let change = intent::new_change(plan, p.now);
    let revert = change.revert;
    s.change = Some(Box::new(change));
    trace::record_change(s);
    // A revert raises values back to the template's: no canary, no health watch to undo it.
    if !revert {
        act::choose_canary(s, p);
    }
    *s = record::decision_status(p, s, &decided.decision, generation);
    record::write_warning_once(p, sink, s, status::invalid_warning).await?;
    crate::failpoints::hit("after-intent").map_err(ActError::from)?;
    let res = act::advance(s, p, true).await;
    let result = sink.checked(p, s, res, Action::Apply).await?;
    Ok(Carried {
        decided: Some(decided),
        result,
    })
}
