//! The words of lifecycle events and log lines: every message names the values it is
//! about (`cpu 500m→300m, memory 512Mi→384Mi in place on 3 pods`), never only a change id.
//! Pure functions of the intent record.

use kerf_api::Resource;
use kerf_api::policy::Strategy;
use kerf_api::rsr::{ChangeRecord, ContainerChange, Summary};
use kerf_api::{Quantity, ResourceValues};

/// `cpu 500m→300m, memory 512Mi→384Mi` for one container; `app: cpu 500m→300m;
/// sidecar: memory 64Mi→32Mi` for several. Only `resources` (all when empty) and only the
/// values the change sets; a limit appears where it changes (`cpu limit 1→600m`).
pub fn values(change: &ChangeRecord, resources: &[Resource]) -> String {
    let parts: Vec<(&str, String)> = change
        .containers
        .iter()
        .map(|c| (c.name.as_str(), container_values(c, resources)))
        .filter(|(_, t)| !t.is_empty())
        .collect();
    if change.containers.len() == 1 {
        return parts.into_iter().map(|(_, t)| t).collect();
    }
    parts
        .iter()
        .map(|(name, t)| format!("{name}: {t}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn container_values(c: &ContainerChange, resources: &[Resource]) -> String {
    let mut parts = Vec::new();
    for r in Resource::ALL {
        if !resources.is_empty() && !resources.contains(&r) {
            continue;
        }
        if let Some(t) = arrow(&c.from.requests, &c.to.requests, r) {
            parts.push(format!("{r} {t}"));
        }
        let limit_moves = c.from.limits.get(r) != c.to.limits.get(r);
        if let Some(t) = arrow(&c.from.limits, &c.to.limits, r).filter(|_| limit_moves) {
            parts.push(format!("{r} limit {t}"));
        }
    }
    parts.join(", ")
}

/// `500m→300m` when `to` sets `r`.
fn arrow(from: &ResourceValues, to: &ResourceValues, r: Resource) -> Option<String> {
    let to = to.get(r)?;
    let from = from.get(r).map_or("none", |q: &Quantity| q.0.as_str());
    Some(format!("{from}\u{2192}{to}"))
}

/// How the change is carried: `in place on 3 pods`, `by rollout`, `by a rollout in a
/// maintenance window`.
pub fn carrier(change: &ChangeRecord) -> String {
    if change.strategy.resizes_pods() {
        return match change.progress.as_ref().map(|p| p.pods_total) {
            Some(1) => "in place on 1 pod".to_owned(),
            Some(n) => format!("in place on {n} pods"),
            None => "in place".to_owned(),
        };
    }
    match change.strategy {
        Strategy::Deferred => "by a rollout in a maintenance window".to_owned(),
        _ => "by rollout".to_owned(),
    }
}

/// The `applied` message: `cpu 500m→300m, memory 512Mi→384Mi in place on 3 pods`.
pub fn applied(change: &ChangeRecord) -> String {
    format!("{} {}", values(change, &[]), carrier(change))
}

/// The `fallback` message: the values, now by rollout, and why.
pub fn fallback(change: &ChangeRecord, why: &str) -> String {
    format!("{} now by rollout: {why}", values(change, &[]))
}

/// The `rolled_back` message: the signal, then the values restored (`to→from`).
pub fn rolled_back(change: &ChangeRecord, restored: &[Resource], signal: &str) -> String {
    let back = ChangeRecord {
        containers: change
            .containers
            .iter()
            .map(|c| ContainerChange {
                name: c.name.clone(),
                from: c.to.clone(),
                to: c.from.clone(),
            })
            .collect(),
        ..change.clone()
    };
    format!("{signal}: restored {}", values(&back, restored))
}

/// The `released` message: the resources, their modes and the values kerf let go of.
pub fn released(change: &ChangeRecord, resources: &[Resource], modes: (&str, &str)) -> String {
    let names: Vec<&str> = resources.iter().map(|r| r.as_str()).collect();
    let keep = if change.strategy.resizes_pods() {
        "; running pods keep them, new pods get the template's"
    } else {
        "; the template's fields are handed back"
    };
    format!(
        "mode of {} changed from {} to {}: released {}{keep}",
        names.join(", "),
        modes.0,
        modes.1,
        values(change, resources)
    )
}

/// The `released Reverted` message: the values put back and how, and that Kerf holds the
/// workload until the annotation goes.
pub fn reverted(change: &ChangeRecord) -> String {
    let how = if change.strategy.resizes_pods() {
        "the running pods run the template's values"
    } else {
        "the template has its values from before Kerf's change and kerf handed its fields over"
    };
    format!(
        "reverted {} {}: {how}; no recommendation is applied while the annotation \
         kerf.getkerf.dev/revert is \"true\"",
        values(change, &[]),
        carrier(change)
    )
}

/// The `failed` message: what failed, for which values, and the API error.
pub fn failed(change: &ChangeRecord, what: &str, error: &str) -> String {
    format!(
        "{what} of {} {} failed: {error}",
        values(change, &[]),
        carrier(change)
    )
}

/// A skip or block message with the pod's requests as `kubectl get rsr` shows them:
/// `cpu is in mode audit (cpu 800m→400m, memory 2Gi→1536Mi)`, cut to the contract's
/// length.
pub fn with_requests(message: &str, summary: &Summary) -> String {
    let (Some(cpu), Some(memory)) = (&summary.cpu, &summary.memory) else {
        return message.to_owned();
    };
    let text = format!("{message} (cpu {cpu}, memory {memory})");
    kerf_api::event::cut_message(&text).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(limit_from: &str, limit_to: &str) -> ContainerChange {
        serde_json::from_value(serde_json::json!({
            "name": "app",
            "from": {"requests": {"cpu": "500m", "memory": "512Mi"},
                     "limits": {"memory": limit_from}},
            "to": {"requests": {"cpu": "300m", "memory": "384Mi"},
                   "limits": {"memory": limit_to}},
        }))
        .unwrap_or_else(|e| panic!("change: {e}"))
    }

    #[test]
    fn a_limit_shows_only_where_it_moves() {
        assert_eq!(
            container_values(&change("1Gi", "1Gi"), &[]),
            "cpu 500m\u{2192}300m, memory 512Mi\u{2192}384Mi"
        );
        assert_eq!(
            container_values(&change("1Gi", "768Mi"), &[]),
            "cpu 500m\u{2192}300m, memory 512Mi\u{2192}384Mi, memory limit 1Gi\u{2192}768Mi"
        );
    }
}
