//! One pass over one workload's rsr: gather the facts once, ask
//! [`kerf_decide::pass::next_step`] for the one step of the pass, carry it out, record
//! status and events, schedule the next pass. A pass that acted and wrote its rsr is
//! followed at once by the next one, which waits until the caches show its writes (to the
//! rsr, the workload, its pods and HPAs): the watch event that brings them wakes it again.
//! A pass whose write found no token of the write limit free ends there and is woken when
//! the token reserved for it is due.

use std::sync::Arc;

use kerf_api::rsr::{HpaOrder, RightsizingRecommendation, RightsizingRecommendationStatus};
use kerf_decide::Outcome;
use kerf_decide::pass::{
    Decided, PassFacts, Step, StepKind, next_step, on_delete_wake, settle_wake,
};

use super::act;
use super::failure::Action;
use super::healthwatch;
use super::hpa_step;
use super::memory::Memory;
use super::ondelete_step;
use super::pass::Pass;
use super::record;
use super::release_step;
use super::report::{EventRecorder, RsrRef};
use super::sink::{Carried, Sink};
use super::step::{ActError, KeyError, StepResult};
use super::writer::Writer;
use crate::cache::{RsrEntry, WorkloadInfo, WorkloadKey};
use crate::context::Context;
use crate::health::{HealthStep, Watcher};
use crate::hub::HubState;
use crate::intent;
use crate::rsr_sync::is_withdrawn;
use crate::status::{self, StatusInput};

/// Reconciles the rsr of `key`. An rsr the cache still shows at a resourceVersion this
/// reconciler has written over is left until the watch brings the newer one (its write
/// would only get a 409); a workload whose own writes to it, its pods or HPAs the caches
/// do not show yet is looked at again shortly. `watcher` runs the health watch of an applied change and rolls a
/// breached one back.
pub async fn reconcile_key(
    ctx: &Context,
    hub: &HubState,
    recorder: &EventRecorder,
    memory: &mut Memory,
    watcher: &Watcher,
    key: &WorkloadKey,
) -> Result<(), KeyError> {
    let Some(entry) = ctx.cache.rsrs_for(key).into_iter().next() else {
        return Ok(());
    };
    if !ctx.may_write() || memory.writes.stale(key, &entry.resource_version) {
        return Ok(());
    }
    let now = ctx.clock.now();
    if memory.objects.holds_back(key, &ctx.cache, now) {
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
    let res = reconcile_entry(ctx, hub, watcher, key, &entry, &mut sink).await;
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

/// One pass; returns whether its step acted (anything but a report).
async fn reconcile_entry(
    ctx: &Context,
    hub: &HubState,
    watcher: &Watcher,
    key: &WorkloadKey,
    entry: &RsrEntry,
    sink: &mut Sink<'_>,
) -> Result<bool, KeyError> {
    let rsr = match &entry.rsr {
        Ok(r) => r,
        Err(e) => return record::invalid_rsr(sink, key, entry, e.to_string(), ctx).await,
    };
    let Some(workload) = live_workload(ctx, key, rsr) else {
        return Ok(false);
    };
    let mut s = rsr.status.clone().unwrap_or_default();
    intent::clear_pending(&mut s, &sink.memory.reports.acked_ids);
    let mut p = Pass::gather(ctx, hub, key, workload, &rsr.spec, &s);
    let res = pass_step(&mut p, rsr, entry, &mut s, watcher, sink).await;
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

/// The health watch, the step and its record of one pass.
async fn pass_step(
    p: &mut Pass<'_>,
    rsr: &RightsizingRecommendation,
    entry: &RsrEntry,
    s: &mut RightsizingRecommendationStatus,
    watcher: &Watcher,
    sink: &mut Sink<'_>,
) -> Result<bool, KeyError> {
    let withdrawn = is_withdrawn(entry);
    let health = if !withdrawn && kerf_decide::pass::watch_due(s, p.now) {
        let h = healthwatch::evaluate(p, watcher, s).await;
        // The watch may have got its end: the decision reads the status as evaluated.
        p.facts.state = super::facts::rsr_state(s, p.now);
        h
    } else if !withdrawn && kerf_decide::pass::canary_watch_due(s) {
        healthwatch::evaluate_canary(p, watcher, s).await
    } else {
        HealthStep::Idle
    };
    let (step, wakes) = plan(p, s, withdrawn, &health);
    let acted = !matches!(
        step.kind(),
        StepKind::Report | StepKind::Withdrawn | StepKind::Settle
    );
    let generation = rsr.metadata.generation;
    let carried = carry_out(p, step, s, sink, watcher, generation).await?;
    record::record(p, rsr, s, &carried, sink).await?;
    record::schedule(sink.memory, p, s, &carried, wakes);
    Ok(acted)
}

/// The workload of the rsr, if the cache has it and it is the one the rsr names.
fn live_workload(
    ctx: &Context,
    key: &WorkloadKey,
    rsr: &RightsizingRecommendation,
) -> Option<Arc<WorkloadInfo>> {
    let Some(workload) = ctx.cache.workload(key) else {
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
fn plan(
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
    watcher: &Watcher,
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
            let r = sink.checked(p, s, res, Action::Apply).await?;
            healthwatch::start(p, watcher, s).await;
            r
        }
        Step::ResumeRollback => {
            let r = healthwatch::resume(p, watcher, s, &mut sink.writer).await?;
            sink.emit(&r.events).await;
            r
        }
        Step::Release(rel) => {
            let res = release_step::run(s, p, &rel).await;
            let r = sink.checked(p, s, res, Action::Release).await?;
            StepResult {
                finished: true,
                ..r
            }
        }
        Step::RollBack(breach) => {
            let r = healthwatch::roll_back(p, watcher, s, &breach, &mut sink.writer).await?;
            sink.emit(&r.events).await;
            r
        }
        Step::HpaAfter => {
            hpa_step::write_due(s, p, HpaOrder::After).await?;
            StepResult::default()
        }
        Step::Evict(pods) => {
            let attempts = &mut sink.memory.attempts;
            let r = ondelete_step::evict(p, s, pods, attempts).await?;
            sink.emit(&r.events).await;
            r
        }
        // A revert is a change: intent first, the same executor and write limit.
        Step::Start(d) | Step::Revert(d) => {
            return start(p, s, *d, sink, watcher, generation).await;
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

/// Starts the change a decision applies: intent before action (design D25), in a whole
/// status (strategy, summary, mode, conditions) so a change whose action fails still shows
/// what it is. A decision that applies passed the pause and freeze checks.
async fn start(
    p: &Pass<'_>,
    s: &mut RightsizingRecommendationStatus,
    decided: Decided,
    sink: &mut Sink<'_>,
    watcher: &Watcher,
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
    s.change = Some(change);
    // A revert raises values back to the template's: no canary, no health watch to undo it.
    if !revert {
        act::choose_canary(s, p);
    }
    let invalid = status::invalid_inputs(&p.policy, Some(&decided.decision));
    *s = status::build_status(&StatusInput {
        previous: s,
        decision: Some(&decided.decision),
        facts: Some(&p.facts),
        policy_name: p.policy.policy_name.as_deref(),
        generation,
        invalid: &invalid,
        rollout_in_progress: kerf_decide::pass::rolling(&p.workload_state(s)),
        withdrawn: false,
        now: p.now,
    });
    record::write_warning_once(p, sink, s, status::invalid_warning).await?;
    crate::failpoints::hit("after-intent").map_err(ActError::from)?;
    let res = act::advance(s, p, true).await;
    let result = sink.checked(p, s, res, Action::Apply).await?;
    healthwatch::start(p, watcher, s).await;
    Ok(Carried {
        decided: Some(decided),
        result,
    })
}
