//! `kerf-agent explain <ns>/<kind>/<name>`: the effective policy with the layer of every
//! field, each pipeline step with its value and threshold, and when the change could go in
//! next (design section 10).

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use kerf_api::WorkloadKind;
use kerf_decide::Explanation;
use kerf_decide::duration::format_go_duration;
use kerf_decide::effective::{EffectivePolicy, Sourced};
use kerf_decide::explain::Verdict;

use crate::cache::metrics::CacheMetrics;
use crate::cache::{CacheSet, WorkloadKey};
use crate::hub::HubState;
use crate::reconcile::facts;
use crate::settings::Settings;

/// Errors of the explain command.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The target is not `<namespace>/<kind>/<name>`.
    #[error(
        "{0:?} is not <namespace>/<kind>/<name> with kind Deployment, StatefulSet or DaemonSet"
    )]
    Target(String),
    /// The workload or its rsr is not in the cluster.
    #[error("{0}: {1}")]
    NotFound(String, &'static str),
    /// No Kubernetes client could be built.
    #[error("cannot build a Kubernetes client (in-cluster or KUBECONFIG): {0}")]
    Client(#[source] kube::Error),
    /// The caches did not list everything in time.
    #[error("the caches did not sync within {0:?}")]
    SyncTimeout(std::time::Duration),
}

/// How long `explain` waits for the caches.
pub const SYNC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// `kerf-agent explain`: builds the caches, waits for them, fetches the hub's config and
/// recommendations once (when a hub is set) and renders the explanation of `target`.
pub async fn run(target: &str, settings: Settings) -> Result<String, ExplainError> {
    parse_target(target)?;
    let client = kube::Client::try_default()
        .await
        .map_err(ExplainError::Client)?;
    explain_with(client, target, &settings).await
}

/// [`run`] on a given client.
pub async fn explain_with(
    client: kube::Client,
    target: &str,
    settings: &Settings,
) -> Result<String, ExplainError> {
    let key = parse_target(target)?;
    let cache = CacheSet::new();
    let mut watches = cache.start(client.clone(), CacheMetrics::default());
    let synced = tokio::time::timeout(SYNC_TIMEOUT, cache.wait_synced()).await;
    let hub = hub_state(settings).await;
    let resize = crate::runtime::resize_subresource_served(&client).await;
    watches.abort_all();
    synced.map_err(|_| ExplainError::SyncTimeout(SYNC_TIMEOUT))?;
    explain_key(&cache, &hub, settings, resize, &key, Utc::now())
}

async fn hub_state(settings: &Settings) -> HubState {
    let Some(url) = settings.hub.url.clone() else {
        return HubState::default();
    };
    let mut cfg = crate::hub::HubClientConfig::new(url, settings.cluster_name.clone());
    cfg.token_file = settings.hub.token_file.clone();
    cfg.stale_after = settings.hub.stale_after;
    let clock: crate::clock::SharedClock = std::sync::Arc::new(crate::clock::SystemClock);
    let Ok(client) = crate::hub::HubClient::new(cfg, Default::default(), clock) else {
        return HubState::default();
    };
    if let Err(e) = client.fetch_config().await {
        tracing::warn!(error = %e, "hub config fetch failed");
    }
    if let Err(e) = client.fetch_recommendations().await {
        tracing::warn!(error = %e, "hub recommendations fetch failed");
    }
    client.state()
}

/// The explanation of `key` from the caches and the hub state at `now`.
pub fn explain_key(
    cache: &CacheSet,
    hub: &HubState,
    settings: &Settings,
    resize_subresource: bool,
    key: &WorkloadKey,
    now: DateTime<Utc>,
) -> Result<String, ExplainError> {
    let shown = key.to_string();
    let workload = cache
        .workload(key)
        .ok_or(ExplainError::NotFound(shown.clone(), "no such workload"))?;
    let entry = cache
        .rsrs_for(key)
        .into_iter()
        .next()
        .ok_or(ExplainError::NotFound(
            shown.clone(),
            "no RightsizingRecommendation yet (the hub has not recommended for it)",
        ))?;
    let rsr = entry.rsr.as_ref().map_err(|_| {
        ExplainError::NotFound(shown, "its RightsizingRecommendation does not convert")
    })?;
    let policies = facts::policies(cache);
    let policy = facts::policy_for(&workload, cache, &policies, hub, settings);
    let status = rsr.status.clone().unwrap_or_default();
    let src = facts::Sources {
        cache,
        hub,
        settings,
        resize_subresource,
    };
    let f = facts::gather(src, &workload, &rsr.spec, &status, now);
    let e = kerf_decide::explain(&f, &policy, now);
    Ok(render(key, &policy, &e, now))
}

/// Reads `<namespace>/<kind>/<name>` (kind case-insensitive).
pub fn parse_target(s: &str) -> Result<WorkloadKey, ExplainError> {
    let bad = || ExplainError::Target(s.to_owned());
    let mut parts = s.splitn(3, '/');
    let (Some(ns), Some(kind), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let kind = [
        WorkloadKind::Deployment,
        WorkloadKind::StatefulSet,
        WorkloadKind::DaemonSet,
    ]
    .into_iter()
    .find(|k| k.as_str().eq_ignore_ascii_case(kind))
    .ok_or_else(bad)?;
    if ns.is_empty() || name.is_empty() {
        return Err(bad());
    }
    Ok(WorkloadKey::new(ns, kind, name))
}

fn line<T: std::fmt::Display>(out: &mut String, field: &str, v: &Sourced<T>) {
    let _ = writeln!(
        out,
        "  {field:<22} {:<24} ({:?})",
        v.value.to_string(),
        v.layer
    );
}

fn dur(out: &mut String, field: &str, v: &Sourced<chrono::Duration>) {
    let _ = writeln!(
        out,
        "  {field:<22} {:<24} ({:?})",
        format_go_duration(v.value),
        v.layer
    );
}

/// The effective policy, one field a line with the layer that set it.
pub fn render_policy(p: &EffectivePolicy) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Effective policy (RightsizingPolicy: {})",
        p.policy_name.as_deref().unwrap_or("none")
    );
    line(
        &mut out,
        "mode.cpu",
        &Sourced::new(p.mode.cpu.value.as_str(), p.mode.cpu.layer),
    );
    line(
        &mut out,
        "mode.memory",
        &Sourced::new(p.mode.memory.value.as_str(), p.mode.memory.layer),
    );
    line(
        &mut out,
        "apply.strategy",
        &Sourced::new(p.strategy.value.as_str(), p.strategy.layer),
    );
    dur(&mut out, "learningPeriod", &p.learning_period);
    line(&mut out, "minConfidence", &p.min_confidence);
    line(&mut out, "maxChangePercent", &p.max_change_percent);
    line(&mut out, "minCPU (m)", &p.min_cpu);
    line(&mut out, "minMemory (bytes)", &p.min_memory);
    dur(&mut out, "cooldown", &p.cooldown);
    dur(&mut out, "rollback.watchDuration", &p.watch_duration);
    line(&mut out, "rollback.oomKills", &p.oom_kills);
    line(&mut out, "rollback.restarts", &p.restarts);
    line(&mut out, "rollback.throttling", &p.throttling_ratio);
    dur(&mut out, "apply.fallbackAfter", &p.fallback_after);
    dur(&mut out, "apply.minWindowRemain", &p.min_window_remaining);
    line(
        &mut out,
        "maintenanceWindows",
        &Sourced::new(
            p.maintenance_windows.value.len(),
            p.maintenance_windows.layer,
        ),
    );
    line(
        &mut out,
        "freezeWindows",
        &Sourced::new(p.freeze_windows.value.len(), p.freeze_windows.layer),
    );
    line(&mut out, "hpa.coordination", &p.hpa_coordination);
    for pr in &p.problems {
        let _ = writeln!(
            out,
            "  invalid: {} = {:?} ({:?}): {}",
            pr.field, pr.value, pr.layer, pr.message
        );
    }
    out
}

/// The whole explanation as text.
pub fn render(
    key: &WorkloadKey,
    policy: &EffectivePolicy,
    e: &Explanation,
    now: DateTime<Utc>,
) -> String {
    let mut out = format!("Workload {key} at {now}\n\n");
    out.push_str(&render_policy(policy));
    out.push_str("\nPipeline (first match decides)\n");
    for s in &e.steps {
        let verdict = match &s.verdict {
            Verdict::Pass => "pass".to_owned(),
            Verdict::Skip(r) => format!("skipped {r}"),
            Verdict::Block(r) => format!("blocked {r}"),
        };
        let num = s.number.map_or("  ".to_owned(), |n| format!("{n:>2}"));
        let mark = if s.decisive { "*" } else { " " };
        let until = s.until.map(|u| format!(" until {u}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "{mark}{num} {:<24} value {:<28} threshold {:<20} {verdict}{until}",
            s.name, s.value, s.threshold
        );
    }
    let _ = writeln!(
        out,
        "\nDecision: {} ({:?}): {}",
        e.decision.reason(),
        e.decision.phase,
        e.decision.message
    );
    if let Some(c) = e.cooldown_end {
        let _ = writeln!(out, "Cooldown ends: {c}");
    }
    if let Some(w) = e.next_window {
        let _ = writeln!(out, "Next maintenance window: {w}");
    }
    match e.next_change_at {
        Some(at) if at <= now => out.push_str("The change could go in now.\n"),
        Some(at) => {
            let _ = writeln!(out, "The change could go in at {at}.");
        }
        None => out.push_str("The change waits for something that does not end by itself (see the blocking steps).\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_is_namespace_kind_name() {
        let k = parse_target("shop/deployment/checkout").unwrap();
        assert_eq!(
            k,
            WorkloadKey::new("shop", WorkloadKind::Deployment, "checkout")
        );
        assert!(parse_target("shop/checkout").is_err());
        assert!(parse_target("shop/Job/x").is_err());
    }

    #[test]
    fn policy_lines_name_their_layer() {
        let text = render_policy(&EffectivePolicy::builtin());
        assert!(text.contains("cooldown"));
        assert!(text.contains("24h"));
        assert!(text.contains("BuiltIn"));
    }
}
