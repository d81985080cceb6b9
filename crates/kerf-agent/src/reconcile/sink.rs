//! Where the results of one pass go: its rsr's status (written before the events it lists
//! as pending, design D25), its events, and the reconciler's ledgers.

use kerf_api::event::Event;
use kerf_api::rsr::RightsizingRecommendationStatus;
use kerf_decide::pass::Decided;

use super::failure::{self, Action};
use super::memory::Memory;
use super::pass::Pass;
use super::report::{EventRecorder, RsrRef};
use super::step::{ActError, KeyError, StepResult, event_workload};
use super::writer::Writer;

/// Where the results of one pass go: its rsr's status, its events and the reconciler's
/// ledgers.
pub struct Sink<'a> {
    /// The status writer of the rsr.
    pub writer: Writer,
    /// Where events go.
    pub recorder: &'a EventRecorder,
    /// The rsr events are recorded on.
    pub rsr: RsrRef,
    /// The reconciler's ledgers.
    pub memory: &'a mut Memory,
}

impl Sink<'_> {
    /// Records `events` (outbox and Kubernetes Event).
    pub async fn emit(&self, events: &[Event]) {
        for e in events {
            self.recorder.record(&self.rsr, e).await;
        }
    }

    /// Writes the status a step produced (when it changed) and then emits its events: an
    /// event is queued only after its intent and pending entry are in status (D25).
    pub async fn write_and_emit(
        &mut self,
        s: &RightsizingRecommendationStatus,
        step: Option<&StepResult>,
    ) -> Result<(), KeyError> {
        self.writer.write(s).await?;
        if let Some(step) = step.filter(|r| !r.events.is_empty()) {
            crate::failpoints::hit("before-applied-event").map_err(ActError::from)?;
            self.emit(&step.events).await;
        }
        Ok(())
    }

    /// Writes and emits what an action produced; a failed API call is counted and, once
    /// its retries are spent, recorded as `failed` (EV-13, EV-47) before the error goes to
    /// the backoff.
    pub async fn checked(
        &mut self,
        p: &Pass<'_>,
        s: &mut RightsizingRecommendationStatus,
        res: Result<StepResult, ActError>,
        action: Action,
    ) -> Result<StepResult, KeyError> {
        self.write_and_emit(s, res.as_ref().ok()).await?;
        let failures = &mut self.memory.attempts.failures;
        let e = match res {
            Ok(step) => {
                if let Some(c) = &s.change {
                    failures.remove(&c.id);
                }
                return Ok(step);
            }
            Err(e) => e,
        };
        let ew = event_workload(&p.workload);
        if let Some(event) = failure::record(failures, s, ew, &e, action, p.now) {
            tracing::warn!(workload = %p.key, reason = %event.reason, error = %e, "action failed after its retries");
            self.writer.write(s).await?;
            self.emit(std::slice::from_ref(&event)).await;
        }
        Err(e.into())
    }
}

/// What carrying out the step left: the decision (for a new decision only) and what the
/// step did.
pub struct Carried {
    /// The decision of a [`Step::Start`] or [`Step::Report`].
    pub decided: Option<Decided>,
    /// Events, whether the change finished, when to look again.
    pub result: StepResult,
}
