//! The report as a pure function of the workloads (replicas and container requests) and
//! their rsrs (spec and status) at `now`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use kerf_api::policy::Mode;
use kerf_api::rsr::{
    ChangeState, Phase, RightsizingRecommendationSpec, RightsizingRecommendationStatus,
};
use kerf_api::wellknown as wk;
use kerf_api::{Resource, ResourceValues, WorkloadKind};
use kerf_decide::{dedup, quantity};

use super::{
    HeldBack, NamespaceTotals, Report, ResourceTotals, SCHEMA_VERSION, Split, Totals, Units,
    WorkloadLine, WorkloadResource,
};
use kerf_decide::status::summary::{INVALID_REASONS, container_running_value};

/// The held-back reason of a change that is going in now.
pub const REASON_APPLYING: &str = "Applying";
/// The held-back reason of a recommendation no decision holds yet.
pub const REASON_PENDING: &str = "Pending";
/// The rsr column's reason of a recommendation the hub no longer lists.
pub const REASON_WITHDRAWN: &str = "RecommendationWithdrawn";

/// One workload as the report reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadInput {
    /// Namespace.
    pub namespace: String,
    /// Kind.
    pub kind: WorkloadKind,
    /// Name.
    pub name: String,
    /// Pods: `spec.replicas` (1 when absent), or a DaemonSet's pods scheduled.
    pub replicas: i64,
    /// The pod template's containers and restartable init containers.
    pub containers: Vec<ContainerInput>,
    /// Its rsr, when the hub recommends for it.
    pub rsr: Option<RsrInput>,
}

/// A container of the pod template.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContainerInput {
    /// Name.
    pub name: String,
    /// Requests.
    pub requests: ResourceValues,
    /// Limits (Kubernetes uses a limit as the request when the request is absent).
    pub limits: ResourceValues,
}

/// The rsr of a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct RsrInput {
    /// The hub's recommendation.
    pub spec: RightsizingRecommendationSpec,
    /// What the agent did with it.
    pub status: RightsizingRecommendationStatus,
}

/// The report of `workloads` at `now`; `problems` are carried into it (inputs that could
/// not be read before), and every quantity that does not parse is added to them.
pub fn build(workloads: &[WorkloadInput], problems: Vec<String>, now: DateTime<Utc>) -> Report {
    let mut problems = problems;
    let mut lines: Vec<WorkloadLine> = workloads
        .iter()
        .map(|w| workload_line(w, &mut problems))
        .collect();
    lines.sort_by(|a, b| (&a.namespace, &a.kind, &a.name).cmp(&(&b.namespace, &b.kind, &b.name)));
    let mut by_ns: BTreeMap<&str, Vec<&WorkloadLine>> = BTreeMap::new();
    for l in &lines {
        by_ns.entry(l.namespace.as_str()).or_default().push(l);
    }
    let namespaces = by_ns
        .into_iter()
        .map(|(ns, ls)| NamespaceTotals {
            namespace: ns.to_owned(),
            totals: totals(ls.into_iter()),
        })
        .collect();
    Report {
        version: SCHEMA_VERSION,
        generated_at: now,
        units: Units::default(),
        cluster: totals(lines.iter()),
        namespaces,
        workloads: lines,
        problems,
    }
}

/// The totals of `lines`.
pub fn totals<'a>(lines: impl Iterator<Item = &'a WorkloadLine>) -> Totals {
    let mut t = Totals::default();
    let mut held: BTreeMap<String, HeldBack> = BTreeMap::new();
    for l in lines {
        t.workloads += 1;
        t.recommended_workloads += u32::from(l.recommended);
        add(&mut t.cpu, &l.cpu);
        add(&mut t.memory, &l.memory);
        let mut counted: Vec<&str> = Vec::new();
        for r in Resource::ALL {
            let res = l.get(r);
            let Some(reason) = res.held_back.as_deref() else {
                continue;
            };
            let entry = held.entry(reason.to_owned()).or_insert_with(|| HeldBack {
                reason: reason.to_owned(),
                ..HeldBack::default()
            });
            match r {
                Resource::Cpu => entry.cpu = entry.cpu.plus(res.savings),
                Resource::Memory => entry.memory = entry.memory.plus(res.savings),
            }
            if !counted.contains(&reason) {
                entry.workloads += 1;
                counted.push(reason);
            }
        }
    }
    t.held_back = held.into_values().collect();
    t
}

fn add(t: &mut ResourceTotals, w: &WorkloadResource) {
    t.requested = t.requested.saturating_add(w.requested);
    t.recommended = t.recommended.saturating_add(w.recommended);
    t.savings = t.savings.plus(w.savings);
    t.applied = t.applied.plus(w.applied);
    if w.held_back.is_some() {
        t.held_back = t.held_back.plus(w.savings);
    }
}

fn workload_line(w: &WorkloadInput, problems: &mut Vec<String>) -> WorkloadLine {
    let status = w.rsr.as_ref().map(|r| r.status.clone()).unwrap_or_default();
    let mut read = Reader {
        workload: format!("{}/{}/{}", w.namespace, w.kind, w.name),
        problems,
    };
    let mut resource = |r| workload_resource(w, &status, r, &mut read);
    let cpu = resource(Resource::Cpu);
    let memory = resource(Resource::Memory);
    let summary = status.summary.as_ref();
    WorkloadLine {
        namespace: w.namespace.clone(),
        kind: w.kind.as_str().to_owned(),
        name: w.name.clone(),
        replicas: w.replicas,
        recommended: w.rsr.is_some(),
        mode: summary.and_then(|s| s.mode.clone()),
        phase: status.phase.map(phase_name),
        cpu,
        memory,
    }
}

/// Parses quantities, naming the workload of any that does not parse.
struct Reader<'a> {
    workload: String,
    problems: &'a mut Vec<String>,
}

impl Reader<'_> {
    fn value(&mut self, what: &str, r: Resource, v: &ResourceValues) -> Option<i64> {
        let q = v.get(r)?;
        match quantity::parse(r, q) {
            Ok(n) => Some(n),
            Err(e) => {
                self.problems.push(format!(
                    "{}: {what} {}: {e}; counted as absent",
                    self.workload,
                    r.as_str(),
                ));
                None
            }
        }
    }
}

fn workload_resource(
    w: &WorkloadInput,
    status: &RightsizingRecommendationStatus,
    r: Resource,
    read: &mut Reader<'_>,
) -> WorkloadResource {
    let (mut now, mut rec, mut per_pod) = (0i64, 0i64, Split::default());
    let mut applied_per_pod = Split::default();
    for c in &w.containers {
        let req = read.value(&format!("container {} request", c.name), r, &c.requests);
        let lim = read.value(&format!("container {} limit", c.name), r, &c.limits);
        let running = container_running_value(status, &c.name, req, lim, r);
        let template = req.or(lim).unwrap_or(0);
        let moved = applied(status, (&c.name, template, running), r, read);
        applied_per_pod = applied_per_pod.plus(moved);
        let hub = w
            .rsr
            .as_ref()
            .and_then(|rsr| rsr.spec.containers.iter().find(|rc| rc.name == c.name))
            .and_then(|rc| read.value(&format!("recommendation {}", rc.name), r, &rc.requests))
            .unwrap_or(running);
        now = now.saturating_add(running);
        rec = rec.saturating_add(hub);
        per_pod = per_pod.plus(Split::between(running, hub));
    }
    let savings = per_pod.times(w.replicas);
    let held_back = (!savings.is_zero()).then(|| held_back_reason(w.rsr.as_ref(), status, r));
    WorkloadResource {
        requested: now.saturating_mul(w.replicas),
        recommended: rec.saturating_mul(w.replicas),
        savings,
        applied: applied_per_pod.times(w.replicas),
        held_back,
    }
}

/// Per pod, what Kerf's values that still run moved for `r` in container `name`, given
/// its `template` value and the value its pods `running` (see [`container_running_value`]):
/// in place, the template's value against the running one (a live change, or the values an
/// in-place change left on the pods after a release or a partial rollback); by rollout,
/// the last change's `from - to` while the template still holds its `to`. A change in
/// flight, a rollback that restored `r`, or a revert counts nothing.
fn applied(
    s: &RightsizingRecommendationStatus,
    (name, template, running): (&str, i64, i64),
    r: Resource,
    read: &mut Reader<'_>,
) -> Split {
    let Some(change) = s.change.as_ref().filter(|c| !c.revert) else {
        return Split::default();
    };
    if change.strategy.resizes_pods() {
        return Split::between(template, running);
    }
    let Some(c) = change
        .containers
        .iter()
        .find(|c| c.name == name)
        .filter(|_| change.resources.contains(&r) && change.state != ChangeState::Intent)
    else {
        return Split::default();
    };
    let what = format!("change {} container {}", change.id, c.name);
    let from = read.value(&format!("{what} from"), r, &c.from.requests);
    let to = read.value(&format!("{what} to"), r, &c.to.requests);
    match (from, to) {
        (Some(f), Some(t)) if t == template => Split::between(f, t),
        _ => Split::default(),
    }
}

/// Why the recommended `r` is not in effect, from the rsr's status: a change going in
/// (`Applying`), an invalid input or a withdrawn recommendation, the mode (`ModeOff`,
/// `ModeAudit`), the block (the Blocked condition's reason), the reason of the phase
/// (skipped, deferred, rolled back), and otherwise `Pending`.
pub fn held_back_reason(
    rsr: Option<&RsrInput>,
    s: &RightsizingRecommendationStatus,
    r: Resource,
) -> String {
    if rsr.is_none() {
        return REASON_PENDING.to_owned();
    }
    let going_in = s.phase == Some(Phase::Applying)
        && s.change.as_ref().is_some_and(|c| c.resources.contains(&r));
    if going_in {
        return REASON_APPLYING.to_owned();
    }
    let column = s.summary.as_ref().and_then(|x| x.reason.as_deref());
    if let Some(c) = column.filter(|c| INVALID_REASONS.contains(c) || *c == REASON_WITHDRAWN) {
        return c.to_owned();
    }
    let mode = s.mode.as_ref().map(|m| match r {
        Resource::Cpu => m.cpu,
        Resource::Memory => m.memory,
    });
    match mode {
        Some(Mode::Off) => return wk::REASON_MODE_OFF.to_owned(),
        Some(Mode::Audit) => return wk::REASON_MODE_AUDIT.to_owned(),
        _ => {}
    }
    let blocked = s.conditions.iter().find(|c| {
        c.type_ == wk::CONDITION_BLOCKED && c.status == kerf_api::condition::ConditionStatus::True
    });
    if let Some(b) = blocked {
        return b.reason.clone();
    }
    phase_reason(rsr, s, r, column)
}

fn phase_reason(
    rsr: Option<&RsrInput>,
    s: &RightsizingRecommendationStatus,
    r: Resource,
    column: Option<&str>,
) -> String {
    match s.phase {
        Some(p @ (Phase::Skipped | Phase::Blocked | Phase::Deferred | Phase::RolledBack)) => {
            column.map_or_else(|| phase_name(p), str::to_owned)
        }
        Some(Phase::Applied) if below_tolerance(rsr, s, r) => {
            wk::REASON_NO_SIGNIFICANT_CHANGE.to_owned()
        }
        _ => REASON_PENDING.to_owned(),
    }
}

/// Whether the agent reported the current recommendation below the tolerance (a
/// `skipped NoSignificantChange` recorded with the values the spec holds now), for `r` or
/// for the whole workload.
fn below_tolerance(
    rsr: Option<&RsrInput>,
    s: &RightsizingRecommendationStatus,
    r: Resource,
) -> bool {
    let Some(rsr) = rsr else { return false };
    let hash = dedup::values_hash(&dedup::recommended_values(&rsr.spec));
    s.reported.iter().any(|k| {
        k.reason == wk::REASON_NO_SIGNIFICANT_CHANGE
            && k.values_hash == hash
            && k.resource.is_none_or(|kr| kr == r)
    })
}

/// The phase as the rsr spells it.
pub fn phase_name(p: Phase) -> String {
    match p {
        Phase::Pending => "Pending",
        Phase::Skipped => "Skipped",
        Phase::Blocked => "Blocked",
        Phase::Deferred => "Deferred",
        Phase::Applying => "Applying",
        Phase::Applied => "Applied",
        Phase::RolledBack => "RolledBack",
        Phase::Released => "Released",
    }
    .to_owned()
}
