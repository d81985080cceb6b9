//! The invariants checked once the last agent has settled every workload: each change
//! applied once or rolled back once, nothing orphaned, the rsr agreeing with the cluster,
//! and the hub holding each lifecycle event once, under the id the intent recorded.

use std::collections::BTreeMap;

use kerf_api::event::{Event, EventType};
use serde_json::Value;

use super::cluster::{Cluster, Values};
use super::workload::Workload;

/// The key of `status.change.eventIds` for a lifecycle event type.
fn key(t: EventType) -> Option<&'static str> {
    match t {
        EventType::Applied => Some("applied"),
        EventType::Fallback => Some("fallback"),
        EventType::RolledBack => Some("rolledBack"),
        EventType::Released => Some("released"),
        EventType::Failed => Some("failed"),
        EventType::Skipped | EventType::Blocked => None,
    }
}

/// Every violation found, each naming the workload and what is wrong.
pub async fn all(c: &Cluster, workloads: &[Workload]) -> anyhow::Result<Vec<String>> {
    let events = c.hub_events();
    let mut failures = Vec::new();
    for w in workloads {
        let mut found = changes(w);
        found.extend(hub(w, &events));
        found.extend(final_state(c, w).await?);
        failures.extend(found.into_iter().map(|f| format!("{}: {f}", w.id())));
    }
    failures.extend(strays(workloads, &events));
    Ok(failures)
}

/// Each recommendation reached its outcome as exactly one change, its event ids steady.
fn changes(w: &Workload) -> Vec<String> {
    let mut out = Vec::new();
    for rec in &w.recs {
        if !rec.done {
            out.push(format!("{} never reached its outcome", rec.id));
        }
        match rec.changes.len() {
            0 => out.push(format!("{}: no change recorded in the rsr", rec.id)),
            1 => {}
            n => out.push(format!(
                "{} went in as {n} changes: {:?}",
                rec.id, rec.changes
            )),
        }
        out.extend(rec.problems.iter().cloned());
    }
    out
}

/// The hub stored, for each recommendation, each expected lifecycle event exactly once
/// under the id its intent recorded, and no other lifecycle event.
fn hub(w: &Workload, events: &[Event]) -> Vec<String> {
    let mut stored: BTreeMap<(String, &str), Vec<String>> = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| e.workload.namespace == w.ns && e.workload.name == w.name)
    {
        let Some(k) = key(e.type_) else { continue };
        let rec = e.recommendation_id.clone().unwrap_or_default();
        stored.entry((rec, k)).or_default().push(e.id.to_string());
    }
    let mut out = Vec::new();
    for (i, rec) in w.recs.iter().enumerate() {
        for &k in w.expected_events(i) {
            let ids = stored.remove(&(rec.id.clone(), k)).unwrap_or_default();
            let recorded = rec.event_ids.get(k).map(String::as_str).unwrap_or("none");
            if ids.len() != 1 {
                out.push(format!(
                    "{}: the hub stored {} {k} events {ids:?}, want 1",
                    rec.id,
                    ids.len()
                ));
            } else if ids[0] != recorded {
                out.push(format!(
                    "{}: the {k} event is stored as {}, the intent recorded {recorded}",
                    rec.id, ids[0]
                ));
            }
        }
    }
    for ((rec, k), ids) in stored {
        out.push(format!("{rec}: unexpected {k} events at the hub {ids:?}"));
    }
    out
}

/// Stored lifecycle events of workloads the sweep does not drive (none should exist).
fn strays(workloads: &[Workload], events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| key(e.type_).is_some())
        .filter(|e| {
            !workloads
                .iter()
                .any(|w| w.ns == e.workload.namespace && w.name == e.workload.name)
        })
        .map(|e| {
            format!(
                "{}/{}: unexpected {} event {}",
                e.workload.namespace,
                e.workload.name,
                e.type_.as_str(),
                e.id
            )
        })
        .collect()
}

/// The CPU (millicores) and memory (MiB) a change record holds on `side` (`from` or `to`)
/// for container `app`; a resource the change did not touch is absent.
fn recorded(change: &Value, side: &str) -> (Option<u64>, Option<u64>) {
    let app = change["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "app"));
    let Some(app) = app else {
        return (None, None);
    };
    let requests = &app[side]["requests"];
    let cpu = kerf_sim::quantity::quantity(&requests["cpu"]).map(|v| (v * 1000.0).round() as u64);
    let mem =
        kerf_sim::quantity::quantity(&requests["memory"]).map(|v| (v / 1048576.0).round() as u64);
    (cpu, mem)
}

/// Whether the change record agrees with what the cluster runs: the `to` values of the
/// resources it touched, and after a rollback the `from` memory (rule RB-05).
fn record_agrees(change: &Value, state: &str, live: Values) -> bool {
    let (to_cpu, to_mem) = recorded(change, "to");
    let (_, from_mem) = recorded(change, "from");
    let cpu_ok = to_cpu.is_none_or(|c| c == live.cpu);
    if state == "RolledBack" {
        return cpu_ok && from_mem == Some(live.mem);
    }
    (to_cpu.is_some() || to_mem.is_some()) && cpu_ok && to_mem.is_none_or(|m| m == live.mem)
}

/// Nothing left in flight or between values, and the rsr agreeing with the cluster.
async fn final_state(c: &Cluster, w: &Workload) -> anyhow::Result<Vec<String>> {
    let Some(last) = w.recs.last() else {
        return Ok(vec!["no recommendation was published".into()]);
    };
    let rsr = c.rsr(&w.ns, &w.name).await?;
    let change = &rsr["status"]["change"];
    let state = change["state"].as_str().unwrap_or("none");
    let mut out = Vec::new();
    if !matches!(state, "Applied" | "RolledBack" | "Released") {
        out.push(format!(
            "change {} left in flight in state {state}",
            change["id"]
        ));
    }
    if !last.done {
        let watch = rsr["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "HealthWatch"))
            .map(|c| format!("{} {}", c["reason"], c["message"]));
        out.push(format!(
            "{} not done: phase {}, change state {state}, HealthWatch {watch:?}, watch {}, OOM kill injected: {}",
            last.id, rsr["status"]["phase"], rsr["status"]["watch"], last.oom
        ));
    }
    let pending = change["pendingEvents"].as_array().map_or(0, Vec::len);
    if pending > 0 {
        out.push(format!("{pending} events still pending in the rsr"));
    }
    if rsr["spec"]["recommendationID"] != last.id.as_str()
        || change["recommendationID"] != last.id.as_str()
    {
        out.push(format!(
            "rsr shows recommendation {} (change for {}), want {}",
            rsr["spec"]["recommendationID"], change["recommendationID"], last.id
        ));
    }
    let live = w.live(last);
    if let Some(wrong) = w.cluster_wrong(c, live).await? {
        out.push(format!("cluster not at {live} after {state}: {wrong}"));
    }
    if !record_agrees(change, state, live) {
        let record = &change["containers"];
        out.push(format!(
            "rsr change {record} does not match the cluster's {live} after {state}"
        ));
    }
    if state == "Released" {
        out.extend(kerf_managers(c, w).await?);
    }
    Ok(out)
}

/// After a release no `kerf*` field manager is left on the workload.
async fn kerf_managers(c: &Cluster, w: &Workload) -> anyhow::Result<Vec<String>> {
    let obj = c.workload(&w.ns, w.workload_kind(), &w.name).await?;
    let managers: Vec<&str> = obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .filter(|m| m.starts_with("kerf"))
        .collect();
    Ok(if managers.is_empty() {
        Vec::new()
    } else {
        vec![format!("released but field managers {managers:?} are left")]
    })
}
