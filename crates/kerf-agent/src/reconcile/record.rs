//! What a pass leaves behind: the rsr status, the skips and blocks it reports (de-duplicated
//! with [`kerf_decide::dedup`], design D25), the decision counter and the wake-up times.
//!
//! A pass that carried a change on writes the change's progress only; a pass that made a
//! new decision writes the whole status built from it and reports its skip or block.

use chrono::{DateTime, Utc};
use kerf_api::rsr::{RightsizingRecommendation, RightsizingRecommendationStatus};
use kerf_decide::dedup::{self, DedupContext, RecommendedValues};
use kerf_decide::pass::{Decided, rolling, wake_times};
use kerf_decide::{Decision, Outcome};

use super::memory::{InFlight, Memory};
use super::pass::Pass;
use super::report::{self, Report};
use super::sink::{Carried, Sink};
use super::step::{KeyError, event_workload};
use crate::cache::{RsrEntry, WorkloadKey};
use crate::context::Context;
use kerf_decide::status::{self, StatusInput};

/// Records the status the step left: its progress, or the whole status of a new decision
/// with its reports. A change that finished reports its next skip or block again (EV-18).
pub(super) async fn record(
    p: &Pass<'_>,
    rsr: &RightsizingRecommendation,
    s: &mut RightsizingRecommendationStatus,
    carried: &Carried,
    sink: &mut Sink<'_>,
) -> Result<(), KeyError> {
    if carried.result.finished {
        s.reported = dedup::reset();
    }
    match &carried.decided {
        None => Ok(sink.writer.write(s).await?),
        Some(d) => decision(p, rsr, s, d, sink).await,
    }
}

/// Writes the status of a new decision and reports its skips and blocks once each.
async fn decision(
    p: &Pass<'_>,
    rsr: &RightsizingRecommendation,
    s: &RightsizingRecommendationStatus,
    d: &Decided,
    sink: &mut Sink<'_>,
) -> Result<(), KeyError> {
    if !matches!(d.decision.outcome, Outcome::Apply(_)) {
        count_decision(p, &d.decision);
    }
    let mut new = decision_status(p, s, &d.decision, rsr.metadata.generation);
    let ledger = Ledger {
        values: dedup::recommended_values(&rsr.spec),
        policy_hash: p.policy.values_hash(),
        tolerance: p.ctx.settings.tolerance.percent_milli,
    };
    let mut reports = match d.decision.outcome {
        Outcome::Apply(_) => Vec::new(),
        _ => {
            let ew = event_workload(&p.workload);
            report::reports(&d.decision, &ew, &rsr.spec.recommendation_id, p.now)
        }
    };
    report::add_requests(&mut reports, new.summary.as_ref());
    let acked = sink.memory.reports.acked_reports.remove(p.key);
    new.reported = ledger.reported(&new, &reports, acked.unwrap_or_default());
    write_warning_once(p, sink, &new, status::invalid_warning).await?;
    for r in reports {
        if ledger.due(sink.memory, p.key, &new, &r) {
            sink.recorder.record(&sink.rsr, &r.event).await;
        }
    }
    Ok(())
}

/// The whole status of a new `decision` over `previous` (strategy, summary, mode,
/// conditions): the one place a pass composes it, for a skip, a block or a change that
/// starts.
pub(super) fn decision_status(
    p: &Pass<'_>,
    previous: &RightsizingRecommendationStatus,
    decision: &Decision,
    generation: Option<i64>,
) -> RightsizingRecommendationStatus {
    let invalid = status::invalid_inputs(&p.policy, Some(decision));
    status::build_status(&StatusInput {
        previous,
        decision: Some(decision),
        facts: Some(&p.facts),
        policy_name: p.policy.policy_name.as_deref(),
        generation,
        invalid: &invalid,
        rollout_in_progress: rolling(&p.workload_state(previous)),
        withdrawn: false,
        now: p.now,
    })
}

/// Writes `new` and then, when `warning` finds in it an invalid input the status as
/// written before did not name, its Warning Kubernetes Event: once per invalid input,
/// whichever step writes the status first.
pub(super) async fn write_warning_once(
    p: &Pass<'_>,
    sink: &mut Sink<'_>,
    new: &RightsizingRecommendationStatus,
    warning: fn(
        &RightsizingRecommendationStatus,
        &RightsizingRecommendationStatus,
    ) -> Option<(&'static str, String)>,
) -> Result<(), KeyError> {
    let warning = warning(&sink.writer.last, new);
    sink.writer.write(new).await?;
    if let Some((reason, message)) = warning {
        sink.recorder.warn(&sink.rsr, reason, &message, p.now).await;
    }
    Ok(())
}

/// What de-duplication compares a report with.
struct Ledger {
    values: RecommendedValues,
    policy_hash: String,
    tolerance: u32,
}

impl Ledger {
    fn context(&self) -> DedupContext<'_> {
        DedupContext {
            values: &self.values,
            policy_hash: &self.policy_hash,
            tolerance_milli_percent: self.tolerance,
        }
    }

    /// `status.reported` keeping the current reports only, with the acknowledged ones
    /// marked reported.
    fn reported(
        &self,
        new: &RightsizingRecommendationStatus,
        reports: &[Report],
        acked: Vec<InFlight>,
    ) -> Vec<kerf_api::rsr::ReportedKey> {
        let current: Vec<_> = reports.iter().map(|r| r.candidate.clone()).collect();
        let mut reported = dedup::retain_current(&new.reported, &current);
        for a in acked {
            let c = DedupContext {
                values: &a.values,
                policy_hash: &a.policy_hash,
                tolerance_milli_percent: self.tolerance,
            };
            reported = dedup::mark_reported(&reported, &a.candidate, &c);
        }
        reported
    }

    /// Whether `r` is sent now: not waiting for its acknowledgement and not reported yet
    /// for these values; a sent one waits in the ledger.
    fn due(
        &self,
        memory: &mut Memory,
        key: &WorkloadKey,
        new: &RightsizingRecommendationStatus,
        r: &Report,
    ) -> bool {
        let ledger = &mut memory.reports;
        if ledger.sent(key, &r.candidate)
            || !dedup::should_emit(&new.reported, &r.candidate, &self.context())
        {
            return false;
        }
        ledger.in_flight.insert(
            r.event.id,
            InFlight {
                key: key.clone(),
                candidate: r.candidate.clone(),
                values: self.values.clone(),
                policy_hash: self.policy_hash.clone(),
            },
        );
        true
    }
}

/// Counts a decision (`kerf_agent_decisions_total`).
pub(super) fn count_decision(p: &Pass<'_>, decision: &Decision) {
    let (kind, reason) = match &decision.outcome {
        Outcome::Apply(plan) => ("applied", plan.reason),
        Outcome::Skip(skip) => ("skipped", skip.reason),
        Outcome::Block(block) => ("blocked", block.reason),
    };
    p.ctx
        .metrics
        .reconcile
        .decisions
        .get_or_create(&crate::metrics::TypeReason {
            r#type: kind.to_owned(),
            reason: reason.to_owned(),
        })
        .inc();
}

/// Says in status that the hub withdrew the recommendation, or that the rsr could not hold
/// it: then Valid=False names the refused fields and a Warning Kubernetes Event says so once
/// per recommendation id (the status kept in the API server remembers it across passes and
/// restarts).
pub(super) async fn withdrawn(
    p: &Pass<'_>,
    s: &mut RightsizingRecommendationStatus,
    sink: &mut Sink<'_>,
    generation: Option<i64>,
) -> Result<(), KeyError> {
    let invalid = refused_recommendation(p);
    let new = status::build_status(&StatusInput {
        previous: s,
        decision: None,
        facts: None,
        policy_name: p.policy.policy_name.as_deref(),
        generation,
        invalid: &invalid,
        rollout_in_progress: false,
        withdrawn: true,
        now: p.now,
    });
    write_warning_once(p, sink, &new, status::refused_warning).await?;
    // The pass records `s` after its step: it must be what was written, not the status
    // before it (which would undo this write and start the next pass at once).
    *s = new;
    Ok(())
}

/// The hub's recommendation the rsr could not hold, as `Valid=False InvalidSpec` (see
/// [`crate::rsr_sync::ANNOTATION_INVALID`]).
fn refused_recommendation(p: &Pass<'_>) -> Vec<status::Invalid> {
    let entry = p.ctx.cache.rsrs_for(p.key).into_iter().next();
    let text = entry.as_ref().and_then(|e| {
        let rsr = e.rsr.as_ref().ok()?;
        rsr.metadata
            .annotations
            .as_ref()?
            .get(crate::rsr_sync::ANNOTATION_INVALID)
            .cloned()
    });
    text.map(|message| status::Invalid {
        reason: kerf_api::wellknown::CONDITION_REASON_INVALID_SPEC,
        message,
    })
    .into_iter()
    .collect()
}

/// Marks an rsr that does not convert `Valid=False`, once per error.
pub(super) async fn invalid_rsr(
    sink: &mut Sink<'_>,
    key: &WorkloadKey,
    entry: &RsrEntry,
    error: String,
    ctx: &Context,
) -> Result<bool, KeyError> {
    if sink.memory.writes.invalid.get(key) == Some(&error) {
        return Ok(false);
    }
    let invalid = [status::Invalid {
        reason: kerf_api::wellknown::CONDITION_REASON_INVALID_SPEC,
        message: error.clone(),
    }];
    let s = status::build_status(&StatusInput {
        previous: &RightsizingRecommendationStatus::default(),
        decision: None,
        facts: None,
        policy_name: None,
        generation: entry.generation,
        invalid: &invalid,
        rollout_in_progress: false,
        withdrawn: false,
        now: ctx.clock.now(),
    });
    tracing::warn!(rsr = %entry.name, namespace = %entry.namespace, %error, "rsr does not convert; Valid=False");
    sink.writer.read_raw_spec().await;
    sink.writer.write(&s).await?;
    sink.memory.writes.invalid.insert(key.clone(), error);
    Ok(false)
}

/// Sets the timers of the workload: what the decision waits for, the watch end, the
/// fallback time of an in-place change, a held release, waiting OnDelete pods, the
/// throttling recheck and what the step asked for.
pub(super) fn schedule(
    memory: &mut Memory,
    p: &Pass<'_>,
    s: &RightsizingRecommendationStatus,
    carried: &Carried,
    waits: Vec<DateTime<Utc>>,
) {
    let decided = carried.decided.as_ref();
    let decision = decided.map(|d| &d.decision);
    let times = wake_times(decision, s, &p.policy, p.now)
        .into_iter()
        .chain(waits)
        .chain(carried.result.wake_at)
        .chain(decided.and_then(|d| d.hold_until));
    for at in times {
        memory.schedule.wake_at(at, p.key);
    }
}
