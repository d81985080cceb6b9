//! `kerf-agent explain <ns>/<kind>/<name>`: the effective policy with the layer of every
//! field, each pipeline step with its value and threshold, and when the change could go in
//! next (design section 10). The decision settings are the running agent's, read from its
//! ConfigMap ([`agent_config`]); the first line says where they came from.

pub mod agent_config;

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use kerf_api::Resource;
use kerf_api::WorkloadKind;
use kerf_decide::Explanation;
use kerf_decide::duration::{Rfc3339, format_go_duration};
use kerf_decide::effective::{EffectivePolicy, Layer, Sourced};
use kerf_decide::explain::Verdict;
use kerf_decide::quantity;

use crate::cache::metrics::CacheMetrics;
use crate::cache::{CacheSet, WorkloadKey};
use crate::cli::{DEFAULT_AGENT_CONFIG, ExplainArgs};
use crate::hub::HubState;
use crate::reconcile::facts;
use crate::settings::{EnvLookup, Settings};

pub use agent_config::{AgentConfigError, Given};

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
    /// The agent's settings cannot be read or are invalid.
    #[error(transparent)]
    Settings(#[from] AgentConfigError),
}

/// How long `explain` waits for the caches.
pub const SYNC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// `kerf-agent explain`: reads the agent's settings (`--from-agent`, with the settings
/// `given` over them), builds the caches, waits for them, fetches the hub's config and
/// recommendations once (when a hub is set) and renders the explanation of the target.
pub async fn run(args: &ExplainArgs, given: &Given) -> Result<String, ExplainError> {
    parse_target(&args.target)?;
    let env = |k: &str| std::env::var(k).ok();
    agent_config::check_given(given, &env)?;
    let client = kube::Client::try_default()
        .await
        .map_err(ExplainError::Client)?;
    let from = args.from_agent.as_deref();
    explain_from_agent(client, &args.target, from, given, &env).await
}

/// [`run`] on a given client: the settings of the agent whose ConfigMap is `from`
/// (`<namespace>/<name>`, default [`DEFAULT_AGENT_CONFIG`]) with `given` over them, then
/// the explanation under a first line naming where the settings came from.
pub async fn explain_from_agent(
    client: kube::Client,
    target: &str,
    from: Option<&str>,
    given: &Given,
    env: EnvLookup<'_>,
) -> Result<String, ExplainError> {
    parse_target(target)?;
    let from = from.unwrap_or(DEFAULT_AGENT_CONFIG);
    let (settings, origin) = agent_config::resolve(client.clone(), from, given, env).await?;
    let text = explain_with(client, target, &settings).await?;
    Ok(format!("{origin}\n{text}"))
}

/// [`run`] on a given client.
pub async fn explain_with(
    client: kube::Client,
    target: &str,
    settings: &Settings,
) -> Result<String, ExplainError> {
    let key = parse_target(target)?;
    let cache = CacheSet::new();
    let mut watches = cache.start(client.clone(), CacheMetrics::default(), &[]);
    let synced = tokio::time::timeout(SYNC_TIMEOUT, cache.wait_synced()).await;
    let (hub, hub_problems) = hub_state(settings).await;
    let resize = crate::apiclient::resize_subresource_served(&client).await;
    watches.abort_all();
    synced.map_err(|_| ExplainError::SyncTimeout(SYNC_TIMEOUT))?;
    let mut text = explain_key(&cache, &hub, settings, resize, &key, Utc::now())?;
    for p in hub_problems {
        let _ = writeln!(text, "Hub: {p}");
    }
    Ok(text)
}

/// The hub's state after one fetch of config and recommendations, and what failed.
async fn hub_state(settings: &Settings) -> (HubState, Vec<String>) {
    if settings.recommendation_source.is_local() {
        // The rsr holds the source's recommendation; the configuration is the agent's own.
        let mut state = crate::source::empty_state(settings.recommendation_source);
        let now = Utc::now();
        crate::source::record(&mut state, Default::default(), now);
        state.refresh(settings.hub.stale_after);
        return (state, Vec::new());
    }
    let Some(url) = settings.hub.url.clone() else {
        return (HubState::default(), vec!["no --hub-url set".to_owned()]);
    };
    let mut cfg = crate::hub::HubClientConfig::new(url, settings.cluster_name.clone());
    cfg.token_file = settings.hub.token_file.clone();
    cfg.stale_after = settings.hub.stale_after;
    let clock: crate::clock::SharedClock = std::sync::Arc::new(crate::clock::SystemClock);
    let client = match crate::hub::HubClient::new(cfg, Default::default(), clock) {
        Ok(c) => c,
        Err(e) => return (HubState::default(), vec![format!("no hub client: {e}")]),
    };
    let mut problems = Vec::new();
    if let Err(e) = client.fetch_config().await {
        problems.push(format!("config fetch failed: {e}"));
    }
    if let Err(e) = client.fetch_recommendations().await {
        problems.push(format!("recommendations fetch failed: {e}"));
    }
    (client.state(), problems)
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
        webhook_certificate_problem: None,
    };
    let pods = facts::live_pods(&cache.pods_of(key));
    let hpas = cache.hpas_for(key);
    let objects = facts::Objects {
        pods: &pods,
        hpas: &hpas,
    };
    let f = facts::gather(src, &workload, objects, &rsr.spec, &status, now);
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

/// The layer that set a value, as people name it: `built-in`, `hub fleet`, `hub cluster`,
/// `clusterDefaults`, `policy <name>`, `annotation`, `hub override` or `outside the scope`.
pub fn layer_label(layer: Layer, policy_name: Option<&str>) -> String {
    match layer {
        Layer::BuiltIn => "built-in".to_owned(),
        Layer::HubFleet => "hub fleet".to_owned(),
        Layer::HubCluster => "hub cluster".to_owned(),
        Layer::ClusterDefaults => "clusterDefaults".to_owned(),
        Layer::Policy => format!("policy {}", policy_name.unwrap_or("?")),
        Layer::Annotation => "annotation".to_owned(),
        Layer::HubOverride => "hub override".to_owned(),
        Layer::Scope => "outside the scope".to_owned(),
    }
}

/// Writes the effective policy one field a line, each with the layer that set it.
struct PolicyLines<'a> {
    out: String,
    policy_name: Option<&'a str>,
}

impl PolicyLines<'_> {
    fn line(&mut self, field: &str, value: impl std::fmt::Display, layer: Layer) {
        let layer = layer_label(layer, self.policy_name);
        let _ = writeln!(
            self.out,
            "  {field:<32} {:<24} ({layer})",
            value.to_string()
        );
    }

    fn sourced<T: std::fmt::Display>(&mut self, field: &str, v: &Sourced<T>) {
        self.line(field, &v.value, v.layer);
    }

    fn dur(&mut self, field: &str, v: &Sourced<chrono::Duration>) {
        self.line(field, format_go_duration(v.value), v.layer);
    }

    fn optional<T: std::fmt::Display>(&mut self, field: &str, v: Option<&Sourced<T>>) {
        match v {
            Some(v) => self.sourced(field, v),
            None => {
                let _ = writeln!(self.out, "  {field:<32} {:<24} (no layer sets it)", "-");
            }
        }
    }
}

/// The effective policy, one field a line with the layer that set it.
pub fn render_policy(p: &EffectivePolicy) -> String {
    let mut w = PolicyLines {
        out: String::new(),
        policy_name: p.policy_name.as_deref(),
    };
    let _ = writeln!(
        w.out,
        "Effective policy (RightsizingPolicy: {})",
        p.policy_name.as_deref().unwrap_or("none")
    );
    w.line("mode.cpu", p.mode.cpu.value.as_str(), p.mode.cpu.layer);
    w.line(
        "mode.memory",
        p.mode.memory.value.as_str(),
        p.mode.memory.layer,
    );
    w.line(
        "apply.strategy",
        p.strategy.value.as_str(),
        p.strategy.layer,
    );
    guardrail_lines(&mut w, p);
    window_lines(&mut w, p);
    w.sourced("hpa.coordination", &p.hpa_coordination);
    w.sourced("hpa.minTargetUtilization", &p.hpa_min_target);
    w.sourced("hpa.maxTargetUtilization", &p.hpa_max_target);
    let r = &p.recommendation;
    let window = r
        .window
        .as_ref()
        .map(|w| Sourced::new(format_go_duration(w.value), w.layer));
    w.optional("recommendation.window", window.as_ref());
    w.optional("recommendation.cpuPercentile", r.cpu_percentile.as_ref());
    w.optional(
        "recommendation.memoryPercentile",
        r.memory_percentile.as_ref(),
    );
    w.optional(
        "recommendation.headroomPercent",
        r.headroom_percent.as_ref(),
    );
    let limits = r
        .limits
        .as_ref()
        .map(|l| Sourced::new(format!("{:?}", l.value), l.layer));
    w.optional("recommendation.limits", limits.as_ref());
    for pr in &p.problems {
        let layer = layer_label(pr.layer, p.policy_name.as_deref());
        let _ = writeln!(
            w.out,
            "  invalid: {} = {:?} ({layer}): {}",
            pr.field, pr.value, pr.message
        );
    }
    w.out
}

fn guardrail_lines(w: &mut PolicyLines<'_>, p: &EffectivePolicy) {
    w.dur("guardrails.learningPeriod", &p.learning_period);
    w.sourced("guardrails.minConfidence", &p.min_confidence);
    w.line(
        "guardrails.maxChangePercent",
        format!("{}%", p.max_change_percent.value),
        p.max_change_percent.layer,
    );
    let min_cpu = quantity::format(Resource::Cpu, p.min_cpu.value);
    w.line("guardrails.minCPU", min_cpu, p.min_cpu.layer);
    let min_memory = quantity::format(Resource::Memory, p.min_memory.value);
    w.line("guardrails.minMemory", min_memory, p.min_memory.layer);
    w.dur("guardrails.cooldown", &p.cooldown);
    w.dur("rollback.watchDuration", &p.watch_duration);
    w.sourced("rollback.oomKills", &p.oom_kills);
    w.sourced("rollback.restarts", &p.restarts);
    w.sourced("rollback.throttlingRatio", &p.throttling_ratio);
}

fn window_lines(w: &mut PolicyLines<'_>, p: &EffectivePolicy) {
    w.dur("apply.fallbackAfter", &p.fallback_after);
    w.dur("apply.minWindowRemaining", &p.min_window_remaining);
    let count = |n: usize| format!("{n} window{}", if n == 1 { "" } else { "s" });
    w.line(
        "apply.maintenanceWindows",
        count(p.maintenance_windows.value.len()),
        p.maintenance_windows.layer,
    );
    w.line(
        "freezeWindows",
        count(p.freeze_windows.value.len()),
        p.freeze_windows.layer,
    );
}

fn render_steps(out: &mut String, e: &Explanation) {
    out.push_str("\nPipeline (first match decides)\n");
    for s in &e.steps {
        let verdict = match &s.verdict {
            Verdict::Pass => "pass".to_owned(),
            Verdict::Skip(r) => format!("skipped {r}"),
            Verdict::Block(r) => format!("blocked {r}"),
        };
        let num = s.number.map_or("  ".to_owned(), |n| format!("{n:>2}"));
        let mark = if s.decisive { "*" } else { " " };
        let until = s
            .until
            .map(|u| format!(" until {}", Rfc3339(u)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{mark}{num} {:<24} value {:<28} threshold {:<20} {verdict}{until}",
            s.name, s.value, s.threshold
        );
    }
}

fn render_targets(out: &mut String, e: &Explanation) {
    out.push_str("\nValues (current \u{2192} target)\n");
    if e.targets.is_empty() {
        out.push_str("  none: the recommendation names no container Kerf may change\n");
    }
    for t in &e.targets {
        let _ = writeln!(out, "  {t}");
    }
}

/// The whole explanation as text.
pub fn render(
    key: &WorkloadKey,
    policy: &EffectivePolicy,
    e: &Explanation,
    now: DateTime<Utc>,
) -> String {
    let mut out = format!("Workload {key} at {}\n\n", Rfc3339(now));
    out.push_str(&render_policy(policy));
    render_targets(&mut out, e);
    render_steps(&mut out, e);
    let _ = writeln!(
        out,
        "\nDecision: {} ({:?}): {}",
        e.decision.reason(),
        e.decision.phase,
        e.decision.message
    );
    if let Some(c) = e.cooldown_end {
        let _ = writeln!(out, "Cooldown ends: {}", Rfc3339(c));
    }
    let _ = writeln!(out, "Maintenance windows: {}", e.maintenance);
    let _ = writeln!(out, "Freeze windows: {}", e.freeze);
    let _ = writeln!(out, "Cluster-wide freeze windows: {}", e.cluster_freeze);
    if let Some(w) = e.next_window {
        let _ = writeln!(out, "Next maintenance window: {}", Rfc3339(w));
    }
    let _ = writeln!(out, "{}", e.next_change);
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
        let mut p = EffectivePolicy::builtin();
        p.policy_name = Some("payments".to_owned());
        p.cooldown = Sourced::new(chrono::Duration::hours(12), Layer::Policy);
        p.min_cpu = Sourced::new(50, Layer::ClusterDefaults);
        p.restarts = Sourced::new(5, Layer::HubCluster);
        let text = render_policy(&p);
        let line = |field: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(&format!("{field} ")))
                .unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            line("guardrails.cooldown"),
            "guardrails.cooldown 12h (policy payments)"
        );
        assert_eq!(
            line("guardrails.minCPU"),
            "guardrails.minCPU 50m (clusterDefaults)"
        );
        assert_eq!(
            line("guardrails.minMemory"),
            "guardrails.minMemory 32Mi (built-in)"
        );
        assert_eq!(
            line("rollback.restarts"),
            "rollback.restarts 5 (hub cluster)"
        );
        assert_eq!(line("mode.cpu"), "mode.cpu audit (built-in)");
    }
}
