//! The tracing of a pass: a span `pass` with the workload, the id of the change the pass
//! works on and the step it takes, each recorded as it becomes known, so every log line of
//! a pass can be found by its change (docs/operations.md, "Following one change"); and
//! the pass's duration by step, `kerf_agent_pass_duration_seconds{step}`.

use std::time::Instant;

use kerf_api::rsr::RightsizingRecommendationStatus;
use kerf_decide::pass::{StepKind, canary_watch_due, in_flight, watch_due};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use tracing::Span;
use tracing::field::Empty;

use crate::cache::WorkloadKey;
use crate::metrics::StepLabel;

/// The span of one pass over `key`. At level ERROR so that every record a log filter lets
/// through carries it (a span is only context: it writes no line of its own).
pub fn pass_span(key: &WorkloadKey) -> Span {
    tracing::error_span!("pass", workload = %key, change_id = Empty, step = Empty)
}

/// Records the id of the change in `s` in the current span when the pass works on it: a
/// change in flight, or an applied change whose health watch or canary is due.
pub fn record_status_change(
    s: &RightsizingRecommendationStatus,
    now: chrono::DateTime<chrono::Utc>,
) {
    if in_flight(s) || watch_due(s, now) || canary_watch_due(s) {
        record_change(s);
    }
}

/// Records the id of the change in `s`, if any, in the current span.
pub fn record_change(s: &RightsizingRecommendationStatus) {
    if let Some(change) = &s.change {
        Span::current().record("change_id", change.id.as_str());
    }
}

/// Whether a step carries out or watches the change already in status (a new decision
/// starts a change of its own; a report or a withdrawal acts on none).
fn acts_on_status_change(kind: StepKind) -> bool {
    !matches!(
        kind,
        StepKind::Report | StepKind::Withdrawn | StepKind::Start | StepKind::Revert
    )
}

/// The name of a step as a label value and a span field: `start`, `hpa_after`,
/// `resume_rollback`.
pub fn step_name(kind: StepKind) -> String {
    let mut name = String::new();
    for (i, c) in format!("{kind:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

/// Times a pass: when dropped, observes the time since [`PassTimer::start`] under the step
/// the pass chose. A pass that ends before choosing one (an rsr that does not convert, a
/// workload gone) is counted by `kerf_agent_reconcile_duration_seconds` alone.
#[derive(Debug)]
pub struct PassTimer {
    family: Family<StepLabel, Histogram>,
    started: Instant,
    step: Option<String>,
}

impl PassTimer {
    /// Starts timing a pass into `family` (`kerf_agent_pass_duration_seconds`).
    pub fn start(family: &Family<StepLabel, Histogram>) -> PassTimer {
        PassTimer {
            family: family.clone(),
            started: Instant::now(),
            step: None,
        }
    }

    /// The pass chose `kind`: records it (and the change it works on, from `s`) in the
    /// current span and labels the duration with it.
    pub fn step(&mut self, kind: StepKind, s: &RightsizingRecommendationStatus) {
        let name = step_name(kind);
        Span::current().record("step", name.as_str());
        if acts_on_status_change(kind) {
            record_change(s);
        }
        self.step = Some(name);
    }
}

impl Drop for PassTimer {
    fn drop(&mut self) {
        if let Some(step) = self.step.take() {
            let took = self.started.elapsed().as_secs_f64();
            self.family.get_or_create(&StepLabel { step }).observe(took);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names_are_snake_case() {
        assert_eq!(step_name(StepKind::Start), "start");
        assert_eq!(step_name(StepKind::HpaAfter), "hpa_after");
        assert_eq!(step_name(StepKind::ResumeRollback), "resume_rollback");
    }

    #[test]
    fn a_pass_is_timed_under_its_step_once_it_has_one() {
        let family =
            Family::<StepLabel, Histogram>::new_with_constructor(|| Histogram::new([0.1, 1.0]));
        let report = StepLabel {
            step: "report".into(),
        };
        let mut timer = PassTimer::start(&family);
        drop(PassTimer::start(&family));
        assert!(family.get(&report).is_none(), "no step, no sample");
        timer.step(
            StepKind::Report,
            &RightsizingRecommendationStatus::default(),
        );
        assert!(family.get(&report).is_none(), "observed when the pass ends");
        drop(timer);
        assert!(family.get(&report).is_some());
    }
}
