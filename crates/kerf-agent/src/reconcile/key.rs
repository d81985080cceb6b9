//! One pass over one workload's rsr.

use chrono::{DateTime, Utc};
use kerf_api::rsr::{ChangeState, HpaOrder, RightsizingRecommendationStatus};
use kerf_decide::Outcome;
use kerf_decide::dedup::{self, DedupContext};

use super::act::{self, StepCtx};
use super::facts::{self, Sources};
use super::failure::{self, Action};
use super::healthwatch::{self, HealthCtx};
use super::hpa_step;
use super::ondelete_step;
use super::release_step;
use super::report::{self, EventRecorder, RsrRef};
use super::{InFlight, Memory};
use crate::cache::{RsrEntry, WorkloadKey};
use crate::health::{self, Watcher};
use crate::hub::HubState;
use crate::intent::{self, IntentError};
use crate::rsr_sync::{is_withdrawn, rsr_api};
use crate::runtime::Context;
use crate::status::{self, StatusInput};

/// Why a pass over one workload stopped.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A status write failed (409 included: read again next pass).
    #[error(transparent)]
    Intent(#[from] IntentError),
    /// An actuating step failed.
    #[error(transparent)]
    Act(#[from] act::ActError),
    /// The health watch or a rollback failed.
    #[error(transparent)]
    Health(#[from] health::HealthError),
}

impl KeyError {
    /// A short, bounded name for metric labels and logs.
    pub fn category(&self) -> &'static str {
        match self {
            KeyError::Intent(e) => e.category(),
            KeyError::Act(e) => e.category(),
            KeyError::Health(e) => e.category(),
        }
    }
}

struct Writer {
    api: kube::Api<kube::api::DynamicObject>,
    name: String,
    rv: String,
    /// The spec as read (sent along with the status, see [`intent::write_status`]).
    spec: Option<serde_json::Value>,
    /// The status as the API server holds it.
    last: RightsizingRecommendationStatus,
    /// The resourceVersions this pass wrote over.
    replaced: Vec<String>,
}

impl Writer {
    async fn write(&mut self, s: &RightsizingRecommendationStatus) -> Result<(), IntentError> {
        if *s == self.last {
            return Ok(());
        }
        let rv =
            intent::write_status(&self.api, &self.name, &self.rv, self.spec.as_ref(), s).await?;
        self.replaced.push(std::mem::replace(&mut self.rv, rv));
        self.last = s.clone();
        Ok(())
    }
}

impl health::StatusWriter for Writer {
    async fn write(&mut self, s: &RightsizingRecommendationStatus) -> Result<(), IntentError> {
        Writer::write(self, s).await
    }
}

/// Reconciles the rsr of `key`. An rsr the cache still shows at a resourceVersion this
/// reconciler has written over is left until the watch brings the newer one (its write
/// would only get a 409). `watcher` runs the health watch of an applied change and rolls a
/// breached one back.
pub async fn reconcile_key(
    ctx: &Context,
    hub: &HubState,
    recorder: &EventRecorder,
    memory: &mut Memory,
    resize_subresource: bool,
    watcher: &Watcher,
    key: &WorkloadKey,
) -> Result<(), KeyError> {
    let Some(entry) = ctx.cache.rsrs_for(key).into_iter().next() else {
        return Ok(());
    };
    if !ctx.may_write() {
        return Ok(());
    }
    match memory.superseded.get(key) {
        Some(old) if old.contains(&entry.resource_version) => return Ok(()),
        Some(_) => {
            memory.superseded.remove(key);
        }
        None => {}
    }
    let mut writer = new_writer(ctx, &entry);
    let res = reconcile_entry(
        ctx,
        hub,
        recorder,
        memory,
        resize_subresource,
        watcher,
        key,
        &entry,
        &mut writer,
    )
    .await;
    if !writer.replaced.is_empty() {
        memory
            .superseded
            .entry(key.clone())
            .or_default()
            .extend(writer.replaced);
    }
    res
}

fn new_writer(ctx: &Context, entry: &RsrEntry) -> Writer {
    Writer {
        api: rsr_api(ctx.client.clone(), &entry.namespace),
        name: entry.name.clone(),
        rv: entry.resource_version.clone(),
        spec: entry
            .rsr
            .as_ref()
            .ok()
            .and_then(|r| serde_json::to_value(&r.spec).ok()),
        last: entry
            .rsr
            .as_ref()
            .ok()
            .and_then(|r| r.status.clone())
            .unwrap_or_default(),
        replaced: Vec::new(),
    }
}

#[allow(clippy::too_many_arguments)]
async fn reconcile_entry(
    ctx: &Context,
    hub: &HubState,
    recorder: &EventRecorder,
    memory: &mut Memory,
    resize_subresource: bool,
    watcher: &Watcher,
    key: &WorkloadKey,
    entry: &RsrEntry,
    writer: &mut Writer,
) -> Result<(), KeyError> {
    let now = ctx.clock.now();
    let rsr = match &entry.rsr {
        Ok(r) => r,
        Err(e) => return invalid_rsr(memory, key, entry, writer, e.to_string(), now).await,
    };
    let Some(workload) = ctx.cache.workload(key) else {
        if rsr
            .status
            .as_ref()
            .and_then(|s| s.change.as_ref())
            .is_some_and(|c| matches!(c.state, ChangeState::Intent | ChangeState::Applying))
        {
            tracing::info!(workload = %key, "workload deleted: the change in flight is dropped");
        }
        return Ok(());
    };
    if rsr
        .spec
        .workload_ref
        .uid
        .as_deref()
        .is_some_and(|u| u != workload.uid)
    {
        return Ok(());
    }
    let previous = rsr.status.clone().unwrap_or_default();
    let mut s = previous.clone();
    intent::clear_pending(&mut s, &memory.acked_ids);
    let src = Sources {
        cache: &ctx.cache,
        hub,
        settings: &ctx.settings,
        resize_subresource,
    };
    let policies = facts::policies(&ctx.cache);
    let policy = facts::policy_for(&workload, &ctx.cache, &policies, hub, &ctx.settings);
    if is_withdrawn(entry) {
        let input = StatusInput {
            previous: &s,
            decision: None,
            facts: None,
            policy_name: policy.policy_name.as_deref(),
            generation: rsr.metadata.generation,
            invalid: &[],
            rollout_in_progress: false,
            withdrawn: true,
            now,
        };
        let new = status::build_status(&input);
        if status::status_changed(Some(&previous), &new) {
            writer.write(&new).await?;
        }
        return Ok(());
    }
    let pods = facts::live_pods(&ctx.cache.pods_of(key));
    let hpas = ctx.cache.hpas_for(key);
    let may_write = || ctx.may_write();
    let rsr_ref = RsrRef {
        namespace: entry.namespace.to_string(),
        name: entry.name.clone(),
        uid: rsr.metadata.uid.clone(),
    };
    let mut finished = false;
    // Resume or finish a change in flight, from status alone.
    let in_flight = s
        .change
        .as_ref()
        .is_some_and(|c| matches!(c.state, ChangeState::Intent | ChangeState::Applying));
    let f = facts::gather(src, &workload, &rsr.spec, &s, now);
    let step = StepCtx {
        client: &ctx.client,
        workload: &workload,
        pods: &pods,
        hpas: &hpas,
        facts: &f,
        policy: &policy,
        may_write: &may_write,
        metrics: &ctx.metrics.executor,
        now,
    };
    if in_flight {
        let res = act::advance(&mut s, &step).await;
        write_and_emit(writer, &s, recorder, &rsr_ref, res.as_ref().ok()).await?;
        let fail = FailCtx {
            memory: &mut *memory,
            writer: &mut *writer,
            recorder,
            rsr: &rsr_ref,
            workload: &workload,
            now,
        };
        finished |= fail.check(&mut s, res, Action::Apply).await?.finished;
    } else if let Some(rel) = release_step::due(&s, &policy)
        && !act::frozen(&f, &policy, now)
    {
        let res = release_step::run(&mut s, &step, &rel).await;
        write_and_emit(writer, &s, recorder, &rsr_ref, res.as_ref().ok()).await?;
        let fail = FailCtx {
            memory: &mut *memory,
            writer: &mut *writer,
            recorder,
            rsr: &rsr_ref,
            workload: &workload,
            now,
        };
        fail.check(&mut s, res, Action::Release).await?;
        finished = true;
    }
    // A higher HPA target once the rollout completed (design D22).
    if hpa_step::after_due(&s)
        && s.change
            .as_ref()
            .is_some_and(|c| act::template_covers(c, &workload))
        && health::rollout_complete(&workload)
    {
        hpa_step::write_due(&mut s, &step, HpaOrder::After).await?;
        writer.write(&s).await?;
    }
    // Outdated pods of an OnDelete StatefulSet (design section 6).
    if ondelete_step::due(&s, &workload) {
        let all_pods = ctx.cache.pods_of(key);
        let oc = ondelete_step::OnDeleteCtx {
            client: &ctx.client,
            workload: &workload,
            pods: &all_pods,
            settings: &ctx.settings.on_delete,
            frozen: act::frozen(&f, &policy, now),
            paused: f.hub.pause.is_some(),
            may_write: &may_write,
            metrics: &ctx.metrics.executor,
            now,
        };
        let run = ondelete_step::run(&oc, &s, &mut memory.refused_evictions).await?;
        if let Some(at) = run.wake_at {
            memory.wake_at(at, key);
        }
        for e in &run.events {
            recorder.record(&rsr_ref, e).await;
        }
    } else if ondelete_step::waiting_for_controller(&s, &workload) {
        memory.wake_at(now + ondelete_step::RECHECK, key);
    }
    // The health watch of an applied change, or the rollback of a breached one (RB-11).
    let hctx = HealthCtx {
        ctx,
        watcher,
        recorder,
        rsr: &rsr_ref,
        workload: &workload,
        key,
        policy: &policy,
        now,
    };
    finished |= healthwatch::watch_pass(&hctx, memory, &mut s, writer).await?;
    let f = facts::gather(src, &workload, &rsr.spec, &s, now);
    let mut decision = kerf_decide::decide(&f, &policy, now);
    // A release held by a freeze or a pause reports that block for its resources (D21).
    if let Some(rel) = release_step::due(&s, &policy)
        && let Some(held) = release_step::holding_block(&f, &policy, &rel.resources, now)
    {
        if let Some(at) = held.until {
            memory.wake_at(at.max(now), key);
        }
        release_step::report_hold(&mut decision, held);
    }
    let (kind, reason) = match &decision.outcome {
        Outcome::Apply(plan) => ("applied", plan.reason),
        Outcome::Skip(skip) => ("skipped", skip.reason),
        Outcome::Block(block) => ("blocked", block.reason),
    };
    ctx.metrics
        .reconcile
        .decisions
        .get_or_create(&crate::metrics::TypeReason {
            r#type: kind.to_owned(),
            reason: reason.to_owned(),
        })
        .inc();
    if let Outcome::Apply(plan) = &decision.outcome
        && !s
            .change
            .as_ref()
            .is_some_and(|c| matches!(c.state, ChangeState::Intent | ChangeState::Applying))
    {
        // Intent before action (design D25), in a whole status (strategy, summary, mode,
        // conditions) so a change whose action fails still shows what it is.
        s.change = Some(intent::new_change(plan, now));
        let invalid = status::invalid_inputs(&policy, Some(&decision));
        s = status::build_status(&StatusInput {
            previous: &s,
            decision: Some(&decision),
            facts: Some(&f),
            policy_name: policy.policy_name.as_deref(),
            generation: rsr.metadata.generation,
            invalid: &invalid,
            rollout_in_progress: rolling(&workload),
            withdrawn: false,
            now,
        });
        writer.write(&s).await?;
        crate::failpoints::hit("after-intent").map_err(act::ActError::from)?;
        let step = StepCtx { facts: &f, ..step };
        let res = act::advance(&mut s, &step).await;
        write_and_emit(writer, &s, recorder, &rsr_ref, res.as_ref().ok()).await?;
        let fail = FailCtx {
            memory: &mut *memory,
            writer: &mut *writer,
            recorder,
            rsr: &rsr_ref,
            workload: &workload,
            now,
        };
        finished |= fail.check(&mut s, res, Action::Apply).await?.finished;
    }
    if finished {
        s.reported = dedup::reset();
    }
    let invalid = status::invalid_inputs(&policy, Some(&decision));
    let rollout_in_progress = rolling(&workload);
    let input = StatusInput {
        previous: &s,
        decision: Some(&decision),
        facts: Some(&f),
        policy_name: policy.policy_name.as_deref(),
        generation: rsr.metadata.generation,
        invalid: &invalid,
        rollout_in_progress,
        withdrawn: false,
        now,
    };
    let mut new = status::build_status(&input);
    let ew = act::event_workload(&workload);
    let dctx_values = report::recommended_values(&rsr.spec);
    let policy_hash = policy.values_hash();
    let dctx = DedupContext {
        values: &dctx_values,
        policy_hash: &policy_hash,
        tolerance_milli_percent: ctx.settings.tolerance.percent_milli,
    };
    let mut reports = if matches!(decision.outcome, Outcome::Apply(_)) {
        Vec::new()
    } else {
        report::reports(&decision, &ew, &rsr.spec.recommendation_id, now)
    };
    report::add_requests(&mut reports, new.summary.as_ref());
    let current: Vec<_> = reports.iter().map(|r| r.candidate.clone()).collect();
    new.reported = dedup::retain_current(&new.reported, &current);
    for acked in memory.acked_reports.remove(key).unwrap_or_default() {
        let c = DedupContext {
            values: &acked.values,
            policy_hash: &acked.policy_hash,
            tolerance_milli_percent: dctx.tolerance_milli_percent,
        };
        new.reported = dedup::mark_reported(&new.reported, &acked.candidate, &c);
    }
    let warning = status::invalid_warning(&writer.last, &new);
    if status::status_changed(Some(&writer.last), &new) {
        writer.write(&new).await?;
    }
    if let Some((reason, message)) = warning {
        recorder.warn(&rsr_ref, reason, &message, now).await;
    }
    for r in reports {
        let already = memory
            .in_flight
            .values()
            .any(|f| &f.key == key && f.candidate == r.candidate);
        if already || !dedup::should_emit(&new.reported, &r.candidate, &dctx) {
            continue;
        }
        memory.in_flight.insert(
            r.event.id,
            InFlight {
                key: key.clone(),
                candidate: r.candidate.clone(),
                values: dctx_values.clone(),
                policy_hash: policy_hash.clone(),
            },
        );
        recorder.record(&rsr_ref, &r.event).await;
    }
    schedule(memory, key, &decision, &new, &policy, now);
    Ok(())
}

/// Writes the status a step produced (when it changed) and then emits its events: an
/// event is queued only after its intent and pending entry are in status (D25).
async fn write_and_emit(
    writer: &mut Writer,
    s: &RightsizingRecommendationStatus,
    recorder: &EventRecorder,
    rsr: &RsrRef,
    step: Option<&act::StepResult>,
) -> Result<(), KeyError> {
    writer.write(s).await?;
    if let Some(step) = step {
        if !step.events.is_empty() {
            crate::failpoints::hit("before-applied-event").map_err(act::ActError::from)?;
        }
        for e in &step.events {
            recorder.record(rsr, e).await;
        }
    }
    Ok(())
}

/// What recording a `failed` event needs.
struct FailCtx<'a> {
    memory: &'a mut Memory,
    writer: &'a mut Writer,
    recorder: &'a EventRecorder,
    rsr: &'a RsrRef,
    workload: &'a crate::cache::WorkloadInfo,
    now: DateTime<Utc>,
}

impl FailCtx<'_> {
    /// Passes a step's result on; a failed API call is counted and, once its retries are
    /// spent, recorded as `failed` (EV-13, EV-47) before the error goes to the backoff.
    async fn check(
        self,
        s: &mut RightsizingRecommendationStatus,
        res: Result<act::StepResult, act::ActError>,
        action: Action,
    ) -> Result<act::StepResult, KeyError> {
        let e = match res {
            Ok(step) => {
                if let Some(c) = &s.change {
                    self.memory.failures.remove(&c.id);
                }
                return Ok(step);
            }
            Err(e) => e,
        };
        let ew = act::event_workload(self.workload);
        let failed = failure::record(&mut self.memory.failures, s, ew, &e, action, self.now);
        if let Some(event) = failed {
            tracing::warn!(workload = %self.workload.key, reason = %event.reason, error = %e, "action failed after its retries");
            self.writer.write(s).await?;
            self.recorder.record(self.rsr, &event).await;
        }
        Err(e.into())
    }
}

fn rolling(w: &crate::cache::WorkloadInfo) -> bool {
    let st = &w.status;
    if st
        .observed_generation
        .zip(w.generation)
        .is_some_and(|(o, g)| o < g)
    {
        return true;
    }
    match w.key.kind {
        kerf_api::WorkloadKind::DaemonSet => {
            st.updated_number_scheduled.unwrap_or(0) < st.desired_number_scheduled.unwrap_or(0)
        }
        _ => {
            let want = w.replicas.unwrap_or(1);
            st.updated_replicas.unwrap_or(0) < want || st.replicas.unwrap_or(0) > want
        }
    }
}

fn schedule(
    memory: &mut Memory,
    key: &WorkloadKey,
    decision: &kerf_decide::Decision,
    s: &RightsizingRecommendationStatus,
    policy: &kerf_decide::effective::EffectivePolicy,
    now: DateTime<Utc>,
) {
    if let Outcome::Block(b) = &decision.outcome {
        for at in [b.until, b.next_window].into_iter().flatten() {
            memory.wake_at(at.max(now), key);
        }
    }
    if let Some(end) = s.watch.as_ref().and_then(|w| w.end).filter(|e| *e > now) {
        memory.wake_at(end, key);
    }
    if let Some(c) = s
        .change
        .as_ref()
        .filter(|c| c.state == ChangeState::Applying)
    {
        let at = c
            .first_resize_at
            .map_or(now, |f| f + policy.fallback_after.value);
        memory.wake_at(at.max(now + chrono::Duration::seconds(1)), key);
    }
}

async fn invalid_rsr(
    memory: &mut Memory,
    key: &WorkloadKey,
    entry: &RsrEntry,
    writer: &mut Writer,
    error: String,
    now: DateTime<Utc>,
) -> Result<(), KeyError> {
    if memory.invalid.get(key) == Some(&error) {
        return Ok(());
    }
    let mut s = RightsizingRecommendationStatus::default();
    let invalid = [status::Invalid {
        reason: kerf_api::wellknown::CONDITION_REASON_INVALID_SPEC,
        message: error.clone(),
    }];
    let input = StatusInput {
        previous: &s.clone(),
        decision: None,
        facts: None,
        policy_name: None,
        generation: entry.generation,
        invalid: &invalid,
        rollout_in_progress: false,
        withdrawn: false,
        now,
    };
    s = status::build_status(&input);
    tracing::warn!(rsr = %entry.name, namespace = %entry.namespace, %error, "rsr does not convert; Valid=False");
    if writer.spec.is_none()
        && let Ok(Some(raw)) = writer.api.get_opt(&entry.name).await
    {
        writer.spec = raw.data.get("spec").cloned();
    }
    writer.write(&s).await?;
    memory.invalid.insert(key.clone(), error);
    Ok(())
}
